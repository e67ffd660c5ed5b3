"""Byte-level counts of a block of JSON lines: what the JSON fast path's check compares
the rows it wrote against (see ``BlockStats`` and docs/storage.md, "Ingest")."""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, cast

import numpy as np

from rootsift.ingest.sources import GZIP_MAGIC, read_full
from rootsift.ingest.staging import write_file

SPACED_KEY = re.compile(rb'(?<!\\)"[ \t\r]+:')
"""A key written ``"key" :``: its colon does not follow the quote, so ``":`` misses it."""


@dataclass
class BlockStats:
    """Byte-level counts of a block of JSON lines for the fast path's key check, and the
    file that holds the block (``path``).

    Every key ends in a ``":`` token. The typed rows must account for all of them, less
    two kinds that are not values to keep: tokens inside strings (a quote in a string is
    escaped, so they read ``\\":``) and null-valued keys outside strings. Those two are
    counted only when the typed rows fall short (``keys_with_values()``).
    """

    key_tokens: int
    suspect: bool
    path: str | None = None
    _with_values: int | None = None
    lines: LineStarts | None = None
    """Where lines start in a plain file, counted beside the rest (None: not counted)."""

    @classmethod
    def of(cls, block: bytes | bytearray, tmp_dir: str | None = None, end: int | None = None) -> BlockStats:
        """Count ``block[:end]`` and, given ``tmp_dir``, write it to a file there."""
        end = len(block) if end is None else end
        path = write_file(memoryview(block)[:end], tmp_dir) if tmp_dir is not None else None
        keys, spaced, doubled = _quote_pairs(block, 0, end)
        return cls(keys, _suspect(block, 0, end, spaced, doubled), path)

    @classmethod
    def of_file(cls, path: str, chunk: int = 32 << 20) -> BlockStats:
        """The same counts over a whole file, mapped rather than read (no copy); a gzip
        file is counted as it decompresses, one window at a time."""
        if is_gzip(path):
            try:
                return cls._of_stream(path, chunk)
            except unreadable_gzip():
                # Truncated or corrupt: vouch for nothing; DuckDB's read fails too and the
                # blocks path reports what it could read.
                return cls(0, True, path)
        size = os.path.getsize(path)
        if size == 0:
            return cls(0, False, path)
        keys = 0
        suspect = False
        lines = LineStarts()
        chunk -= chunk % mmap.ALLOCATIONGRANULARITY
        with open(path, "rb") as fh:
            # One mapped window at a time, so the process does not hold the file's pages.
            # Each pair is counted at its quote: windows overlap by one byte.
            for lo in range(0, size, chunk):
                length = min(chunk + 1, size - lo)
                with mmap.mmap(fh.fileno(), length, offset=lo, access=mmap.ACCESS_READ) as mm:
                    found, spaced, doubled = _quote_pairs(mm, 0, length, lines, lo)
                    keys += found
                    # A seam may split a spaced or empty key: check across it too.
                    suspect = suspect or _suspect(mm, 0, length, spaced, doubled)
                    if not suspect and lo:
                        suspect = _seam_suspect(fh, lo)
        return cls(keys, suspect, path, lines=lines)

    @classmethod
    def _of_stream(cls, path: str, chunk: int) -> BlockStats:
        keys = 0
        suspect = False
        spaced_before = doubled_before = 0
        for buf, seam, end in _windows(path, chunk):
            # Each pair is counted at its quote (the seam repeats the last bytes before).
            found, spaced, doubled = _quote_pairs(buf, max(0, seam - 1), end)
            keys += found
            # A spaced or empty key whose quote was in the window before may end in this one.
            suspect = suspect or _suspect(buf, 0, end, spaced + spaced_before, doubled + doubled_before)
            spaced_before, doubled_before = spaced, doubled
        return cls(keys, suspect, path)

    def keys_with_values(self) -> int:
        r"""Key tokens outside strings whose value is not null; counted on first use.

        A ``":`` is inside a string when its quote is escaped, i.e. preceded by an odd run
        of backslashes: ``\":`` is a quote in a string, ``\\":`` ends a key whose name
        ends in a backslash. -1 when a run is too long to tell across window seams (then
        no count matches and the block takes the next rung).
        """
        if self._with_values is None:
            assert self.path is not None
            total = 0
            for buf, seam, end in _windows(self.path):
                outside = [_unescaped(buf, tok, seam, end) for tok in (b'":', b'":null', b'": null')]
                if min(outside) < 0:
                    total = -1
                    break
                total += outside[0] - outside[1] - outside[2]
            self._with_values = total
        return self._with_values


def _seam_suspect(fh: Any, at: int) -> bool:
    """Whether the bytes around a window boundary hold a pattern ``_suspect`` looks for."""
    fh.seek(max(0, at - 16))
    around = fh.read(32)
    return _suspect(around, 0, len(around), *_quote_pairs(around, 0, len(around))[1:])


LINE_START = 0x7B0A
"""``\n{`` as a little-endian 16-bit word: a line that starts an object."""


@dataclass
class LineStarts:
    """How many ``\n{`` pairs start in each slice of a file: ``offsets[i]`` to the next
    offset (or the file's end) holds ``counts[i]``. Every line of JSON lines that makes a
    row starts with ``{``, so these tell which line a row was read from (``vouch.py``)."""

    offsets: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)

    def add(self, offset: int, count: int) -> None:
        self.offsets.append(offset)
        self.counts.append(count)


PAIR_WORDS = 1 << 18
"""Words compared per numpy call: the temporaries (768 KiB) stay in the CPU's cache,
which makes the passes several times faster than over a whole window."""


def _quote_pairs(
    buf: bytes | bytearray | mmap.mmap, start: int, end: int, lines: LineStarts | None = None, base: int = 0
) -> tuple[int, int, int]:
    """How many quotes in ``buf[start:end]`` are followed by a colon, by whitespace (or a
    control byte), and by another quote: ``":``, ``" ``, ``""``. Given ``lines``, the
    ``\n{`` pairs of each slice are counted into it too (``buf`` is the file from ``base``).

    The bytes are read as little-endian 16-bit words from ``start`` and from ``start + 1``,
    so a quote and the byte after it are one word (``":`` is 0x3A22), compared in a few
    numpy passes over cache-sized slices without the GIL: about 6x faster than comparing
    bytes and combining masks, and this runs beside DuckDB on every byte ingested.
    """
    keys = spaced = doubled = 0
    scratch = np.empty(min(PAIR_WORDS, max(0, end - start) // 2), dtype="<u2")
    hit = np.empty(scratch.size, dtype=bool)
    for lo in range(start, end - 1, 2 * PAIR_WORDS):
        hi = min(end, lo + 2 * PAIR_WORDS + 1)  # the slice's last pair ends one byte past it
        starts = 0
        for first in (lo, lo + 1):
            n = (hi - first) // 2
            if n <= 0:
                continue
            words, tmp, mask = np.frombuffer(buf, dtype="<u2", count=n, offset=first), scratch[:n], hit[:n]
            keys += int(np.count_nonzero(np.equal(words, 0x3A22, out=mask)))
            # Whitespace (or a control byte, never raw in a JSON string) after a quote may hide
            # a key's colon, ``"key"\t:``: bytes 0-31 have their top three bits clear; 32 is a space.
            np.bitwise_and(words, 0xE0FF, out=tmp)
            spaced += int(np.count_nonzero(np.equal(tmp, 0x0022, out=mask)))
            spaced += int(np.count_nonzero(np.equal(words, 0x2022, out=mask)))
            # Two quotes may open an empty key, ``"":``.
            doubled += int(np.count_nonzero(np.equal(words, 0x2222, out=mask)))
            if lines is not None:  # where lines start: which rows are which lines (vouch.py)
                starts += int(np.count_nonzero(np.equal(words, LINE_START, out=mask)))
        if lines is not None:
            lines.add(base + lo, starts)
    return keys, spaced, doubled


def _suspect(buf: bytes | bytearray | mmap.mmap, start: int, end: int, spaced: int, doubled: int) -> bool:
    r"""Blocks the count cannot vouch for: a key written ``"key" : value`` (no ``":`` token),
    or one that may hold an empty key ``"":`` (renamed on the exact path). ``spaced`` and
    ``doubled`` are ``_quote_pairs``' counts: the byte searches run only when they say a
    pattern may be there.

    Escapes are no reason: in the raw bytes a quote inside a string is always escaped
    (``\"`` or ``\u0022``), so an escape can neither make nor hide a ``":`` token, and
    nothing is counted in decoded text.
    """
    # An empty key (DuckDB reads its object as a MAP) is renamed on the exact path.
    if doubled > 0 and buf.find(b'"":', start, end) >= 0:
        return True
    # A quote followed by a space may only open a string that starts with one; a regex
    # looks for the spaced colon itself, only then.
    return spaced > 0 and SPACED_KEY.search(buf, start, end) is not None


SEAM = 64
"""Bytes carried from one window into the next: longer than any counted token."""


def _windows(path: str, chunk: int = 32 << 20) -> Iterator[tuple[bytearray, int, int]]:
    """(buffer, seam, end) windows over a file (decompressed, if gzip), in one reused buffer
    (no page faults per chunk): ``buffer[:seam]`` repeats the last bytes of the window
    before, new bytes run to ``end``. Count with ``_count`` so a token is counted in the
    window where it ends."""
    buf = bytearray(SEAM + chunk)
    view = memoryview(buf)
    carried = 0
    with open_decompressed(path) as fh:
        while n := read_full(fh, view[carried:]):
            end = carried + n
            yield buf, carried, end
            keep = min(SEAM, end)
            buf[:keep] = buf[end - keep : end]
            carried = keep


def is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def unreadable_gzip() -> tuple[type[Exception], ...]:
    """What reading a truncated or corrupt gzip file through ``open_decompressed`` raises."""
    from isal import igzip_lib

    return (EOFError, OSError, cast("type[Exception]", igzip_lib.IsalError))


def open_decompressed(path: str) -> BinaryIO:
    """The file's bytes, decompressed when it is gzip (in place ingest reads ``.gz`` files).

    ISA-L's inflate (``isal``) is about twice as fast as zlib's, and the counts of a
    ``.gz`` read in place decompress it a second time, beside DuckDB.
    """
    if is_gzip(path):
        from isal import igzip

        return igzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def _count(buf: bytearray, token: bytes, seam: int, end: int) -> int:
    """Occurrences of ``token`` in ``buf[:end]`` that end after ``seam`` (not counted before)."""
    return buf.count(token, max(0, seam - len(token) + 1), end)


def _unescaped(buf: bytearray, token: bytes, seam: int, end: int) -> int:
    r"""Occurrences of ``token`` (which starts with a quote) whose quote is not escaped, i.e.
    preceded by an even run of backslashes; -1 if a run is longer than the seam can hold.

    ``\`` * j + token counts the runs of at least j, so the alternating sum over j counts
    the odd runs once and the even runs not at all.
    """
    escaped, j = 0, 1
    while n := _count(buf, b"\\" * j + token, seam, end):
        if j + len(token) > SEAM:
            return -1
        escaped += n if j % 2 else -n
        j += 1
    return _count(buf, token, seam, end) - escaped
