"""The header lines of a MySQL slow-log entry: ``# User@Host:`` and the
``# Key: value  Key: value`` lines of MySQL, MySQL 8 ``log_slow_extra``, Percona Server
and MariaDB, turned into event fields.

Field names are the keys in snake case (``InnoDB_IO_r_ops`` → ``innodb_io_r_ops``);
seconds (``*_time``, ``*_wait``) become milliseconds named ``*_ms``; ``Yes``/``No`` become
booleans; numbers become numbers. docs/formats/mysql-slow.md lists them all.
"""

from __future__ import annotations

import re

from rootsift.ingest.formats.base import TIME_KEY

__all__ = ["FieldReader"]

# "root[root] @ localhost [127.0.0.1]  Id: 3"; "[SQL_SLAVE] @  []"; "foo[foo] @ [host]"
_USER_HOST = re.compile(
    r"\s*(?P<priv>[^\[\s]*)\s*\[(?P<user>[^\]]*)\]\s*@\s*(?P<host>[^\[\s]*)\s*(?:\[(?P<ip>[^\]]*)\])?"
)
# MySQL's "# Query_time: %.6f  Lock_time: %.6f Rows_sent: %lu  Rows_examined: %lu" (any spacing).
_QUERY_TIME = re.compile(
    r"# Query_time:\s+(\d{1,6})\.(\d{6})\s+Lock_time:\s+(\d+)\.(\d{6})\s+Rows_sent:\s+(\d+)\s+Rows_examined:\s+(\d+)\s*",
    re.ASCII,
)
# The same as MySQL writes it (its exact spacing): matched about twice as fast, tried first.
_QUERY_TIME_MYSQL = re.compile(
    r"# Query_time: (\d{1,6})\.(\d{6})  Lock_time: (\d+)\.(\d{6}) Rows_sent: (\d+)  Rows_examined: (\d+)", re.ASCII
)
# "Key: value" pairs; a key followed directly by another key (Percona's "Schema:  Last_errno: 0") is empty.
_PAIR = re.compile(r"([A-Za-z_]\w*):(?:[ \t]+(?![A-Za-z_]\w*:(?:\s|$))(\S+))?")
_NUMBER_PREFIX = re.compile(r"-?\d+(?:\.\d+)?")
_INT = re.compile(r"-?\d+")

_RENAME = {
    "Id": "thread_id",
    "Thread_id": "thread_id",
    "Schema": "db",
    "Start": "start_time",
    "End": "end_time",
    "QC_hit": "qc_hit",
}
_STRINGS = frozenset(
    {"db", "start_time", "end_time", "innodb_trx_id", "log_slow_rate_type", "client", "stored_routine", "trx_id"}
)
# MariaDB writes these in milliseconds already.
_ALREADY_MS = frozenset({"pages_read_time", "engine_time"})
_CACHE_LIMIT = 50_000
_POWERS = [10**k for k in range(16)]
# A negative duration printed unsigned (wrapped around 2**64 microseconds): not a time.
_IMPLAUSIBLE_SECONDS = 1e9


class FieldReader:
    """Turns header lines into fields, caching the conversion of each ``(key, value)``."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[str, object] | None] = {}
        self._hosts: dict[str, dict[str, object]] = {}
        self._templates: dict[str, dict[str, object]] = {}

    def query_time(self, line: str, into: dict[str, object]) -> None:
        """Fields of a ``# Query_time:`` line (the classic four fast, anything else as pairs)."""
        m = _QUERY_TIME_MYSQL.fullmatch(line) or _QUERY_TIME.fullmatch(line)
        if m is not None:  # what the split below reads, in one call
            qt, qt_frac, lt, lt_frac, sent, examined = m.groups()
            into["query_time_ms"] = int(qt + qt_frac) / 1000
            into["lock_time_ms"] = int(lt + lt_frac) / 1000
            into["rows_sent"] = int(sent)
            into["rows_examined"] = int(examined)
            return
        p = line.split()
        if len(p) == 9 and p[3] == "Lock_time:" and p[5] == "Rows_sent:" and p[7] == "Rows_examined:":
            qt, lt = p[2], p[4]
            # MySQL prints %.6f: the digits as an integer of microseconds, / 1000 is exact.
            if 0 < qt.find(".") == len(qt) - 7 and 0 < lt.find(".") == len(lt) - 7 and len(qt) < 14:
                try:
                    into["query_time_ms"] = int(qt.replace(".", "")) / 1000
                    into["lock_time_ms"] = int(lt.replace(".", "")) / 1000
                    into["rows_sent"] = int(p[6])
                    into["rows_examined"] = int(p[8])
                    return
                except ValueError:  # "1.2.3": the general reader keeps what it can
                    pass
        self.pairs(line, into)

    def pairs(self, text: str, into: dict[str, object]) -> None:
        """Add the ``Key: value`` pairs of ``text`` to ``into`` (an empty ``Schema:`` as "")."""
        cache = self._cache
        for key, value in _PAIR.findall(text):
            item = cache.get((key, value), False)
            if item is False:
                if len(cache) > _CACHE_LIMIT:
                    cache.clear()
                item = cache[(key, value)] = _convert(key, value)
            if item is not None:
                into[item[0]] = item[1]  # type: ignore[index]

    def user_host(self, text: str, into: dict[str, object]) -> None:
        """Fields of ``user[user] @ host [ip]  Id: 3`` (text after ``# User@Host:``)."""
        # The connection id varies where user, host and ip repeat: cache without it.
        cut = text.find("  Id:")
        thread = ""
        if cut > 0:
            thread = text[cut + 5 :].strip()
            text = text[:cut]
        cached = self._hosts.get(text)
        if cached is None:
            if len(self._hosts) > _CACHE_LIMIT:
                self._hosts.clear()
            cached = self._hosts[text] = {}
            self._user_host(text, cached)
        into.update(cached)
        if thread:
            if thread.isdigit():
                into["thread_id"] = int(thread)
            else:
                self.pairs("Id: " + thread, into)

    def entry_fields(self, line: str) -> dict[str, object]:
        """A new entry's fields (the time keys, unset) and those of its ``# User@Host:``
        line: what ``user_host`` adds to them, by a copy of a cached dict."""
        head, cut, thread = line.partition("  Id:")
        if cut and len(head) > 12:  # as user_host: an id after some user@host text
            thread = thread.strip()
        else:
            head, thread = line, ""
        into = self.template(head).copy()
        if thread:
            if thread.isdigit():
                into["thread_id"] = int(thread)
            else:
                self.pairs("Id: " + thread, into)
        return into

    def template(self, head: str) -> dict[str, object]:
        """The fields of a ``# User@Host:`` line without its ``  Id:`` (the time keys first,
        unset), cached: the caller copies it."""
        template = self._templates.get(head)
        if template is None:
            if len(self._templates) > _CACHE_LIMIT:
                self._templates.clear()
            template = self._templates[head] = {TIME_KEY: None, "timestamp_source": None}
            self._user_host(head[12:], template)
        return template

    def _user_host(self, text: str, into: dict[str, object]) -> None:
        m = _USER_HOST.match(text)
        if m is None:
            if text.strip():
                into["user_host"] = text.strip()
            return
        priv, user, host, ip = m.group("priv", "user", "host", "ip")
        if user or priv:
            into["user"] = user or priv
            if priv and user and priv != user:
                into["priv_user"] = priv
        if host:
            into["host"] = host
        if ip:
            into["ip"] = ip
        rest = text[m.end() :]
        if ":" in rest:
            self.pairs(rest, into)


def _convert(key: str, value: str) -> tuple[str, object] | None:
    name = _RENAME.get(key) or key.lower()
    if name in _STRINGS:
        return name, value
    if not value:
        return None
    if value == "Yes" or value == "No":
        return name, value == "Yes"
    seconds = name.endswith(("_time", "_wait"))
    if seconds:
        number = _number(value)
        if number is None:
            return name, value
        if number > _IMPLAUSIBLE_SECONDS:
            return name + "_raw", value
        if name in _ALREADY_MS:
            return name + "_ms", float(number)
        try:
            return name + "_ms", seconds_to_ms(value)
        except ValueError:
            return name + "_ms", round(number * 1000.0, 6)
    if _INT.fullmatch(value):
        return name, int(value)
    number = _number(value)
    return (name, number) if number is not None else (name, value)


def seconds_to_ms(text: str) -> float:
    """``"0.000652"`` → ``0.652``, the float nearest the written value: the digits are read as
    an integer and divided by a power of ten, which is exact for microsecond values
    (``float(text) * 1000`` gives 0.6519999999999999). Raises ValueError on non-numbers."""
    i = text.find(".")
    if i < 0:
        return float(int(text) * 1000)
    decimals = len(text) - i - 1
    if 3 <= decimals <= 18 and text.isascii():
        return int(text.replace(".", "", 1)) / _POWERS[decimals - 3]
    return round(float(text) * 1000.0, 6)


def _number(value: str) -> float | None:
    """A float, or the leading number of a mangled one (``18446744073708.796870.000036``)."""
    try:
        return float(value)
    except ValueError:
        m = _NUMBER_PREFIX.match(value)
        return float(m.group()) if m else None
