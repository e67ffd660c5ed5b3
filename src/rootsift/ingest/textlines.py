"""A file's lines as DuckDB reads them, for the text formats it parses (``textsql``, ``textslow``)."""

from __future__ import annotations

LINES = (
    "read_csv({path}, sep=chr(1), quote='', escape='', header=false, auto_detect=false, columns={{'line': 'VARCHAR'}})"
)
"""The file's lines in order, as one text column ``line`` (an empty line is NULL)."""


def numbered(select: str, first_line: int) -> str:
    """SQL: the rows of ``select`` (one per line, in file order) with ``n``, the line's number
    when the first is ``first_line``.

    The number is taken last, above everything computed from the line: DuckDB runs the
    operators below a window in parallel but those above ``row_number() OVER ()`` on one
    thread (a regex over the lines took 70 + 3 ticks of CPU on two threads numbered first,
    47 + 25 numbered after). A statement that must use every thread has no number at all
    (``textsql.odd_lines``). It relies, as the numbering did before, on DuckDB keeping the
    file's order through a projection (``preserve_insertion_order``, on by default)."""
    return f"SELECT row_number() OVER () + {first_line - 1} AS n, * FROM ({select})"
