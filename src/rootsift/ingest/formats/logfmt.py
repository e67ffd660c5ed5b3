"""logfmt: ``key=value`` pairs per line, as Go kit, Heroku, logrus and slog's text handler write them.

    time=2024-05-01T10:00:00.123Z level=warn msg="pool exhausted" wait_ms=1520 db=orders

Values may be bare (up to the next space) or double-quoted with backslash escapes; a
bare key is a ``true`` flag. Numbers become numbers; the time comes from the first of
``time``, ``ts``, ``timestamp``, ``t`` (RFC 3339, or epoch seconds / milliseconds).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

# Possessive quantifiers: a line that fails must fail in linear time, not by trying every split.
_PAIR = r'([^\s="]++)(?:(=)("(?:[^"\\]|\\.)*+"|[^\s"]*+))?'
PAIR = re.compile(_PAIR)
LINE = re.compile(rf"\s*{_PAIR}(?:\s+{_PAIR})*\s*")
NUMBER_START = frozenset("0123456789-+.")
TIME_KEYS = ("time", "ts", "timestamp", "t")
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
_ESCAPE = re.compile(r"\\(.)")


@register
class Logfmt(TextFormat):
    name = "logfmt"
    summary = "logfmt key=value lines (Go kit, Heroku, logrus, slog); time from time/ts/timestamp/t"
    reads = ("tz",)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        sample = [ln for ln in lines if ln.strip()][:20]
        if not sample or sample[0].lstrip().startswith(("{", "[", "#")):
            return 0.0
        pairs = [p for p in map(_pairs, sample) if p is not None and len(p) > 1]
        timed = sum(1 for p in pairs if any(k in TIME_KEYS and v for k, v in p))
        return 0.7 * len(pairs) / len(sample) if timed * 2 >= len(sample) else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        zone = self.options.zone()
        for number, line in lines:
            if not line.strip():
                continue
            pairs = _pairs(line)
            if pairs is None:
                yield Reject(number, "not key=value pairs (an unbalanced quote, or text outside a pair)", line)
                continue
            event: dict[str, object] = {}
            for key, value in pairs:
                event[key] = _value(value)
            when = next((event.pop(k) for k in TIME_KEYS if k in event), None)
            stamp = _time(when, zone)
            if stamp is None:
                yield Reject(number, f"no readable time in {'/'.join(TIME_KEYS)} (got {when!r})", line)
                continue
            event[TIME_KEY] = stamp
            yield number, event


def _pairs(line: str) -> list[tuple[str, str | None]] | None:
    """The line's (key, raw value) pairs, or None when text falls outside every pair."""
    if LINE.fullmatch(line) is None:
        return None
    return [(k, v if eq else None) for k, eq, v in PAIR.findall(line)]


def _value(raw: str | None) -> object:
    if raw is None:
        return True
    if raw[:1] == '"':
        return _ESCAPE.sub(lambda m: ESCAPES.get(m.group(1), m.group(0)), raw[1:-1]) if "\\" in raw else raw[1:-1]
    if raw[:1] not in NUMBER_START:  # most values are words: skip the cost of a failed float()
        return raw
    if raw.isdigit() and len(raw) < 16:
        return int(raw)
    try:
        number = float(raw)
    except ValueError:
        return raw
    if number != number or number in (float("inf"), float("-inf")):
        return raw
    return int(raw) if raw.lstrip("-").isdigit() and abs(number) < 2**53 else number


def _time(value: object, zone: object) -> datetime | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) >= 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=zone)  # type: ignore[arg-type]
