"""The l2 segmentation the change detector (detect.py) is built on: binary segmentation's
first cuts (ruptures' algorithm, in numpy, many series of one length at once) and the
exact penalised choice among them.

Both are written for hundreds of short series (a host each): binary segmentation runs on
a matrix of series of equal length, a row each, so that numpy's per-call cost is paid once
per split and not once per series; the penalised choice computes the cost of every
segment between two candidates once and reuses it for every penalty tried.
"""

from __future__ import annotations

import bisect
import operator

import numpy as np


def binseg(z: np.ndarray, most: int, min_size: int) -> list[int]:
    """Binary segmentation's first ``most`` cuts of ``z`` under the l2 cost (each the split
    of one segment that lowers the cost most). The same cuts as ruptures'
    ``Binseg(model="l2", min_size=min_size, jump=1).predict(n_bkps=most)``, without its
    Python call per position (0.15–0.3 s a series, too slow for hundreds of groups)."""
    return binseg_many(np.asarray(z, dtype=np.float64)[None, :], most, min_size)[0]


def binseg_many(z: np.ndarray, most: int, min_size: int) -> list[list[int]]:
    """``binseg`` of each row of ``z`` (series of one length), all rows at once: the gain of
    splitting at each position within its current segment (from cumulative sums) is kept
    for every row in one array; each round every row splits at its largest gain, and only
    the positions of the two segments a split makes are computed again. A row stops at
    ``most`` cuts or when no split gains (an exact tie of gains in two segments goes to the
    leftmost position)."""
    rows, n = z.shape
    c1 = np.concatenate([np.zeros((rows, 1)), np.cumsum(z, axis=1)], axis=1)
    gain = np.full((rows, n + 1), -np.inf)
    everyone = np.arange(rows)
    _gains(c1, gain, everyone, np.zeros(rows, dtype=np.int64), np.full(rows, n), min_size)
    cuts: list[list[int]] = [[] for _ in range(rows)]
    bounds = [[0, n] for _ in range(rows)]  # each row's cuts, sorted, with 0 and n
    for _ in range(most):
        k = np.argmax(gain, axis=1)
        split = gain[everyone, k] > 0
        if not split.any():
            break
        gain[~split] = -np.inf  # a row that cannot gain stops
        live, k = everyone[split], k[split]
        a, b = np.empty(len(live), dtype=np.int64), np.empty(len(live), dtype=np.int64)
        for i, (r, kk) in enumerate(zip(live.tolist(), k.tolist(), strict=True)):
            cuts[r].append(kk)
            at = bisect.bisect_left(bounds[r], kk)
            a[i], b[i] = bounds[r][at - 1], bounds[r][at]
            bounds[r].insert(at, kk)
        gain[live, k] = -np.inf
        _gains(c1, gain, live, a, k, min_size)
        _gains(c1, gain, live, k, b, min_size)
    return cuts


def _gains(c1: np.ndarray, gain: np.ndarray, rows: np.ndarray, a: np.ndarray, b: np.ndarray, min_size: int) -> None:
    """Into ``gain``: for each of ``rows``, the gain of splitting its segment [a, b) at each
    position strictly inside it (``-inf`` nearer than ``min_size`` to an end)."""
    lengths = np.maximum(b - a - 1, 0)
    total_len = int(lengths.sum())
    if not total_len:
        return
    width = c1.shape[1]
    at = np.repeat(rows * width - np.cumsum(lengths) + lengths + a + 1, lengths) + np.arange(total_len)
    p = at % width  # the positions, and ``at`` their place in the flattened arrays
    ca, cb = c1[rows, a], c1[rows, b]
    cp = c1.ravel()[at]
    before, after = p - np.repeat(a, lengths), np.repeat(b, lengths) - p
    left = cp - np.repeat(ca, lengths)
    right = np.repeat(cb, lengths) - cp
    whole = np.repeat((cb - ca) ** 2 / (b - a), lengths)  # the unsplit segment's, once per segment
    g = left**2 / before + right**2 / after - whole
    gain.ravel()[at] = np.where((before >= min_size) & (after >= min_size), g, -np.inf)


def segment_costs(z: np.ndarray, candidates: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(0, the sorted candidates, len(z)) and the l2 cost of the segment between every two
    of them (``cost[i, j]``, i < j): what ``choose`` needs, whatever the penalty."""
    n = len(z)
    c1 = np.concatenate([[0.0], np.cumsum(z)])
    c2 = np.concatenate([[0.0], np.cumsum(z * z)])
    points = np.array([0, *sorted(candidates), n])
    a, b = points[:, None], points[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = c2[b] - c2[a] - (c1[b] - c1[a]) ** 2 / (b - a)
    return points, cost


def choose(points: np.ndarray, cost: np.ndarray | list[list[float]], penalty: float) -> list[int]:
    """The cuts among ``points`` (``segment_costs``) that minimise the cost plus ``penalty``
    per cut, by dynamic programming over the end points; ending with the last point.
    ``cost`` may be given as its columns' lists (``cost.T.tolist()``), once for several
    penalties."""
    m = len(points)
    # in Python floats (the same IEEE sums as numpy's, first minimum kept): 30-odd
    # candidates are too few to pay numpy's cost per call
    cols = cost.T.tolist() if isinstance(cost, np.ndarray) else cost
    best, back = [0.0] * m, [0] * m
    add = operator.add
    for j in range(1, m):  # every segment ending at points[j]
        col = cols[j]
        total = [best[0] + col[0] + 0.0, *[s + penalty for s in map(add, best[1:j], col[1:j])]]
        best[j] = min(total)
        back[j] = total.index(best[j])
    cuts, j = [], m - 1
    while j > 0:
        cuts.append(int(points[j]))
        j = back[j]
    return sorted(cuts)


def best_subset(z: np.ndarray, candidates: list[int], penalty: float) -> list[int]:
    """The cuts among ``candidates`` that minimise the l2 cost plus ``penalty`` per cut
    (exact, by dynamic programming over the candidates), ending with ``len(z)`` as
    ruptures' do. Binary segmentation stopped at the first split that gains less than the
    penalty misses a short spell in the middle (neither of its edges alone gains much);
    choosing among its first splits by the penalised cost finds both."""
    return choose(*segment_costs(z, candidates), penalty)
