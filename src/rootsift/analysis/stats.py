"""The statistics behind the analyses, vectorised over many field/value pairs at once.

- **Shares** (is this value more common in the selection than in the baseline?): the
  exact conditional test of a 2×2 table, i.e. the hypergeometric distribution (Fisher's
  test), two-sided as twice the smaller tail. Exact at any count, so a selection of
  twelve events is judged as fairly as one of a million.
- **Weights** (sample rates): counts are scaled to Kish's effective sample size
  ``(Σw)² / Σw²`` before testing, so a thousand events that stand for a million are
  not taken as a million observations; for a value whose own events are weighted more
  unevenly than their group's, its own (smaller) effective size sets the scale.
- **Distributions** (did a measure shift?): the Mann–Whitney U test on log-spaced bins
  (values within a bin count as ties, with the tie correction), reported as Cliff's
  delta ``P(sel > base) − P(sel < base)``, which lives on the same −1…1 scale as a
  difference of shares.
- **Many tests**: Benjamini–Hochberg q-values over every pair tested in one run.
- **Score**: the effect (difference of shares, or Cliff's delta) shrunk by 1.96
  standard errors toward zero: the smallest effect the data support, so a large
  effect on three events does not outrank a solid one on three thousand.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray
from scipy import special

from rootsift.analysis import distributions as dist

Z95 = 1.959963984540054
Array = NDArray[np.float64]


def effective_size(weight_sum: float, weight_sq_sum: float) -> float:
    """Kish's effective sample size of a weighted sample (the count itself when unweighted)."""
    return weight_sum * weight_sum / weight_sq_sum if weight_sq_sum > 0 else 0.0


def share_test(a: Array, b: Array, n_sel: float | Array, n_base: float | Array) -> Array:
    """Two-sided p-values that values with ``a`` of ``n_sel`` selected events and ``b`` of
    ``n_base`` baseline events are equally common in both (hypergeometric, exact).

    Counts may be effective (non-integer) counts: they are rounded first.
    """
    a_i = np.rint(np.asarray(a, dtype=np.float64))
    b_i = np.rint(np.asarray(b, dtype=np.float64))
    n1 = np.rint(np.asarray(n_sel, dtype=np.float64))
    n0 = np.rint(np.asarray(n_base, dtype=np.float64))
    a_i = np.clip(a_i, 0, n1)
    b_i = np.clip(b_i, 0, n0)
    total = n1 + n0
    with_value = a_i + b_i
    upper = dist.hypergeom_sf(a_i - 1, total, with_value, n1)
    lower = dist.hypergeom_cdf(a_i, total, with_value, n1)
    p = np.minimum(1.0, 2.0 * np.minimum(upper, lower))
    return np.asarray(np.where(with_value > 0, p, 1.0), dtype=np.float64)


def share_score(p_sel: Array, p_base: Array, n_sel: float | Array, n_base: float | Array) -> tuple[Array, Array]:
    """(difference of shares, score): the score is ``|difference| − 1.96 SE`` floored at 0."""
    diff = p_sel - p_base
    n1 = np.maximum(np.asarray(n_sel, dtype=np.float64), 1.0)
    n0 = np.maximum(np.asarray(n_base, dtype=np.float64), 1.0)
    se = np.sqrt(p_sel * (1 - p_sel) / n1 + p_base * (1 - p_base) / n0)
    return diff, np.maximum(0.0, np.abs(diff) - Z95 * se)


def q_values(p: Array) -> Array:
    """Benjamini–Hochberg adjusted p-values (the false discovery rate at which each is significant)."""
    p = np.asarray(p, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p)
    ranked = p[order] * m / np.arange(1, m + 1)
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(ranked, 1.0)
    return out


def binned_rank_test(sel: Array, base: Array) -> tuple[float, float, float]:
    """Mann–Whitney on counts per ordered bin (equal bins are ties): (Cliff's delta, p, SE of delta).

    ``sel`` and ``base`` are (effective) counts per bin, bins in increasing order of value.
    """
    n1, n0 = float(sel.sum()), float(base.sum())
    if n1 < 1 or n0 < 1:
        return 0.0, 1.0, 1.0
    below = np.cumsum(base) - base  # baseline values in lower bins
    greater = float(np.sum(sel * below))
    ties = float(np.sum(sel * base))
    u = greater + ties / 2
    delta = 2 * u / (n1 * n0) - 1
    t = sel + base
    total = n1 + n0
    tie_term = float(np.sum(t**3 - t)) / (total * (total - 1)) if total > 1 else 0.0
    var_u = n1 * n0 / 12 * ((total + 1) - tie_term)
    if var_u <= 0:
        return delta, 1.0, 1.0
    z = (abs(u - n1 * n0 / 2) - 0.5) / np.sqrt(var_u)  # continuity correction
    p = float(2 * dist.norm_sf(max(z, 0.0)))
    return delta, min(p, 1.0), float(2 * np.sqrt(var_u) / (n1 * n0))


def binned_quantiles(counts: Array, lows: Array, highs: Array, qs: tuple[float, ...]) -> list[float | None]:
    """Quantiles of a distribution given as counts per bin [low, high), interpolated in the bin."""
    total = float(counts.sum())
    if total <= 0:
        return [None for _ in qs]
    cum = np.cumsum(counts)
    out: list[float | None] = []
    for q in qs:
        i = int(np.searchsorted(cum, q * total, side="left"))
        i = min(i, len(counts) - 1)
        before = cum[i] - counts[i]
        frac = (q * total - before) / counts[i] if counts[i] > 0 else 0.0
        lo, hi = float(lows[i]), float(highs[i])
        if lo > 0 and hi > lo:  # log-spaced bins: interpolate geometrically
            out.append(lo * (hi / lo) ** frac)
        else:
            out.append(lo + (hi - lo) * frac)
    return out


def welch(var_a: float, n_a: float, var_b: float, n_b: float) -> tuple[float, float]:
    """(standard error of a difference of two means, Welch–Satterthwaite degrees of freedom)
    from each group's variance and (effective) size."""
    va, vb = var_a / n_a, var_b / n_b
    se = math.sqrt(va + vb)
    return se, (va + vb) ** 2 / (va**2 / max(n_a - 1, 1) + vb**2 / max(n_b - 1, 1) or 1e-300)


def t_interval(diff: float, se: float, df: float, level: float) -> tuple[float, float, float]:
    """(two-sided p, low, high) for a difference with its standard error on ``df`` degrees
    of freedom, the interval at 1 − ``level``; a difference with no error is certain."""
    if se == 0:
        return (0.0 if diff else 1.0), diff, diff
    t = float(dist.t_ppf(1 - level / 2, df))
    return float(2 * dist.t_sf(abs(diff) / se, df)), diff - t * se, diff + t * se


def nonnegative_least_squares(a: Array, b: Array) -> Array:
    """The x ≥ 0 that minimises ‖a·x − b‖ for ``a`` of two columns, as Lawson–Hanson's
    active set reaches it (``scipy.optimize.nnls``, whose import costs 0.5 s of CPU): the
    column most correlated with ``b`` first, the other only when it lowers the residual;
    within 1e-12 of scipy's (tests/test_distributions.py), the same zeros."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    x = np.zeros(2)
    w = a.T @ b
    if not w.max() > 0:
        return x
    j = int(np.argmax(w))
    first, other = a[:, j], a[:, 1 - j]
    x_first = float(first @ b) / float(first @ first)
    if len(b) < 2 or float(other @ (b - first * x_first)) <= 1e-12 * float(np.abs(w).max()):
        x[j] = x_first
        return x
    q, r = np.linalg.qr(a)
    both = np.linalg.solve(r, q.T @ b)
    if both[0] > 0 and both[1] > 0:
        return np.asarray(both, dtype=np.float64)
    x_other = float(other @ b) / float(other @ other)
    if x_other > 0 and float(first @ (b - other * x_other)) <= 0:
        x[1 - j] = x_other
    else:
        x[j] = x_first
    return x


def stratified_share_test(a: Array, n_sel: Array, n_base: Array, with_value: Array) -> float:
    """One-sided p-value that a value is no more common in the selection than in the
    baseline *within* strata (Cochran–Mantel–Haenszel, continuity corrected): per stratum,
    ``a`` selected events of ``n_sel`` and ``n_base`` baseline ones hold the value, which
    ``with_value`` events hold in all. A stratum where every event or none holds the value
    says nothing; with no stratum that says anything the p-value is 1."""
    a, n1, n0, m = (np.asarray(x, dtype=np.float64) for x in (a, n_sel, n_base, with_value))
    total = n1 + n0
    use = (total > 1) & (m > 0) & (m < total)
    if not use.any():
        return 1.0
    a, n1, n0, m, total = a[use], n1[use], n0[use], m[use], total[use]
    expected = n1 * m / total
    var = float(np.sum(n1 * n0 * m * (total - m) / (total * total * (total - 1))))
    if var <= 0:
        return 1.0
    z = (float(np.sum(a - expected)) - 0.5) / math.sqrt(var)
    return float(dist.norm_sf(z))


@functools.cache
def _legendre() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Gauss–Legendre nodes and weights on (0, 1), 256 of them. Made when first needed, not
    at import: an eigenvalue problem through the multi-threaded BLAS, it cost 0.5 s of CPU
    on a loaded 2-core machine in every process that imported this module (investigate
    too, which never needs it)."""
    nodes, weights = np.polynomial.legendre.leggauss(256)
    return (nodes + 1) / 2, weights / 2


def behrens_fisher(
    diff: float, se_a: float, df_a: float, se_b: float, df_b: float, level: float
) -> tuple[float, float, float]:
    """(two-sided p, low, high) for a difference of two means whose standard errors
    ``se_a`` and ``se_b`` carry ``df_a`` and ``df_b`` degrees of freedom (n − 1 each),
    the interval at 1 − ``level``: the Behrens–Fisher test.

    With unequal, unknown variances the statistic d / √(se_a² + se_b²) is referred to
    T = sin θ · T_a + cos θ · T_b, with T_a, T_b independent Student t on df_a, df_b and
    tan θ = se_a / se_b. Welch's single t with Satterthwaite's degrees of freedom is
    an approximation to the same problem that rejects more often than its level with a
    few units a side (3 against 5, spreads 3:1: 6.5 % at 5 %, 2.5 % at 1.25 %); the
    Behrens–Fisher test stays at or below its level for every ratio of the spreads
    (Robinson, Ann. Stat. 1976; ``bench/compare_calibration.py --part hosts``), and is
    Student's t on df_a when B's error is nil. Example: one cohort of three hosts
    against five identical ones, ``behrens_fisher(d, se, 2, 0, 4, 0.05)`` is the t-test
    on 2 degrees of freedom."""
    se = math.hypot(se_a, se_b)
    if se == 0:
        return (0.0 if diff else 1.0), diff, diff
    tail = _BehrensFisherTail(se_a / se, se_b / se, df_a, df_b)
    p = tail(abs(diff) / se)
    low, top = 0.0, float(dist.t_isf(level / 2, min(df_a, df_b)))  # about the heavier t's point
    while tail(top) > level:
        low, top = top, top * 2
    crit = brentq(lambda x: tail(x) - level, low, top, xtol=1e-9)
    return p, diff - crit * se, diff + crit * se


def brentq(f: Callable[[float], float], a: float, b: float, xtol: float = 2e-12) -> float:
    """The root of ``f`` in [a, b] (signs differing at the ends) by Brent's method, step for
    step as ``scipy.optimize.brentq`` takes them (its C loop, rtol 4ε, 100 iterations), so
    the same float, without importing scipy.optimize (0.5 s of CPU)."""
    rtol = 4 * np.finfo(float).eps
    xpre, xcur = float(a), float(b)
    xblk = fblk = spre = scur = 0.0
    fpre, fcur = float(f(xpre)), float(f(xcur))
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    if math.copysign(1, fpre) == math.copysign(1, fcur):
        raise ValueError("f(a) and f(b) must have different signs")
    for _ in range(100):
        if fpre != 0 and fcur != 0 and math.copysign(1, fpre) != math.copysign(1, fcur):
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):  # the best guess is the end nearer the root
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        if abs(spre) > delta and abs(fcur) < abs(fpre):
            if xpre == xblk:  # secant
                stry = -fcur * (xcur - xpre) / (fcur - fpre)
            else:  # inverse quadratic
                dpre = (fpre - fcur) / (xpre - xcur)
                dblk = (fblk - fcur) / (xblk - xcur)
                stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
            if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
                spre, scur = scur, stry
            else:
                spre = scur = sbis
        else:
            spre = scur = sbis
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = float(f(xcur))
    raise RuntimeError("brentq: no convergence in 100 iterations")


class _BehrensFisherTail:
    """x ↦ P(|sin · T_a + cos · T_b| > x): the term with the smaller weight integrated over
    its quantiles (Gauss–Legendre, 256 nodes), the other's tail in closed form."""

    def __init__(self, sin: float, cos: float, df_a: float, df_b: float) -> None:
        (w, outer), (self.big, self.inner) = sorted(((sin, df_a), (cos, df_b)))
        self.u = w * special.stdtrit(outer, _legendre()[0]) if w > 0 else None  # the quantiles of T_outer, scaled

    def __call__(self, x: float) -> float:
        if self.u is None:
            return float(min(1.0, 2 * special.stdtr(self.inner, -x / self.big)))
        tail = special.stdtr(self.inner, (self.u - x) / self.big) + special.stdtr(self.inner, (-x - self.u) / self.big)
        return float(min(1.0, float(np.dot(_legendre()[1], tail))))
