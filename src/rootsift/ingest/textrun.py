"""Text log formats in the ingest pipeline: parse lines, hand the events on as JSON lines.

A parser (``rootsift.ingest.formats``) yields events as dicts; here they are serialised
with orjson into blocks of JSON lines, which the JSON-lines reader stores like any JSON
input (the checked fast path, types, new fields). Parsing runs in the reader thread,
beside DuckDB's insert of the previous block. Each block remembers the input line and
file of every event, so a reject found while storing names the line of the log, not of
the block.
"""

from __future__ import annotations

import bisect
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from rootsift.errors import InputFormatError
from rootsift.ingest.formats.access_common import AccessLog, Compiled
from rootsift.ingest.formats.access_sql import SqlPlan, clean, sql_plan
from rootsift.ingest.formats.base import Event, FormatOptions, Item, TextFormat, file_time
from rootsift.ingest.formats.mysql_slow import MySQLSlowLog
from rootsift.ingest.rejects import Reject
from rootsift.ingest.scratch import write_file
from rootsift.ingest.sources import BOM, Input, line_blocks, open_input
from rootsift.ingest.textcut import Joined, Pace, growing, raw_blocks
from rootsift.ingest.textgil import sharing_gil

if TYPE_CHECKING:  # imported where used: a parser process (textchild) needs none of them (DuckDB, numpy)
    from rootsift.ingest.jsonl import BlockStats
    from rootsift.ingest.textsql import RawLines

SQL_LINES = True
"""Let DuckDB parse the formats that have a ``SqlPlan`` (tests turn it off to compare)."""
SQL_SLOW_LOG = False
"""Let DuckDB read MySQL slow logs (``textslow``; also needs ``SQL_LINES``). Off: measured on
2 cores, the parser's thread and DuckDB's JSON insert overlap better than DuckDB's streaming
windows alone (200k entries: 1.99 s against 2.24-2.49 s wall, the same CPU seconds;
docs/adr/0016-text-formats-in-one-duckdb-pass.md)."""
TEXT_BLOCK_BYTES = 16 << 20
"""JSON bytes per block: big enough for DuckDB, small enough that parsing and storing overlap.
The last block is stored after the parser has finished, on DuckDB alone: at 32 MiB that tail
was half of a 200k-entry slow log's storing (ADR 0016, amendment)."""
RAW_BLOCK_BYTES = 64 << 20
"""Log bytes per block DuckDB parses (``RawLines``), the first included: the reader thread only
cuts them, DuckDB's statement uses every core, and each block costs a commit and a Python
pass for its odd lines, so fewer blocks are faster. A small first block cost more still: a
small transaction followed by a big one in the same segment made its checkpoint rewrite the
row groups (0.3-0.8 s, a quarter of a 200k-line ingest; ADR 0016, second amendment)."""
FIRST_BLOCK_BYTES = 2 << 20
"""The first block of JSON lines a parser's events make (storing starts early); the pieces
the reader thread reads lines in."""
MAX_EVENT_BYTES = 8 << 20
"""Largest event stored whole (DuckDB's JSON reader takes objects up to 16 MiB); longer
text values are cut to ``MAX_TEXT_CHARS`` and the cut is recorded on the event."""
MAX_TEXT_CHARS = 2 << 20
_DUMP = orjson.OPT_APPEND_NEWLINE
COUNT_WINDOW = 8 << 20
"""Bytes of a block's JSON lines counted at a time (``BlockStats.of_file``)."""
STOP_QUIET = 0.5
"""Seconds without a parsed item after which a stopped (SIGTERM) stream's parser is left."""
HEAD_BYTES = 64 << 10
"""What ``open_files`` reads of each file's front (for sniffing and detection)."""

Chooser = Callable[[Input, bytes], type[TextFormat]]
"""Picks the format of one file of the input from its name and first bytes."""


@dataclass
class TextBlock:
    """One block of parsed events written as JSON lines, with where each event came from."""

    stats: BlockStats | None
    """The JSON lines' byte counts and file; None when no event was parsed."""
    lines: list[int]
    """The input line of each event, in block order."""
    files: list[tuple[int, int, str]] = field(default_factory=list)
    """(index of the first event, file number, file name) for each input file in the block."""
    rejects: list[tuple[int, Reject]] = field(default_factory=list)
    """(file number, reject) for what the parser rejected while this block was filled."""
    name_files: bool = False
    """Put each file's name in front of its rejects' reasons (directory input)."""
    bytes_read: int = 0
    numbered: bool = False
    """The store's rejects already carry the log's line numbers (a ``RawLines`` block)."""
    json_path: str | None = None
    """The block's JSON lines, written by the reader thread and counted by ``counted``."""

    @property
    def followed(self) -> bool:
        """More blocks of the input are known to follow: a block of lines DuckDB parses that
        is not its file's last (the storing thread need not wait for the next to know)."""
        from rootsift.ingest.textsql import RawLines

        return isinstance(self.stats, RawLines) and not self.stats.last

    @property
    def prepares(self) -> bool:
        """Not a block of events: the front of the next block, handed on to be probed while it is cut."""
        from rootsift.ingest.textsql import RawLines

        return isinstance(self.stats, RawLines) and self.stats.front

    def counted(self) -> BlockStats | None:
        """The block's stats (None when no event was parsed). The JSON lines' byte counts are
        taken here, by the thread that stores the block: the reader thread, whose parser is
        the slower of the two, only writes them (ADR 0016, amendment)."""
        if self.stats is None and self.json_path is not None:
            from rootsift.ingest.jsonl import BlockStats

            self.stats = BlockStats.of_file(self.json_path, chunk=COUNT_WINDOW)
        return self.stats

    def origin(self, index: int) -> tuple[int, int, str | None]:
        """The input line, file number and file name of the block's ``index``-th event (0-based)."""
        line = self.lines[index] if 0 <= index < len(self.lines) else 0
        at = bisect.bisect_right(self.files, (index, 1 << 62, "")) - 1
        return (line, *self.files[at][1:]) if at >= 0 else (line, 0, None)

    def traced(self, store_rejects: list[Reject]) -> list[Reject]:
        """The parser's rejects and the store's (renumbered to the log's lines), in file and line order."""
        out = list(self.rejects)
        if self.numbered:
            return [rej for _, rej in out] + sorted(store_rejects, key=lambda r: r.line)
        for rej in store_rejects:
            line, number, name = self.origin(rej.line - 1)
            out.append((number, Reject(line, named(rej.reason, name) if self.name_files else rej.reason, rej.text)))
        out.sort(key=lambda item: (item[0], item[1].line))
        return [rej for _, rej in out]


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
    choose: Chooser,
    options: FormatOptions,
    tmp_dir: str,
    block_bytes: int,
    name_files: bool,
    stop_at_reject: bool = False,
    pace: Pace | None = None,
) -> Iterator[TextBlock]:
    """Parse each opened input (with the bytes already read from its front) into blocks of JSON lines.

    ``choose`` gives each file's format; ``block_bytes`` is the largest block (at most
    ``TEXT_BLOCK_BYTES`` of JSON lines, ``RAW_BLOCK_BYTES`` of lines DuckDB parses);
    ``name_files`` names each file in its rejects;
    ``stop_at_reject`` ends the input at the first reject (``--on-error raise``), so no
    event after it is stored; ``pace`` (seconds, stop event) cuts the lines of a stream
    that DuckDB parses every few seconds, and ends it when the event is set (SIGTERM).
    """
    raw_bytes = min(block_bytes, RAW_BLOCK_BYTES)
    block_bytes = min(block_bytes, TEXT_BLOCK_BYTES)
    buf = bytearray()
    labels = options.labels
    block = TextBlock(None, [], name_files=name_files)
    limit = min(FIRST_BLOCK_BYTES, block_bytes)  # small first blocks: storing starts early
    fronted: set[str] = set()  # the plans (by regex) whose first block's front was handed on
    done_bytes = 0
    for number, (inp, head) in enumerate(files):
        fmt = choose(inp, head)
        parser = fmt(options.for_file(inp.name, file_time(inp.name) if inp.name != "-" else None))
        label = Path(inp.name).name
        tag = label if name_files else None
        plan = None if stop_at_reject or labels or not SQL_LINES else sql_reading(parser, head)
        if isinstance(parser, MySQLSlowLog) and _slow_by_duckdb(parser, stop_at_reject):
            # DuckDB reads this file's entries where it can (textslow): raw blocks of whole entries
            from rootsift.ingest.textslow import SlowLines, entry_blocks

            if buf or block.rejects:
                yield _sealed(block, buf, tmp_dir, done_bytes)
                buf = bytearray()
            state = parser.blocks()
            pieces = line_blocks(Joined(head.removeprefix(BOM), inp), FIRST_BLOCK_BYTES)
            lines = ((raw, first) for raw, first, _ in growing(pieces, block_bytes, FIRST_BLOCK_BYTES))
            for raw, first, starts, ends, last in entry_blocks(lines, block_bytes):
                slow = SlowLines(0, False, write_file(raw, tmp_dir, ".log"), first_line=first, state=state, tag=tag)
                slow.fmt, slow.starts_entry, slow.ends_entry, slow.last = fmt.name, starts, ends, last
                slow.whole_in_python, slow.line_count = b"\r" in raw, raw.count(b"\n")
                yield TextBlock(slow, [], [(0, number, label)], name_files=name_files, numbered=True,
                                bytes_read=done_bytes + inp.position())  # fmt: skip
            done_bytes += inp.position()
            block = TextBlock(None, [], name_files=name_files)
            continue
        if plan is not None:
            # DuckDB parses this file's lines (textsql): hand on raw blocks, after what came before
            from rootsift.ingest.textprobe import PROBE_BYTES

            if buf or block.rejects:
                yield _sealed(block, buf, tmp_dir, done_bytes)
                buf = bytearray()
            paced = pace if inp.is_stream else None
            source = Joined(head.removeprefix(BOM), inp)
            front = None if paced is not None or plan[1].regex in fronted else source.front(PROBE_BYTES)
            if front is not None:
                # the front of the first block, probed by the storing thread while this one cuts the block
                fronted.add(plan[1].regex)
                ahead = _raw_lines(plan, parser, tag, fmt.name, write_file(front, tmp_dir, ".log"), 1)
                ahead.clean, ahead.last, ahead.front = clean(front), False, True
                yield TextBlock(ahead, [], [(0, number, label)], name_files=name_files, numbered=True,
                                bytes_read=done_bytes)  # fmt: skip
            for cut in raw_blocks(source, raw_bytes, FIRST_BLOCK_BYTES, paced):
                stats = _raw_lines(plan, parser, tag, fmt.name, write_file(cut.pieces, tmp_dir, ".log"), cut.first)
                stats.whole_in_python = any(b"\r" in piece for piece in cut.pieces)
                stats.clean, stats.last = all(map(clean, cut.pieces)), cut.last
                # counted once handed on, beside DuckDB's statement (textodd checks the odd lines by it)
                stats.lines_total = cut.count
                yield TextBlock(stats, [], [(0, number, label)], name_files=name_files, numbered=True,
                                bytes_read=done_bytes + inp.position())  # fmt: skip
            done_bytes += inp.position()
            block = TextBlock(None, [], name_files=name_files)
            continue
        block.files.append((len(block.lines), number, label))
        parsed = parser.read(Joined(head.removeprefix(BOM), inp))
        paced = pace if inp.is_stream else None
        # a stream's parsed lines are cut every few seconds too, while it pauses or not
        items: Iterator[Item | None] = sharing_gil(parsed if paced is None else _timed(parsed, *paced))
        since = time.monotonic()
        for item in items:
            if item is None or (paced is not None and buf and time.monotonic() - since >= paced[0]):
                since = time.monotonic()
                if buf or block.rejects:
                    yield _sealed(block, buf, tmp_dir, done_bytes + inp.position())
                    buf = bytearray()
                    block = TextBlock(None, [], [(0, number, label)], name_files=name_files)
                if item is None:
                    continue
            if isinstance(item, Reject):
                block.rejects.append((number, Reject(item.line, named(item.reason, tag), item.text)))
                if stop_at_reject:
                    yield _sealed(block, buf, tmp_dir, done_bytes + inp.position())
                    return
                continue
            line, event = item
            if labels:
                event = {**labels, **event}
            data = dumped(event, fmt.name)
            if isinstance(data, str):
                block.rejects.append((number, Reject(line, named(data, tag), "")))
                continue
            buf += data
            block.lines.append(line)
            if len(buf) >= limit:
                yield _sealed(block, buf, tmp_dir, done_bytes + inp.position())
                limit = min(limit * 2, block_bytes)
                buf = bytearray()
                block = TextBlock(None, [], [(0, number, label)], name_files=name_files)
        done_bytes += inp.position()
    yield _sealed(block, buf, tmp_dir, done_bytes)


def _raw_lines(
    plan: tuple[Compiled, SqlPlan], parser: TextFormat, tag: str | None, fmt: str, path: str, first: int
) -> RawLines:
    """A block of lines DuckDB parses with ``plan``, in the file ``path``, from line ``first``."""
    from rootsift.ingest.textsql import RawLines

    stats = RawLines(0, False, path, first_line=first, plan=plan[1])
    stats.compiled, stats.file_time, stats.tag, stats.fmt = plan[0], parser.options.file_time, tag, fmt
    return stats


def _timed(items: Iterator[Item], every: float, stop: threading.Event) -> Iterator[Item | None]:
    """``items`` (a parser reading a stream) pulled by a daemon thread, with None whenever
    nothing came for ``every`` seconds, so the caller can cut a block while the stream
    pauses. Once ``stop`` is set, the items end when nothing comes for a moment (what
    arrived is parsed; an entry still open in a multi-line format is not finished)."""
    ahead: queue.Queue[Item | BaseException | None] = queue.Queue(maxsize=1 << 12)

    def pump() -> None:
        try:
            for item in items:
                ahead.put(item)
            ahead.put(None)
        except BaseException as exc:  # noqa: BLE001 - raised in the reader's thread
            ahead.put(exc)

    threading.Thread(target=pump, name="rootsift-text-parser", daemon=True).start()
    while True:
        try:
            got = ahead.get(timeout=STOP_QUIET if stop.is_set() else every)
        except queue.Empty:
            if stop.is_set():
                return
            yield None
            continue
        if got is None:
            return
        if isinstance(got, BaseException):
            raise got
        yield got


def parsed_in_python(parser: TextFormat, head: bytes, stop_at_reject: bool) -> bool:
    """Whether ``text_blocks`` parses this input's lines in Python (not by DuckDB's SQL)."""
    if stop_at_reject or parser.options.labels or not SQL_LINES:
        return True
    return not _slow_by_duckdb(parser, stop_at_reject) and sql_reading(parser, head) is None


def _slow_by_duckdb(parser: TextFormat, stop_at_reject: bool) -> bool:
    return (
        isinstance(parser, MySQLSlowLog)
        and SQL_SLOW_LOG
        and not (stop_at_reject or parser.options.labels or not SQL_LINES)
    )


def sql_reading(parser: TextFormat, head: bytes) -> tuple[Compiled, SqlPlan] | None:
    """The template and DuckDB's plan for reading this input, when its format has one (access logs)."""
    if not isinstance(parser, AccessLog):
        return None
    lines = head.removeprefix(BOM).decode("utf-8", "replace").split("\n")
    if len(head) >= HEAD_BYTES and len(lines) > 1:
        lines.pop()  # cut by the head's end
    compiled = parser.compiled([line.removesuffix("\r") for line in lines[:50]])
    plan = sql_plan(compiled)
    return (compiled, plan) if plan is not None else None


def dumped(event: Event, fmt: str) -> bytes | str:
    """The event as one JSON line, its longest texts cut when it is too big; a reason when it cannot be."""
    try:
        data = orjson.dumps(event, option=_DUMP)
        if len(data) <= MAX_EVENT_BYTES:
            return data
        for key, value in list(event.items()):
            if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
                event[key] = value[:MAX_TEXT_CHARS]
                event[f"{key}_truncated_from_chars"] = len(value)
        data = orjson.dumps(event, option=_DUMP)
    except TypeError as exc:
        return f"{fmt} produced an event that cannot be stored: {exc}"
    if len(data) > MAX_EVENT_BYTES:
        return f"event of {len(data) >> 20} MiB is too large to store (the limit is {MAX_EVENT_BYTES >> 20} MiB)"
    return data


def _sealed(block: TextBlock, buf: bytearray, tmp_dir: str, bytes_read: int) -> TextBlock:
    """Write the block's JSON lines to a file (when it has any) and note the bytes read so far."""
    if buf:
        block.json_path = write_file(memoryview(buf), tmp_dir)
    block.bytes_read = bytes_read
    return block


def named(reason: str, label: str | None) -> str:
    return f"{label}: {reason}" if label else reason


def open_files(names: list[str]) -> Iterator[tuple[Input, bytes]]:
    """Open each file in turn (closing the previous one) with its first 64 KiB read."""
    for name in names:
        inp = open_input(name)
        try:
            yield inp, inp.stream.read(HEAD_BYTES)
        finally:
            inp.close()
