"""One slow-log entry, from its header fields and body lines to an event (or a reject).

The body is the statement, possibly preceded by the lines the server adds itself:
``use db;`` (written when the current database differs from the previous entry's) and
``SET timestamp=N;`` (also ``SET last_insert_id=N,insert_id=N,timestamp=N;``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from rootsift.ingest.formats.base import TIME_KEY, Event, Item
from rootsift.ingest.formats.mysql_slow_time import TimeReader
from rootsift.ingest.rejects import Reject

__all__ = ["Backfill", "Entry", "EntryBuilder", "backfill"]

_SET = re.compile(r"SET\s+((?:[A-Za-z_]+=[0-9]+(?:\.[0-9]+)?,)*[A-Za-z_]+=[0-9]+(?:\.[0-9]+)?)\s*;\s*", re.I)
_SET_KEYS = frozenset({"timestamp", "insert_id", "last_insert_id"})


class Entry:
    """An entry being read: its first line, header fields, ``# Time:`` and body lines."""

    __slots__ = ("body", "fields", "has_query_time", "line", "time_line", "time_text")

    def __init__(self, line: int) -> None:
        self.line = line
        # Becomes the event: the time keys come first in it, set when the entry is done.
        self.fields: dict[str, object] = {TIME_KEY: None, "timestamp_source": None}
        self.body: list[str] = []
        self.time_text: str | None = None
        self.time_line = 0
        self.has_query_time = False


class EntryBuilder:
    """Finishes entries in file order; remembers what later entries inherit (the time and
    the ``use`` database, which the server writes only when it changes)."""

    def __init__(self, times: TimeReader, fingerprint: Callable[[str], str]) -> None:
        self.times = times
        self.fingerprint = fingerprint
        self.last_time: datetime | None = None
        self.db: str | None = None

    def restart(self) -> None:
        """A server-restart banner: the server's remembered database is reset."""
        self.db = None

    def finish(self, entry: Entry) -> tuple[int, Event] | Reject:
        """The event of a complete entry, or a reject naming what is missing."""
        body = entry.body
        if len(body) > 1:
            # The usual body, "SET timestamp=N;" then the statement, read without the
            # general loop below (which gives the same for it).
            first, text = body[0], body[1]
            if first[:14] == "SET timestamp=" and first[-1] == ";" and text[:4] != "use ":
                digits = first[14:-1]
                if digits.isdigit() and (stamp := self.times.epoch(digits)) is not None:
                    sql = (text if len(body) == 2 else "\n".join(body[1:])).strip()
                    if sql:
                        if sql[-1] == ";":
                            sql = sql[:-1].rstrip()
                        if "start_time" in entry.fields:
                            start, source = self._time(entry, stamp)
                            return self._event(entry, sql, start or stamp, source, None)
                        return self._event(entry, sql, stamp, "set_timestamp", None)
        while body and not body[-1].strip():
            body.pop()
        if not body:
            return Reject(entry.line, "slow-log entry has a header but no statement (truncated?)", _snippet(entry))
        fields = entry.fields
        use_db: str | None = None
        set_time: datetime | None = None
        skip = 0
        for text in body[:2]:
            if set_time is None and text.startswith("SET timestamp=") and text.endswith(";") and text[14:-1].isdigit():
                set_time = self.times.epoch(text[14:-1])
            elif use_db is None and text.startswith("use ") and text.rstrip().endswith(";"):
                use_db = text.rstrip()[4:-1].strip().strip("`")
            elif set_time is None and text.startswith(("SET ", "set ")) and (m := _SET.fullmatch(text)):
                pairs = [pair.split("=", 1) for pair in m.group(1).split(",")]
                if any(key.lower() not in _SET_KEYS for key, _ in pairs):
                    break
                for key, value in pairs:
                    if key.lower() == "timestamp":
                        set_time = self.times.epoch(value)
                    else:
                        fields[key.lower()] = int(float(value))
            else:
                break
            skip += 1
        # An entry whose whole body is "use db;" logged the USE itself.
        if skip == len(body) - 1:
            statement = body[skip].strip()
        else:
            statement = "\n".join(body[skip:] if skip < len(body) else body[-1:]).strip()
        if statement.endswith(";"):
            statement = statement[:-1].rstrip()

        if use_db:
            self.db = use_db
        if set_time is not None and "start_time" not in fields:
            when: datetime | None = set_time
            source = "set_timestamp"
        else:
            when, source = self._time(entry, set_time)
        if when is None and entry.time_text is not None:
            return Reject(entry.time_line, source, "# Time: " + entry.time_text)
        # No time at all: the event goes out without one and ``backfill`` dates it.
        return self._event(entry, statement, when, source, use_db)

    def _event(
        self, entry: Entry, statement: str, when: datetime | None, source: str, use_db: str | None
    ) -> tuple[int, Event]:
        return entry.line, self.event(entry.fields, statement, when, source, use_db)

    def event(self, event: Event, statement: str, when: datetime | None, source: str, use_db: str | None) -> Event:
        """An entry's fields made its event: its time (None: ``backfill`` dates it) and where
        it came from, its database, statement and fingerprint."""
        if when is not None:
            self.last_time = when
        event[TIME_KEY] = when
        event["timestamp_source"] = source
        if use_db:
            event["db"] = use_db
        elif "db" in event:
            if not event["db"]:
                del event["db"]
        elif self.db:
            event["db"] = self.db
        event["statement"] = statement
        event["fingerprint"] = self.fingerprint(statement)
        return event

    def _time(self, entry: Entry, set_time: datetime | None) -> tuple[datetime | None, str]:
        """The most precise start time known and where it came from (or None and why not)."""
        start = entry.fields.get("start_time")
        if isinstance(start, str) and (when := self.times.iso(start)) is not None:
            return when, "start"
        if set_time is not None:
            return set_time, "set_timestamp"
        if entry.time_text is not None:
            when = self.times.header(entry.time_text)
            if when is not None:
                return when, "time"
            self.last_time = None
            return None, f"unreadable '# Time:' value {entry.time_text!r} and no 'SET timestamp=' in the entry"
        if self.last_time is not None:
            return self.last_time, "previous"
        return None, "no time"


def _snippet(entry: Entry) -> str:
    """What a rejected entry held: a few header fields and its first statement line."""
    parts = [f"{k}: {v}" for k, v in list(entry.fields.items())[2:6]]
    if entry.body:
        parts.append(entry.body[0][:200])
    return "; ".join(parts)


def backfill(items: Iterator[Item], file_time: Callable[[], datetime], limit: int = 10_000) -> Iterator[Item]:
    """Date the events that came without any time (no ``# Time:`` before them in the file, no
    ``SET timestamp``): MySQL leaves ``# Time:`` out within the second of the entry before,
    so an entry before a file's first time ran at or before it and takes it
    (``timestamp_source: next``). When no time follows (or ``limit`` wait), they take the
    file's modification time (``file_mtime``), the latest they can have run."""
    dates = Backfill(file_time, limit)
    yield from dates.feed(items)
    yield from dates.end()


class Backfill:
    """``backfill`` over an input given in parts: the entries waiting for a time stay here
    from one part to the next."""

    def __init__(self, file_time: Callable[[], datetime], limit: int = 10_000) -> None:
        self.file_time = file_time
        self.limit = limit
        self.waiting: list[tuple[int, Event]] = []

    def feed(self, items: Iterable[Item]) -> Iterator[Item]:
        """``items`` with the events before them that waited for a time, dated (see ``backfill``)."""
        for item in items:
            if isinstance(item, tuple) and item[1].get(TIME_KEY) is None:
                self.waiting.append(item)
                if len(self.waiting) >= self.limit:
                    yield from self.end()
                continue
            if self.waiting and isinstance(item, tuple):
                yield from self.dated(item[1][TIME_KEY])  # type: ignore[arg-type]
            yield item

    def dated(self, when: datetime) -> Iterator[Item]:
        """The waiting events, given the time of the event after them."""
        waiting, self.waiting = self.waiting, []
        return _dated(waiting, when, "next")

    def end(self) -> Iterator[Item]:
        """The input ended: the waiting events take the file's time."""
        waiting, self.waiting = self.waiting, []
        return _dated(waiting, self.file_time(), "file_mtime")


def _dated(events: list[tuple[int, Event]], when: datetime, source: str) -> Iterator[Item]:
    for line, event in events:
        event[TIME_KEY] = when
        event["timestamp_source"] = source
        yield line, event
