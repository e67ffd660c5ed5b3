"""Vouching for numbers the JSON reader parsed straight into DOUBLE columns.

The fast path lets DuckDB's ``read_json`` parse a number field as DOUBLE itself, which
saves rendering every number as text and casting it back (ADR 0005, "Amended"). The one
value the reader changes silently there is a boolean: ``true`` becomes 1.0 and ``false``
0.0. So every 0 or 1 in such a column is a suspect. A block whose suspects are few is
checked line by line here: each suspect row is found in the block's bytes (row ``r`` of
the insert is line ``r`` of the file when every line made a row) and parsed; it passes
only when the value at its path is a JSON number (or numeric text, which the exact cast
reads the same way), never a boolean. Anything this cannot prove fails the check.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable

import numpy as np
import orjson

SLICE = 1 << 19
"""Bytes of the file compared at a time when counting its lines (numpy's temporaries stay small)."""


def lines_of_rows(path: str, rows: Iterable[int], total: int) -> dict[int, bytes] | None:
    """The lines of ``path`` that rows ``rows`` (0-based, in file order) were read from.

    DuckDB's reader makes one row of every line but skips blank ones, so rows are lines
    only when the file has exactly ``total`` lines; None otherwise (or for an empty file).
    """
    size = os.path.getsize(path)
    if size == 0:
        return None
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        counts = [_newlines(mm, lo, min(SLICE, size - lo)) for lo in range(0, size, SLICE)]
        if sum(counts) + (mm[size - 1] != 0x0A) != total:
            return None
        before = np.concatenate(([0], np.cumsum(counts)))  # newlines before each slice
        found: dict[int, np.ndarray] = {}

        def newline(j: int) -> int:
            """Offset of the file's ``j``-th newline (0-based); its size past the last."""
            if j >= before[-1]:
                return size
            s = int(np.searchsorted(before, j, side="right")) - 1
            if s not in found:
                found[s] = _positions(mm, s * SLICE, min(SLICE, size - s * SLICE))
            return int(found[s][j - before[s]])

        return {r: mm[(newline(r - 1) + 1 if r else 0) : newline(r)] for r in sorted(set(rows))}


def _newlines(mm: mmap.mmap, lo: int, n: int) -> int:
    return int(np.count_nonzero(np.frombuffer(mm, dtype=np.uint8, count=n, offset=lo) == 0x0A))


def _positions(mm: mmap.mmap, lo: int, n: int) -> np.ndarray:
    return np.flatnonzero(np.frombuffer(mm, dtype=np.uint8, count=n, offset=lo) == 0x0A) + lo


def vouch(path: str, suspects: list[tuple[int, tuple[str, ...]]], total: int) -> bool:
    """Whether every suspect (row, field path) holds a number, not a boolean, in its line
    of ``path`` (a file of JSON lines that made ``total`` rows)."""
    lines = lines_of_rows(path, (r for r, _ in suspects), total)
    if lines is None:
        return False
    for row, field_path in suspects:
        try:
            value = orjson.loads(lines[row])
        except orjson.JSONDecodeError:
            return False
        for key in field_path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return False
    return True
