"""What else moved: other numeric series (every metric of every host of a Prometheus
scrape, or every numeric field of wide events) whose change points coincide with or lead
a shift.

Series: ``avg(value)`` per bucket per metric name (``metric``, ``name`` or ``__name__``)
and per label (``host``, ``instance``, ``service``, ``quantile`` when present) when the
dataset has a ``value`` field; else ``avg(field)`` of each numeric field, per ``host``
when present. The buckets are the shift's. Each series' change points come from the same
detector: its change points of level, and of slope when it reads the series as integrated
(``aspect``); BH over all of them. (When the dataset is stamped more coarsely than the
shift's buckets, whole units of its resolution.) A change point is *related* when it lies between
``LEAD_WINDOW`` before the shift's onset and ``LAG_BUCKETS`` buckets after the shift:
``lead`` is how long before the shift it happened (negative: after it). Ranked by the
closeness of its time to the onset (a change that leads a shift by minutes says more than
one a day earlier), then by q-value.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from rootsift.analysis import timescale
from rootsift.analysis.changes import detect as det
from rootsift.analysis.changes import series as ser
from rootsift.analysis.stats import q_values
from rootsift.errors import UsageError
from rootsift.query.spec import Calculation
from rootsift.store.duckdb import DuckDBBackend
from rootsift.timeutil import format_duration

NAME_FIELDS = ("metric", "name", "__name__")
LABEL_FIELDS = ("host", "instance", "service", "quantile")
LEAD_WINDOW = timedelta(days=1)
LAG_BUCKETS = 3
MAX_SERIES = 200
NUMERIC = ("DOUBLE", "BIGINT")


@dataclass
class Related:
    series: str
    time: datetime
    lead_seconds: float
    point: det.Point
    q_value: float
    aspect: str = "level"
    """``level`` (medians either side) or ``slope`` (median increment per bucket either side)."""


def related(
    backend: DuckDBBackend,
    dataset: str,
    onset: datetime,
    shift: datetime,
    granularity: timedelta,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    alpha: float = 0.05,
) -> tuple[list[Related], list[str]]:
    """Change points of ``dataset``'s series near a shift (``onset`` … ``shift``), ranked."""
    fields = backend.fields(dataset)
    if not fields:
        raise UsageError(f"--related {dataset!r}: no such dataset, or it has no events")
    name = next((f for f in NAME_FIELDS if f in fields and fields[f].type == "VARCHAR"), None)
    labels = [f for f in LABEL_FIELDS if f in fields and fields[f].type == "VARCHAR"]
    # the shift's buckets, unless this dataset is stamped more coarsely
    unit = ser.bucket_width(backend, dataset, start, end, None)[1]
    granularity = timescale.whole_units(max(granularity, timedelta(seconds=unit)), unit)
    g = format_duration(granularity)
    sets: list[tuple[str, ser.SeriesSet]] = []
    if name is not None and "value" in fields and fields["value"].type in NUMERIC:
        m = ser.Measure("avg(value)", Calculation("avg", "value"))
        made = ser.build(
            backend, dataset, m, by=name, start=start, end=end, granularity=g, labels=labels, max_groups=MAX_SERIES
        )
        sets.append(("avg(value)", made))
    else:
        numeric = [f for f, info in fields.items() if info.type in NUMERIC and not f.startswith("_")]
        host = "host" if "host" in labels else None
        for f in numeric[:20]:
            m = ser.Measure(f"avg({f})", Calculation("avg", f))
            sets.append((f"avg({f})", ser.build(backend, dataset, m, by=host, start=start, end=end, granularity=g)))
    keys = ([name] if name else []) + labels
    found: list[tuple[str, ser.Series, det.Point, str]] = []
    warnings: list[str] = []
    for label, made in sets:
        warnings += made.warnings
        for s, d in zip(made.series, det.detect_many([s.values for s in made.series]), strict=True):
            title = label + "".join(f" {k}={v}" for k, v in zip(keys, _parts(s.group), strict=False) if v is not None)
            found += [(title, s, p, "level") for p in d.points] + [(title, s, p, "slope") for p in d.slope]
    if not found:
        return [], warnings
    q = q_values(np.array([p.p_value for _, _, p, _ in found]))
    out = []
    lo, hi = onset - LEAD_WINDOW, shift + LAG_BUCKETS * granularity
    for (title, s, p, aspect), qv in zip(found, q, strict=True):
        at = s.times[p.index]
        if qv < alpha and lo <= at <= hi:
            out.append(Related(title, at, (shift - at).total_seconds(), p, float(qv), aspect))
    out.sort(key=lambda r: (abs((r.time - onset).total_seconds()), r.q_value))
    return out, warnings


def _parts(group: object) -> tuple[object, ...]:
    return group if isinstance(group, tuple) else (group,)
