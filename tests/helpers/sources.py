"""Real log sources for tests: start a server with scripts/sources/*.sh, load it, stop it.

Each ``run_*`` context manager starts its server in a fresh directory under /tmp (the
PostgreSQL server runs as the ``postgres`` user, which cannot enter pytest's private
tmp_path), drives a known load, stops the server so every log line is flushed, yields
what it did, and always stops the server and removes the directory afterwards.

A missing server binary skips the test with the reason, or fails it when
``ROOTSIFT_REQUIRE_SOURCES=1`` (scripts/test.sh sets it after installing them).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from glob import glob
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts" / "sources"
REQUIRED = os.environ.get("ROOTSIFT_REQUIRE_SOURCES") == "1"


def need(present: bool, what: str) -> None:
    """Skip (or, under ROOTSIFT_REQUIRE_SOURCES=1, fail) unless ``present``."""
    if present:
        return
    reason = f"{what} is not installed here (scripts/sources/install.sh installs it)"
    if REQUIRED:
        pytest.fail(f"{reason}; ROOTSIFT_REQUIRE_SOURCES=1 makes a missing source a failure", pytrace=False)
    pytest.skip(reason)


def have(*names: str) -> bool:
    """Every program in ``names`` is on PATH or in /usr/sbin."""
    return all(shutil.which(n) or os.access(f"/usr/sbin/{n}", os.X_OK) for n in names)


def postgres_bin() -> str | None:
    """The newest /usr/lib/postgresql/N/bin (N >= 15, for jsonlog) with postgres and pgbench."""
    found = []
    for d in glob("/usr/lib/postgresql/*/bin"):
        version = Path(d).parent.name
        if (
            version.isdigit()
            and int(version) >= 15
            and all(os.access(f"{d}/{p}", os.X_OK) for p in ("postgres", "pgbench", "initdb"))
        ):
            found.append((int(version), d))
    return max(found)[1] if found else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def script(*args: str | float | Path, timeout: float = 180, check: bool = True, **env: str) -> str:
    """Run ``scripts/sources/<args>`` (``env`` added to the environment); its stdout, or an
    assertion naming what failed when ``check``."""
    cmd = [str(SCRIPTS / str(args[0])), *map(str, args[1:])]
    full_env = {**os.environ, "PYTHON": sys.executable, **env}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, stdin=subprocess.DEVNULL)
    assert not check or res.returncode == 0, f"{' '.join(cmd)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
    return res.stdout


@contextmanager
def _stopping(name: str, d: Path) -> Iterator[None]:
    """Stop the server in ``d`` on the way out: checked after a good run, quietly after a failure."""
    try:
        yield
    except BaseException:
        script(name, "stop", d, check=False)
        raise
    script(name, "stop", d)


@contextmanager
def _workdir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class SourceRun:
    """What one run of a source did: where its logs are, when it ran, and its own report."""

    dir: Path
    started: datetime
    stopped: datetime
    facts: dict[str, Any] = field(default_factory=dict)


PG_PREFIX = "%m [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h "
"""The log_line_prefix the test server writes with (pgbadger's recommended form, %m for ms)."""
PG_ZONE = "America/New_York"
"""log_timezone of the test server: times are written as ``... 06:01:24.484 EST``, not UTC."""
NGINX_ZONE = "Asia/Kolkata"
"""TZ of the test nginx: ``$time_local`` is written with ``+0530``."""
_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")


def _processed(report: Path) -> int:
    m = _PROCESSED.search(report.read_text())
    assert m, f"no transaction count in {report}:\n{report.read_text()}"
    return int(m.group(1))


@contextmanager
def run_postgres(transactions: int = 200) -> Iterator[SourceRun]:
    """A PostgreSQL server under pgbench; logs in ``dir/log/postgresql.{log,csv,json}``.

    ``facts``: pgbench's transaction counts ``processed`` (simple protocol, application
    ``pgbench``), ``prepared_processed`` (``-M prepared``, ``pgbench-prepared``) and
    ``split_processed`` (log_statement=all + log_duration, ``pgbench-split``);
    ``prefix`` (the log_line_prefix).
    """
    need(postgres_bin() is not None, "a PostgreSQL >= 15 server with pgbench")
    if os.geteuid() == 0:
        need(shutil.which("runuser") is not None and _user_exists("postgres"), "the postgres OS user and runuser")
    with _workdir("rootsift-pg-") as d:
        port = free_port()
        started = _now()
        with _stopping("postgres.sh", d):
            script("postgres.sh", "start", d, port, PG_LOG_LINE_PREFIX=PG_PREFIX, PG_LOG_TIMEZONE=PG_ZONE)
            script("postgres.sh", "load", d, port, transactions)
        facts = {
            "processed": _processed(d / "pgbench.out"),
            "prepared_processed": _processed(d / "pgbench-prepared.out"),
            "split_processed": _processed(d / "pgbench-split.out"),
            "prefix": PG_PREFIX,
        }
        yield SourceRun(d, started, _now(), facts)


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


@contextmanager
def run_mariadb(rows: int = 40, selects: int = 120) -> Iterator[SourceRun]:
    """A MariaDB server running the workload of mariadb.sh; slow log in ``dir/slow.log``.

    ``facts``: ``rows`` and ``selects`` as asked.
    """
    need(have("mariadbd", "mariadb", "mariadb-install-db", "mariadb-admin"), "MariaDB (server and client)")
    with _workdir("rootsift-mariadb-") as d:
        started = _now()
        with _stopping("mariadb.sh", d):
            script("mariadb.sh", "start", d, free_port())
            script("mariadb.sh", "load", d, rows, selects)
        yield SourceRun(d, started, _now(), {"rows": rows, "selects": selects})


@contextmanager
def run_nginx(requests: int = 500, slow_seconds: float = 0.15) -> Iterator[SourceRun]:
    """nginx in front of upstream.py under http_load.py; logs in ``dir/logs/{timing,combined}.log``.

    ``facts``: ``load`` (http_load.py's JSON report), ``log_format`` (the string in
    nginx.conf), ``slow_ms`` (the upstream's delay on /api/slow).
    """
    need(have("nginx"), "nginx")
    with _workdir("rootsift-nginx-") as d:
        started = _now()
        port, upstream = free_port(), free_port()
        while upstream == port:
            upstream = free_port()
        with _stopping("nginx.sh", d):
            script("nginx.sh", "start", d, port, upstream, slow_seconds, NGINX_TZ=NGINX_ZONE)
            script("nginx.sh", "load", d, port, requests)
        facts = {
            "load": json.loads((d / "load.json").read_text()),
            "log_format": (d / "log_format.txt").read_text().rstrip("\n"),
            "slow_ms": slow_seconds * 1000,
        }
        yield SourceRun(d, started, _now(), facts)


@contextmanager
def snapshot_procfs(stamp: str) -> Iterator[SourceRun]:
    """This machine's /proc files copied as ``KIND_<stamp>`` into ``dir`` (procfs.sh)."""
    need(Path("/proc/meminfo").exists(), "a Linux /proc")
    with _workdir("rootsift-procfs-") as d:
        started = _now()
        names = script("procfs.sh", "snapshot", d / "snap", stamp).split()
        yield SourceRun(d / "snap", started, _now(), {"files": names})
