"""The store backends a test can be parametrised over: ``BACKENDS`` for a fixture's
``params``, ``needs_chdb`` for a test of the chdb backend alone. chdb is in the ``dev``
extra; where it is missing its half is skipped with the reason, never silently."""

from __future__ import annotations

import importlib.util

import pytest

HAVE_CHDB = importlib.util.find_spec("chdb") is not None
needs_chdb = pytest.mark.skipif(not HAVE_CHDB, reason="chdb is not installed (pip install '.[dev]')")
BACKENDS = ["duckdb", pytest.param("chdb", marks=needs_chdb)]
