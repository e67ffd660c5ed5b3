"""PostgreSQL log time stamps: ``2024-06-27 00:00:07.369 CEST`` and its kin, to aware datetimes.

``%t``/``%m``/``%s`` and the csvlog/jsonlog time columns print the server's
``log_timezone`` as an abbreviation (``UTC``, ``CET``, ``PDT``) or, for zones without
one, a numeric offset (``+02``, ``-03``, ``+0545``). Resolution order:

1. a numeric offset is used as written;
2. if ``--tz`` is given and that zone's own abbreviation at that moment is the one
   printed, the zone is used (this settles ambiguous names such as ``IST`` or ``CST``);
3. the abbreviation table below (the common tzdata abbreviations; ``CST`` is US
   Central and ``IST`` India, as most servers mean);
4. otherwise ``--tz`` (default UTC).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo

_HOURS: dict[str, float] = {
    "UTC": 0, "GMT": 0, "UT": 0, "Z": 0, "WET": 0, "WEST": 1, "BST": 1, "IST": 5.5,
    "CET": 1, "CEST": 2, "MET": 1, "MEST": 2, "WAT": 1, "EET": 2, "EEST": 3, "CAT": 2,
    "SAST": 2, "IDT": 3, "MSK": 3, "EAT": 3, "PKT": 5, "WIB": 7, "HKT": 8, "AWST": 8,
    "JST": 9, "KST": 9, "ACST": 9.5, "ACDT": 10.5, "AEST": 10, "AEDT": 11, "NZST": 12,
    "NZDT": 13, "HST": -10, "AKST": -9, "AKDT": -8, "PST": -8, "PDT": -7, "MST": -7,
    "MDT": -6, "CST": -6, "CDT": -5, "EST": -5, "EDT": -4, "AST": -4, "ADT": -3,
    "NST": -3.5, "NDT": -2.5,
}  # fmt: skip
ABBREVIATIONS: dict[str, tzinfo] = {k: (UTC if not v else timezone(timedelta(hours=v), k)) for k, v in _HOURS.items()}
"""Zone abbreviations read without ``--tz`` (documented in docs/formats/postgres.md)."""

_CACHE_MAX = 8192
_MILLIS = tuple(timedelta(milliseconds=i) for i in range(1000))
_FRACTION = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[.,](\d{1,9})(.*)", re.S)


class PgTime:
    """Reads PostgreSQL time stamps with a per-text cache (one parser, one instance)."""

    def __init__(self, zone: tzinfo, zone_given: bool) -> None:
        self.zone = zone
        self.zone_given = zone_given
        self.cache: dict[str, datetime | None] = {}
        self.iso_cache: dict[str, str] = {}

    def parse(self, text: str) -> datetime | None:
        """``YYYY-MM-DD HH:MM:SS[.fff][ ZONE]`` (or ISO 8601 / epoch seconds) → aware datetime, or None."""
        if text[19:20] == "." and text[23:24] in (" ", "") and text[20:23].isdigit():
            # %m: milliseconds are rarely repeated, so the second (and zone) is what is cached
            base = self._cached(text[:19] + text[23:])
            return None if base is None else base + _MILLIS[int(text[20:23])]
        return self._cached(text)

    def iso(self, text: str) -> str | None:
        """``parse`` as RFC 3339 text (session start times: few, repeated on every line)."""
        got = self.iso_cache.get(text)
        if got is None:
            stamp = self.parse(text)
            if stamp is None:
                return None
            if len(self.iso_cache) >= _CACHE_MAX:
                self.iso_cache.clear()
            got = self.iso_cache[text] = stamp.isoformat()
        return got

    def _cached(self, text: str) -> datetime | None:
        cache = self.cache
        got = cache.get(text, False)
        if got is not False:
            return got  # type: ignore[return-value]
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        m = _FRACTION.match(text)
        if m is None:
            value = cache[text] = self._read(text)
            return value
        head, frac, tail = m.groups()
        base = self._cached(head + tail)
        value = cache[text] = None if base is None else base.replace(microsecond=int((frac + "00000")[:6]))
        return value

    def _read(self, text: str) -> datetime | None:
        text = text.strip()
        if len(text) < 19 or text[4] != "-" or text[10] not in " T":
            return _epoch(text)
        try:
            naive = datetime(
                int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]), int(text[14:16]), int(text[17:19])
            )
        except ValueError:
            return None
        rest = text[19:]
        if rest.startswith((".", ",")):
            digits = len(rest) - len(rest[1:].lstrip("0123456789"))
            frac = rest[1:digits]
            if frac:
                naive = naive.replace(microsecond=int((frac + "000000")[:6]))
            rest = rest[digits:]
        return self._zoned(naive, rest.strip())

    def _zoned(self, naive: datetime, abbr: str) -> datetime | None:
        if not abbr:
            return naive.replace(tzinfo=self.zone)
        if abbr[0] in "+-" or abbr.startswith(("UTC+", "UTC-", "GMT+", "GMT-")):
            offset = _offset(abbr[3:] if abbr[0] in "UG" else abbr)
            return None if offset is None else naive.replace(tzinfo=offset)
        if self.zone_given:
            local = naive.replace(tzinfo=self.zone)
            if local.tzname() == abbr:
                return local
        known = ABBREVIATIONS.get(abbr.upper())
        if known is not None:
            return naive.replace(tzinfo=known)
        if not abbr.isalpha() or len(abbr) > 6:
            return None
        return naive.replace(tzinfo=self.zone)


def _offset(text: str) -> tzinfo | None:
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    if not digits.isdigit() or len(digits) not in (1, 2, 4):
        return None
    hours, minutes = (int(digits[:-2]), int(digits[-2:])) if len(digits) == 4 else (int(digits), 0)
    if hours > 15 or minutes > 59:
        return None
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _epoch(text: str) -> datetime | None:
    """``%n``: seconds since the epoch with milliseconds; also ISO 8601 with a zone."""
    try:
        return datetime.fromtimestamp(float(text), UTC)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo is not None else None
