"""The tail of a step between two segments' means when the noise is not normal: the
saddlepoint approximation (Lugannani–Rice) of the difference of two means of draws from
the noise's own empirical distribution (Daniels 1954; Davison & Hinkley 1988, the
bootstrap distribution's saddlepoint).

Why: the detector's scores are normal scores of ranks, normal only when values rarely tie.
A count of rare errors (mostly 0, now and then 1 or 2) has two or three distinct scores,
far from normal: a spell of three 1s among zeros is a mean of 2 σ over three buckets, z ≈ 7
by the normal test (p ≈ 10⁻¹²), yet with 1s in 5 % of buckets three in a row happen once in
8,000 positions. The normal test claimed such spells in 11–43 % of no-change series of
60–1,000 buckets (Poisson, 0.05 a bucket). With the noise's empirical distribution the tail is its own: for noise
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
from rootsift.analysis.stats import brentq


class Noise:
    """The empirical distribution of ``noise`` (centred; non-finite values left out), taken
    once for every step tested against it."""

    def __init__(self, noise: np.ndarray) -> None:
        r = np.asarray(noise, dtype=np.float64)
        r = r[np.isfinite(r)]
        if len(r) == 0:
            r = np.zeros(1)
        self.values, counts = np.unique(r - r.mean(), return_counts=True)
        self.logw = np.log(counts / len(r))

    def _moments(self, u: float) -> tuple[float, float, float]:
        """K(u), K'(u), K''(u) of one draw."""
        a = u * self.values + self.logw
        top = float(a.max())
        e = np.exp(a - top)
        s = float(e.sum())
        mean = float(e @ self.values) / s
        var = max(float(e @ (self.values * self.values)) / s - mean * mean, 0.0)
        return top + math.log(s), mean, var

    def tail(self, d: float, first: float, second: float) -> float:
        """P(mean of ``first`` draws − mean of ``second`` draws ≥ ``d``); the sizes may be
        fractional (effective sizes). Without a lattice's continuity correction: on a
        two-point noise it is up to 3–4 times under the binomial tail (three 1s in three
        buckets: exact)."""
        values, logw = self.values, self.logw
        if len(values) < 2 or d <= 0 or first <= 0 or second <= 0:
            return 1.0
        if d >= (values[-1] - values[0]) * (1 - 1e-12):  # every draw at its extreme
            return float(math.exp(first * logw[-1] + second * logw[0]))

        def cgf(t: float) -> tuple[float, float, float]:
            """K, K', K'' of the difference at ``t``."""
            k1, m1, v1 = self._moments(t / first)
            k2, m2, v2 = self._moments(-t / second)
            return first * k1 + second * k2, m1 - m2, v1 / first + v2 / second

        hi = 1.0
        while cgf(hi)[1] < d and hi < 1e12:
            hi *= 2
        t = brentq(lambda t: cgf(t)[1] - d, 0.0, hi)  # K' rises with t: the saddlepoint
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


def step_tail(noise: np.ndarray, d: float, first: float, second: float) -> float:
    """``Noise(noise).tail(d, first, second)``: one step against the noise."""
    return Noise(noise).tail(d, first, second)
