"""The odd lines of a block DuckDB parsed (``textsql``): parsed by text, numbered only for a reject.

The one statement per block hands each line the SQL does not read to ``odd_line`` (a
side-effect UDF called from any of DuckDB's threads, in any order), which keeps its text
once per line. Whether a line is odd, and what the Python parser makes of it, depend on
its text alone, and an event does not hold its line number: the texts are parsed in the
order of their texts (equal texts next to each other), each numbered by its place in
that order, and only a reject needs the log's line number. Then only the texts of the
rejects are looked for in the block (``textlines.odd_lines``), and the k-th of equal
texts in that order takes the k-th line of that text in the block: equal texts give
equal items, so which takes which does not matter.

Looking for every odd text in the block (a numpy pass over it, 0.04-0.1 CPU s per 200k
lines, on the storing thread while DuckDB waits) was a third of what a block cost outside
its statement; most blocks have no rejected odd line at all (a TLS handshake or an
escaped value still makes an event).

Keeping one text per call relies on DuckDB calling ``odd_line`` once for each line where
``keep`` is false. That is checked: the lines the statement inserted and the texts kept
must add up to the lines of the block (counted by the reader thread beside the
statement, ``LineCount``, ``textcut.Cut.lines``); when they do not, every odd text is looked for in the block
and its lines numbered there, as before, so no line is counted twice or dropped.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable

from rootsift.ingest.rejects import Reject

COUNT_WAIT = 60.0
"""Most seconds the storing thread waits for the reader thread's count of a block's lines
(it is taken right after the block is handed on; a bytes.count of 64 MiB takes ~50 ms)."""


class LineCount:
    """A block's number of lines, told by the reader thread after it handed the block on
    (so that counting runs beside DuckDB's statement, not before it)."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._lines: int | None = None

    def tell(self, lines: int) -> None:
        self._lines = lines
        self._done.set()

    def lines(self, wait: float = COUNT_WAIT) -> int | None:
        """The count, or None when it was not told within ``wait`` seconds (the reader stopped)."""
        self._done.wait(wait)
        return self._lines


def in_text_order(texts: list[str | None]) -> list[str]:
    """The odd texts (None: an empty line, as DuckDB reads it) sorted, equal ones together;
    the parser gets the i-th as line i (1-based)."""
    return sorted("" if text is None else text for text in texts)


def renumbered(
    rejects: list[Reject], order: list[str], find: Callable[[set[str]], list[tuple[int, str]]]
) -> list[Reject] | None:
    """``rejects`` (numbered by their place in ``order``) with the log's line numbers: ``find``
    gives the lines of the block whose text is one of a set, numbered, in file order. None
    when a text is not found as many times as it is in ``order`` (the caller numbers every
    odd line in the block instead)."""
    wanted = {order[rej.line - 1] for rej in rejects}
    where: dict[str, list[int]] = {}
    for number, text in find(wanted):
        where.setdefault(text, []).append(number)
    lines: dict[int, int] = {}
    for text in wanted:
        first, end = bisect.bisect_left(order, text), bisect.bisect_right(order, text)
        found = where.get(text, [])
        if len(found) != end - first:
            return None
        lines.update(zip(range(first + 1, end + 1), found))
    return sorted((Reject(lines[rej.line], rej.reason, rej.text) for rej in rejects), key=lambda r: r.line)
