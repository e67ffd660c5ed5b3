"""Vouching for numbers the JSON reader parsed straight into DOUBLE columns.

The fast path lets DuckDB's ``read_json`` parse a number field as DOUBLE itself, which
saves rendering every number as text and casting it back (ADR 0005, "Amended"). The one
value the reader changes silently there is a boolean: ``true`` becomes 1.0 and ``false``
0.0. So every 0 or 1 in such a column is a suspect. A block whose suspects are few is
checked line by line here: each suspect row is found in the block's bytes and parsed,
and it passes only when the value at its path is a JSON number (or numeric text, which
the exact cast reads the same way), never a boolean. Anything this cannot prove fails.

Rows are found by where lines start. The reader makes one row of every line but skips
blank ones, and a line that makes a row starts with ``{`` (an object cannot span lines):
when the file's line starts (its first byte, then every ``\\n{``, counted beside the
insert in ``BlockStats.lines``) are as many as the rows, row ``r`` is the ``r``-th.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterable

import numpy as np
import orjson

from rootsift.ingest.blockstats import LINE_START, LineStarts


def lines_of_rows(path: str, rows: Iterable[int], total: int, starts: LineStarts) -> dict[int, bytes] | None:
    """The lines of ``path`` that rows ``rows`` (0-based, in file order) were read from,
    given where its lines start (``starts``); None when those are not ``total``, the
    rows the reader made (a line starting with a space, say: rows are not lines then)."""
    size = os.path.getsize(path)
    if size == 0 or len(starts.offsets) == 0:
        return None
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        first = int(mm[0] == ord("{"))
        before = np.concatenate(([0], np.cumsum(starts.counts)))  # "\n{" pairs before each slice
        if first + int(before[-1]) != total:
            return None
        ends = [*starts.offsets[1:], size - 1]  # a pair starts before the last byte
        found: dict[int, list[int]] = {}

        def start_of(row: int) -> int:
            if first and row == 0:
                return 0
            j = row - first  # the j-th "\n{" pair
            s = int(np.searchsorted(before, j, side="right")) - 1
            if s not in found:
                found[s] = _pairs(mm, starts.offsets[s], ends[s])
            return found[s][j - int(before[s])] + 1

        out = {}
        for row in sorted(set(rows)):
            begin = start_of(row)
            end = mm.find(b"\n", begin)
            out[row] = mm[begin : end if end >= 0 else size]
        return out


def _pairs(mm: mmap.mmap, lo: int, hi: int) -> list[int]:
    """Offsets of the ``\\n{`` pairs that start in ``[lo, hi)``, in order."""
    found = []
    for first in (lo, lo + 1):
        n = (min(hi, len(mm) - 1) - first + 1) // 2
        if n > 0:
            words = np.frombuffer(mm, dtype="<u2", count=n, offset=first)
            found.append(np.flatnonzero(words == LINE_START) * 2 + first)
            del words
    return sorted(int(p) for p in np.concatenate(found)) if found else []


def vouch(path: str, suspects: list[tuple[int, tuple[str, ...]]], total: int, starts: LineStarts | None) -> bool | None:
    """Whether every suspect (row, field path) holds a number, not a boolean, in its line
    of ``path`` (a file of JSON lines that made ``total`` rows, whose lines start at
    ``starts``): True; False when one holds a boolean (or no number); None when the rows
    cannot be found by line (or a line does not parse)."""
    lines = lines_of_rows(path, (r for r, _ in suspects), total, starts) if starts is not None else None
    if lines is None:
        return None
    for row, field_path in suspects:
        try:
            value = orjson.loads(lines[row])
        except orjson.JSONDecodeError:
            return None
        for key in field_path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return False
    return True
