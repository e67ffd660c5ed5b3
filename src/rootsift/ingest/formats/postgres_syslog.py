"""PostgreSQL through syslog (``log_destination = 'syslog'``), as rsyslog/syslog-ng file it.

    Feb 11 13:15:40 db1 postgres[10819]: [7-1] db=shop,user=app LOG:  duration: 13.9 ms  statement: SELECT d.datname,
    Feb 11 13:15:40 db1 postgres[10819]: [7-2] #011       d.datdba
    Feb 11 13:15:39 db1 postgres[10808]: [3-2] db=,user= HINT:  Future log output will go to log destination "syslog".

The syslog header gives the time, host and pid; ``[N-M]`` numbers the server's messages
(``syslog_sequence_numbers``): ``M`` > 1 is a continuation line (``#011`` is the tab
rsyslog escapes), a piece of a line split at ``syslog_split_messages``' limit, or a
DETAIL/HINT/… line of message N. The rest is ``log_line_prefix`` + ``SEVERITY:  message``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime, timedelta

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, FormatOptions, Item, Lines, TextFormat
from rootsift.ingest.formats.postgres_common import SECONDARY, Assembler
from rootsift.ingest.formats.postgres_prefix import LoosePrefix, Prefix
from rootsift.ingest.formats.postgres_time import PgTime
from rootsift.ingest.rejects import Reject

HEADER = re.compile(
    r"(?:<\d+>)?(?:(?P<bsd>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)|(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*)) "
    r"(?P<host>\S+) (?P<ident>[^\s\[]+)\[(?P<pid>\d+)\]: (?:\[(?P<seq>\d+)-(?P<part>\d+)\] ?)?"
)
MONTHS = {
    m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)
}


@register
class PostgresSyslog(TextFormat):
    name = "postgres-syslog"
    summary = "PostgreSQL via syslog (BSD or ISO header, [N-M] numbering); statements joined with their durations"
    reads = ("log_line_prefix", "tz")

    def __init__(self, options: FormatOptions) -> None:
        super().__init__(options)
        self.clock = PgTime(options.zone(), bool(options.tz))
        self.zone = options.zone()
        self.year_of = options.file_time().astimezone(self.zone)
        self._bsd: dict[str, datetime | None] = {}

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        heads = [ln for ln in lines if ln.strip()]
        if not heads:
            return 0.0
        hits = 0
        for ln in heads:
            m = HEADER.match(ln)
            if m is not None and (m.group("seq") or "postgres" in m.group("ident")) and "  " in ln:
                hits += 1
        return 0.9 * hits / len(heads) if hits * 2 >= len(heads) else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        given = self.options.log_line_prefix
        prefix: Prefix | LoosePrefix = (
            Prefix(given, self.clock) if given is not None else LoosePrefix(self.clock, False)
        )
        asm = Assembler()
        out = asm.out
        for number, line in lines:
            if not line.strip():
                continue
            why = self._line(asm, prefix, number, line)
            if why is not None:
                asm.close()
                out.append(Reject(number, why, line))
            if out:
                yield from out
                out.clear()
        yield from asm.finish()

    def _line(self, asm: Assembler, prefix: Prefix | LoosePrefix, number: int, line: str) -> str | None:
        m = HEADER.match(line)
        if m is None:
            return "not a syslog line from PostgreSQL (time host postgres[pid]: …)"
        rest = line[m.end() :].replace("#011", "\t")
        pid = int(m.group("pid"))
        part = m.group("part")
        got = prefix.read(rest)
        more = part not in (None, "1") or (part is None and rest.startswith("\t"))  # without syslog_sequence_numbers
        if more and (got is None or got[1] not in SECONDARY):
            cur = asm.cur
            if cur is None or cur.get("pid") != pid:
                where = f" [{m.group('seq')}-{part}]" if part else ""
                return f"continuation{where} with no message of process {pid} before it"
            if rest.startswith("\t"):
                asm.extend(rest[1:])
            else:  # a piece of a line split at the syslog length limit
                asm.extend(rest, join="")
            return None
        if got is None:
            if part is None:
                return f"not a PostgreSQL message ({m.group('ident')}[{pid}]: without [N-M] or SEVERITY:  )"
            return "no SEVERITY:  message after the syslog header and log_line_prefix"
        record, severity, message = got
        when = self._time(m.group("bsd"), m.group("iso"))
        if when is None:
            return "unreadable syslog time"
        record.setdefault(TIME_KEY, when)
        record["pid"] = pid
        record["host"] = m.group("host")
        if severity in SECONDARY:
            asm.attach(number, record, severity, message)
        else:
            record["severity"], record["message"] = severity, message
            asm.open(number, record)
        return None

    def _time(self, bsd: str | None, iso: str | None) -> datetime | None:
        if iso is not None:
            return self.clock.parse(iso)
        assert bsd is not None
        got = self._bsd.get(bsd, False)
        if got is not False:
            return got  # type: ignore[return-value]
        value = self._bsd[bsd] = self._bsd_time(bsd)
        if len(self._bsd) > 8192:
            self._bsd.clear()
        return value

    def _bsd_time(self, text: str) -> datetime | None:
        """``Feb 11 13:15:39`` has no year: the file's, or the year before for a date after the file's."""
        month = MONTHS.get(text[:3])
        if month is None:
            return None
        ref = self.year_of
        try:
            when = datetime(ref.year, month, int(text[4:6]), int(text[7:9]), int(text[10:12]), int(text[13:15]))
            if when - ref.replace(tzinfo=None) > timedelta(days=1):
                when = when.replace(year=ref.year - 1)
        except ValueError:
            return None
        return when.replace(tzinfo=self.zone)
