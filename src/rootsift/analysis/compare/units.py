"""Metrics per unit (host), and extremes over events."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import stats
from rootsift.analysis.compare.cohorts import relative, rounded, weight_of
from rootsift.analysis.compare.metrics import Metric
from rootsift.analysis.frame import Frame
from rootsift.errors import QuerySpecError


def extreme(fa: Frame, fb: Frame, metric: Metric) -> dict[str, Any]:
    col = q.col(str(metric.field))
    vals = []
    for frame in (fa, fb):
        query, params = frame.rows([exp.Count(this=col.copy()), _extreme(metric, col.copy())])
        vals.append(frame.backend.execute(query, params).rows[0])
    (n_a, a), (n_b, b) = vals
    return {
        "kind": metric.kind,
        "field": metric.field,
        "unit": "event",
        "n_a": n_a,
        "n_b": n_b,
        "a": rounded(a),
        "b": rounded(b),
        "relative_change": relative(a, b) if a is not None and b is not None else math.nan,
        "ci": [math.nan, math.nan],
        "p_value": 1.0,
        "test": "none: one extreme per cohort cannot be tested (give --per FIELD to compare units)",
    }


def _extreme(metric: Metric, col: exp.Expr) -> exp.Expr:
    """``max(col)`` or ``min(col)``: the metric kinds that are one extreme."""
    if metric.kind not in ("max", "min"):
        raise QuerySpecError(f"--metrics {metric.text}: {metric.kind} cannot be compared per unit")
    return exp.Max(this=col) if metric.kind == "max" else exp.Min(this=col)


def per_unit(fa: Frame, fb: Frame, metric: Metric, unit: str, level: float) -> dict[str, Any]:
    """The metric per unit (host), then the units compared. Positive quantities (memory,
    latency) vary across hosts by factors, so the test is on the logarithms (Behrens–Fisher): the
    change is the ratio of geometric means, with its interval. With a few hosts per
    cohort a rank test cannot reach significance at all (4 against 4: p ≥ 0.029)."""
    col = q.col(str(metric.field))
    if metric.kind == "quantile":
        agg: exp.Expr = q.quantile_cont(col, float(metric.q or 0))
    elif metric.kind == "avg":  # each event counts as its sample rate
        w = weight_of(fa)
        agg = exp.Div(this=exp.Sum(this=q.product([w, col])), expression=exp.Sum(this=w.copy()))
    elif metric.kind == "slope":
        hours = exp.Div(this=exp.TimeToUnix(this=q.col("timestamp")), expression=q.num(3600.0))
        agg = exp.RegrSlope(this=col, expression=hours)
    else:
        agg = _extreme(metric, col)
    values = {}
    for name, frame in (("a", fa), ("b", fb)):
        query, params = frame.rows([q.alias(q.col(unit), "u"), q.alias(agg.copy(), "v")], q.not_null(col.copy()))
        rows = frame.backend.execute(query.group_by(q.num(1), copy=False), params).rows
        values[name] = {r[0]: float(r[1]) for r in rows if r[1] is not None}
    out: dict[str, Any] = {
        "kind": metric.kind,
        "field": metric.field,
        "unit": unit,
        "n_a": len(values["a"]),
        "n_b": len(values["b"]),
        "units_a": {str(k): rounded(v) for k, v in sorted(values["a"].items(), key=lambda kv: str(kv[0]))},
        "units_b": {str(k): rounded(v) for k, v in sorted(values["b"].items(), key=lambda kv: str(kv[0]))},
    }
    return out | compare_units(values["a"], values["b"], level, unit, f"one {metric.kind} per {unit}")


def compare_units(
    a: dict[Any, float], b: dict[Any, float], level: float, unit: str = "unit", what: str = "one value per unit"
) -> dict[str, Any]:
    """The units' values of cohort A against B's (``a``, ``b``: unit → value), at ``level``.

    Ratio scale: when every value is positive (bytes, durations, counts, rates), the
    test is on the logarithms, and the change is the ratio of geometric means with
    its interval (``scale`` ``log``): hosts vary by factors, and a difference of logs is
    the same whichever host is large. With any value at or below zero (a slope that can
    fall), it is on the values themselves, the difference of means relative to A's
    (``scale`` ``linear``). The test is Behrens–Fisher's (``stats.behrens_fisher``):
    the cohorts' spreads may differ by any factor, and Welch's approximation rejects up
    to 2.6 times its level with three hosts against five or ten. When both cohorts hold the same units
    (before and after a deploy), each unit is compared with itself: a paired t on the
    differences, so the units' own levels drop out. Fewer than two units a side:
    nothing is tested. ``bench/compare_calibration.py --part hosts`` measures the A/A
    rate."""
    finite = {name: {k: v for k, v in got.items() if math.isfinite(v)} for name, got in (("a", a), ("b", b))}
    left_out = len(a) + len(b) - len(finite["a"]) - len(finite["b"])
    note = {"note": f"{left_out} {unit}s left out: their value is not a finite number"} if left_out else {}
    a, b = finite["a"], finite["b"]
    xa, xb = np.array(list(a.values()), dtype=float), np.array(list(b.values()), dtype=float)
    if xa.size < 2 or xb.size < 2:
        return note | {"a": None, "b": None, "relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    logs = bool((xa > 0).all() and (xb > 0).all())
    paired = set(a) == set(b)  # the same hosts before and after
    if paired:
        keys = sorted(a, key=str)
        xa = np.array([a[k] for k in keys], dtype=float)
        xb = np.array([b[k] for k in keys], dtype=float)
    ya, yb = (np.log(xa), np.log(xb)) if logs else (xa, xb)
    diff = float(yb.mean() - ya.mean())
    if paired:  # each host against itself: the hosts' own levels drop out
        d = yb - ya
        p, lo, hi = stats.t_interval(diff, float(d.std(ddof=1)) / math.sqrt(d.size), float(d.size - 1), level)
    else:  # Behrens–Fisher: Welch's approximation rejects too often with a few units a side
        se_a, se_b = math.sqrt(float(ya.var(ddof=1)) / ya.size), math.sqrt(float(yb.var(ddof=1)) / yb.size)
        p, lo, hi = stats.behrens_fisher(diff, se_a, ya.size - 1, se_b, yb.size - 1, level)
    how = f"paired t (the same {unit}s in both)" if paired else "Behrens–Fisher test"
    if logs:
        mean_a, mean_b = float(np.exp(ya.mean())), float(np.exp(yb.mean()))
        change, ci = math.expm1(diff), [math.expm1(lo), math.expm1(hi)]
        test = f"{how} on the logarithms of {what} (ratio of geometric means)"
    else:
        mean_a, mean_b = float(ya.mean()), float(yb.mean())
        base = abs(mean_a) or 1.0
        change, ci = diff / base, [lo / base, hi / base]
        test = f"{how} on {what} (difference of means: a value is not above zero)"
    return note | {
        "paired": paired,
        "scale": "log" if logs else "linear",
        "a": rounded(mean_a),
        "b": rounded(mean_b),
        "absolute_change": rounded(mean_b - mean_a),
        "relative_change": change,
        "ci": ci,
        "p_value": p,
        "test": test,
    }
