"""The series trends fits: one per group (``--by host``) and field, read in one query.

Events are averaged per time bucket (or summed, counted, …: the measure's calculation),
so a series has at most ``MAX_POINTS`` points whatever the sampling: a host sampled every
5 minutes for 30 days is fitted on 240 three-hour means. Each point's time is the mean
time of its events, so sparse snapshots (every 12 h) keep their own times. Sample rates
are not applied: a gauge's mean does not depend on how many of its samples were kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.frame import Frame
from rootsift.errors import QuerySpecError, UnknownFieldError
from rootsift.query.spec import Calculation
from rootsift.store.base import TIME_COLUMN

MAX_POINTS = 240
BUCKETS = tuple(timedelta(minutes=m) for m in (1, 5, 10, 15, 30, 60, 120, 180, 240, 360, 480, 720, 1440, 2880, 10080))
NUMERIC = ("DOUBLE", "BIGINT")
AGGREGATE_OF: dict[str, type[exp.AggFunc]] = {"avg": exp.Avg, "min": exp.Min, "max": exp.Max, "sum": exp.Sum}


@dataclass
class Series:
    """One group's points: hours since the epoch and a value per measure."""

    group: Any
    t: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)


def measure(calc: Calculation) -> exp.Expr:
    """The aggregate of a measure per bucket: avg, min, max, sum, count or a percentile."""
    if calc.op == "count":
        return exp.Count(this=q.col(calc.field)) if calc.field else q.count_rows()
    if calc.op == "percentile":
        return q.quantile_cont(q.col(str(calc.field)), float(calc.q or 0))
    if calc.op not in AGGREGATE_OF:
        raise QuerySpecError(f"--measure {calc.label}: trends read avg, min, max, sum, count or a percentile")
    return AGGREGATE_OF[calc.op](this=q.col(str(calc.field)))


def check_fields(frame: Frame, names: list[str], flag: str) -> None:
    """Each name is a numeric field of the dataset, or a usage error naming ``flag``."""
    import difflib

    for name in names:
        info = frame.fields.get(name)
        if info is None:
            close = difflib.get_close_matches(name, list(frame.fields), n=3)
            hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
            if not flag:
                raise UnknownFieldError(name, close)
            raise QuerySpecError(f"{flag}: unknown field {name!r}{hint}")
        if info.type not in NUMERIC:
            raise QuerySpecError(f"{flag} {name!r} holds {info.type.lower()} values, not numbers")


def numeric_fields(frame: Frame, exclude: set[str]) -> list[str]:
    """The numeric fields present in the frame that vary (a constant has no trend)."""
    names = [n for n, f in frame.fields.items() if f.type in NUMERIC and n not in exclude]
    if not names:
        return []
    query, params = frame.rows([exp.EQ(this=exp.Min(this=q.col(n)), expression=exp.Max(this=q.col(n))) for n in names])
    row = frame.backend.execute(query, params).rows[0]
    return [n for n, constant in zip(names, row, strict=True) if constant is False]


def bucket_for(frame: Frame) -> timedelta | None:
    """The smallest bucket giving at most ``MAX_POINTS`` points over the frame's events; None when empty."""
    query, params = frame.rows([exp.Min(this=q.col(TIME_COLUMN)), exp.Max(this=q.col(TIME_COLUMN))])
    lo, hi = frame.backend.execute(query, params).rows[0]
    if lo is None:
        return None
    span = hi - lo
    return next((b for b in BUCKETS if span / b <= MAX_POINTS), BUCKETS[-1])


def load(frame: Frame, measures: dict[str, exp.Expr], by: str | None, bucket: timedelta) -> list[Series]:
    """Every group's series of each measure (name → aggregate), bucketed by ``bucket``."""
    us = int(bucket.total_seconds() * 1_000_000)
    hours = exp.Div(this=exp.Avg(this=exp.TimeToUnix(this=q.col(TIME_COLUMN))), expression=q.num(3600.0))
    items = [q.alias(q.col(by) if by else exp.Null(), "g"), q.alias(hours, "t")]
    items += [q.alias(agg.copy(), f"m{i}") for i, agg in enumerate(measures.values())]
    query, params = frame.rows(items)
    query = query.group_by(
        q.num(1), exp.IntDiv(this=exp.UnixMicros(this=q.col(TIME_COLUMN)), expression=q.num(us)), copy=False
    )
    rows = frame.backend.execute(q.order_by(query, q.nulls_last(q.num(1)), q.num(2)), params).rows
    out: list[Series] = []
    names = list(measures)
    start = 0
    for i in range(1, len(rows) + 1):
        if i == len(rows) or rows[i][0] != rows[start][0]:
            block = np.array([r[1:] for r in rows[start:i]], dtype=np.float64)
            out.append(Series(rows[start][0], block[:, 0], {n: block[:, k + 1] for k, n in enumerate(names)}))
            start = i
    return out


def labels(frame: Frame, by: str, exclude: set[str]) -> dict[Any, dict[str, Any]]:
    """Each group's labels: the text fields that hold one value within every group and
    differ between groups (kernel, version, region…)."""
    names = [n for n, f in frame.fields.items() if f.type not in NUMERIC and n not in exclude and n != by]
    names = [n for n in names if frame.fields[n].type != "TIMESTAMP"]
    if not names:
        return {}
    items: list[exp.Expr] = [q.col(by)]
    for n in names:
        items += [exp.Count(this=exp.Distinct(expressions=[q.col(n)])), exp.AnyValue(this=q.col(n))]
    query, params = frame.rows(items)
    rows = frame.backend.execute(query.group_by(q.num(1), copy=False), params).rows
    keep = []
    for k, name in enumerate(names):
        single = all(r[1 + 2 * k] <= 1 for r in rows)
        values = {r[2 + 2 * k] for r in rows}
        if single and len(values) > 1:
            keep.append((k, name))
    return {r[0]: {name: r[2 + 2 * k] for k, name in keep} for r in rows}
