"""``pNN(field)``: the ratio of quantiles, with its curve, spread and shape."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rootsift.analysis import distributions as dist
from rootsift.analysis.compare.bins import log_interval
from rootsift.analysis.compare.cohorts import relative, rounded
from rootsift.analysis.compare.fields import CURVE, SPREAD, Fields
from rootsift.analysis.compare.metrics import Metric

TAIL_EVENTS = 10
"""Events needed beyond a quantile, in each cohort, before it is tested: n · (1 − q) for
an upper quantile (n · q for a lower one). With fewer, the quantile rests on a handful
of the largest values and its bootstrap interval is too narrow (p99.9 of 100–1,000
events called 8–21 % of A/A splits a change at 5 %); the calibration is in
docs/compare.md and ADR 0012."""


def tail_events(q: float, n: float) -> float:
    """The events beyond quantile q of n (below it, for q under one half), rounded so that
    p90 of 100 events has 10 (1 − 0.9 is not 0.1 in binary)."""
    return round(n * min(q, 1 - q), 9)


def quantile(fields: Fields, metric: Metric, level: float) -> dict[str, Any]:
    """A quantile of each cohort, their ratio and its interval, the field's curve, spread
    and shape; ``enough_events`` false (and a note saying how many are needed) when a
    cohort has fewer than ``TAIL_EVENTS`` events beyond the quantile: not tested."""
    qs, (n_a, q_a), (n_b, q_b), draws_a, draws_b = fields.quantiles(str(metric.field))
    binned = dict(zip("ab", fields.binned(str(metric.field)), strict=True))
    q = float(metric.q or 0.5)
    out: dict[str, Any] = {"kind": "quantile", "field": metric.field, "q": q, "unit": "event", "n_a": n_a, "n_b": n_b}
    a_value, b_value = q_a.get(q), q_b.get(q)
    out.update(a=rounded(a_value), b=rounded(b_value))
    if not n_a or not n_b or a_value is None or b_value is None or draws_a is None:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(draws_a > 0, draws_b / draws_a, np.nan)
    sizes = [float(binned[c][1].sum()) for c in "ab"]  # effective sizes with sample rates
    out["enough_events"] = min(tail_events(q, n) for n in sizes) >= TAIL_EVENTS
    if not out["enough_events"]:
        needed = math.ceil(TAIL_EVENTS / min(q, 1 - q))
        out["note"] = (
            f"{TAIL_EVENTS} events beyond p{100 * q:g} in each cohort are needed to test it "
            f"({needed:,} events per cohort); A has {round(sizes[0]):,}, B has {round(sizes[1]):,}"
        )
    curve = []
    for k, qq in enumerate(qs):
        if qq not in CURVE and qq != q:
            continue
        av, bv = q_a[qq], q_b[qq]
        change = relative(av, bv)
        lo, hi, p = log_interval(bv / av if av and bv and av > 0 and bv > 0 else math.nan, ratios[:, k], level)
        curve.append(
            {
                "q": qq,
                "a": rounded(av),
                "b": rounded(bv),
                "relative_change": rounded(change),
                "ci": [rounded(lo), rounded(hi)],
                "p_value": p,
                "enough_events": min(tail_events(qq, n) for n in sizes) >= TAIL_EVENTS,
            }
        )
        if qq == q:
            out.update(absolute_change=rounded(bv - av), relative_change=change, ci=[float(lo), float(hi)], p_value=p)
    out["test"] = "ratio of quantiles, normal on the log scale with a bootstrap standard error"
    out["curve"] = curve
    out["spread"] = _spread(q_a, q_b, draws_a, draws_b, qs, level)
    out["shape"] = _shape(binned["a"], binned["b"])
    return out


def _spread(
    q_a: dict[float, Any], q_b: dict[float, Any], da: np.ndarray, db: np.ndarray, qs: list[float], level: float
) -> dict[str, Any] | None:
    """The width of the distribution, log(p90 / p10), B's against A's, with a bootstrap
    interval: a change in variance that the median does not show."""
    lo_q, hi_q = SPREAD
    if not all(v and v > 0 for v in (q_a[lo_q], q_a[hi_q], q_b[lo_q], q_b[hi_q])):
        return None
    i, j = qs.index(lo_q), qs.index(hi_q)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.log(db[:, j] / db[:, i]) / np.log(da[:, j] / da[:, i])
    width_a, width_b = math.log(q_a[hi_q] / q_a[lo_q]), math.log(q_b[hi_q] / q_b[lo_q])
    if width_a <= 0 or width_b <= 0:
        return None
    lo, hi, p = log_interval(width_b / width_a, boot, level)
    return {
        "measure": "log(p90 / p10)",
        "a": rounded(width_a),
        "b": rounded(width_b),
        "relative_change": rounded(width_b / width_a - 1),
        "ci": [rounded(lo), rounded(hi)],
        "p_value": p,
    }


def _shape(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """Kolmogorov–Smirnov between the two binned distributions: any difference in shape
    (bins of 0.54 % make it slightly conservative)."""
    keys = np.union1d(a[0], b[0])
    cdf = []
    for k, c in (a, b):
        counts = np.zeros(keys.size)
        counts[np.searchsorted(keys, k)] = c
        cdf.append(np.cumsum(counts) / counts.sum())
    d = float(np.abs(cdf[0] - cdf[1]).max())
    n_a, n_b = float(a[1].sum()), float(b[1].sum())
    p = float(dist.kstwobign_sf(d * math.sqrt(n_a * n_b / (n_a + n_b))))
    return {"test": "Kolmogorov-Smirnov (binned)", "statistic": rounded(d), "p_value": float(f"{p:.4g}")}
