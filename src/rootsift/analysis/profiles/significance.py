"""Is a function's change of share more than the noise between profiles?

Each profile is a unit. With at least two profiles on each side, a function's share is
taken in every profile and the two cohorts' mean shares are compared with Welch's t-test,
so the spread between runs of one build (what one profile cannot show) is the noise the
change must stand out of. A share is never less noisy than sampling alone makes it: each
cohort's variance is at least the binomial variance of a share from a profile of its
mean size, so two cohorts of identical profiles (no spread) are not called different on
a sliver.

With one profile on a side there is no spread to learn from: the fallback counts samples
as independent draws (an exact two-proportion test on the pooled counts). That tells a
difference from sampling noise, not from the run-to-run variation of the program, and
over-states significance when the value is not a sample count (CPU time, bytes); the
result says so in a warning.

Benjamini–Hochberg over every test made (self and total of each function) controls the
false discovery rate.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float64]

PER_PROFILE = "welch"
"""Method name: Welch's t on per-profile shares (several profiles per cohort)."""
POOLED = "binomial"
"""Method name: exact two-proportion test on pooled samples (one profile on a side)."""


def method(profiles_a: int, profiles_b: int) -> str:
    return PER_PROFILE if min(profiles_a, profiles_b) >= 2 else POOLED


def shares(values: Array, totals: Array) -> Array:
    """Per-profile shares (rows: functions, columns: profiles); a profile without samples has none."""
    return np.divide(values, totals, out=np.zeros_like(values), where=totals > 0)


def p_values(xa: Array, na: Array, xb: Array, nb: Array) -> Array:
    """Two-sided p-values, one per row, that a function's share is the same in A and B.

    ``xa`` (functions × profiles of A) holds each function's value per profile, ``na`` each
    profile's total; likewise for B."""
    if method(len(na), len(nb)) == PER_PROFILE:
        return _welch(shares(xa, na), na, shares(xb, nb), nb)
    from rootsift.analysis.stats import share_test

    return share_test(xb.sum(axis=1), xa.sum(axis=1), float(nb.sum()), float(na.sum()))


def _welch(sa: Array, na: Array, sb: Array, nb: Array) -> Array:
    from rootsift.analysis import distributions as dist

    ma, mb = sa.mean(axis=1), sb.mean(axis=1)
    va = np.maximum(sa.var(axis=1, ddof=1), _sampling_floor(ma, na))
    vb = np.maximum(sb.var(axis=1, ddof=1), _sampling_floor(mb, nb))
    ea, eb = va / len(na), vb / len(nb)
    se = np.sqrt(ea + eb)
    df = (ea + eb) ** 2 / (ea**2 / (len(na) - 1) + eb**2 / (len(nb) - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, (mb - ma) / se, 0.0)
    p = 2 * dist.t_sf(np.abs(t), np.where(np.isfinite(df), df, 1.0))
    return np.asarray(np.where(se > 0, p, 1.0), dtype=np.float64)


def _sampling_floor(share: Array, totals: Array) -> Array:
    """The binomial variance of a share from a profile of the cohort's mean size: the least
    spread sampling alone gives (a share of 0 or 1 floors at the rule of three's 3/n)."""
    n = max(float(totals.mean()), 1.0)
    p = np.clip(share, 3.0 / n / 2, 1 - 3.0 / n / 2) if n > 3 else np.full_like(share, 0.5)
    return np.asarray(p * (1 - p) / n, dtype=np.float64)
