"""Lexing the Prometheus / OpenMetrics text format: sample lines, labels, numbers, timestamps.

Used by ``prometheus.py``; see docs/formats/prometheus.md.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime

from rootsift.ingest.formats.base import TIME_KEY

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
# The common line: labels without backslashes, value, optional timestamp, optional exemplar.
_FAST = re.compile(rf"({_NAME})(?:\{{([^}}\\]*)\}})?[ \t]+([^ \t#]+)(?:[ \t]+([^ \t#]+))?[ \t]*(?:#(.*))?")
_PLAIN_LABELS = re.compile(rf'[ \t]*(?:{_LABEL}[ \t]*=[ \t]*"[^"\\]*"[ \t]*(?:,[ \t]*|(?=$)))*')
_PAIR = re.compile(rf'({_LABEL})[ \t]*=[ \t]*"([^"\\]*)"')
_SLOW_PAIR = re.compile(rf'[ \t]*({_LABEL})[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,?)')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
TYPES = {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset", "gaugehistogram"}
SUFFIXES = {
    "_bucket": {"histogram", "gaugehistogram"},
    "_sum": {"histogram", "summary"},
    "_count": {"histogram", "summary"},
    "_total": {"counter"},
    "_created": {"counter", "histogram", "summary"},
    "_gsum": {"gaugehistogram"},
    "_gcount": {"gaugehistogram"},
    "_info": {"info"},
}
RESERVED = frozenset(
    {TIME_KEY, "metric", "family", "type", "unit", "value", "value_text", "host", "le_value", "quantile_value"}
)
"""Event fields of our own: a label with one of these names is stored as ``label_<name>``."""
SECONDS_RANGE = (1e8, 1e11)
"""Integer timestamps in this range are OpenMetrics seconds (as milliseconds they would fall in
1970-1973); other integers are Prometheus milliseconds; ones with a fraction are seconds."""


def _unescape(text: str) -> str | None:
    """A label value with ``\\\\``, ``\\"`` and ``\\n`` resolved; None if another escape appears."""
    if "\\" not in text:
        return text
    if any(ch not in _UNESCAPE for ch in _ESCAPE.findall(text)):
        return None
    return _ESCAPE.sub(lambda m: _UNESCAPE[m.group(1)], text)


def labels_slow(text: str, start: int) -> tuple[list[tuple[str, str]], int] | str:
    """Labels from ``text[start]`` (just after ``{``): the pairs and the index after ``}``, or an error."""
    pairs: list[tuple[str, str]] = []
    pos = start
    while True:
        while pos < len(text) and text[pos] in " \t":
            pos += 1
        if pos < len(text) and text[pos] == "}":
            return pairs, pos + 1
        m = _SLOW_PAIR.match(text, pos)
        if m is None:
            return "labels are not name=\"value\" pairs closed by '}'"
        value = _unescape(m.group(2))
        if value is None:
            return f'label {m.group(1)} has an escape other than \\\\, \\" or \\n'
        pairs.append((m.group(1), value))
        pos = m.end()
        if not m.group(3) and not text.startswith("}", pos):
            return f"label {m.group(1)} is followed by neither ',' nor '}}'"


Sample = tuple[str, list[tuple[str, str]], str, str | None, str | None]
"""A sample line's name, labels, value text, timestamp text and exemplar text."""


def split_sample(line: str) -> Sample | str:
    """Name, labels, value, timestamp and exemplar texts of a sample line, or what is wrong with it."""
    m = _FAST.fullmatch(line)
    if m is not None:
        name, body, value, stamp, exemplar = m.groups()
        if body is None:
            return name, [], value, stamp, exemplar
        if _PLAIN_LABELS.fullmatch(body):
            return name, _PAIR.findall(body), value, stamp, exemplar
    head = re.match(_NAME, line)
    if head is None:
        return "does not start with a metric name"
    pos = head.end()
    labels: list[tuple[str, str]] = []
    brace = line.find("{", pos)
    if brace >= 0 and not line[pos:brace].strip(" \t"):  # "name {..." is allowed, as Prometheus does
        got = labels_slow(line, brace + 1)
        if isinstance(got, str):
            return got
        labels, pos = got
    rest, hash_sign, exemplar = line[pos:].partition("#")
    parts = rest.split()
    if not parts or len(parts) > 2 or (line[pos - 1] != "}" and not rest.startswith((" ", "\t"))):
        return "needs a value and at most a timestamp after the name and labels"
    return head.group(), labels, parts[0], parts[1] if len(parts) == 2 else None, exemplar if hash_sign else None


def is_sample(line: str) -> bool:
    split = split_sample(line)
    if isinstance(split, str):
        return False
    return parse_number(split[2]) is not None and (split[3] is None or parse_number(split[3]) is not None)


def parse_number(text: str) -> float | None:
    if "_" in text:  # Python reads 1_000, Prometheus does not
        return None
    try:
        return float(text)
    except ValueError:
        return None


class Times:
    """Sample timestamps (ms, or OpenMetrics seconds) as datetimes, with a small cache."""

    def __init__(self) -> None:
        self.cache: dict[str, datetime] = {}

    def get(self, text: str) -> datetime | None:
        found = self.cache.get(text)
        if found is None:
            number = parse_number(text)
            if number is None or not math.isfinite(number):
                return None
            low, high = SECONDS_RANGE
            fraction = "." in text or "e" in text or "E" in text
            seconds = number if (low <= abs(number) < high or (fraction and abs(number) < high)) else number / 1000
            try:
                found = datetime.fromtimestamp(seconds, UTC)
            except (OverflowError, OSError, ValueError):
                return None
            if len(self.cache) > 4096:
                self.cache.clear()
            self.cache[text] = found
        return found
