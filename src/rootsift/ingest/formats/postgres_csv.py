"""PostgreSQL csvlog: one CSV record per message, no header, quoted fields may span lines.

The columns are positional and grew with the server version: 23 up to PostgreSQL 12
(log_time … application_name), 24 in 13 (+ backend_type), 26 from 14 (+ leader_pid,
query_id). Lines are joined until the double quotes balance; a line that starts a new
record (a time stamp and a comma) while quotes are still open ends the broken record as a
reject instead of swallowing the rest of the file.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, FormatOptions, Item, Lines, TextFormat
from rootsift.ingest.formats.postgres_common import Assembler
from rootsift.ingest.formats.postgres_prefix import add_remote
from rootsift.ingest.formats.postgres_time import PgTime
from rootsift.ingest.rejects import Reject

# csvlog column -> (event field, kind); None drops the column (it is read elsewhere)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("timestamp", "time"),
    ("user", "str"),
    ("database", "str"),
    ("pid", "int"),
    ("remote", "remote"),
    ("session_id", "str"),
    ("line_num", "int"),
    ("command_tag", "str"),
    ("session_start", "stamp"),
    ("virtual_xid", "str"),
    ("transaction_id", "int"),
    ("severity", "str"),
    ("sql_state", "str"),
    ("message", "text"),
    ("detail", "text"),
    ("hint", "text"),
    ("internal_query", "text"),
    ("internal_position", "int"),
    ("context", "text"),
    ("statement", "text"),
    ("cursor_position", "int"),
    ("location", "text"),
    ("application_name", "str"),
    ("backend_type", "str"),
    ("leader_pid", "int"),
    ("query_id", "int"),
)
MIN_COLUMNS = 23
_TEXT = [(i, field) for i, (field, kind) in enumerate(COLUMNS) if kind in ("str", "text")]
_INTS = [(i, field) for i, (field, kind) in enumerate(COLUMNS) if kind == "int"]
_NAMES = ("user", "database", "application_name")
"""Name columns where PostgreSQL writes ``[unknown]`` before the session knows them."""
START = re.compile(r'"?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^,"]{1,8})?"?,')
SNIFF = re.compile(r'"?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?[^,]*,.*,(?:LOG|ERROR|FATAL|PANIC|WARNING|NOTICE|INFO|DEBUG\d?),[0-9A-Z]{5},')  # fmt: skip
MAX_JOIN = 100_000
"""Lines one record may span before it is given up as an unterminated quote."""


@register
class PostgresCsv(TextFormat):
    name = "postgres-csv"
    summary = "PostgreSQL csvlog (23/24/26 columns, PG ≤12/13/14+); statements joined with their durations"
    reads = ("tz",)

    def __init__(self, options: FormatOptions) -> None:
        super().__init__(options)
        self.clock = PgTime(options.zone(), bool(options.tz))
        self._feed = _Feed()
        self._reader = csv.reader(self._feed, strict=True)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        starts = [ln for ln in lines if START.match(ln)]
        if not starts:
            return 0.0
        hits = sum(1 for ln in starts if SNIFF.match(ln))
        return 0.95 * hits / len(starts) if hits * 2 >= len(starts) else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        asm = Assembler()
        parts: list[str] = []
        first = 0
        for number, line in lines:
            if parts:
                if START.match(line) and line.count('"') % 2 == 0:
                    yield Reject(
                        first, "unterminated quoted field (a new record starts before the quote closes)", parts[0]
                    )
                    parts = []
                else:
                    parts.append(line)
                    if line.count('"') % 2 == 1:
                        yield from self._record(asm, first, "\n".join(parts))
                        parts = []
                    elif len(parts) > MAX_JOIN:
                        yield Reject(first, f"unterminated quoted field (over {MAX_JOIN} lines)", parts[0])
                        parts = []
                    continue
            if not line:
                continue
            if line.count('"') % 2 == 1:
                parts, first = [line], number
                continue
            yield from self._record(asm, number, line)
        if parts:
            yield Reject(first, "unterminated quoted field at the end of the input", parts[0])
        yield from asm.finish()

    def _record(self, asm: Assembler, number: int, text: str) -> Iterator[Item]:
        self._feed.items.append(text)
        try:
            row = next(self._reader)
        except (csv.Error, StopIteration) as exc:
            self._feed.items.clear()
            yield Reject(number, f"not a CSV record: {exc}", text)
            return
        if len(row) < MIN_COLUMNS:
            yield Reject(number, f"{len(row)} columns; csvlog has 23 (PG ≤12), 24 (PG13) or 26 (PG14+)", text)
            return
        event = self.row_event(row)
        if isinstance(event, str):
            yield Reject(number, event, text)
            return
        asm.complete(number, event)
        yield from asm.take()

    def row_event(self, row: list[str]) -> Event | str:
        """The event of one csvlog row (or CloudNativePG record), or why it cannot be one."""
        stamp = self.clock.parse(row[0])
        if stamp is None:
            return (
                f"unreadable time stamp {row[0]!r} (log_time, the first column)"
                if row[0]
                else "no time stamp (log_time, the first column)"
            )
        n = len(row)
        event: Event = {field: row[i] for i, field in _TEXT if i < n and row[i]}
        event[TIME_KEY] = stamp
        for field in _NAMES:
            if event.get(field) == "[unknown]":
                del event[field]
        for i, field in _INTS:
            if i < n and row[i].lstrip("-").isdigit():
                event[field] = int(row[i])
        if row[4]:
            add_remote(event, row[4])
        if row[8]:
            start = self.clock.iso(row[8])
            if start is not None:
                event["session_start"] = start
        detail = event.get("detail")
        if isinstance(detail, str) and detail.startswith("parameters: "):
            del event["detail"]
            event["parameters"] = detail[12:]
        return event


class _Feed:
    """The records for one long-lived ``csv.reader``: cheaper than a reader per record."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def __iter__(self) -> _Feed:
        return self

    def __next__(self) -> str:
        if self.items:
            return self.items.pop()
        raise StopIteration
