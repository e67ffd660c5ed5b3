"""The front of a plan's first block, read before the block's one statement (``textsql``).

The statement inserts a block straight into the store, so its columns are decided before
it runs: which of the plan's fields are new and have values (a field never seen is not
added as a column of NULLs), and which fields the Python parser gives the lines the SQL
does not read (the odd lines: an unusual request becomes ``request``). A column added
after the block's rows, when its odd lines are stored, made the segment's checkpoint
rewrite every row group (0.16-0.28 s for 200k rows); added with the block, it costs
nothing. Both are read from the first ``PROBE_BYTES`` of the block, copied to a file of
their own (a ``LIMIT`` over the block's lines did not stop DuckDB's parallel scan early).
A field that only later lines have is still stored: those lines go to Python, which adds
it, as in any later block.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

import duckdb

from rootsift.ingest.staging import write_file
from rootsift.store.sqltext import ident

PROBE_BYTES = 1 << 20
"""The front of a plan's first block that is probed (about 8,000 access-log lines)."""
PROBE_ODD_LINES = 1000
"""Most odd lines of the front handed to the Python parser for their fields."""


@dataclass
class Front:
    """What the front of a block holds: the plan's columns with a value, and the odd lines."""

    valued: set[str]
    odd: list[str]


def read_front(
    cur: duckdb.DuckDBPyConnection, path: str, tmp_dir: str, columns: list[str], split: Callable[[str], str]
) -> Front:
    """The front of the block file ``path``: which of ``columns`` have a value where ``ok``,
    and the texts of up to ``PROBE_ODD_LINES`` lines where it is not; ``split(path)`` is the
    plan's SQL over a file's lines (``line``, the columns, ``ok``). Raises
    ``duckdb.InvalidInputException`` when DuckDB cannot read the front as text."""
    with open(path, "rb") as fh:
        front = fh.read(PROBE_BYTES)
    probe = write_file(front[: front.rfind(b"\n") + 1] or front, tmp_dir, ".log")
    try:
        # FILTER, not WHERE: DuckDB pushed a WHERE on ``ok`` below the split and ran the
        # regex once for each of its terms (6x slower)
        counts = [f"count({ident(name)}) FILTER (WHERE ok)" for name in columns]
        odd = f"list(coalesce(line, '')) FILTER (WHERE ok IS NOT TRUE)[:{PROBE_ODD_LINES}]"
        row = cur.execute(f"SELECT {', '.join([*counts, odd])} FROM ({split(probe)})").fetchall()[0]
    finally:
        os.unlink(probe)
    return Front({name for name, count in zip(columns, row) if count}, list(row[-1] or []))
