"""The chdb backend (embedded ClickHouse) against the DuckDB store, on the same data.

``BACKENDS`` parametrises the fixtures that open a store (here and in test_query.py), so
the query tests run on both; chdb is in the ``dev`` extra, and a missing chdb skips its
half with the reason (never silently).
"""

from __future__ import annotations

import importlib.util

import pytest

HAVE_CHDB = importlib.util.find_spec("chdb") is not None
BACKENDS = [
    "duckdb",
    pytest.param("chdb", marks=pytest.mark.skipif(not HAVE_CHDB, reason="chdb is not installed (pip install '.[dev]')")),
]
