"""The cohorts compared: their frames, totals and weights, and how numbers are reported."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import stats
from rootsift.analysis.findings import iso
from rootsift.analysis.frame import Frame, row_weights
from rootsift.store.duckdb import DuckDBBackend


def and_filters(*parts: str | None) -> str | None:
    kept = [f"({p})" for p in parts if p and p.strip()]
    return " and ".join(kept) or None


def time_text(frame: Frame) -> str | None:
    """A cohort's time range as a filter (explain's baseline is a filter)."""
    bits = []
    if frame.start is not None:
        bits.append(f'timestamp >= "{iso(frame.start)}"')
    if frame.end is not None:
        bits.append(f'timestamp < "{iso(frame.end)}"')
    return " and ".join(bits) or None


def cohort(
    backend: DuckDBBackend,
    dataset: str,
    where: str | None,
    text: str | None,
    rng: tuple[datetime | None, datetime | None],
    count_field: str | None = None,
) -> Frame:
    return Frame(backend, dataset, rng[0], rng[1], and_filters(where, text), count_field=count_field)


def describe(frame: Frame, text: str | None) -> dict[str, Any]:
    return {"where": text, "from": iso(frame.start), "to": iso(frame.end)}


def totals(frame: Frame) -> tuple[int, float, float]:
    """(stored events, weighted events, Kish's effective size) of the cohort: the last two
    are the count when events carry no sample rate or count."""
    query, params = frame.rows([q.count_rows(), exp.Sum(this=weight_of(frame)), exp.Sum(this=squares_of(frame))])
    n, total, squares = frame.backend.execute(query, params).rows[0]
    return int(n), float(total or 0), stats.effective_size(float(total or 0), float(squares or 0))


def weight_of(frame: Frame) -> exp.Expr:
    """The events a row stands for: its sample rate times its count (r·n), or 1."""
    if not frame.row_weights:
        return q.num(1)
    return row_weights(frame.weight, frame.count, 1)[0]


def squares_of(frame: Frame) -> exp.Expr:
    """The sum of the squared weights of the events a row observed (n·r²): summed over a
    cohort with ``weight_of``, Kish's effective size counts a count row as n observations
    and a sampled event as one."""
    if not frame.row_weights:
        return q.num(1)
    return row_weights(frame.weight, frame.count, 1)[1]


def finite(x: float | None) -> float | None:
    """A number for JSON: None for missing, NaN or infinite."""
    out = rounded(x)
    return None if out is None or math.isinf(out) else out


def relative(a: float | None, b: float | None) -> float:
    if a is None or b is None:
        return math.nan
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return (b - a) / abs(a)


def rounded(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return x
    return float(f"{x:.6g}")
