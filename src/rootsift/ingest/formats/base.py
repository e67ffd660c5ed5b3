"""What a log-format parser is: text lines in, events (dicts) and counted rejects out.

A parser turns the lines of one input into ``(line_number, event)`` pairs and
``Reject``s. Events are plain dicts of JSON-able values; the event's time is a
timezone-aware ``datetime`` under ``TIME_KEY``. The ingest runner serialises events as
JSON lines and stores them through the JSON-lines reader (types, new fields and ``#raw``
values as for any JSON input), so a parser only has to read its format.

Parsers are stateful generators: a multi-line record (a slow-log entry, a PostgreSQL
statement with its continuation lines) is emitted when the line after it arrives or
the input ends, with the number of its first line.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rootsift.errors import UsageError
from rootsift.ingest.rejects import Reject
from rootsift.ingest.sources import Readable, line_blocks

TIME_KEY = "timestamp"
"""The key under which every parser puts the event's time (an aware datetime)."""

Event = dict[str, object]
Item = tuple[int, Event] | Reject
"""What ``TextFormat.parse`` yields: an event with the number of its first line, or a reject."""
Lines = Iterable[tuple[int, str]]
"""Numbered lines (from 1), without their line ending."""


@dataclass(frozen=True)
class FormatOptions:
    """Everything a parser may be told besides its input. Each format documents what it reads."""

    log_format: str | None = None
    """nginx ``log_format`` (or Apache ``LogFormat``) string for access logs."""
    log_line_prefix: str | None = None
    """PostgreSQL ``log_line_prefix`` for stderr logs."""
    host: str | None = None
    """Host name to record on every event (procfs, metrics); default: from the path."""
    tz: str | None = None
    """IANA zone for times written without an offset (default UTC)."""
    source: str = "-"
    """The file being read (set by the runner, one file at a time for directories)."""
    mtime: float | None = None
    """The file's modification time (epoch seconds), for formats whose records carry no time."""
    labels: dict[str, str] = field(default_factory=dict)
    """Fields set on every event (``--label KEY=VALUE``); a value the event has of its own wins."""

    def zone(self) -> tzinfo:
        """The zone for naive times: ``tz`` or UTC; a bad name is a usage error naming the flag."""
        if not self.tz:
            return UTC
        try:
            return ZoneInfo(self.tz)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise UsageError(f"--tz {self.tz!r} is not a known time zone (use a name such as Europe/Berlin)") from exc

    def for_file(self, path: str, mtime: float | None) -> FormatOptions:
        return replace(self, source=path, mtime=mtime)

    def file_time(self) -> datetime:
        """The file's modification time (now for stdin), for records that carry no time."""
        return datetime.fromtimestamp(self.mtime, UTC) if self.mtime is not None else datetime.now(UTC)


class TextFormat(ABC):
    """A line-oriented log format. Subclasses set ``name`` and ``summary`` and register
    themselves with ``rootsift.ingest.formats.register``."""

    name: ClassVar[str]
    summary: ClassVar[str]
    """One line for ``--help`` and docs/formats.md."""
    reads: ClassVar[tuple[str, ...]] = ()
    """The FormatOptions fields this format uses (others given on the command line are an error)."""

    def __init__(self, options: FormatOptions) -> None:
        self.options = options

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        """How sure (0..1) this format is that the input starting with ``lines`` is its own."""
        return 0.0

    @abstractmethod
    def parse(self, lines: Lines) -> Iterator[Item]:
        """Yield ``(first_line_number, event)`` for each record and a ``Reject`` for each bad line."""

    def read(self, stream: Readable) -> Iterator[Item]:
        """The items of a whole input: its lines parsed. A binary format (pprof) overrides this
        to read the bytes, numbering its records (samples) where a text format numbers lines."""
        return self.parse(numbered_lines(stream))


def numbered_lines(stream: Readable, chunk: int = 4 << 20) -> Iterator[tuple[int, str]]:
    """Decode a byte stream into numbered lines (invalid UTF-8 replaced, ``\r\n`` and ``\n`` ends).

    Works in blocks of whole lines (``line_blocks``), so a caller holds one block at a
    time whatever the input's size; a line longer than ``chunk`` is kept whole.
    """
    for text, number in decoded_blocks(stream, chunk):
        yield from enumerate(text.split("\n"), number)


def decoded_blocks(stream: Readable, chunk: int = 4 << 20) -> Iterator[tuple[str, int]]:
    """The stream in blocks of whole lines (``line_blocks``), each decoded (invalid UTF-8
    replaced) with its lines joined by ``\n`` (a ``\r`` ending a line dropped, no final
    newline), and the number of its first line."""
    for block, number in line_blocks(stream, chunk):
        text = block[:-1].decode("utf-8", "replace")
        if "\r" in text:
            text = text.replace("\r\n", "\n").removesuffix("\r")
        yield text, number


def parse_bytes(fmt: TextFormat, data: bytes) -> tuple[list[tuple[int, Event]], list[Reject]]:
    """Parse ``data`` completely (tests, small inputs): the events and the rejects."""
    events: list[tuple[int, Event]] = []
    rejects: list[Reject] = []
    for item in fmt.read(io.BytesIO(data)):
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            events.append(item)
    return events, rejects


def file_time(path: str) -> float | None:
    try:
        return Path(path).stat().st_mtime
    except OSError:
        return None
