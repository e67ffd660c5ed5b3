"""The Mann–Whitney U test's p-value, the same float as ``scipy.stats.mannwhitneyu`` (its
default: ``method='auto'``, continuity corrected) without importing scipy.stats (0.5–1 s
of CPU per process; analysis/distributions.py): ``changes --events`` and ``investigate``
with change events judge each change event with it.

The same steps as scipy's: average ranks of the two samples together, U of the first,
then the exact null distribution when either sample has at most 8 values and none are
tied (the frequencies of each U by the recurrence scipy uses), the normal approximation
with the tie correction otherwise. ``tests/test_distributions.py`` compares it with scipy
on samples of every size, with and without ties.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

EXACT_AT_MOST = 8
"""Either sample this small, and no ties: the exact distribution (scipy's rule)."""


def mannwhitneyu_p(x: Any, y: Any, alternative: str = "two-sided") -> float:
    """``scipy.stats.mannwhitneyu(x, y, alternative=alternative).pvalue`` for 1-d samples
    (``alternative``: two-sided, less or greater). Example: ``mannwhitneyu_p(after,
    before, "greater")`` is small when ``after`` tends to be larger."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or y.ndim != 1 or not x.size or not y.size or np.isnan(x).any() or np.isnan(y).any():
        from scipy import stats  # what scipy does with these (errors, NaN): its own business

        return float(stats.mannwhitneyu(x, y, alternative=alternative).pvalue)
    n1, n2 = x.shape[-1], y.shape[-1]
    xy = np.concatenate([x, y])
    order = np.argsort(xy, kind="stable")
    s = xy[order]
    first = np.concatenate([[True], s[:-1] != s[1:]])
    starts = np.flatnonzero(first)
    counts = np.diff(starts, append=len(s))
    sorted_ranks = np.repeat((starts + 1) + (counts.astype(np.float64) - 1) / 2, counts)
    ranks = np.empty(len(s))
    ranks[order] = sorted_ranks
    r1 = np.sum(ranks[:n1])
    u1 = r1 - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    if alternative == "greater":
        u, f = u1, 1
    elif alternative == "less":
        u, f = u2, 1
    else:
        u, f = np.maximum(u1, u2), 2
    if (n1 > EXACT_AT_MOST and n2 > EXACT_AT_MOST) or (counts > 1).any():
        tie_term = np.sum(counts.astype(np.float64) ** 3 - counts)
        n = n1 + n2
        sd = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        numerator = u - n1 * n2 / 2
        numerator -= 0.5
        with np.errstate(divide="ignore", invalid="ignore"):
            p = special.ndtr(-(numerator / sd))
    else:
        p = np.asarray(_exact_sf(min(n1, n2), max(n1, n2), np.asarray(u, np.int64)), dtype=np.float64)
    p *= f
    return float(np.clip(p, 0.0, 1.0))


def _exact_sf(n1: int, n2: int, k: np.ndarray) -> Any:
    """P(U ≥ k) under the null, n1 ≤ n2: scipy's ``_MWU.sf``."""
    kc = np.asarray(n1 * n2 - k)
    below = k < kc
    if np.any(below):
        kc[below] = k[below]
        freqs = _frequencies(n1, n2, int(np.max(kc)))
        cdfs = np.asarray(np.cumsum(freqs)[kc])
        cdfs[below] = 1.0 - cdfs[below] + freqs[kc[below]]
    else:
        cdfs = np.asarray(np.cumsum(_frequencies(n1, n2, int(np.max(kc))))[kc])
    return cdfs[()]


def _frequencies(n1: int, n2: int, most: int) -> np.ndarray:
    """P(U = u) for u = 0 … ``most``: the number of arrangements with each U by the
    recurrence u·c(u) = Σ σ(j)·c(u − j), over C(n1 + n2, n1) (scipy's, step for step)."""
    sigma = np.zeros(most + 1, dtype=int)
    for d in np.arange(1, n1 + 1):
        sigma[np.arange(d, most + 1, d)] += d
    for d in np.arange(n2 + 1, n2 + n1 + 1):
        sigma[np.arange(d, most + 1, d)] -= d
    sigma = sigma[1:]
    ways = np.zeros(most + 1, dtype=np.uint64)
    whole = True
    ways[0] = 1
    for u in np.arange(1, most + 1):
        value = np.dot(ways[:u], sigma[u - 1 :: -1]) / u
        if value > np.iinfo(np.uint64).max and whole:
            ways = ways.astype(float)
            whole = False
        ways[u] = value
    return np.asarray(ways / special.binom(n1 + n2, n1))
