"""A file's lines as DuckDB reads them, for the text formats it parses (``textsql``, ``textslow``)."""

from __future__ import annotations

import os

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


KEY_BYTES = 8
"""Bytes from the middle of a line that, with its length, make the key ``odd_lines`` compares."""


def odd_lines(path: str, first_line: int, texts: set[str | None]) -> list[tuple[int, str]]:
    """Every line of the block file ``path`` (numbered from ``first_line``) whose text is one
    of ``texts`` (None: an empty line, as DuckDB reads it), in file order.

    Whether a line is odd depends on its text alone (the plan's checks and which of its
    fields have values), so a text found odd once is odd wherever it occurs: numbering
    the lines here, after the statement, lets DuckDB run it on all its threads without
    keeping the lines in order (``row_number() OVER ()`` ran everything above it on one).
    The lines are compared by a key first, vectorised with numpy (the length and the 8
    bytes in the middle: 0.037 CPU s for a block of 183k lines, against 0.056 for
    ``bytes.split`` and a set lookup per line), then by text where the key matches."""
    import numpy as np

    wanted = {b"" if text is None else text.encode() for text in texts}
    size = os.path.getsize(path)
    if not size or not wanted:
        return [(first_line, "")] if not size and b"" in wanted else []
    data = bytearray(size + KEY_BYTES)  # zeros past the end: a key is read 8 bytes at a time
    with open(path, "rb") as fh:
        fh.readinto(memoryview(data)[:size])
    arr = np.frombuffer(data, dtype=np.uint8, count=size)
    ends = np.flatnonzero(arr == ord("\n"))
    if data[size - 1] != ord("\n"):
        ends = np.append(ends, size)
    starts = np.concatenate(([0], ends[:-1] + 1))
    lengths = ends - starts
    # the (unaligned, little-endian) 8 bytes starting at each byte of the block, as one view
    words = np.ndarray((size,), dtype="<u8", buffer=data, strides=(1,))
    middle = starts + lengths // 2 - KEY_BYTES // 2
    sizes = lengths.astype(np.uint64)
    keys = np.where(lengths >= KEY_BYTES, words[np.maximum(middle, 0)] ^ sizes, sizes)
    found: list[tuple[int, str]] = []
    for i in np.flatnonzero(np.isin(keys, np.array([_key(w) for w in wanted], dtype=np.uint64))).tolist():
        line = bytes(data[starts[i] : ends[i]])
        if line in wanted:
            found.append((first_line + i, line.decode()))
    return found


def _key(line: bytes) -> int:
    """``odd_lines``' key of one line: its length, xor its middle ``KEY_BYTES`` (little-endian)."""
    if len(line) < KEY_BYTES:
        return len(line)
    middle = len(line) // 2 - KEY_BYTES // 2
    return len(line) ^ int.from_bytes(line[middle : middle + KEY_BYTES], "little")
