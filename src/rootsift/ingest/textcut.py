"""Cutting a text input into blocks of whole lines, in the reader thread (``textrun``).

A block DuckDB parses (``textsql.RawLines``) is kept as the pieces it was read in (2 MiB
each) and written to its file from them: joining 64 MiB of pieces into one ``bytes`` and
slicing off the part of a line past the cut were two copies into fresh memory, 0.045 and
0.041 CPU s each per 64 MiB, before DuckDB could start on the first block. Only the piece
where the block ends is cut. A block's lines are counted after it is handed on, beside
DuckDB's statement (``Cut.count``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from rootsift.ingest.sources import Input
from rootsift.ingest.streams import paced_buffers
from rootsift.ingest.textodd import LineCount

Pace = tuple[float, threading.Event]
"""A stream's commit interval in seconds and the event that ends it (SIGTERM, SIGINT)."""


@dataclass
class Cut:
    """One block of whole lines: the pieces it was read in, its first line's number, whether it
    ends the input, and its number of lines (told once it has been handed on)."""

    pieces: list[bytes]
    first: int
    last: bool
    count: LineCount = field(default_factory=LineCount)

    def lines(self) -> int:
        """The block's lines as DuckDB's ``read_csv`` gives them rows (a last line without its
        line break is one)."""
        ends = sum(piece.count(b"\n") for piece in self.pieces)
        return ends + (1 if self.pieces and not self.pieces[-1].endswith(b"\n") else 0)


class Joined:
    """The bytes already read from an input's front, then the rest of its stream."""

    def __init__(self, head: bytes, inp: Input) -> None:
        self.head = head
        self.inp = inp

    def read(self, n: int) -> bytes:
        if self.head:
            data, self.head = (self.head, b"") if len(self.head) <= n else (self.head[:n], self.head[n:])
            return data
        return self.inp.stream.read(n)

    def front(self, size: int) -> bytes | None:
        """The input's first ``size`` bytes (read now, and read again from here), when more follow
        them; None for a shorter input."""
        while len(self.head) <= size:
            more = self.inp.stream.read(size + 1 - len(self.head))
            if not more:
                return None
            self.head += more
        return self.head[:size]


def raw_blocks(source: Joined, most: int, step: int, pace: Pace | None) -> Iterator[Cut]:
    """Blocks of whole lines for DuckDB, ``most`` bytes each (read ``step`` at a time); for a
    stream (``pace``), what arrived every ``pace[0]`` seconds (``streams.paced_buffers``), each
    committed at once (so each counts as the last)."""
    if pace is None:
        yield from cut_blocks(source, most, step)
        return
    stream = cast(BinaryIO, source)  # paced_buffers only calls read()
    for buf, end, line in paced_buffers(stream, most, *pace):
        cut = Cut([bytes(buf[:end])], line, True)
        yield cut
        cut.count.tell(cut.lines())


def cut_blocks(source: Joined, most: int, step: int) -> Iterator[Cut]:
    """Blocks of whole lines of ``most`` bytes or a little more (read ``step`` at a time, one
    read ahead to know the last), with their first line's number; each block's lines are
    counted after it is handed on (``Cut.count``)."""
    step = min(step, most)
    parts: list[bytes] = []
    size, line, plain = 0, 1, 0  # parts[:plain] hold no line break
    data = source.read(step)
    while data:
        parts.append(data)
        size += len(data)
        data = source.read(step)
        if size < most and data:
            continue
        if not data:
            cut = Cut(parts, line, True)
            yield cut
            cut.count.tell(cut.lines())
            return
        at, end = len(parts) - 1, -1
        while at >= plain and (end := parts[at].rfind(b"\n")) < 0:
            at -= 1
        if at < plain:  # no line has ended yet: read on
            plain = len(parts)
            continue
        piece = parts[at]
        rest = [piece[end + 1 :]] if end + 1 < len(piece) else []
        cut = Cut([*parts[:at], piece[: end + 1] if rest else piece], line, False)
        parts = rest + parts[at + 1 :]
        size, plain = sum(map(len, parts)), 0
        yield cut
        count = cut.lines()
        cut.count.tell(count)
        line += count


def growing(
    pieces: Iterator[tuple[bytes, int]], most: int, first: int, step: int = 2
) -> Iterator[tuple[bytes, int, bool]]:
    """Pieces of whole lines joined into blocks of ``first``, ``first * step``, ... bytes up to
    ``most``, each with its first line's number and whether it is the last (known by reading
    one piece ahead)."""
    parts: list[bytes] = []
    size, number, limit = 0, 1, min(first, most)
    ahead = next(pieces, None)
    while ahead is not None:
        piece, line = ahead
        if not parts:
            number = line
        parts.append(piece)
        size += len(piece)
        ahead = next(pieces, None)
        if size >= limit or ahead is None:
            yield b"".join(parts), number, ahead is None
            parts, size, limit = [], 0, min(limit * step, most)
