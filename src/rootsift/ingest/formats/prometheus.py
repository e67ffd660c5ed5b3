"""Prometheus text exposition format 0.0.4 and OpenMetrics text: one event per sample.

A sample line is ``name{label="value",...} value [timestamp]`` (OpenMetrics may add
`` # {labels} value [timestamp]``, an exemplar). ``# TYPE`` and ``# HELP`` lines name the
metric family, so ``foo_bucket`` of ``# TYPE foo histogram`` has family ``foo``. A sample
without a timestamp is at the scrape time: the time in the file's name, else its mtime.
See docs/formats/prometheus.md.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.formats.snapshot_paths import host_from_path, time_from_path
from rootsift.ingest.rejects import Reject

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
# The common line: labels without backslashes, value, optional timestamp, optional exemplar.
_FAST = re.compile(rf"({_NAME})(?:\{{([^}}\\]*)\}})?[ \t]+([^ \t#]+)(?:[ \t]+([^ \t#]+))?[ \t]*(?:#(.*))?")
_PLAIN_LABELS = re.compile(rf'[ \t]*(?:{_LABEL}[ \t]*=[ \t]*"[^"\\]*"[ \t]*(?:,[ \t]*|(?=$)))*')
_PAIR = re.compile(rf'({_LABEL})[ \t]*=[ \t]*"([^"\\]*)"')
_SLOW_PAIR = re.compile(rf'[ \t]*({_LABEL})[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,?)')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset", "gaugehistogram"}
_SUFFIXES = {
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


def _labels_slow(text: str, start: int) -> tuple[list[tuple[str, str]], int] | str:
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


def _split_sample(line: str) -> Sample | str:
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
        got = _labels_slow(line, brace + 1)
        if isinstance(got, str):
            return got
        labels, pos = got
    rest, hash_sign, exemplar = line[pos:].partition("#")
    parts = rest.split()
    if not parts or len(parts) > 2 or (line[pos - 1] != "}" and not rest.startswith((" ", "\t"))):
        return "needs a value and at most a timestamp after the name and labels"
    return head.group(), labels, parts[0], parts[1] if len(parts) == 2 else None, exemplar if hash_sign else None


def _is_sample(line: str) -> bool:
    split = _split_sample(line)
    if isinstance(split, str):
        return False
    return _number(split[2]) is not None and (split[3] is None or _number(split[3]) is not None)


def _number(text: str) -> float | None:
    if "_" in text:  # Python reads 1_000, Prometheus does not
        return None
    try:
        return float(text)
    except ValueError:
        return None


class _Times:
    """Sample timestamps (ms, or OpenMetrics seconds) as datetimes, with a small cache."""

    def __init__(self) -> None:
        self.cache: dict[str, datetime] = {}

    def get(self, text: str) -> datetime | None:
        found = self.cache.get(text)
        if found is None:
            number = _number(text)
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


@register
class PrometheusFormat(TextFormat):
    """Prometheus / OpenMetrics text exposition: one event per sample."""

    name = "prometheus"
    summary = "Prometheus text exposition 0.0.4 and OpenMetrics text (one event per sample)"
    reads = ("host", "tz")

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        body = [ln for ln in lines[:50] if ln.strip()]
        if not body:
            return 0.0
        meta = sum(1 for ln in body if ln.startswith(("# TYPE ", "# HELP ")) and len(ln.split()) >= 3)
        comments = sum(1 for ln in body if ln.startswith("#"))
        samples = sum(1 for ln in body if not ln.startswith("#") and _is_sample(ln))
        if meta and comments + samples >= 0.9 * len(body):
            return 0.95
        named = name.endswith((".prom", ".om", ".metrics")) or "metrics" in name.lower()
        if samples >= 3 and samples >= 0.9 * len(body):
            return 0.8 if named else 0.55
        return 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        options = self.options
        scrape = time_from_path(options.source, options.zone()) or options.file_time()
        host = options.host or host_from_path(options.source)
        types: dict[str, str] = {}
        units: dict[str, str] = {}
        families: dict[str, tuple[str, str]] = {}
        times = _Times()
        eof = 0
        for n, line in lines:
            if not line or line.isspace():
                continue
            if eof:
                yield Reject(n, f"text after '# EOF' (line {eof})", line)
                continue
            if line[0] == "#":
                meta = line.split(None, 3)
                if line.rstrip() == "# EOF":
                    eof = n
                elif len(meta) >= 3 and meta[1] in ("TYPE", "UNIT"):
                    if meta[1] == "UNIT":
                        units[meta[2]] = meta[3].strip() if len(meta) > 3 else ""
                    elif len(meta) != 4 or meta[3].strip().lower() not in _TYPES:
                        yield Reject(n, "# TYPE line does not name a known metric type", line)
                    else:
                        kind = meta[3].strip().lower()
                        types[meta[2]] = "untyped" if kind == "unknown" else kind
                        families.clear()
                continue
            split = _split_sample(line if line[0] not in " \t" else line.lstrip())
            if isinstance(split, str):
                yield Reject(n, f"sample {split}", line)
                continue
            metric, labels, value_text, stamp_text, exemplar_text = split
            value = _number(value_text)
            if value is None:
                yield Reject(n, f"sample value {value_text!r} is not a number", line)
                continue
            when = scrape
            if stamp_text is not None:
                stamp = times.get(stamp_text)
                if stamp is None:
                    yield Reject(n, f"sample timestamp {stamp_text!r} is not a time", line)
                    continue
                when = stamp
            family = families.get(metric)
            if family is None:
                family = families[metric] = _family(metric, types)
            ev: Event = {TIME_KEY: when, "metric": metric, "family": family[0], "type": family[1]}
            if host:
                ev["host"] = host
            if family[0] in units:
                ev["unit"] = units[family[0]]
            if math.isfinite(value):
                ev["value"] = value
            else:
                ev["value_text"] = "NaN" if value != value else "+Inf" if value > 0 else "-Inf"
            error = _add_labels(ev, labels)
            if error:
                yield Reject(n, error, line)
                continue
            if exemplar_text is not None:
                exemplar = _exemplar(exemplar_text.strip(), times)
                if isinstance(exemplar, str):
                    yield Reject(n, f"exemplar {exemplar}", line)
                    continue
                ev.update(exemplar)
            yield n, ev


def _family(metric: str, types: dict[str, str]) -> tuple[str, str]:
    """The family name and type of a sample name, from the ``# TYPE`` lines seen so far."""
    if metric in types:
        return metric, types[metric]
    stem, sep, suffix = metric.rpartition("_")
    if sep and stem in types and types[stem] in _SUFFIXES.get("_" + suffix, ()):
        return stem, types[stem]
    return metric, "untyped"


def _add_labels(ev: Event, labels: list[tuple[str, str]], prefix: str = "") -> str:
    """Put labels into ``ev`` (``le``/``quantile`` also as floats); an error text or ''."""
    for name, value in labels:
        key = prefix + name if prefix or name not in RESERVED else "label_" + name
        if key in ev:
            return f"label {name} appears twice"
        ev[key] = value
        if name in ("le", "quantile") and not prefix:
            number = _number(value)
            if number is not None and math.isfinite(number):
                ev[name + "_value"] = number
    return ""


def _exemplar(text: str, times: _Times) -> Event | str:
    """``{labels} value [timestamp]`` as ``exemplar_*`` fields, or what is wrong with it."""
    if not text.startswith("{"):
        return "does not start with '{'"
    got = _labels_slow(text, 1)
    if isinstance(got, str):
        return got
    ev: Event = {}
    error = _add_labels(ev, got[0], "exemplar_")
    parts = text[got[1] :].split()
    value = _number(parts[0]) if parts and len(parts) <= 2 else None
    if error or value is None:
        return error or "needs a value and at most a timestamp after its labels"
    if math.isfinite(value):
        ev["exemplar_value"] = value
    if len(parts) == 2:
        stamp = times.get(parts[1])
        if stamp is None:
            return f"timestamp {parts[1]!r} is not a time"
        ev["exemplar_timestamp"] = stamp
    return ev
