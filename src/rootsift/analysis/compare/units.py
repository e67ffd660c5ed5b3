"""Metrics per unit (host), and extremes over events."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rootsift.analysis import stats
from rootsift.analysis.compare.cohorts import relative, rounded, values_sql, weight_of
from rootsift.analysis.compare.metrics import Metric
from rootsift.analysis.frame import Frame
from rootsift.store.sqltext import ident


def extreme(fa: Frame, fb: Frame, metric: Metric) -> dict[str, Any]:
    col = ident(str(metric.field))
    vals = []
    for frame in (fa, fb):
        sql, params = values_sql(frame, f"count({col}), {metric.kind}({col})")
        vals.append(frame.backend.execute_sql(sql, params).rows[0])
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


def per_unit(fa: Frame, fb: Frame, metric: Metric, unit: str, level: float) -> dict[str, Any]:
    """The metric per unit (host), then the units compared. Positive quantities (memory,
    latency) vary across hosts by factors, so the test is Welch's on the logarithms: the
    change is the ratio of geometric means, with its interval. With a few hosts per
    cohort a rank test cannot reach significance at all (4 against 4: p ≥ 0.029)."""
    col, u = ident(str(metric.field)), ident(unit)
    per_hour = f"regr_slope({col}, epoch({ident('timestamp')}) / 3600.0)"
    w = weight_of(fa)
    mean = f"sum({w} * {col}) / sum({w})"  # each event counts as its sample rate
    agg = {"quantile": f"quantile_cont({col}, {metric.q})", "avg": mean, "slope": per_hour}.get(
        metric.kind, f"{metric.kind}({col})"
    )
    values = {}
    for name, frame in (("a", fa), ("b", fb)):
        sql, params = values_sql(frame, f"{u} AS u, {agg} AS v")
        rows = frame.backend.execute_sql(f"{sql} AND {col} IS NOT NULL GROUP BY 1", params).rows
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
