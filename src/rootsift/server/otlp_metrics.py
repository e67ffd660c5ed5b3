"""OTLP metric data points into events: one event per point, with ``metric.name``,
``metric.unit``, ``metric.type`` and the point's, scope's and resource's attributes.

    gauge                  value
    sum                    value; a cumulative sum also ``delta`` (since the series' last
                           point; none on its first, the value itself after a reset) and
                           ``rate`` (delta per second); a delta sum's value is its delta
    histogram              count, sum, min, max, histogram.bounds, histogram.counts (JSON)
    exponential histogram  count, sum, min, max, exp.scale, exp.zero_count,
                           exp.positive (offset and counts, JSON), exp.negative
    summary                count, sum, quantile.<q> for each quantile

The series' last points (for deltas) are kept in memory, at most ``Series.limit`` of them
(least recently seen forgotten first); a restart starts each series afresh.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from rootsift.server.otlp import Event, flatten, nanos_iso, scoped

CUMULATIVE = 2  # AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE


class Series:
    """Each cumulative series' last (start time, time, value)."""

    def __init__(self, limit: int = 200_000) -> None:
        self.limit = limit
        self._last: OrderedDict[tuple[Any, ...], tuple[int, int, float]] = OrderedDict()

    def delta(self, key: tuple[Any, ...], start: int, time: int, value: float) -> tuple[float | None, float | None]:
        """(delta, rate per second) of a cumulative point against the series' previous one."""
        last = self._last.get(key)
        self._last[key] = (start, time, value)
        self._last.move_to_end(key)
        if len(self._last) > self.limit:
            self._last.popitem(last=False)
        if last is None or time <= last[1]:
            return None, None
        if value < last[2] or (start and start != last[0]):  # the counter restarted
            return value, None
        delta = value - last[2]
        return delta, delta / ((time - last[1]) / 1e9)


def points(request: Any, series: Series | None = None) -> tuple[list[Event], int, str]:
    series = series or Series()
    events: list[Event] = []
    rejected, why = 0, ""
    for base, metric in scoped(request.resource_metrics, "scope_metrics", "metrics"):
        kind = metric.WhichOneof("data")
        if kind is None:
            continue
        data = getattr(metric, kind)
        for point in data.data_points:
            nanos = point.time_unix_nano or point.start_time_unix_nano
            if not nanos:
                rejected += 1
                why = f"a point of {metric.name!r} has no time_unix_nano"
                continue
            event = dict(base)
            flatten(point.attributes, event)
            event.update({"timestamp": nanos_iso(nanos), "metric.name": metric.name, "metric.type": kind})
            if metric.unit:
                event["metric.unit"] = metric.unit
            _values(kind, data, point, event, series, (metric.name, _key(event)))
            events.append(event)
    return events, rejected, why


def _key(event: Event) -> tuple[Any, ...]:
    """A series: every field of the point but its time."""
    return tuple(sorted((k, str(v)) for k, v in event.items() if k != "timestamp"))


def _number(point: Any) -> float | int | None:
    which = point.WhichOneof("value")
    return None if which is None else getattr(point, which)


def _values(kind: str, data: Any, point: Any, event: Event, series: Series, key: tuple[Any, ...]) -> None:
    if kind == "gauge":
        event["value"] = _number(point)
    elif kind == "sum":
        value = _number(point)
        event["value"] = value
        event["metric.monotonic"] = bool(data.is_monotonic)
        if data.aggregation_temporality == CUMULATIVE and value is not None:
            delta, rate = series.delta(key, point.start_time_unix_nano, point.time_unix_nano, float(value))
            if delta is not None:
                event["delta"] = delta
            if rate is not None:
                event["rate"] = rate
        else:
            event["delta"] = value
    elif kind in ("histogram", "exponential_histogram"):
        event["count"] = point.count
        if point.HasField("sum"):
            event["sum"] = point.sum
        if point.HasField("min"):
            event["min"] = point.min
        if point.HasField("max"):
            event["max"] = point.max
        if kind == "histogram":
            event["histogram.bounds"] = json.dumps(list(point.explicit_bounds))
            event["histogram.counts"] = json.dumps(list(point.bucket_counts))
        else:
            event["exp.scale"] = point.scale
            event["exp.zero_count"] = point.zero_count
            for side in ("positive", "negative"):
                buckets = getattr(point, side)
                if buckets.bucket_counts:
                    event[f"exp.{side}"] = json.dumps({"offset": buckets.offset, "counts": list(buckets.bucket_counts)})
    elif kind == "summary":
        event["count"] = point.count
        event["sum"] = point.sum
        for q in point.quantile_values:
            event[f"quantile.{q.quantile:g}"] = q.value
