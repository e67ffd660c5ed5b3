"""``log_line_prefix`` for stderr logs: compiling the user's prefix, guessing it, or reading any.

``compile_prefix('%m [%p] %q%u@%d ')`` gives a ``Prefix`` whose ``read(line)`` returns the
line's prefix fields, its severity and its message text. ``detect(lines)`` picks one of
``CANDIDATES`` (the defaults of PostgreSQL, Debian/Ubuntu, RDS, Cloud SQL, pgBadger's
advice) from the first lines, or the ``LoosePrefix`` reader when none fits.
"""

from __future__ import annotations

import re

from rootsift.ingest.formats.base import Event
from rootsift.ingest.formats.postgres_common import SEVERITY_RE, UNKNOWN
from rootsift.ingest.formats.postgres_time import PgTime

_TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
_ZONE = r"(?: [A-Za-z]{1,6}| [+-]\d\d(?::?\d\d)?)?"
# escape -> (regex of its value, field, kind of value). Names are at most 63 bytes
# (NAMEDATALEN); user and database names are taken to hold no space. Bounding the lazy
# groups keeps a line that almost matches from costing more than a few milliseconds.
ESCAPES: dict[str, tuple[str, str, str]] = {
    "a": (r".{0,64}?", "application_name", "str"),
    "u": (r"\S{0,64}?", "user", "str"),
    "d": (r"\S{0,64}?", "database", "str"),
    "r": (r"\S{0,300}?", "remote", "remote"),
    "h": (r"\S{0,300}?", "remote_host", "str"),
    "L": (r"\S{0,300}?", "local_address", "str"),  # PostgreSQL 17+
    "b": (r".{0,64}?", "backend_type", "str"),
    "p": (r"\d+", "pid", "int"),
    "P": (r"\d*", "leader_pid", "int"),
    "t": (_TS + _ZONE, "timestamp", "time"),
    "m": (_TS + r"[.,]\d+" + _ZONE, "timestamp", "time"),
    "n": (r"\d+\.\d+", "timestamp", "epoch"),
    "i": (r".{0,64}?", "command_tag", "str"),
    "e": (r"[0-9A-Z]{5}", "sql_state", "str"),
    "c": (r"[0-9a-f]+\.[0-9a-f]+", "session_id", "str"),
    "l": (r"\d+", "line_num", "int"),
    "s": (_TS + _ZONE, "session_start", "stamp"),
    "v": (r"[\d/]*", "virtual_xid", "str"),
    "x": (r"\d*", "transaction_id", "int"),
    "Q": (r"-?\d+", "query_id", "int"),
}
_ESCAPE = re.compile(r"%(-?\d+)?(.)", re.S)

CANDIDATES = (
    "%m [%p] %q%u@%d ",  # Debian / Ubuntu packages
    "%m [%p] ",  # PostgreSQL 10 and later
    "%t:%r:%u@%d:[%p]:",  # Amazon RDS / Aurora
    "%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",  # pgBadger's advice
    "%t [%p]: user=%u,db=%d,app=%a,client=%h ",
    "%m [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
    "%t [%p-%l] %q%u@%d ",  # PostgreSQL 9.x packages
)
"""Prefixes tried, in this order, when none is given (see docs/formats/postgres.md)."""

PREFIX_MAX = 1024
"""Where the severity marker must appear by (a prefix is a few dozen characters)."""
# PostgreSQL writes two spaces after the colon; hand-edited logs often keep one
_SEVERITY = re.compile(r"\b(" + SEVERITY_RE + "):  ?")
_SEVERITY_END = re.compile(r"(?<![A-Za-z0-9_])(" + SEVERITY_RE + r")\Z")


class Prefix:
    """One compiled ``log_line_prefix``: ``read(line)`` → (fields, severity, message) or None."""

    def __init__(self, prefix: str, clock: PgTime) -> None:
        self.prefix = prefix
        self.clock = clock
        self.fields: list[tuple[str, str]] = []
        head, _, tail = prefix.partition("%q")
        pattern = self._compile(head)
        if _:
            pattern += "(?:" + self._compile(tail) + ")?"
        self.regex = re.compile(pattern, re.S)
        self.has_time = any(kind in ("time", "epoch") for _, kind in self.fields)

    def _compile(self, text: str) -> str:
        out, pos = [], 0
        for m in _ESCAPE.finditer(text):
            out.append(re.escape(text[pos : m.start()]))
            pos = m.end()
            pad, esc = m.group(1), m.group(2)
            if esc == "%":
                out.append("%")
            elif esc in ESCAPES:
                value, field, kind = ESCAPES[esc]
                spaces = " *" if pad else ""
                out.append(f"{spaces}({value}){spaces}")
                self.fields.append((field, kind))
            # PostgreSQL prints nothing for an unknown escape
        out.append(re.escape(text[pos:]))
        return "".join(out)

    def read(self, line: str) -> tuple[Event, str, str] | None:
        # The prefix must end at the first severity marker: matching it against only the text
        # before that marker keeps the lazy groups from backtracking through a long line.
        sev = marker(line)
        if sev is None:
            return None
        m = self.regex.fullmatch(line, 0, sev[0])
        if m is None:
            return None
        values = m.groups()
        record: Event = {}
        for (field, kind), value in zip(self.fields, values):
            if not value or value == "[unknown]":
                continue
            if kind == "str":
                record[field] = value if value[0] != " " and value[-1] != " " else value.strip()
            elif kind == "time" or kind == "epoch":
                if kind == "time" and field in record:
                    continue  # %n, exact, wins over %t/%m
                stamp = self.clock.parse(value)
                if stamp is None:
                    return None
                record[field] = stamp
            elif kind == "int":
                record[field] = int(value)
            elif kind == "stamp":
                stamp = self.clock.parse(value)
                if stamp is not None:
                    record[field] = stamp.isoformat()
            else:
                add_remote(record, value)
        return record, sev[1], line[sev[2] :]


def marker(line: str) -> tuple[int, str, int] | None:
    """The first ``SEVERITY:  `` of ``line``: (where it starts, the severity, where the message starts)."""
    i = line.find(":  ", 0, PREFIX_MAX)
    if i > 0:
        m = _SEVERITY_END.search(line, max(0, i - 10), i)
        if m is not None:
            return m.start(), m.group(1), i + 3
    m = _SEVERITY.search(line, 0, PREFIX_MAX)
    return None if m is None else (m.start(), m.group(1), m.end())


def add_remote(record: Event, value: str) -> None:
    """``host(port)`` (log_line_prefix %r) or ``host:port`` (csvlog) → remote_host, remote_port."""
    host, port = value, ""
    if value[-1] == ")":
        host, _, port = value[:-1].rpartition("(")
    elif value[-1] != "]" and ":" in value:
        host, _, port = value.rpartition(":")
    if not port.isdigit():
        host, port = value, ""
    if host:
        record["remote_host"] = host
    if port:
        record["remote_port"] = int(port)


_LOOSE = re.compile(r"(.*?)(" + SEVERITY_RE + "):  ", re.S)
_LOOSE_TIME = re.compile(
    r"\s*(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d(?::?\d\d)?| [A-Za-z]{1,6}\b| [+-]\d\d(?::?\d\d)?)?"
    r"|\d{9,11}\.\d+)"
)
_PID = re.compile(r"\[(\d+)\]")
_LINE_NUM = re.compile(r"\[(\d+)-\d+\]")
_PAIR = re.compile(r"(\w+)=(\[[^\]\s]*\]|[^,\s\]]*)")
_AT = re.compile(r"(?:^|\s)([^\s@=\[\]:,]+)@([^\s@=\[\]:,]+)")
ALIASES = {
    "user": "user", "usr": "user", "u": "user", "username": "user",
    "db": "database", "database": "database", "dbname": "database", "d": "database",
    "app": "application_name", "appli": "application_name", "application": "application_name",
    "application_name": "application_name", "a": "application_name",
    "client": "remote_host", "host": "remote_host", "remote": "remote", "h": "remote_host", "r": "remote",
    "pid": "pid", "xid": "transaction_id", "queryid": "query_id", "query_id": "query_id",
    "sqlstate": "sql_state", "session": "session_id", "tag": "command_tag",
}  # fmt: skip
_INTS = ("pid", "transaction_id", "query_id")


class LoosePrefix:
    """Any prefix: a leading time stamp, ``[pid]``, ``[line-n]``, ``key=value`` pairs, ``user@db``."""

    prefix = "(any)"
    has_time = True

    def __init__(self, clock: PgTime, need_time: bool = True) -> None:
        self.clock = clock
        self.need_time = need_time

    def read(self, line: str) -> tuple[Event, str, str] | None:
        m = _LOOSE.match(line)
        if m is None:
            return None
        text = m.group(1)
        record: Event = {}
        t = _LOOSE_TIME.match(text)
        if t is not None:
            stamp = self.clock.parse(t.group(1))
            if stamp is None:
                return None
            record["timestamp"] = stamp
            text = text[t.end() :]
        elif self.need_time:
            return None
        p = _PID.search(text)
        if p is not None:
            record["pid"] = int(p.group(1))
        n = _LINE_NUM.search(text)
        if n is not None:
            record["line_num"] = int(n.group(1))
        for key, value in _PAIR.findall(text):
            field = ALIASES.get(key.lower())
            if field is None or not value or value in UNKNOWN or field in record:
                continue
            if field == "remote":
                add_remote(record, value)
            elif field in _INTS:
                if value.lstrip("-").isdigit():
                    record[field] = int(value)
            else:
                record[field] = value
        if "user" not in record:
            at = _AT.search(text)
            if at is not None:
                for field, value in (("user", at.group(1)), ("database", at.group(2))):
                    if value not in UNKNOWN:
                        record[field] = value
        return record, m.group(2), line[m.end() :]


def detect(sample: list[str], clock: PgTime) -> Prefix | LoosePrefix | None:
    """The prefix that reads the most of ``sample`` (message lines), or None if none reads most."""
    heads = [ln for ln in sample if ln and not ln[0].isspace()][:200]
    if not heads:
        return None
    best: Prefix | LoosePrefix | None = None
    best_n = 0
    for text in CANDIDATES:
        prefix = Prefix(text, clock)
        n = sum(1 for ln in heads if prefix.read(ln) is not None)
        if n > best_n:
            best, best_n = prefix, n
    if best_n * 5 >= len(heads) * 4:
        return best
    loose = LoosePrefix(clock)
    n = sum(1 for ln in heads if loose.read(ln) is not None)
    return loose if n * 2 >= len(heads) else None
