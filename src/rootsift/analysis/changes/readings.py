"""The readings of a series the change detector (detect.py) chooses among, and the BIC it
chooses by: the values standardized (less their median, over their MAD, less a daily
cycle), Theil–Sen's slope (over the whole series or within segments), and the BIC of
segment means plus AR(1) residuals at the best number of a binary segmentation's cuts;
and the noise's scale and lag-1 autocorrelation the detector's penalty is set by.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from rootsift.analysis import distributions as dist

MAX_RHO = 0.9
"""The bound on the AR(1) coefficient of the noise: the detector's and the BIC's."""
EXACT = 1e-12
"""``path_bics``: a residual energy this small against the values' mean square is an exact fit."""
SEASON_PERIODS = 3
"""A cycle is taken out only when the series spans at least this many of its periods."""
SEASON_R = 0.5
THEIL_POINTS = 150
"""The trend reading's Theil–Sen slope is taken over at most about this many points."""


def median(a: np.ndarray) -> float:
    """``np.median`` of a 1-d float array, the same number (its partition, NaN at the end
    checked, the middle two averaged), without its per-call cost: the detector takes
    thousands of them per ``changes`` run."""
    n = len(a)
    if n == 0:
        return float(np.median(a))
    h = n // 2
    part = np.partition(a, [h - 1, h, -1] if n % 2 == 0 else [h, -1])
    if np.isnan(part[-1]):
        return math.nan
    return float((part[h - 1] + part[h]) / 2) if n % 2 == 0 else float(part[h])


def ranks(values: np.ndarray) -> np.ndarray:
    """The ranks of ``values`` from 1, ties given their average: scipy's ``rankdata``
    (which it falls back to with NaNs), without its per-call cost (a few hundred calls
    per ``changes`` run)."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n == 0 or np.isnan(v).any():
        return dist.rankdata(v)
    order = np.argsort(v, kind="stable")
    s = v[order]
    starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
    lengths = np.diff(np.append(starts, n))
    out = np.empty(n)
    out[order] = np.repeat((2 * starts + lengths + 1) / 2, lengths)
    return out


def deseason(z: np.ndarray, period: int | None) -> tuple[np.ndarray, bool]:
    """``z`` less each phase's median when it spans at least ``SEASON_PERIODS`` periods and
    the cycle repeats: each whole period correlates with the median of the others by at
    least ``SEASON_R`` on average (shifts that happen at one time of one day are no cycle).
    Each period is compared less its own straight line: a steady trend rises within every
    period alike, and is no cycle either."""
    if not period or period < 2 or len(z) < SEASON_PERIODS * period:
        return z, False
    whole = z[: len(z) // period * period].reshape(-1, period)
    tc = np.arange(period) - (period - 1) / 2
    whole = whole - whole.mean(axis=1, keepdims=True) - np.outer(whole @ tc / float(tc @ tc), tc)
    rs = []
    for i in range(len(whole)):
        others = np.median(np.delete(whole, i, axis=0), axis=0)
        if np.std(whole[i]) > 0 and np.std(others) > 0:
            rs.append(float(np.corrcoef(whole[i], others)[0, 1]))
    if not rs or float(np.mean(rs)) < SEASON_R:
        return z, False
    phase = np.arange(len(z)) % period
    profile = np.array([np.median(z[phase == k]) for k in range(period)])
    return z - profile[phase], True


def standardized(x: np.ndarray, period: int | None) -> np.ndarray:
    """``x`` less its median over its MAD (its standard deviation when the MAD is 0), less
    each phase's median when ``period`` is given: the values whose increments and trend
    the integrated and trend readings take (a daily cycle is no change of slope)."""
    y = x - median(x)
    scale = 1.4826 * median(np.abs(y)) or float(np.std(y)) or 1.0
    y = y / scale
    if period:
        phase = np.arange(len(y)) % period
        y = y - np.array([np.median(y[phase == k]) for k in range(period)])[phase]
    return y


def bic(z: np.ndarray, cuts: list[int], extra: int = 0, increments: bool = False) -> float:
    """BIC of ``z`` as segment means (cut at ``cuts``, ending with ``len(z)``) plus AR(1)
    residuals (coefficient within ±``MAX_RHO``, the detector's noise model): a mean and a
    position per segment, ``extra`` parameters more (a trend's slope). Scored over the
    last n − 2 innovations of the series either way: values lose their first residual to
    the AR's lag, ``increments`` (one fewer) none, so the readings of one series compare
    (the increments' model is the values' model given the first value)."""
    ids = np.searchsorted(np.asarray(cuts), np.arange(len(z)), side="right")[None, :]
    return float(bics(z, ids, np.array([len(cuts)]), extra, increments)[0])


def fit(path: list[int], z: np.ndarray, extra: int = 0, increments: bool = False) -> float:
    """The lowest ``bic`` of ``z`` over its first k = 0, 1, … cuts of a
    binary segmentation ``path``: how well a reading can explain the series at its best
    complexity (not at the calibrated one, which is for claiming change points: a series
    switching between many short regimes is still a level series)."""
    return float(np.min(path_bics(path, z, extra, increments)))


def path_bics(
    path: list[int], z: np.ndarray, extra: int = 0, increments: bool = False, weight: float = 1.0
) -> np.ndarray:
    """``bic`` of ``z`` under its first k = 0, 1, … cuts of ``path`` (entry k), each
    segment's two parameters counted ``weight`` times (1: BIC's own penalty)."""
    n = len(z)
    if n < 3:
        # the segment of each position under the first k cuts: how many are at or before it
        before = np.asarray(path, dtype=np.int64)[:, None] <= np.arange(n)[None, :]
        ids = np.concatenate([np.zeros((1, n), dtype=np.int64), np.cumsum(before, axis=0)])
        return bics(z, ids, np.arange(len(path) + 1) + 1, extra, increments, weight)
    return path_bics_many([(path, z, extra, increments, weight)])[0]


def path_bics_many(items: list[tuple[list[int], np.ndarray, int, bool, float]]) -> list[np.ndarray]:
    """``path_bics(path, z, extra, increments, weight)`` of each item, the same numbers,
    those of one length computed together: a path's BICs are sums over its segments (from
    cumulative sums), a few hundred numbers, and numpy's cost per call would be most of the
    work one path at a time."""
    out: list[np.ndarray] = [np.empty(0)] * len(items)
    by_length: dict[int, list[int]] = {}
    for i, (_, z, *_) in enumerate(items):
        if len(z) < 3:
            out[i] = path_bics(*items[i][:4], weight=items[i][4])
        else:
            by_length.setdefault(len(z), []).append(i)
    for n, idx in by_length.items():
        for i, got in zip(idx, _path_bics_of_length(n, [items[i] for i in idx]), strict=True):
            out[i] = got
    return out


def _path_bics_of_length(n: int, items: list[tuple[list[int], np.ndarray, int, bool, float]]) -> list[np.ndarray]:
    """``path_bics_many`` of items whose series all have ``n`` (≥ 3) values."""
    z = np.stack([np.asarray(it[1], dtype=np.float64) for it in items])
    sizes = np.array([len(it[0]) + 1 for it in items])  # rows (numbers of cuts) of each item
    k = int(sizes.max())
    # each row's segments laid end to end: row j of an item is cut at its path's first j cuts
    paths = np.full((len(items), k - 1), n, dtype=np.int64)
    for i, it in enumerate(items):
        paths[i, : len(it[0])] = it[0]
    grid = np.full((len(items), k, k + 1), n, dtype=np.int64)
    grid[:, :, 0] = 0
    grid[:, :, 1:k] = np.where(np.tri(k, k - 1, -1, dtype=bool)[None], paths[:, None, :], n)
    grid.sort(axis=2)
    real = (grid[:, :, :-1] < grid[:, :, 1:]) & (np.arange(k)[None, :] < sizes[:, None])[:, :, None]
    item, j = np.nonzero(real)[:2]
    a, b = grid[:, :, :-1][real], grid[:, :, 1:][real]
    rows = np.concatenate([[0], np.cumsum(sizes)])
    row = rows[item] + j  # each segment's row among every item's rows
    c1 = np.concatenate([np.zeros((len(items), 1)), np.cumsum(z, axis=1)], axis=1)
    c2 = np.concatenate([np.zeros((len(items), 1)), np.cumsum(z * z, axis=1)], axis=1)
    # lag[j]: z_t z_{t-1}, 1 <= t < j
    lag = np.concatenate([np.zeros((len(items), 2)), np.cumsum(z[:, 1:] * z[:, :-1], axis=1)], axis=1)
    length = b - a
    mean = (c1[item, b] - c1[item, a]) / length
    # per segment: the residuals' squares, and their lag products within it
    square = np.maximum(c2[item, b] - c2[item, a] - mean * (c1[item, b] - c1[item, a]), 0.0)
    inner = (
        lag[item, b]
        - lag[item, a + 1]
        - mean * (c1[item, b] - c1[item, a + 1] + c1[item, b - 1] - c1[item, a])
        + (length - 1) * mean * mean
    )
    # across the boundary to the next segment of the same row: (z_b - mean') (z_{b-1} - mean)
    nxt = np.append(mean[1:], 0.0)
    cross = np.where(b < n, (z[item, np.minimum(b, n - 1)] - nxt) * (z[item, b - 1] - mean), 0.0)
    total = np.bincount(row, weights=square, minlength=int(rows[-1]))
    lagged = np.bincount(row, weights=inner + cross, minlength=int(rows[-1]))
    # the residuals the AR(1) is not fitted on: the first (values), and the ends of the sums
    first = row != np.append(-1, row[:-1])
    last = row != np.append(row[1:], -1)
    owner = item[first]  # each row's item
    r0 = z[owner, 0] - mean[first]
    rn = z[owner, n - 1] - mean[last]
    # the second position's residual: the first segment's unless it has one position
    one = length[first] == 1
    r1 = z[owner, 1] - np.where(one, np.append(mean, 0.0)[np.flatnonzero(first) + 1], mean[first])
    increments = np.array([it[3] for it in items], dtype=bool)[owner]
    den = np.where(increments, total - rn * rn, total - r0 * r0 - rn * rn)
    num = np.where(increments, lagged, lagged - r1 * r0)
    tail = np.where(increments, total - r0 * r0, total - r0 * r0 - r1 * r1)
    m = np.where(increments, n - 1, n - 2)
    phi = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0), -MAX_RHO, MAX_RHO)
    energy = (tail - 2 * phi * num + phi * phi * den) / m
    # an exact fit is exact: not the rounding of the sums above (scale: the values' own)
    energy[energy <= EXACT * (c2[owner, n] / n + 1e-300)] = 0.0
    weight = np.array([it[4] for it in items])[owner]
    extra = np.array([it[2] for it in items])[owner]
    params = 2 * weight * (j[first] + 1) + extra
    bic = m * np.log(energy + 1e-300) + params * np.where(increments, math.log(n - 1), math.log(n - 2))
    return [bic[rows[i] : rows[i + 1]] for i in range(len(items))]


def bics(
    z: np.ndarray, ids: np.ndarray, segments: np.ndarray, extra: int, increments: bool, weight: float = 1.0
) -> np.ndarray:
    """``bic`` of ``z`` for each row of ``ids`` (each position's segment number; ``segments``
    of them, their parameters counted ``weight`` times), in one pass (a row of residuals
    per row)."""
    n, rows = len(z), len(ids)
    flat = (ids + (n + 1) * np.arange(rows)[:, None]).ravel()
    sums = np.bincount(flat, weights=np.tile(z, rows), minlength=rows * (n + 1))
    counts = np.bincount(flat, minlength=rows * (n + 1))
    means = np.divide(sums, counts, out=np.zeros_like(sums), where=counts > 0)
    r = (np.tile(z, rows) - means[flat]).reshape(rows, n)
    r = r if increments else r[:, 1:]
    den, num = np.sum(r[:, :-1] ** 2, axis=1), np.sum(r[:, 1:] * r[:, :-1], axis=1)
    phi = np.clip(np.divide(num, den, out=np.zeros_like(num), where=den > 0), -MAX_RHO, MAX_RHO)
    e = r[:, 1:] - phi[:, None] * r[:, :-1]
    m = r.shape[1] - 1
    params = 2 * weight * segments + extra
    return m * np.log(np.mean(e * e, axis=1) + 1e-300) + params * math.log(m)


def theil(y: np.ndarray, cuts: list[int] | None = None) -> float:
    """Theil–Sen's slope of ``y`` per index: the median slope over pairs of at most about
    ``THEIL_POINTS`` evenly spaced points; with ``cuts`` (segment ends, the last ``len(y)``),
    over the pairs within one segment (a step between segments is no slope)."""
    ti, tj, gap = pairs(len(y))
    if cuts is not None:
        segment = np.searchsorted(np.asarray(cuts), np.arange(len(y)), side="right")
        within = segment[ti] == segment[tj]
        if within.any():
            ti, tj, gap = ti[within], tj[within], gap[within]
    return median((y[tj] - y[ti]) / gap)


@functools.lru_cache(maxsize=32)
def pairs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The index pairs (earlier, later) ``theil`` takes the slopes of, for a series of ``n``,
    and their distances (as floats: the division's own conversion, done once)."""
    t = np.arange(0, n, max(1, n // THEIL_POINTS))
    i, j = np.triu_indices(len(t), 1)
    return t[i], t[j], (t[j] - t[i]).astype(np.float64)


def noise(z: np.ndarray) -> tuple[float, float]:
    """(sigma, rho) of the noise, robust to sparse steps: from the MAD of the differences
    at lag 1 and at lag ``k`` (for AR(1) noise, Var(x_t − x_{t−k}) = 2γ₀(1 − ρ^k))."""
    n = len(z)
    k = max(2, min(10, n // 8))

    def spread(d: np.ndarray) -> float:
        dev = np.abs(d - median(d))
        mad = 1.4826 * median(dev)
        # mostly tied values (counts of 0 and 1) have a MAD of 0: their mean square then
        return (mad if mad > 0 else float(np.sqrt(np.mean(dev * dev)))) ** 2 / 2

    d1, dk = spread(np.diff(z)), spread(z[k:] - z[:-k])
    var = max(dk, d1, 1e-18)
    rho = 1 - d1 / var
    return math.sqrt(var), min(max(rho, 0.0), MAX_RHO)


def residual_noise(z: np.ndarray, cuts: list[int]) -> tuple[float, float]:
    """(sigma, rho) of the residuals around the segments' means."""
    r = z.copy()
    for a, b in zip([0, *cuts[:-1]], cuts, strict=True):
        r[a:b] -= r[a:b].mean()
    sigma = float(np.sqrt(np.mean(r * r))) or 1e-9
    denom = float(np.dot(r, r))
    rho = float(np.dot(r[1:], r[:-1]) / denom) if denom > 0 else 0.0
    return sigma, min(max(rho, 0.0), MAX_RHO)
