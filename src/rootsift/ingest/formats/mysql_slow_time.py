"""Times in MySQL slow logs: ``# Time:`` values (``071015 21:43:52``,
``2019-03-05T10:12:01.123456Z``), ``Start:``/``End:`` and ``SET timestamp=`` epochs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["TimeReader"]

_OLD_TIME = re.compile(r"(\d\d)(\d\d)(\d\d)\s+(\d{1,2}):(\d\d):(\d\d)(?:\.(\d+))?")
_CACHE_LIMIT = 50_000


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
