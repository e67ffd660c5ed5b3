"""The store backends a test can be parametrised over: ``BACKENDS`` for a fixture's
``params``, ``needs_chdb`` for a test of the chdb backend alone, ``opened`` and
``cli_env`` to open a store on one of them.

``clickhouse`` is the server backend (``--backend clickhouse``) through clickhouse-connect
on chdb's engine in process: its URL is ``chdb://<data>/clickhouse``, so every line of the
server backend runs (clickhouse-connect's client, its parameter binding, Arrow results,
inserts and errors, the shared-store rules) except the HTTP transport, which no ClickHouse
server on this machine could exercise (docs/clickhouse.md). chdb and clickhouse-connect
are in the ``dev`` extra; where one is missing its half is skipped with the reason, never
silently.
"""

from __future__ import annotations

import importlib.util
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
"""The two ClickHouse backends: embedded (chdb) and the server backend on chdb's engine."""


def clickhouse_url(data: Path) -> str:
    """The ``chdb://`` URL the server backend's tests use: the chdb store's own directory."""
    return f"chdb://{Path(data).absolute()}/clickhouse"


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
