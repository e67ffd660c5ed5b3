"""Text log formats in the ingest pipeline: parse lines, hand the events on as JSON lines.

A parser (``rootsift.ingest.formats``) yields events as dicts; here they are serialised
with orjson into blocks of JSON lines, which the JSON-lines reader stores like any JSON
input (the checked fast path, types, new fields). Parsing runs in the reader thread,
beside DuckDB's insert of the previous block. Each block remembers the input line of
every event, so a reject found while storing names the line of the log, not of the block.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from rootsift.errors import InputFormatError
from rootsift.ingest.formats.base import FormatOptions, TextFormat, file_time, numbered_lines
from rootsift.ingest.jsonl import BlockStats
from rootsift.ingest.rejects import Reject
from rootsift.ingest.sources import Input, open_input

TEXT_BLOCK_BYTES = 32 << 20
"""JSON bytes per block: big enough for DuckDB, small enough that parsing and storing overlap."""
FIRST_BLOCK_BYTES = 2 << 20
_DUMP = orjson.OPT_APPEND_NEWLINE


@dataclass
class TextBlock:
    """One block of parsed events written as JSON lines, with where each event came from."""

    stats: BlockStats | None
    """The JSON lines' byte counts and file; None when no event was parsed."""
    lines: list[int]
    """The input line of each event, in block order."""
    files: list[tuple[int, str]] = field(default_factory=list)
    """(index of the first event, file name) for each input file with events in the block."""
    rejects: list[Reject] = field(default_factory=list)
    """What the parser rejected while this block was filled."""
    bytes_read: int = 0

    def origin(self, index: int) -> tuple[int, str | None]:
        """The input line and file of the block's ``index``-th event (0-based)."""
        line = self.lines[index] if 0 <= index < len(self.lines) else 0
        at = bisect.bisect_right(self.files, (index, "\uffff")) - 1
        return line, self.files[at][1] if at >= 0 else None


def input_files(source: str) -> list[str]:
    """``source`` itself, or the regular files of a directory in name order (hidden files skipped)."""
    path = Path(source)
    if source == "-" or not path.is_dir():
        return [source]
    files = sorted(str(p) for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise InputFormatError(f"input directory {source} has no files")
    return files


def text_blocks(
    files: Iterable[tuple[Input, bytes]],
    fmt: type[TextFormat],
    options: FormatOptions,
    tmp_dir: str,
    block_bytes: int,
    name_files: bool,
) -> Iterator[TextBlock]:
    """Parse each opened input (with the bytes already read from its front) into blocks of JSON lines.

    ``name_files`` puts each file's name in front of its rejects' reasons (directory input).
    """
    buf = bytearray()
    block = TextBlock(None, [], [])
    limit = min(FIRST_BLOCK_BYTES, block_bytes)  # small first blocks: storing starts early
    done_bytes = 0
    for inp, head in files:
        parser = fmt(options.for_file(inp.name, file_time(inp.name) if inp.name != "-" else None))
        label = Path(inp.name).name
        block.files.append((len(block.lines), label))
        for item in parser.parse(numbered_lines(_Joined(head, inp))):
            if isinstance(item, Reject):
                block.rejects.append(_named(item, label) if name_files else item)
                continue
            line, event = item
            try:
                buf += orjson.dumps(event, option=_DUMP)
            except TypeError as exc:
                block.rejects.append(Reject(line, f"{fmt.name} produced an event that cannot be stored: {exc}", ""))
                continue
            block.lines.append(line)
            if len(buf) >= limit:
                yield _sealed(block, buf, tmp_dir, done_bytes + inp.position())
                limit = min(limit * 2, block_bytes)
                buf = bytearray()
                block = TextBlock(None, [], [(0, label)])
        done_bytes += inp.position()
    yield _sealed(block, buf, tmp_dir, done_bytes)


def _sealed(block: TextBlock, buf: bytearray, tmp_dir: str, bytes_read: int) -> TextBlock:
    """Write the block's JSON lines to a file (when it has any) and note the bytes read so far."""
    if buf:
        block.stats = BlockStats.of(buf, tmp_dir, len(buf))
    block.bytes_read = bytes_read
    return block


def _named(rej: Reject, label: str) -> Reject:
    return Reject(rej.line, f"{label}: {rej.reason}", rej.text)


class _Joined:
    """The bytes already read from an input's front, then the rest of its stream."""

    def __init__(self, head: bytes, inp: Input) -> None:
        self.head = head
        self.inp = inp

    def read(self, n: int) -> bytes:
        if self.head:
            data, self.head = self.head, b""
            return data
        return self.inp.stream.read(n)


def open_files(names: list[str]) -> Iterator[tuple[Input, bytes]]:
    """Open each file in turn (closing the previous one) with its first 64 KiB read."""
    for name in names:
        inp = open_input(name)
        try:
            yield inp, inp.stream.read(64 << 10)
        finally:
            inp.close()
