"""``shift(field)``: the whole distribution, as Kayenta compares it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from rootsift.analysis import distributions as dist
from rootsift.analysis import stats
from rootsift.analysis.compare.bins import STEPS
from rootsift.analysis.compare.cohorts import rounded
from rootsift.analysis.compare.fields import Fields
from rootsift.analysis.compare.metrics import Metric


def shift(fields: Fields, metric: Metric, level: float) -> dict[str, Any]:
    """The whole distribution's shift, as Kayenta measures it: Mann–Whitney, and the
    Hodges–Lehmann estimate (the median of every B/A ratio) with Moses' interval, on the
    log scale: a ratio. From the binned counts: the distribution of pairwise differences
    of bins is the convolution of the two histograms, so nothing is enumerated."""
    (ka, ca), (kb, cb) = fields.binned(str(metric.field))
    out: dict[str, Any] = {"kind": "shift", "field": metric.field, "unit": "event"}
    pa, pb = ka > 0, kb > 0  # positive values (the log scale); zeros are left out
    ka, ca, kb, cb = ka[pa], ca[pa], kb[pb], cb[pb]
    n_a, n_b = round(float(ca.sum())), round(float(cb.sum()))
    out.update(n_a=n_a, n_b=n_b)
    if n_a < 2 or n_b < 2:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    lo_k = int(min(ka.min(), kb.min()))
    size = int(max(ka.max(), kb.max())) - lo_k + 1
    ha, hb = np.zeros(size), np.zeros(size)
    ha[ka - lo_k], hb[kb - lo_k] = ca, cb
    _, p, _ = stats.binned_rank_test(hb, ha)
    diffs = np.convolve(hb, ha[::-1])  # index i: a difference of i - (size - 1) bins
    cum = np.cumsum(diffs)
    total = float(cum[-1])

    def at(count: float) -> float:  # the difference, in bins, at this rank
        return float(np.searchsorted(cum, min(max(count, 1.0), total)) - (size - 1))

    z = float(dist.norm_ppf(1 - level / 2))
    k = n_a * n_b / 2 - z * math.sqrt(n_a * n_b * (n_a + n_b + 1) / 12)
    middle, low, high = at(total / 2), at(k), at(total - k + 1)
    ratio = lambda bins: math.exp2(bins / STEPS) - 1  # noqa: E731
    return out | {
        "a": rounded(float(np.exp2(((ka - 1_000_000 + 0.5) / STEPS) @ ca / ca.sum()))),
        "b": rounded(float(np.exp2(((kb - 1_000_000 + 0.5) / STEPS) @ cb / cb.sum()))),
        "relative_change": ratio(middle),
        "ci": [ratio(low), ratio(high)] if k >= 1 else [math.nan, math.nan],
        "p_value": p,
        "test": "Mann-Whitney; Hodges-Lehmann ratio with Moses' interval (bins of 0.54 %)",
    }
