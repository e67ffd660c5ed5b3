"""One series' trend: a robust slope and a significance that survives cycles, serial
correlation and random walks.

- **Cycles**: when the series spans at least three days (weeks) and is sampled at least
  twice per day (week), and its phases differ (ANOVA's F at 1 %), the mean of each phase
  of the day (day of the week) is removed from the residuals of a first Theil–Sen line: a diurnal load or a nightly cron is not
  a trend, and a 12 h snapshot taken at the same two hours every day stays unbiased.
- **Slope**: Theil–Sen, the median of the pairwise slopes (``scipy.stats.theilslopes``
  computes the same number; the pairs are formed once here because the Mann–Kendall
  statistic reads their signs too).
- **Significance**: Mann–Kendall on the means of eight consecutive blocks (Kendall's tau
  of block order against block mean, exact): averaging a block's points takes short-range
  serial correlation away (AR noise, a GC sawtooth, bursts), where a variance correction
  from the residuals' autocorrelation (Hamed and Rao 1998) is liberal for strong
  correlation and, worse, reads the curvature of a leak that slows as it fills as
  correlation and hides it. It does not hold when the level itself wanders (a random
  walk looks like a trend to every stationary test): so unless an augmented
  Dickey–Fuller test rejects a unit root at 1 %, the trend must also pass a drift test on
  the first differences (Student's t, Newey–West long-run variance), and the p-value is
  the larger of the two (an intersection–union test, its level at most each's).
- **Visible**: a trend must also move its line by at least the residual noise over the
  range, so a significant 0.3 % wobble over a month is not called a leak.
- **Line uncertainty**: the residual standard deviation and the inflation of the
  variance by lag-1 autocorrelation, ``(1 + φ)/(1 − φ)``, for time to exhaustion.

Assumptions: the trend is linear over the range (a leak that starts mid-range is fitted
as a smaller slope over all of it), and samples are roughly evenly spaced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import special

Array = NDArray[np.float64]

MIN_POINTS = 8
"""Fewer points than this: no trend is claimed."""
PERIODS_H = (("daily", 24.0), ("weekly", 168.0))
MIN_CHANGE = 1.0
"""A trend must move its line by this many residual standard deviations over the range."""
MIN_CYCLES = 3
BLOCKS = 8
CYCLE_LEVEL = 0.01
"""A daily or weekly cycle is removed when its phases differ at this level."""
MAX_PHASES = 24


@dataclass
class Fit:
    """A series' trend: slope per hour, significance, and what the line's uncertainty needs."""

    n: int
    slope: float = 0.0
    """Theil–Sen slope, in the series' unit per hour."""
    intercept: float = 0.0
    """The line's value at hour 0 of the series' clock (``t`` as given)."""
    level: float = 0.0
    """The series' median: the scale growth is relative to."""
    p_value: float = 1.0
    p_stationary: float = 1.0
    """Mann–Kendall on block means (stationary, serially correlated noise)."""
    p_drift: float = 1.0
    """Drift of the first differences, Newey–West variance (a wandering level)."""
    unit_root: bool = False
    """The augmented Dickey–Fuller test could not reject a wandering level (random walk)."""
    z: float = 0.0
    """The block Mann–Kendall p as a signed normal z: its sign is the trend's direction."""
    t_mean: float = 0.0
    t_first: float = 0.0
    t_last: float = 0.0
    sxx: float = 0.0
    resid_sd: float = 0.0
    inflation: float = 1.0
    """Variance inflation of the line by the residuals' lag-1 autocorrelation."""
    seasons: list[str] = field(default_factory=list)
    """The cycles removed before testing (daily, weekly)."""

    @property
    def per_day(self) -> float:
        return self.slope * 24.0

    @property
    def relative_per_day(self) -> float:
        """Growth per day relative to the series' level (0.01 = 1 % of its level a day)."""
        return self.per_day / abs(self.level) if self.level else (0.0 if self.slope == 0 else math.inf)

    @property
    def change(self) -> float:
        """How far the line moves over the range, in the series' unit."""
        return self.slope * (self.t_last - self.t_first)

    @property
    def visible(self) -> bool:
        """The line moves by at least the noise around it over the range (``MIN_CHANGE``
        residual deviations): a slope smaller than that is not called a trend, however
        many points make it significant (a 0.3 % wobble over a month is no leak)."""
        return abs(self.change) >= MIN_CHANGE * self.resid_sd and self.slope != 0

    def trending(self, alpha: float) -> bool:
        """Significant at ``alpha`` and visible."""
        return self.p_value <= alpha and self.visible

    def at(self, t: float | Array) -> float | Array:
        return self.intercept + self.slope * t


def fit(t: Array, y: Array) -> Fit:
    """The trend of ``y`` sampled at hours ``t`` (sorted; NaN values are left out)."""
    t, y = np.asarray(t, dtype=np.float64), np.asarray(y, dtype=np.float64)
    keep = np.isfinite(t) & np.isfinite(y)
    t, y = t[keep], y[keep]
    n = int(t.size)
    if n < MIN_POINTS or float(np.ptp(t)) <= 0:
        return Fit(n, level=float(np.median(y)) if n else 0.0)
    first = sen_slope(t, y)
    y_ds, seasons = deseasonalise(t, y, first)
    slope = sen_slope(t, y_ds) if seasons else first
    intercept = float(np.median(y_ds - slope * t))
    resid = y_ds - (intercept + slope * t)
    p_mk, z = block_mann_kendall(y_ds)
    tau = adf_tau(y_ds)
    stationary = tau < adf_critical(n)
    p_drift = 0.0 if stationary else drift_test(y)
    phi = _lag1(resid)
    t_mean = float(t.mean())
    return Fit(
        n=n,
        slope=slope,
        intercept=intercept,
        level=float(np.median(y)),
        p_value=max(p_mk, p_drift),
        unit_root=not stationary,
        p_stationary=p_mk,
        p_drift=p_drift,
        z=z,
        t_mean=t_mean,
        t_first=float(t[0]),
        t_last=float(t[-1]),
        sxx=float(((t - t_mean) ** 2).sum()),
        resid_sd=float(resid.std(ddof=2)) if n > 2 else 0.0,
        inflation=(1 + phi) / (1 - phi),
        seasons=seasons,
    )


def deseasonalise(t: Array, y: Array, slope: float | None = None) -> tuple[Array, list[str]]:
    """``y`` less its daily phase means (up to 24 phases) and then its day-of-week means
    (around a first Theil–Sen line), for each period the series covers at least
    ``MIN_CYCLES`` times, sampled at least twice per period with at least three samples
    in every phase; and the names of the cycles removed. ``slope``: the first line's, when
    known (a cycle's removal leaves a straight line's slope as it was)."""
    slope = sen_slope(t, y) if slope is None else slope
    span = float(t[-1] - t[0])
    step = float(np.median(np.diff(t))) if t.size > 1 else span
    out, removed = y.copy(), []
    for name, period in PERIODS_H:
        if span < MIN_CYCLES * period or step <= 0 or step > period / 2:
            continue
        per_day = max(2, round(24 / step)) if period <= 24 else 1
        phases = int(min(MAX_PHASES, per_day)) * int(period // 24)  # weekly: one level per day of the week
        resid = out - slope * t
        phase = np.floor((np.mod(t, period) / period) * phases).astype(np.int64) % phases
        counts = np.bincount(phase, minlength=phases)
        if counts.min() < MIN_CYCLES:
            continue
        means = np.bincount(phase, weights=resid, minlength=phases) / counts
        if not _cycle_is_there(resid, means, counts, phase):
            continue
        out = out - (means - means.mean())[phase]
        removed.append(name)
    return out, removed


def _cycle_is_there(resid: Array, means: Array, counts: NDArray[np.int64], phase: NDArray[np.int64]) -> bool:
    """The phase means differ (one-way ANOVA's F at ``CYCLE_LEVEL``, the within-phase
    variance inflated by the noise's autocorrelation, as if each mean held correlated
    neighbours, which is conservative for daily phases): removing the means
    of a cycle that is not there takes the slow part of autocorrelated noise with it, and
    the noise left looks less correlated than it is."""
    k, n = means.size, resid.size
    grand = float(resid.mean())
    between = float((counts * (means - grand) ** 2).sum()) / (k - 1)
    rest = resid - means[phase]
    within = float((rest**2).sum()) / max(1, n - k) * _ar1_factor(rest)  # a phase's mean holds correlated points
    if within <= 0:
        return between > 0
    return bool(special.fdtrc(k - 1, n - k, between / within) <= CYCLE_LEVEL)


def block_mann_kendall(y: Array) -> tuple[float, float]:
    """Mann–Kendall on the means of ``blocks(n)`` consecutive blocks of the series (the
    exact distribution of Kendall's tau between block order and block mean, scipy's):
    (two-sided p, its signed normal z).

    A block of many points averages short-range correlation away (AR noise,
    a sawtooth, bursts), so its means are close to independent, and a trend that is not a
    straight line (a leak that slows as it fills) still ranks its blocks in order: the
    residuals of a line through it would look autocorrelated and hide it."""
    k = blocks(y.size)
    edges = np.linspace(0, y.size, k + 1).astype(np.int64)
    means = np.array([y[a:b].mean() for a, b in zip(edges[:-1], edges[1:], strict=True)])
    i, j = _pairs(k)
    signs = np.sign(means[j] - means[i])
    score = int(signs.sum())
    if score == 0:
        return 1.0, 0.0
    tied = bool((signs == 0).any())  # ties among the block means (a flat series): scipy's tie-corrected test
    p = kendall_tied(means, score) if tied else _kendall_exact(k, abs(score))
    return p, math.copysign(float(special.ndtri(1 - max(p, 1e-300) / 2)), score)


def kendall_tied(means: Array, score: int) -> float:
    """``scipy.stats.kendalltau(np.arange(k), means).pvalue`` when some of the ``k`` means
    tie (``score``: concordant less discordant pairs): its normal approximation with the
    tie correction, step for step (the order has no ties), without importing scipy.stats."""
    k = len(means)
    cnt = np.unique(means, return_counts=True)[1]
    cnt = cnt[cnt > 1].astype(np.int64)
    ties_term = int((cnt * (cnt - 1.0) * (2 * cnt + 5)).sum())
    m = k * (k - 1.0)
    var = (m * (2 * k + 5) - ties_term) / 18  # scipy's other terms hold the order's ties: 0
    return float(2 * special.ndtr(-np.abs(score / np.sqrt(var))))


@lru_cache(maxsize=32)
def _inversions(n: int) -> tuple[int, ...]:
    """How many orderings of n distinct values have each number of inversions (Mahonian numbers)."""
    counts = [1]
    for m in range(2, n + 1):
        grown = [0] * (len(counts) + m - 1)
        for inv, c in enumerate(counts):
            for extra in range(m):
                grown[inv + extra] += c
        counts = grown
    return tuple(counts)


def _kendall_exact(n: int, score: int) -> float:
    """Two-sided p of Kendall's S (concordant less discordant pairs) at least ``score`` in
    size, ``n`` distinct values in random order: S = n(n − 1)/2 − 2 · inversions."""
    counts = _inversions(n)
    pairs = n * (n - 1) // 2
    tail = sum(c for inv, c in enumerate(counts) if pairs - 2 * inv >= score)
    return min(1.0, 2 * tail / math.factorial(n))


def blocks(n: int) -> int:
    """Eight blocks (every point below 16): a perfectly ordered eight can reach p = 0.0008,
    and blocks of 30 points (30 days of 3-hour means) leave AR(0.8) noise's neighbouring
    block means correlated by about 0.1."""
    return n if n < 16 else BLOCKS


def _ar1_factor(resid: Array) -> float:
    """The variance inflation of a sum over an AR(1) series, ``1 + 2 Σ (1 − k/n) φ^k``
    (φ bias-corrected, ``_lag1``): how much less a mean over correlated points tells."""
    n = resid.size
    phi = _lag1(resid)
    k = np.arange(1, n)
    return float(1 + 2 * ((1 - k / n) * phi**k).sum())


def drift_test(y: Array) -> float:
    """Two-sided p that the first differences of ``y`` have mean zero: Student's t on
    their mean, its variance the larger of the differences' variance and their Newey–West
    long-run variance (Bartlett weights, bandwidth ⌊4 (m/100)^(2/9)⌋). For a random walk
    this is the exact question (its differences are the steps); it is asked only of a
    series that may have a unit root (``adf_tau``)."""
    d = np.diff(y)
    m = d.size
    if m < 3:
        return 1.0
    mean = float(d.mean())
    lags = int(4 * (m / 100) ** (2 / 9))
    acov = _acov(d - mean, lags)
    lrv = acov[0] + 2 * sum((1 - k / (lags + 1)) * acov[k] for k in range(1, lags + 1))
    se = math.sqrt(max(lrv, acov[0] * m / (m - 1)) / m)
    if se <= 0:
        return 1.0 if mean == 0 else 0.0
    return float(2 * special.stdtr(m - 1, -abs(mean) / se))


def adf_tau(y: Array) -> float:
    """The augmented Dickey–Fuller statistic with a constant and a trend: the t of γ in
    Δy_t = α + βt + γ y_{t−1} + Σ δ_i Δy_{t−i} + e_t, with ⌊∛(n − 1)⌋ lagged differences."""
    d = np.diff(y)
    lags = int((y.size - 1) ** (1 / 3))
    rows = d.size - lags
    if rows < lags + 6:
        return 0.0
    target = d[lags:]
    cols = [np.ones(rows), np.arange(rows, dtype=np.float64), y[lags:-1]]
    cols += [d[lags - i : d.size - i] for i in range(1, lags + 1)]
    x = np.column_stack(cols)
    coef, _, rank, _ = np.linalg.lstsq(x, target, rcond=None)
    if rank < x.shape[1]:
        return 0.0
    resid = target - x @ coef
    s2 = float(resid @ resid) / max(1, rows - x.shape[1])
    var = s2 * float(np.linalg.inv(x.T @ x)[2, 2])
    return float(coef[2] / math.sqrt(var)) if var > 0 else (-math.inf if coef[2] < 0 else 0.0)


def adf_critical(n: int) -> float:
    """The 1 % critical value of ``adf_tau`` (MacKinnon 2010's response surface, constant
    and trend): below it the series is taken as stationary around its trend."""
    return -3.95877 - 9.0531 / n - 28.428 / n**2


def _acov(x: Array, lags: int) -> list[float]:
    m = x.size
    return [float(np.dot(x[: m - k], x[k:]) / m) for k in range(lags + 1)]


def _lag1(resid: Array) -> float:
    """Lag-1 autocorrelation of the residuals, corrected for its small-sample bias
    (+(2 + 4φ)/n for the residuals of a fitted line; Kendall's (1 + 3φ)/n is for a known mean) and kept within [0, 0.95]."""
    x = resid - resid.mean()
    denom = float(np.dot(x, x))
    phi = float(np.dot(x[:-1], x[1:]) / denom) if denom > 0 else 0.0
    return min(0.95, max(0.0, phi + (2 + 4 * phi) / x.size))


def sen_slope(t: Array, y: Array) -> float:
    """Theil–Sen: the median of the slopes between every pair of points."""
    i, j = _pairs(t.size)
    dt = t[j] - t[i]
    ok = dt > 0
    return float(np.median((y[j] - y[i])[ok] / dt[ok]))


@lru_cache(maxsize=32)
def _pairs(n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    i, j = np.triu_indices(n, k=1)
    return i, j
