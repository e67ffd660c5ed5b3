"""The store backends a test can be parametrised over: ``BACKENDS`` for a fixture's
``params``, ``needs_chdb`` for a test of the chdb backend alone, ``opened`` and
``cli_env`` to open a store on one of them.

``clickhouse`` is the server backend (``--backend clickhouse``) over HTTP to a real
ClickHouse server: ``scripts/clickhouse_server.py`` (ClickHouse's own HTTP listener on
chdb's engine), started once per test run on a free loopback port, with a user who needs
a password. Each store is a database of its own on it (named after the store's
directory), so tests share the server and never each other's tables. chdb and
clickhouse-connect are in the ``dev`` extra; where one is missing its half is skipped with
the reason, never silently.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import secrets
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HAVE_CHDB = importlib.util.find_spec("chdb") is not None
HAVE_CLICKHOUSE_CONNECT = importlib.util.find_spec("clickhouse_connect") is not None
needs_chdb = pytest.mark.skipif(not HAVE_CHDB, reason="chdb is not installed (pip install '.[dev]')")
needs_clickhouse = pytest.mark.skipif(
    not (HAVE_CHDB and HAVE_CLICKHOUSE_CONNECT),
    reason="chdb or clickhouse-connect is not installed (pip install '.[dev]')",
)
BACKENDS = ["duckdb", pytest.param("chdb", marks=needs_chdb), pytest.param("clickhouse", marks=needs_clickhouse)]
CLICKHOUSE_ENGINES = [pytest.param("chdb", marks=needs_chdb), pytest.param("clickhouse", marks=needs_clickhouse)]
"""The two ClickHouse backends: embedded (chdb) and the server backend over HTTP."""

SERVER_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "clickhouse_server.py"
USER = "rootsift"


@dataclass(frozen=True)
class LiveServer:
    """A ClickHouse server of this test run: its process, address and one user."""

    process: subprocess.Popen[str]
    address: str
    password: str

    def url(self, database: str, user: str = USER, password: str | None = None) -> str:
        secret = self.password if password is None else password
        host = self.address.removeprefix("http://")
        return f"http://{user}:{secret}@{host}/{database}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()


_server: LiveServer | None = None


def live_server() -> LiveServer:
    """The run's ClickHouse server, started on first use and stopped at exit. A server that
    does not start fails the test with its words (chdb is in the ``dev`` extra)."""
    global _server
    if _server is not None and _server.process.poll() is None:
        return _server
    password = secrets.token_urlsafe(12)
    path = Path(tempfile.mkdtemp(prefix="rootsift-test-clickhouse-"))
    address, process = server_script().launch(
        path / "data", path / "server.log", "--user", USER, "--password", password
    )
    _server = LiveServer(process, address, password)
    atexit.register(_server.stop)
    return _server


def server_script() -> Any:
    """scripts/clickhouse_server.py as a module (scripts/ is no package)."""
    spec = importlib.util.spec_from_file_location("clickhouse_server", SERVER_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def database_of(data: Path) -> str:
    """The server database of the store at ``data``: one per directory."""
    return "t_" + hashlib.sha1(str(Path(data).absolute()).encode()).hexdigest()[:16]


def clickhouse_url(data: Path) -> str:
    """The URL the server backend's tests open ``data`` at: its own database on the run's
    live server."""
    return live_server().url(database_of(data))


def opened(data: Path, engine: str, **kwargs: Any) -> Any:
    """``Rootsift(data)`` on ``engine`` (``clickhouse``: at ``clickhouse_url(data)``)."""
    from rootsift import Rootsift

    if engine == "clickhouse":
        kwargs.setdefault("clickhouse_url", clickhouse_url(data))
    return Rootsift(data, engine=engine, **kwargs)


def cli_env(engine: str, data: Path) -> dict[str, str]:
    """The environment that makes the CLI open ``data`` on ``engine``."""
    env = {"ROOTSIFT_BACKEND": engine}
    if engine == "clickhouse":
        env["ROOTSIFT_CLICKHOUSE_URL"] = clickhouse_url(data)
    return env
