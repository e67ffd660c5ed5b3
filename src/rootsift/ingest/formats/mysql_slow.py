"""MySQL, MariaDB and Percona Server slow query logs (``--format mysql-slow``).

An entry is a block of ``#`` header lines (``# Time:``, ``# User@Host:``,
``# Query_time:`` and the extended lines of Percona Server, MariaDB and MySQL 8's
``log_slow_extra``) followed by the statement, possibly preceded by ``use db;`` and
``SET timestamp=N;``. Server-restart banners may appear anywhere. docs/formats/mysql-slow.md
describes every field and rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime

from rootsift.ingest.fingerprint_cache import MySQLCache
from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, FormatOptions, Item, Lines, TextFormat, decoded_blocks
from rootsift.ingest.formats.mysql_slow_entry import Backfill, Entry, EntryBuilder, backfill
from rootsift.ingest.formats.mysql_slow_fields import FieldReader
from rootsift.ingest.formats.mysql_slow_time import TimeReader
from rootsift.ingest.rejects import Reject
from rootsift.ingest.sources import Readable

# "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:"
_BANNER = re.compile(r".*, Version: .*started with:\s*")
_BANNER_REST = re.compile(r"(?:Tcp port|TCP Port): .*|Time\s+Id\s+Command\s+Argument\s*")
_STARTS = ("# Time:", "# User@Host:", "# User:", "# Query_time:")
_KEY_LINE = re.compile(r"#\s*[A-Za-z_]\w*:(?:\s|$)")
_SKIP = ("# No InnoDB statistics", "# explain:", "# Explain:")
_IDLE, _HEAD, _BODY = 0, 1, 2
_OUTSIDE = "text outside any slow-log entry (no '# Time:'/'# User@Host:'/'# Query_time:' header before it)"
# The entry MySQL 5.7 and 8.0 write by default, read whole by one match when the next line
# starts the next entry: "# Time:", "# User@Host:", the four classic numbers exactly as
# MySQL spaces them, "SET timestamp=N;" and a statement of lines that are neither empty nor
# start with "#" (a multi-line statement as it was sent); matched where a line
# starts (``match``, not ``search``: scanning for ``^`` cost more than the match). ``_Reader.run_text`` gives
# what the line-by-line reader gives for it (tests/test_format_mysql_slow.py compares both).
_COMMON = re.compile(
    r"# Time: [^#\n]*\n"
    r"(# User@Host: [^\n]*)\n"
    r"# Query_time: (\d{1,6})\.(\d{6})  Lock_time: (\d+)\.(\d{6}) Rows_sent: (\d+)  Rows_examined: (\d+)\n"
    r"SET timestamp=(\d+);\n"
    r"((?:[^#\n][^\n]*\n)+)"
    r"(?=# Time: )",
    re.ASCII,
)
_COMMON_HEAD_LINES = 4
READ_BLOCK_BYTES = 4 << 20
"""Bytes of input decoded and matched at a time by ``MySQLSlowLog.read``."""


@register
class MySQLSlowLog(TextFormat):
    """The slow query log of MySQL 5.0-8.x, MariaDB and Percona Server."""

    name = "mysql-slow"
    summary = "MySQL / MariaDB / Percona Server slow query log (# Time / # User@Host / # Query_time entries)"
    reads = ("tz",)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        """Sure when the header lines of an entry or the mysqld start banner appear."""
        score = 0.0
        for line in lines[:50]:
            if line.startswith(("# Query_time:", "# User@Host:")):
                score = max(score, 0.95)
            elif line.startswith("# Time:") or (", Version: " in line and _BANNER.fullmatch(line)):
                score = max(score, 0.6)
        if score and "slow" in name.lower():
            score = min(1.0, score + 0.05)
        return score

    def parse(self, lines: Lines) -> Iterator[Item]:
        """Yield one event per entry (numbered by its first header line) and rejects."""
        return backfill(_Reader(self.options).run(lines), self.options.file_time)

    def read(self, stream: Readable) -> Iterator[Item]:
        """``parse`` of the stream's lines, the common entries read whole (``_COMMON``)."""
        blocks = decoded_blocks(stream, READ_BLOCK_BYTES)
        return backfill(_Reader(self.options).run_blocks(blocks), self.options.file_time)

    def blocks(self) -> SlowLogBlocks:
        """A reader of one input given in blocks of lines, some read by the parser, some by DuckDB."""
        return SlowLogBlocks(_Reader(self.options), Backfill(self.options.file_time))


class SlowLogBlocks:
    """One input read in blocks, in order: each either parsed here (``parse``) or read by
    DuckDB (``read_elsewhere``); what later entries inherit (the ``use`` database, the last
    time, entries waiting for a time, an entry cut by a block's end) goes from block to block."""

    def __init__(self, reader: _Reader, dates: Backfill) -> None:
        self._reader = reader
        self._dates = dates

    @property
    def db(self) -> str | None:
        """The database an entry without ``use``/``Schema`` inherits here."""
        return self._reader.builder.db

    @property
    def fingerprint(self) -> Callable[[str], str]:
        """The fingerprint of a statement (cached, as for the parser's events)."""
        return self._reader.builder.fingerprint

    @property
    def at_entry_start(self) -> bool:
        """No entry is open (cut by the previous block's end)."""
        return self._reader.state == _IDLE

    def parse(self, lines: Lines, entry_ends: bool, last: bool) -> Iterator[Item]:
        """The events and rejects of a block of ``lines``; ``entry_ends``: the block ends at an
        entry's end (its last entry is finished here); ``last``: the input's last block."""
        yield from self._dates.feed(self._reader.run(lines, final=entry_ends or last))
        if last:
            yield from self._dates.end()

    def read_elsewhere(self, first: datetime, last: datetime, db: str | None) -> list[Item]:
        """A block of whole entries, each with its own time from ``first`` to ``last``, was read
        by DuckDB, after which later entries inherit the database ``db``: the entries waiting
        for a time take ``first`` (returned); later ones without a time inherit ``last``."""
        self._reader.builder.db = db
        self._reader.builder.last_time = last
        return list(self._dates.dated(first))


class _Reader:
    """One pass over one input: the line-by-line state machine."""

    def __init__(self, options: FormatOptions) -> None:
        self.times = TimeReader(options.zone())
        self.fields = FieldReader()
        self.builder = EntryBuilder(self.times, MySQLCache())
        self.state = _IDLE
        self.entry = Entry(0)

    def run(self, lines: Lines, final: bool = True) -> Iterator[Item]:
        """The items of ``lines``; with ``final`` false, an entry still open at their end stays
        open for the next call (its lines continue there)."""
        builder = self.builder
        finish, start, header = builder.finish, self._start, self._header
        query_time, user_host = self.fields.query_time, self.fields.user_host
        entry_fields = self.fields.entry_fields
        state, entry = self.state, self.entry
        body = entry.body
        for number, line in lines:
            if state == _BODY:
                if line[:1] != "#":
                    if ", Version: " in line and _BANNER.fullmatch(line):
                        yield finish(entry)
                        builder.restart()
                        state = _IDLE
                    else:
                        body.append(line)
                elif line[:7] == "# Time:" and "# User@Host:" not in line:
                    # The usual first line of the next entry, without the general dispatch.
                    yield finish(entry)
                    # The finished entry is not kept: its object is reused.
                    entry.line = entry.time_line = number
                    entry.fields = {TIME_KEY: None, "timestamp_source": None}
                    body = entry.body = []
                    entry.time_text = line[7:].strip()
                    entry.has_query_time = False
                    state = _HEAD
                elif line.startswith(_STARTS) or (body[-1].rstrip().endswith(";") and _KEY_LINE.match(line)):
                    yield finish(entry)
                    entry = start(number, line)
                    body = entry.body
                    state = _BODY if body else _HEAD
                elif line.startswith("# administrator command:"):
                    body.append(line[2:])
                else:
                    body.append(line)
            elif state == _HEAD:
                # The two most common header lines first, without the general dispatch.
                if line[:12] == "# User@Host:" and not entry.has_query_time:
                    if len(entry.fields) == 2:  # only the time keys yet
                        entry.fields = entry_fields(line)
                    else:
                        user_host(line[12:], entry.fields)
                elif line[:13] == "# Query_time:" and not entry.has_query_time:
                    entry.has_query_time = True
                    query_time(line, entry.fields)
                elif line[:1] == "#":
                    if entry.has_query_time and line.startswith(_STARTS):
                        yield finish(entry)
                        entry = start(number, line)
                        body = entry.body
                    else:
                        header(entry, number, line)
                    if body:
                        state = _BODY
                elif not line.strip():
                    continue
                elif ", Version: " in line and _BANNER.fullmatch(line):
                    yield finish(entry)
                    builder.restart()
                    state = _IDLE
                else:
                    body.append(line)
                    state = _BODY
            elif (
                line.startswith("#")
                and (line.startswith(_STARTS) or _KEY_LINE.match(line))
                and not line.startswith("# admin")
            ):
                entry = start(number, line)
                body = entry.body
                state = _BODY if body else _HEAD
            elif not line.strip() or _BANNER_REST.fullmatch(line):
                continue
            elif ", Version: " in line and _BANNER.fullmatch(line):
                builder.restart()
            else:
                yield Reject(number, _OUTSIDE, line)
        if final and state != _IDLE:
            yield finish(entry)
            state = _IDLE
        self.state, self.entry = state, entry

    def run_blocks(self, blocks: Iterable[tuple[str, int]]) -> Iterator[Item]:
        """The items of an input given as decoded blocks of whole lines (``decoded_blocks``)."""
        for text, number in blocks:
            yield from self.run_text(text, number)
        yield from self.run((), final=True)

    def run_text(self, text: str, number: int) -> Iterator[Item]:
        """The items of ``text`` (lines from line ``number``, no final newline) as ``run`` gives
        them with ``final`` false: each common entry by one match, the lines between by ``run``."""
        pos = 0
        builder, template, match, find = self.builder, self.fields.template, _COMMON.match, text.find
        epoch, event = builder.times.epoch, builder.event
        while True:
            m = match(text, pos)
            if m is None:  # the lines up to the next "# Time:" line, by ``run``
                nxt = find("\n# Time: ", pos)
                if nxt < 0:
                    break
                yield from self._lines(text[pos:nxt], number)
                number += text.count("\n", pos, nxt + 1)
                pos = nxt + 1
                continue
            start, end = m.span()
            pos = end
            user_host, qt, qt_frac, lt, lt_frac, sent, examined, stamp, statement = m.groups()
            head, cut, thread = user_host.partition("  Id:")
            thread = thread.strip()
            when = epoch(stamp)
            fields = template(head)
            if (
                self.state == _HEAD  # an open header takes these lines as its own
                or not (cut and thread.isdigit())  # FieldReader.entry_fields reads these
                or when is None
                or ", Version: " in statement  # a banner ends a statement
                or statement[:4] == "use "
                or "start_time" in fields
                or not (sql := statement.strip())
            ):
                yield from self._lines(text[start : end - 1], number)
                number += _COMMON_HEAD_LINES + statement.count("\n")
                continue
            if self.state == _BODY:  # the open entry ends at this "# Time:" line
                yield builder.finish(self.entry)
                self.state = _IDLE
            # what the line-by-line reader makes of these lines: EntryBuilder.finish's
            # usual body and FieldReader's entry_fields and query_time
            fields = fields.copy()
            fields["thread_id"] = int(thread)
            fields["query_time_ms"] = int(qt + qt_frac) / 1000
            fields["lock_time_ms"] = int(lt + lt_frac) / 1000
            fields["rows_sent"] = int(sent)
            fields["rows_examined"] = int(examined)
            if sql[-1] == ";":
                sql = sql[:-1].rstrip()
            yield number, event(fields, sql, when, "set_timestamp", None)
            number += _COMMON_HEAD_LINES + statement.count("\n")
        yield from self._lines(text[pos:], number)

    def _lines(self, text: str, number: int) -> Iterator[Item]:
        return self.run(enumerate(text.split("\n"), number), final=False)

    def _start(self, number: int, line: str) -> Entry:
        entry = Entry(number)
        self._header(entry, number, line)
        return entry

    def _header(self, entry: Entry, number: int, line: str) -> None:
        """Read one ``#`` line of an entry's header into ``entry``."""
        fields = entry.fields
        if line.startswith("# Time:"):
            text = line[7:]
            cut = text.find("# User@Host:")
            if cut >= 0:
                self.fields.user_host(text[cut + 12 :], fields)
                text = text[:cut]
            # Read only if the entry has no better time (SET timestamp, Start:).
            entry.time_text = text.strip()
            entry.time_line = number
        elif line.startswith("# User@Host:"):
            self.fields.user_host(line[12:], fields)
        elif line.startswith("# Query_time:"):
            entry.has_query_time = True
            self.fields.query_time(line, fields)
        elif line.startswith("# User:"):
            self.fields.user_host(line[7:], fields)
        elif line.startswith("# administrator command:"):
            entry.body.append(line[2:])
        elif line.startswith(_SKIP):
            return
        else:
            self.fields.pairs(line, fields)
