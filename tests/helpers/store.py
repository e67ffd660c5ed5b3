"""Reading back what a store holds, measuring it on disk, and running rootsift in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import rootsift
from rootsift import Rootsift

SRC = Path(rootsift.__file__).resolve().parents[1]
"""Where the rootsift under test lives; child processes import the same one."""


def iso(moment: datetime) -> str:
    """A naive UTC datetime as RFC 3339 with a Z, microseconds only when non-zero."""
    return moment.isoformat(timespec="microseconds").replace(".000000", "") + "Z"


def stored_rows(
    rs: Rootsift, dataset: str, where_sql: str = "", params: list[Any] | None = None
) -> list[dict[str, Any]]:
    """Every stored row of ``dataset`` as a dict of its non-NULL columns, timestamps as ISO text.

    Rows come back in time order (ties in stored order), which is the input order of
    the golden files.
    """
    rel = rs.backend.relation(dataset, None, None).sql(dialect="duckdb")
    sql = f"SELECT * FROM {rel} {where_sql}"
    res = rs.backend.execute_sql(sql, params or [])
    rows = [
        {c: (iso(v) if isinstance(v, datetime) else v) for c, v in zip(res.columns, r) if v is not None}
        for r in res.rows
    ]
    return sorted(rows, key=lambda r: r["timestamp"])


def column(rs: Rootsift, dataset: str, name: str) -> list[Any]:
    """The values of one column (NULL included), in time order."""
    rel = rs.backend.relation(dataset, None, None).sql(dialect="duckdb")
    quoted = '"' + name.replace('"', '""') + '"'
    res = rs.backend.execute_sql(f'SELECT {quoted} FROM {rel} ORDER BY "timestamp"', [])
    return [r[0] for r in res.rows]


def columns_of(rs: Rootsift, dataset: str) -> list[str]:
    """The stored column names of ``dataset`` (``#raw`` twins included)."""
    rel = rs.backend.relation(dataset, None, None).sql(dialect="duckdb")
    return rs.backend.execute_sql(f"SELECT * FROM {rel} LIMIT 0", []).columns


def schema_map(rs: Rootsift, dataset: str) -> dict[str, dict[str, Any]]:
    """``rs.schema(dataset)`` keyed by field name."""
    return {entry["field"]: entry for entry in rs.schema(dataset)}


def dir_size(path: Path) -> int:
    """Bytes of every file under ``path`` (os.walk, independent of the store's own accounting)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.path.getsize(os.path.join(root, name))
    return total


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write ``rows`` as JSON lines (no escaping of non-ASCII) and return ``path``."""
    with open(path, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def subprocess_env() -> dict[str, str]:
    """The environment for a child Python that imports rootsift from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_python(
    code: str, *args: str, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """Run ``python -c code args...`` with rootsift importable; raise with stderr if it fails."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        input=stdin,
        capture_output=True,
        env=subprocess_env(),
        timeout=timeout,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"child exited {proc.returncode}\nstdout:\n{proc.stdout.decode(errors='replace')}\n"
            f"stderr:\n{proc.stderr.decode(errors='replace')}"
        )
    return proc


def query_rows(rs: Any, dataset: str, *calcs: str, **kw: Any) -> list[list[Any]]:
    """Rows of a query: ``query_rows(rs, "app", "count", "p99(ms)", breakdowns=["path"], start=..., end=...)``."""
    from rootsift.query.spec import Calculation, QuerySpec

    spec = QuerySpec(dataset, calculations=[Calculation.parse(c) for c in calcs or ("count",)], **kw)
    return [list(r) for r in rs.query(spec).rows]


def query_dicts(rs: Any, dataset: str, *calcs: str, **kw: Any) -> list[dict[str, Any]]:
    """As ``query_rows``, each row a dict keyed by column name."""
    from rootsift.query.spec import Calculation, QuerySpec

    spec = QuerySpec(dataset, calculations=[Calculation.parse(c) for c in calcs or ("count",)], **kw)
    result = rs.query(spec)
    return [dict(zip(result.columns, r, strict=True)) for r in result.rows]
