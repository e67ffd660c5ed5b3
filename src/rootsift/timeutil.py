"""Time and duration arguments: parsing, formatting and bucket sizes.

Every datetime returned here is timezone-aware UTC. A timestamp written without an
offset (``2026-11-21T08:00:00``, ``2026-11-21``) is taken to be UTC, because rootsift
stores UTC and a machine-local guess would make the same command mean different
things on different hosts.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal, InvalidOperation

from rootsift.errors import TimeFormatError, UsageError

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

TIME_FORMS = (
    "accepted forms: RFC 3339 / ISO 8601 (2026-11-21T08:00:00Z, 2026-11-21 08:00:00+02:00, "
    "2026-11-21), epoch seconds, milliseconds, microseconds or nanoseconds (1790000000, "
    "1790000000.5, 1790000000000), 'now', or a relative time (-2h, -90s, -15m, -7d, -1w, "
    "now-2h, +1h)"
)
DURATION_FORMS = (
    "accepted forms: a number of seconds (90, 1.5) or amounts with units w, d, h, m, s, ms, us "
    "(30s, 5m, 2h, 7d, 1w, 1h30m, 500ms)"
)

_UNIT_US = {
    "w": 7 * 86_400_000_000,
    "d": 86_400_000_000,
    "h": 3_600_000_000,
    "m": 60_000_000,
    "s": 1_000_000,
    "ms": 1_000,
    "us": 1,
    "µs": 1,  # micro sign
    "μs": 1,  # Greek mu, which looks the same
}
_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_DURATION_PART = re.compile(rf"\s*({_NUMBER})\s*(ms|us|µs|μs|w|d|h|m|s)")
_PLAIN_NUMBER = re.compile(rf"{_NUMBER}")
_RELATIVE = re.compile(r"(now)?\s*([+-])\s*(.+)", re.IGNORECASE)

# (divisor to seconds, upper bound of the magnitude): epoch values carry no unit, so
# the unit is inferred from how large the number is.
_EPOCH_SCALES = (
    (Decimal(1), Decimal("1e11")),
    (Decimal(1_000), Decimal("1e14")),
    (Decimal(1_000_000), Decimal("1e17")),
    (Decimal(1_000_000_000), None),
)

_LADDER = tuple(
    timedelta(seconds=s) for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)
) + (timedelta(days=1), timedelta(days=2), timedelta(days=7))


def parse_time(text: str, now: datetime | None = None) -> datetime:
    """Parse a time argument into an aware UTC datetime.

    Accepts RFC 3339 / ISO 8601, epoch numbers (unit inferred from magnitude), ``now``
    and relative times such as ``-2h``, ``now-15m`` or ``+1h`` (relative to ``now``,
    which defaults to the current time; a naive ``now`` is taken as UTC).
    """
    raw = text.strip()
    if not raw:
        raise TimeFormatError(f"empty time; {TIME_FORMS}")
    reference = _as_utc(now) if now is not None else datetime.now(UTC)
    if raw.lower() == "now":
        return reference
    if _PLAIN_NUMBER.fullmatch(raw):
        return _from_epoch(raw)
    relative = _RELATIVE.fullmatch(raw)
    if relative and (relative.group(1) or _DURATION_PART.match(relative.group(3))):
        delta = _parse_units(relative.group(3))
        if delta is None:
            raise TimeFormatError(f"cannot read {text!r} as a relative time; {TIME_FORMS}")
        try:
            return reference - delta if relative.group(2) == "-" else reference + delta
        except OverflowError:
            raise TimeFormatError(f"time {text!r} is out of range") from None
    try:
        parsed = datetime.fromisoformat(raw.upper())
    except (ValueError, OverflowError):
        raise TimeFormatError(f"cannot read {text!r} as a time; {TIME_FORMS}") from None
    return _as_utc(parsed)


def parse_duration(text: str) -> timedelta:
    """Parse a duration such as ``30s``, ``1h30m``, ``500ms`` or a plain number of seconds."""
    raw = text.strip()
    if _PLAIN_NUMBER.fullmatch(raw):
        return _micros(Decimal(raw) * 1_000_000, text)
    delta = _parse_units(raw)
    if delta is None:
        raise TimeFormatError(f"cannot read {text!r} as a duration; {DURATION_FORMS}")
    return delta


def format_duration(td: timedelta) -> str:
    """Format a duration compactly (``1h30m``, ``500ms``, ``0s``); parse_duration inverts it."""
    if td < timedelta(0):
        return "-" + format_duration(-td)
    remaining = _us(td)
    parts = []
    for unit in ("d", "h", "m", "s", "ms", "us"):
        count, remaining = divmod(remaining, _UNIT_US[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def nice_granularity(span: timedelta, max_buckets: int) -> timedelta:
    """Return the smallest human interval that cuts ``span`` into at most ``max_buckets`` buckets.

    The ladder is 1s, 2s, 5s, 10s, 15s, 30s, 1m, 2m, 5m, 10m, 15m, 30m, 1h, 2h, 3h, 6h,
    12h, 1d, 2d, 7d and then whole multiples of 7d.
    """
    if max_buckets < 1:
        raise UsageError(f"the number of buckets must be at least 1, not {max_buckets}")
    # Integer microseconds: step * max_buckets as a timedelta can overflow its range.
    span_us = _us(span)
    for step in _LADDER:
        if span_us <= _us(step) * max_buckets:
            return step
    week_us = _UNIT_US["w"]
    return timedelta(microseconds=week_us * -(-span_us // (week_us * max_buckets)))


def _parse_units(text: str) -> timedelta | None:
    """Sum ``<number><unit>`` parts (``1h30m``); None when the text is not exactly that."""
    text = text.strip().lower()
    total = Decimal(0)
    pos = 0
    while pos < len(text):
        part = _DURATION_PART.match(text, pos)
        if part is None:
            return None
        total += Decimal(part.group(1)) * _UNIT_US[part.group(2)]
        pos = part.end()
    return _micros(total, text) if pos else None


def _us(td: timedelta) -> int:
    """Whole microseconds in ``td``."""
    return td // timedelta(microseconds=1)


def _micros(value: Decimal, text: str) -> timedelta:
    """Build a timedelta from a (possibly fractional) count of microseconds."""
    try:
        return timedelta(microseconds=int(value.to_integral_value(ROUND_HALF_EVEN)))
    except (OverflowError, InvalidOperation):
        raise TimeFormatError(f"duration {text!r} is out of range") from None


def _from_epoch(text: str) -> datetime:
    """Turn an epoch number in s, ms, µs or ns (by magnitude) into a UTC datetime."""
    value = Decimal(text)
    for divisor, bound in _EPOCH_SCALES:
        if bound is None or value < bound:
            micros = (value * 1_000_000 / divisor).to_integral_value(ROUND_FLOOR)
            break
    try:
        return _EPOCH + timedelta(microseconds=int(micros))
    except (OverflowError, InvalidOperation):
        raise TimeFormatError(f"epoch time {text!r} is out of range") from None


def _as_utc(moment: datetime) -> datetime:
    """Attach UTC to a naive datetime, or convert an aware one to UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def iso_z(moment: datetime | None) -> str | None:
    """A time as RFC 3339 in UTC with a ``Z`` (naive = UTC), microseconds only when non-zero."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds").replace(".000000", "") + "Z"
