"""Log-spaced bins of a field's values, and the bootstrap of quantiles from them."""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from rootsift.analysis import distributions as dist
from rootsift.analysis import sql as q
from rootsift.analysis import stats
from rootsift.analysis.compare.cohorts import squares_of, weight_of
from rootsift.analysis.frame import Frame

BOOTSTRAP = 2000
STEPS = 128
"""Log-spaced bins per doubling for the quantile bootstrap: 0.54 % wide."""
"""The spread of a quantile field is log(p90 / p10): its width on a log scale."""
SEED = 20261121
"""The bootstrap's seed: the same data give the same intervals."""


def binned_counts(frame: Frame, field: str) -> tuple[np.ndarray, np.ndarray]:
    """(bin keys, counts) of a field's values in the cohort (``bin_key``). With sample rates
    or counts the counts are effective: each bin's weight, scaled so that they add up to
    Kish's effective size (the shares are the weighted ones, the total what the tests may
    trust). A count row of n adds n to its bin, as n events would."""
    col = q.col(field)
    items = [
        q.alias(bin_key(col), "k"),
        q.count_rows(),
        exp.Sum(this=weight_of(frame)),
        exp.Sum(this=squares_of(frame)),
    ]
    query, params = frame.rows(items, q.not_null(col.copy()))
    rows = frame.backend.execute(query.group_by(q.num(1), copy=False), params).rows
    keys = np.array([r[0] for r in rows], dtype=np.int64)
    if not frame.row_weights:
        return keys, np.array([r[1] for r in rows], dtype=np.int64)
    weights = np.array([float(r[2]) for r in rows])
    eff = stats.effective_size(float(weights.sum()), sum(float(r[3]) for r in rows))
    return keys, weights * (eff / weights.sum()) if weights.sum() > 0 else weights


def bootstrap(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], qs: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    """(BOOTSTRAP × len(qs)) resampled quantiles of A and of B, from binned counts."""
    rng = np.random.default_rng(SEED)
    draws = []
    for keys, counts in (a, b):
        centers = bin_centers(keys)
        order = np.argsort(centers)
        centers, counts = centers[order], counts[order]
        n = max(1, round(float(counts.sum())))  # effective counts need not be whole
        sample = rng.multinomial(n, counts / counts.sum(), size=BOOTSTRAP)
        cum = np.cumsum(sample, axis=1)
        at = np.stack([(cum >= q * n).argmax(axis=1) for q in qs], axis=1)
        draws.append(centers[at])
    return draws[0], draws[1]


def bin_key(x: exp.Expr) -> exp.Expr:
    """Log-spaced bins, ``STEPS`` per doubling: keys ordered, 0 for zero and below."""
    return q.log_bin(x, STEPS, 1_000_000, below=q.num(0))


def bin_centers(keys: np.ndarray) -> np.ndarray:
    mag = keys.astype(np.float64) - 1_000_000
    return np.where(keys > 0, np.exp2((mag + 0.5) / STEPS), 0.0)


def log_interval(ratio: float, boot: np.ndarray, level: float) -> tuple[float, float, float]:
    """(low, high, p) for a ratio estimated exactly, its spread from bootstrap ratios: a
    normal interval on the log scale. The bootstrap's standard error gets the bins'
    rounding added (a uniform error of one bin, for each cohort), so it never claims more
    precision than the bins hold; the normal form reaches the small levels a gate
    watched many times needs, which 2,000 resamples' percentiles cannot."""
    logs = np.log(boot[np.isfinite(boot) & (boot > 0)])
    if not ratio > 0 or logs.size < 10:
        return math.nan, math.nan, 1.0
    rounding = 2 * (math.log(2) / STEPS) ** 2 / 12
    se = math.sqrt(float(logs.var(ddof=1)) + rounding)
    x = math.log(ratio)
    z = float(dist.norm_ppf(1 - level / 2))
    p = float(2 * dist.norm_sf(abs(x) / se))
    return math.expm1(x - z * se), math.expm1(x + z * se), float(f"{p:.4g}")
