"""The tail of a step between two segments' means when the noise is not normal: the
saddlepoint approximation (Lugannani–Rice) of the difference of two means of draws from
the noise's own empirical distribution (Daniels 1954; Davison & Hinkley 1988, the
bootstrap distribution's saddlepoint).

Why: the detector's scores are normal scores of ranks, normal only when values rarely tie.
A count of rare errors (mostly 0, now and then 1 or 2) has two or three distinct scores,
far from normal: a spell of three 1s among zeros is a mean of 2 σ over three buckets, z ≈ 7
by the normal test (p ≈ 10⁻¹²), yet with 1s in 5 % of buckets three in a row happen once in
8,000 positions. The normal test claimed such spells in 30–80 % of no-change series of
1,000 buckets. With the noise's empirical distribution the tail is its own: for noise
near normal the saddlepoint is the normal tail, and for a two-point noise it is close to
the binomial's.

Serial correlation enters as in the normal test: each side counts as ``m · σ²/λ`` draws
(λ the long-run variance), the sizes for which a mean of independent draws has the
variance of the correlated mean.
"""

from __future__ import annotations

import math

import numpy as np

from rootsift.analysis import distributions as dist

_ITERATIONS = 80


def step_tail(noise: np.ndarray, d: float, first: float, second: float) -> float:
    """P(mean of ``first`` draws − mean of ``second`` draws ≥ ``d``), each draw from the
    empirical distribution of ``noise`` (centred here); the sizes may be fractional
    (effective sizes). Without a lattice's continuity correction: on a two-point noise it
    is up to 3–4 times under the binomial tail (three 1s in three buckets: exact)."""
    r = np.asarray(noise, dtype=np.float64)
    r = r[np.isfinite(r)]
    if len(r) < 2 or d <= 0 or first <= 0 or second <= 0:
        return 1.0
    values, counts = np.unique(r - r.mean(), return_counts=True)
    if len(values) < 2:
        return 1.0
    logw = np.log(counts / counts.sum())
    lo_v, hi_v = float(values[0]), float(values[-1])
    if d >= (hi_v - lo_v) * (1 - 1e-12):  # every draw at its extreme: the product of shares
        return float(math.exp(first * logw[-1] + second * logw[0]))

    def moments(u: float) -> tuple[float, float, float]:
        """K(u), K'(u), K''(u) of one draw."""
        a = u * values + logw
        top = float(a.max())
        e = np.exp(a - top)
        s = float(e.sum())
        mean = float(e @ values) / s
        var = max(float(e @ (values * values)) / s - mean * mean, 0.0)
        return top + math.log(s), mean, var

    def cgf(t: float) -> tuple[float, float, float]:
        """K, K', K'' of the difference at ``t``."""
        k1, m1, v1 = moments(t / first)
        k2, m2, v2 = moments(-t / second)
        return first * k1 + second * k2, m1 - m2, v1 / first + v2 / second

    lo, hi = 0.0, 1.0
    while cgf(hi)[1] < d and hi < 1e12:
        lo, hi = hi, hi * 2
    for _ in range(_ITERATIONS):  # K' rises with t: bisection to the saddlepoint
        mid = (lo + hi) / 2
        if cgf(mid)[1] < d:
            lo = mid
        else:
            hi = mid
    t = (lo + hi) / 2
    k, _, k2 = cgf(t)
    exponent = t * d - k
    if exponent <= 0 or k2 <= 0:
        return 1.0
    w = math.sqrt(2 * exponent)
    u = t * math.sqrt(k2)
    if w < 1e-6 or u < 1e-6:
        return float(dist.norm_sf(w))
    p = float(dist.norm_sf(w)) + math.exp(-w * w / 2) / math.sqrt(2 * math.pi) * (1 / u - 1 / w)
    chernoff = math.exp(-exponent)  # an upper bound the approximation can cross far out
    return min(p if p > 0 else chernoff, chernoff, 1.0)
