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
    latency) vary across hosts by factors, so the test is Welch's on the logarithms: the
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
    xa, xb = np.array(list(values["a"].values())), np.array(list(values["b"].values()))
    out: dict[str, Any] = {
        "kind": metric.kind,
        "field": metric.field,
        "unit": unit,
        "n_a": int(xa.size),
        "n_b": int(xb.size),
        "units_a": {str(k): rounded(v) for k, v in sorted(values["a"].items(), key=lambda kv: str(kv[0]))},
        "units_b": {str(k): rounded(v) for k, v in sorted(values["b"].items(), key=lambda kv: str(kv[0]))},
    }
    if xa.size < 2 or xb.size < 2:
        return out | {"a": None, "b": None, "relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    logs = bool((xa > 0).all() and (xb > 0).all())
    paired = set(values["a"]) == set(values["b"])  # the same hosts before and after
    if paired:
        keys = sorted(values["a"], key=str)
        xa = np.array([values["a"][k] for k in keys])
        xb = np.array([values["b"][k] for k in keys])
    ya, yb = (np.log(xa), np.log(xb)) if logs else (xa, xb)
    diff = float(yb.mean() - ya.mean())
    if paired:  # each host against itself: the hosts' own levels drop out
        d = yb - ya
        se, df = float(d.std(ddof=1)) / math.sqrt(d.size), float(d.size - 1)
    else:
        se, df = stats.welch(float(ya.var(ddof=1)), xa.size, float(yb.var(ddof=1)), xb.size)
    p, lo, hi = stats.t_interval(diff, se, df, level)
    how = f"paired t (the same {unit}s in both)" if paired else "Welch's t"
    if logs:
        a, b = float(np.exp(ya.mean())), float(np.exp(yb.mean()))
        change, ci = math.expm1(diff), [math.expm1(lo), math.expm1(hi)]
        test = f"{how} on the logarithms of one {metric.kind} per {unit} (ratio of geometric means)"
    else:
        a, b = float(ya.mean()), float(yb.mean())
        base = abs(a) or 1.0
        change, ci = diff / base, [lo / base, hi / base]
        test = f"{how} on one {metric.kind} per {unit} (difference of means)"
    return out | {
        "paired": paired,
        "a": rounded(a),
        "b": rounded(b),
        "absolute_change": rounded(b - a),
        "relative_change": change,
        "ci": ci,
        "p_value": p,
        "test": test,
    }
