"""The metrics compared: parsing ``--metrics``, the defaults, and which way is better."""

from __future__ import annotations

import re
from dataclasses import dataclass

from rootsift.analysis.frame import Frame
from rootsift.analysis.investigate import ERROR_FIELDS, MEASURES
from rootsift.errors import QuerySpecError, UsageError

TOLERANCE = {"quantile": 0.05, "shift": 0.05, "slope": 0.05, "avg": 0.05, "max": 0.05, "min": 0.05, "rate": 0.10}
"""Relative changes that do not matter, per metric kind (``--tolerance`` overrides)."""
_METRIC = re.compile(r"^(?:p(?P<q>\d+(?:\.\d+)?)|(?P<agg>avg|mean|max|min|rate|shift|slope))\((?P<arg>.*)\)$", re.S)


@dataclass
class Metric:
    text: str
    kind: str  # quantile | avg | max | min | rate
    field: str | None = None
    q: float | None = None
    filter: str | None = None


def parse_metrics(text: str) -> list[Metric]:
    """``p50(duration_ms),avg(rss_bytes),rate(status >= 500)`` as metrics (commas inside
    parentheses belong to the argument)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            if text[start:i].strip():
                items.append(text[start:i].strip())
            start = i + 1
    out = []
    for item in items:
        m = _METRIC.match(item)
        if m is None or not m.group("arg").strip():
            raise UsageError(
                f"--metrics: {item!r} is not pNN(field), shift(field), avg(field), max(field), min(field), "
                "slope(field) or rate(filter)"
            )
        arg = m.group("arg").strip()
        if m.group("q") is not None:
            q = round(float(m.group("q")) / 100, 9)
            if not 0 < q < 1:
                raise UsageError(f"--metrics: {item!r}: the quantile must be between p0 and p100")
            out.append(Metric(item, "quantile", arg, q=q))
        elif m.group("agg") == "rate":
            out.append(Metric(item, "rate", filter=arg))
        elif m.group("agg") in ("shift", "slope"):
            out.append(Metric(item, str(m.group("agg")), arg))
        else:
            out.append(Metric(item, "avg" if m.group("agg") == "mean" else str(m.group("agg")), arg))
    if not out:
        raise UsageError("--metrics: no metric given")
    return out


def default_metrics(frame: Frame) -> list[Metric]:
    numeric = {n for n, f in frame.fields.items() if f.type in ("DOUBLE", "BIGINT")}
    out = []
    measure = next((m for m in MEASURES if m in numeric), None)
    if measure:
        out += [Metric(f"p{int(q * 100)}({measure})", "quantile", measure, q=q) for q in (0.5, 0.9, 0.99)]
    status = next((s for s in ERROR_FIELDS if s in numeric), None)
    if status:
        out.append(Metric(f"rate({status} >= 500)", "rate", filter=f"{status} >= 500"))
    if not out:
        raise UsageError("no duration or status field to compare by default: name the metrics with --metrics")
    return out


def direction(metric: Metric, better: dict[str, str] | None) -> tuple[str, str]:
    """(which way is better, where that came from) for a metric: ``lower`` by default, for
    every kind (durations, sizes, quantiles, means and the share of events matching a
    filter), unless ``better`` names the metric. Nothing is guessed from a field's name: a
    rate of ``cache = "hit"`` among errors is as bad as any other error rate."""
    given = (better or {}).get(metric.text)
    if given is None:
        return "lower", "default"
    if given not in ("higher", "lower"):
        raise UsageError(f"--better {metric.text}={given}: say higher or lower")
    return given, "--better"


NUMERIC = ("DOUBLE", "BIGINT")


def check_field(metric: Metric, frame: Frame) -> None:
    """A metric of a field needs the field, and a number in it: a usage error naming the
    field and its type otherwise (a rate's filter is checked by the filter compiler)."""
    if metric.field is None:
        return
    info = frame.fields.get(metric.field)
    if info is None:
        raise QuerySpecError(f"--metrics {metric.text}: no field {metric.field!r} in {frame.dataset}")
    if info.type not in NUMERIC:
        raise UsageError(
            f"--metrics {metric.text}: {metric.field!r} is a {info.type} field, and {metric.kind} needs a number "
            f'(for a share of its values, use rate({metric.field} = "..."))'
        )
