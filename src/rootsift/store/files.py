"""Small durable-file and setting helpers of the store: a JSON file replaced atomically
(and its folder fsync'd), DuckDB's memory limit raised for a block, and DuckDB's threads
set for a block."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from rootsift.store.segment import fsync_dir
from rootsift.store.sqltext import literal


def write_json_atomic(path: Path, data: Any, mode: int = 0o644, indent: int = 2) -> None:
    """Write ``data`` as JSON to ``path`` through a temporary file, fsync'd, then renamed
    over it and the folder fsync'd: readers see the old file or the new, never half."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=indent)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


@contextlib.contextmanager
def raised_memory_limit(con: duckdb.DuckDBPyConnection, lock: threading.RLock, limit: str) -> Iterator[None]:
    """Run a block with ``con``'s DuckDB memory limit raised to ``limit`` (never lowered),
    restoring it after."""
    with lock:
        row = con.execute("SELECT current_setting('memory_limit')").fetchone()
        old = str(row[0]) if row else ""
        raise_it = _size_bytes(limit) > _size_bytes(old)
        if raise_it:
            con.execute(f"SET GLOBAL memory_limit = {literal(limit)}")
    try:
        yield
    finally:
        if raise_it:
            with lock:
                con.execute(f"SET GLOBAL memory_limit = {literal(old)}")


@contextlib.contextmanager
def threads_set(con: duckdb.DuckDBPyConnection, lock: threading.RLock, threads: int) -> Iterator[None]:
    """Run a block with DuckDB's worker threads set to ``threads`` (a setting of the whole
    instance: queries that run meanwhile have as many), restoring the setting after."""
    with lock:
        row = con.execute("SELECT current_setting('threads')").fetchone()
        old = int(row[0]) if row else 0
        if old != threads:
            con.execute(f"SET GLOBAL threads = {int(threads)}")
    try:
        yield
    finally:
        if old != threads:
            with lock:
                con.execute(f"SET GLOBAL threads = {old}")


_UNITS = {
    "B": 1,
    "BYTES": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def _size_bytes(text: str) -> float:
    """Bytes in a DuckDB size such as '512MB' or '488.2 MiB'; infinity when unreadable."""
    number = text.strip()
    digits = "".join(ch for ch in number if ch.isdigit() or ch == ".")
    unit = number[len(digits) :].strip().upper() if number.startswith(digits) else ""
    try:
        return float(digits) * _UNITS[unit or "B"]
    except (ValueError, KeyError):
        return float("inf")
