"""The header lines of a MySQL slow-log entry: ``# Time:``, ``# User@Host:`` and the
``# Key: value  Key: value`` lines of MySQL, MySQL 8 ``log_slow_extra``, Percona Server
and MariaDB, turned into event fields.

Field names are the keys in snake case (``InnoDB_IO_r_ops`` → ``innodb_io_r_ops``);
seconds (``*_time``, ``*_wait``) become milliseconds named ``*_ms``; ``Yes``/``No`` become
booleans; numbers become numbers. docs/formats/mysql-slow.md lists them all.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["FieldReader", "TimeReader"]

_OLD_TIME = re.compile(r"(\d\d)(\d\d)(\d\d)\s+(\d{1,2}):(\d\d):(\d\d)(?:\.(\d+))?")
# "root[root] @ localhost [127.0.0.1]  Id: 3"; "[SQL_SLAVE] @  []"; "foo[foo] @ [host]"
_USER_HOST = re.compile(
    r"\s*(?P<priv>[^\[\s]*)\s*\[(?P<user>[^\]]*)\]\s*@\s*(?P<host>[^\[\s]*)\s*(?:\[(?P<ip>[^\]]*)\])?"
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


class TimeReader:
    """Reads ``# Time:`` values (``071015 21:43:52``, ``2019-03-05T10:12:01.123456Z``) and
    epoch seconds, caching repeated texts; naive times are read in ``zone``."""

    def __init__(self, zone: tzinfo) -> None:
        self.zone = zone
        self._cache: dict[str, datetime | None] = {}
        self._epochs: dict[str, datetime | None] = {}

    def header(self, text: str) -> datetime | None:
        """The time of a ``# Time:`` value, or None if it is not a time."""
        cached = self._cache.get(text, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        if len(self._cache) > _CACHE_LIMIT:
            self._cache.clear()
        value = self._read(text)
        self._cache[text] = value
        return value

    def _read(self, text: str) -> datetime | None:
        if "-" in text:
            return self.iso(text)
        m = _OLD_TIME.fullmatch(text)
        if m is None:
            return None
        yy, mo, dd, hh, mi, ss, frac = m.groups()
        micro = int((frac or "0")[:6].ljust(6, "0"))
        try:
            return datetime(2000 + int(yy), int(mo), int(dd), int(hh), int(mi), int(ss), micro, self.zone)
        except ValueError:
            return None

    def iso(self, text: str) -> datetime | None:
        """An ISO 8601 time (MySQL 5.7+ ``# Time:``, ``Start:``/``End:``), naive ones in the zone."""
        try:
            value = datetime.fromisoformat(text)
        except ValueError:
            return None
        return value if value.tzinfo is not None else value.replace(tzinfo=self.zone)

    def epoch(self, text: str) -> datetime | None:
        """A ``SET timestamp=`` value (epoch seconds, UTC)."""
        cached = self._epochs.get(text, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        if len(self._epochs) > _CACHE_LIMIT:
            self._epochs.clear()
        try:
            value: datetime | None = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=float(text))
        except (ValueError, OverflowError):
            value = None
        self._epochs[text] = value
        return value


class FieldReader:
    """Turns header lines into fields, caching the conversion of each ``(key, value)``."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str], tuple[str, object] | None] = {}
        self._hosts: dict[str, dict[str, object]] = {}

    def query_time(self, line: str, into: dict[str, object]) -> None:
        """Fields of a ``# Query_time:`` line (the classic four fast, anything else as pairs)."""
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
