"""Tests of time and duration arguments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rootsift.errors import TimeFormatError, UsageError
from rootsift.timeutil import format_duration, nice_granularity, parse_duration, parse_time

NOW = datetime(2026, 11, 21, 8, 0, 0, tzinfo=UTC)


def at(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0) -> datetime:
    """A UTC datetime."""
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-21T08:00:00Z", at(2026, 11, 21, 8)),
        ("2026-11-21t08:00:00z", at(2026, 11, 21, 8)),
        ("2026-11-21T10:30:00+02:00", at(2026, 11, 21, 8, 30)),
        ("2026-11-21T03:00:00-05:00", at(2026, 11, 21, 8)),
        ("2026-11-21T08:00:00.123456Z", at(2026, 11, 21, 8, 0, 0, 123456)),
        ("2026-11-21T08:00:00.5Z", at(2026, 11, 21, 8, 0, 0, 500000)),
        ("2026-11-21T08:00:00.123456789Z", at(2026, 11, 21, 8, 0, 0, 123456)),
        ("2026-11-21 08:00:00", at(2026, 11, 21, 8)),
        ("2026-11-21T08:00", at(2026, 11, 21, 8)),
        ("2026-11-21", at(2026, 11, 21)),
        ("  2026-11-21  ", at(2026, 11, 21)),
        ("1790000000", at(2026, 9, 21, 14, 13, 20)),
        ("1790000000.5", at(2026, 9, 21, 14, 13, 20, 500000)),
        ("1790000000123", at(2026, 9, 21, 14, 13, 20, 123000)),
        ("1790000000123456", at(2026, 9, 21, 14, 13, 20, 123456)),
        ("1790000000123456789", at(2026, 9, 21, 14, 13, 20, 123456)),
        ("0", at(1970, 1, 1)),
        ("99999999999", at(5138, 11, 16, 9, 46, 39)),  # just below 1e11: still seconds
        ("100000000000", at(1973, 3, 3, 9, 46, 40)),  # 1e11: milliseconds
        ("now", NOW),
        ("NOW", NOW),
        ("-2h", NOW - timedelta(hours=2)),
        ("-90s", NOW - timedelta(seconds=90)),
        ("-15m", NOW - timedelta(minutes=15)),
        ("-7d", NOW - timedelta(days=7)),
        ("-1w", NOW - timedelta(weeks=1)),
        ("-1h30m", NOW - timedelta(minutes=90)),
        ("now-2h", NOW - timedelta(hours=2)),
        ("now - 2h", NOW - timedelta(hours=2)),
        ("now+1d", NOW + timedelta(days=1)),
        ("+1h", NOW + timedelta(hours=1)),
        ("-500ms", NOW - timedelta(milliseconds=500)),
    ],
)
def test_parse_time(text: str, expected: datetime) -> None:
    result = parse_time(text, now=NOW)
    assert result == expected
    assert result.tzinfo is UTC


def test_parse_time_now_defaults_to_current_time() -> None:
    before = datetime.now(UTC)
    result = parse_time("-1h")
    assert before - timedelta(hours=1) <= result <= datetime.now(UTC) - timedelta(hours=1)


def test_parse_time_naive_and_foreign_now() -> None:
    assert parse_time("-1h", now=datetime(2026, 11, 21, 8)) == at(2026, 11, 21, 7)
    paris = timezone(timedelta(hours=1))
    assert parse_time("now", now=datetime(2026, 11, 21, 9, tzinfo=paris)) == at(2026, 11, 21, 8)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "yesterday",
        "-2",
        "now-90",
        "-2x",
        "2h",
        "now-",
        "--2h",
        "2026-13-01",
        "2026-11-21T25:00",
        "21/11/2026",
        "1e9",
        "-1790000000",
        "9" * 40,
        "-99999999999999999999d",
        "now-2h-1h",
        "0x10",
    ],
)
def test_parse_time_errors(text: str) -> None:
    with pytest.raises(TimeFormatError, match="accepted forms|out of range"):
        parse_time(text, now=NOW)


def test_time_error_lists_forms() -> None:
    with pytest.raises(TimeFormatError) as info:
        parse_time("yesterday")
    message = str(info.value)
    for form in ("RFC 3339", "epoch", "now", "-2h", "now-2h"):
        assert form in message
    assert isinstance(info.value, UsageError)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("5m", timedelta(minutes=5)),
        ("2h", timedelta(hours=2)),
        ("7d", timedelta(days=7)),
        ("1w", timedelta(weeks=1)),
        ("1h30m", timedelta(minutes=90)),
        ("1h 30m", timedelta(minutes=90)),
        ("1H30M", timedelta(minutes=90)),
        ("500ms", timedelta(milliseconds=500)),
        ("250us", timedelta(microseconds=250)),
        ("250µs", timedelta(microseconds=250)),
        ("1.5h", timedelta(minutes=90)),
        ("90", timedelta(seconds=90)),
        ("1.5", timedelta(seconds=1.5)),
        ("0", timedelta(0)),
        ("0s", timedelta(0)),
        (" 2m ", timedelta(minutes=2)),
        ("1d2h3m4s5ms", timedelta(days=1, hours=2, minutes=3, seconds=4, milliseconds=5)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "h", "5x", "-5m", "5 minutes", "1h-30m", "m5", "1e3s", "99999999999w", "1.2.3s"])
def test_parse_duration_errors(text: str) -> None:
    with pytest.raises(TimeFormatError, match="accepted forms|out of range"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("td", "text"),
    [
        (timedelta(0), "0s"),
        (timedelta(minutes=90), "1h30m"),
        (timedelta(milliseconds=500), "500ms"),
        (timedelta(seconds=1, milliseconds=500), "1s500ms"),
        (timedelta(microseconds=7), "7us"),
        (timedelta(days=7), "7d"),
        (timedelta(days=1, hours=2, minutes=3, seconds=4), "1d2h3m4s"),
        (timedelta(hours=-2), "-2h"),
    ],
)
def test_format_duration(td: timedelta, text: str) -> None:
    assert format_duration(td) == text


@given(st.timedeltas(min_value=timedelta(0)))
def test_format_duration_round_trips(td: timedelta) -> None:
    assert parse_duration(format_duration(td)) == td


@pytest.mark.parametrize(
    ("span", "max_buckets", "expected"),
    [
        (timedelta(0), 10, timedelta(seconds=1)),
        (timedelta(seconds=-5), 10, timedelta(seconds=1)),
        (timedelta(seconds=10), 10, timedelta(seconds=1)),
        (timedelta(seconds=11), 10, timedelta(seconds=2)),
        (timedelta(seconds=30), 10, timedelta(seconds=5)),
        (timedelta(minutes=1), 60, timedelta(seconds=1)),
        (timedelta(hours=1), 60, timedelta(minutes=1)),
        (timedelta(hours=1), 59, timedelta(minutes=2)),
        (timedelta(hours=6), 100, timedelta(minutes=5)),
        (timedelta(hours=24), 24, timedelta(hours=1)),
        (timedelta(hours=24), 23, timedelta(hours=2)),
        (timedelta(hours=24), 5, timedelta(hours=6)),
        (timedelta(days=1), 1, timedelta(days=1)),
        (timedelta(days=3), 1, timedelta(days=7)),
        (timedelta(days=30), 2, timedelta(days=21)),
        (timedelta(days=365), 10, timedelta(days=42)),
        (timedelta(days=365), 1, timedelta(days=371)),
        (timedelta(days=1), 10**12, timedelta(seconds=1)),
    ],
)
def test_nice_granularity(span: timedelta, max_buckets: int, expected: timedelta) -> None:
    assert nice_granularity(span, max_buckets) == expected


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10_000)), st.integers(1, 10_000))
def test_nice_granularity_is_smallest_that_fits(span: timedelta, max_buckets: int) -> None:
    step = nice_granularity(span, max_buckets)
    assert span <= step * max_buckets
    ladder = [timedelta(seconds=s) for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)]
    smaller = [s for s in ladder if s < step]
    assert all(span > s * max_buckets for s in smaller)


def test_nice_granularity_rejects_zero_buckets() -> None:
    with pytest.raises(UsageError):
        nice_granularity(timedelta(hours=1), 0)
