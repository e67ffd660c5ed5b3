"""Translating DuckDB's exceptions into rootsift's error tree (see errors.py)."""

from __future__ import annotations

import duckdb

from rootsift.errors import StoreError, StoreLockedError


def translate(exc: duckdb.Error, what: str) -> StoreError:
    """Map a DuckDB error to the rootsift tree, keeping the driver's message."""
    text = str(exc).split("\n")[0]
    if "lock" in text.lower() and isinstance(exc, duckdb.IOException):
        return StoreLockedError(
            f"{what}: another process holds the store (DuckDB allows one writer or several readers at a time; "
            f"waited ROOTSIFT_LOCK_WAIT seconds) ({text})"
        )
    return StoreError(f"{what}: {text}")
