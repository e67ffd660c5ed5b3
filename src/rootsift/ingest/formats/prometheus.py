"""Prometheus text exposition format 0.0.4 and OpenMetrics text: one event per sample.

A sample line is ``name{label="value",...} value [timestamp]`` (OpenMetrics may add
`` # {labels} value [timestamp]``, an exemplar). ``# TYPE`` and ``# HELP`` lines name the
metric family, so ``foo_bucket`` of ``# TYPE foo histogram`` has family ``foo``. A sample
without a timestamp is at the scrape time: the time in the file's name, else its mtime.
See docs/formats/prometheus.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.formats.prometheus_text import (
    RESERVED,
    SUFFIXES,
    TYPES,
    Times,
    is_sample,
    labels_slow,
    parse_number,
    split_sample,
)
from rootsift.ingest.formats.snapshot_paths import host_from_path, time_from_path
from rootsift.ingest.rejects import Reject


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
        samples = sum(1 for ln in body if not ln.startswith("#") and is_sample(ln))
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
        times = Times()
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
                    elif len(meta) != 4 or meta[3].strip().lower() not in TYPES:
                        yield Reject(n, "# TYPE line does not name a known metric type", line)
                    else:
                        kind = meta[3].strip().lower()
                        types[meta[2]] = "untyped" if kind == "unknown" else kind
                        families.clear()
                continue
            split = split_sample(line if line[0] not in " \t" else line.lstrip())
            if isinstance(split, str):
                yield Reject(n, f"sample {split}", line)
                continue
            metric, labels, value_text, stamp_text, exemplar_text = split
            value = parse_number(value_text)
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
    if sep and stem in types and types[stem] in SUFFIXES.get("_" + suffix, ()):
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
            number = parse_number(value)
            if number is not None and math.isfinite(number):
                ev[name + "_value"] = number
    return ""


def _exemplar(text: str, times: Times) -> Event | str:
    """``{labels} value [timestamp]`` as ``exemplar_*`` fields, or what is wrong with it."""
    if not text.startswith("{"):
        return "does not start with '{'"
    got = labels_slow(text, 1)
    if isinstance(got, str):
        return got
    ev: Event = {}
    error = _add_labels(ev, got[0], "exemplar_")
    parts = text[got[1] :].split()
    value = parse_number(parts[0]) if parts and len(parts) <= 2 else None
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
