"""Change points in one series: where its level shifted, each with the values either
side, an effect size and a significance that allows for serial correlation.

The series is first made robust: its values become normal scores of their ranks (a heavy
tail or a log scale changes nothing; a step stays a step), a daily cycle seen over at
least ``readings.SEASON_PERIODS`` periods is taken out (each phase's median), and the noise is
measured around a running median: its scale ``sigma`` (MAD) and its lag-1
autocorrelation ``rho``. Binary segmentation (l2 cost; ruptures' algorithm, in numpy)
proposes up to ``MAX_CANDIDATES`` cuts, and the subset of them minimising the cost plus the penalty
``BETA · sigma² · (1 + rho) / (1 − rho) · log n``: the BIC form, widened by the long-run
variance of an AR(1) noise. The noise is measured around the cuts so claimed, and around
the cuts the AR(1) likelihood itself prefers (``_own_fit``: its BIC with each segment
counted ``OWN_FIT_WEIGHT`` times); the lower long-run variance is kept, so that a step the
penalty missed does not inflate the noise that sets the penalty. ``BETA`` is calibrated so that a series without change
(white noise, AR(1) with rho up to 0.6, a daily cycle, Student-t tails with 2 degrees of
freedom; 60 to 2,000 points) shows a false change point in at most ``FALSE_ALARM_RATE``
of series (tests/test_changes.py checks it over many seeds; bench/changepoints.py
prints the rates).

A series that trends or wanders (population, prices, a filling disk) has no level to
shift: the level model cuts its slope into a staircase of steps. So each series is read
three ways:

- **level**: the scores as above;
- **trend**: the values less one straight line (Theil–Sen's slope; one parameter more):
  level shifts around a steady trend; the slope over the whole series, or within the
  level reading's segments (a step is no slope) when the series then needs fewer change
  points, or as many at a lower BIC (``_refit_trends``);
- **integrated**: the increments (differences of the deseasoned values): a change of
  slope is a change point of the increments' level (``Detection.slope``), a change of
  volatility one of their spread; scored as the differences of the scores.

The reading kept is the one with the lowest BIC on the scores (``readings.fit``: segment means plus
AR(1) residuals, a mean and a position per segment, each reading at the number of its
binary segmentation's cuts that suits it best); its change points are then the ones its
calibrated detector claims. On the no-change series of the calibration the level reading
wins and the rates hold. A random walk, which the level reading alone cut into steps in
35–100 % of series, shows a false change point in 1–10 % (4–6 % with a drift), and a
straight trend in AR(1) noise (98–100 % before) in 0–12 % (bench/changepoints.py
--false-alarms prints them).

Each claimed cut is then tested on its own, with the tail of its step under the noise's
own distribution (``saddle.Noise.tail``), and dropped when it fails: values that tie (a
count of rare errors) make scores far from normal, and a spell of them passed the
penalty in 11–43 % of such series without change (5–7 % now).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import special

from rootsift.analysis.changes.readings import (
    deseason,
    fit,
    median,
    noise,
    path_bics,
    path_bics_many,
    ranks,
    residual_noise,
    standardized,
    theil,
)
from rootsift.analysis.changes.saddle import Noise
from rootsift.analysis.changes.segment import best_subset, binseg, binseg_many, choose, segment_costs

__all__ = ["Detection", "Point", "best_subset", "binseg", "detect", "detect_many"]

BETA = 2.5
"""Penalty multiplier (per unit of long-run variance and of log n); see the module doc."""
FALSE_ALARM_RATE = 0.05
"""The stated share of no-change series in which a change point is (falsely) found."""
MIN_SIZE = 3
"""The fewest buckets a segment has: nothing is claimed about a shorter spell."""
MIN_POINTS = 2 * MIN_SIZE + 2
REFINE = 2
MAX_CANDIDATES = 30
"""Binary segmentation's first splits, among which the penalised best set is chosen."""
SPREAD_FACTOR = 2.2
"""The spread channel's penalty over the level's (calibrated with it: module doc)."""
OWN_FIT_WEIGHT = 1.5
"""The AR(1) likelihood's own segmentation, around which the noise is also measured,
counts each segment's parameters this many times (BIC: 1); calibrated (module doc)."""
OWN_FIT_MIN_POINTS = 60
"""Below this many points the own fit is not tried: it raised false alarms there (white
noise at 15-25 points 2 % -> 7-9 %, AR(1) at 15 points 13 % -> 22 %), outside the range
the rate is calibrated on, and a short series is where a user least expects one."""


@dataclass
class Point:
    """One change point: the index of the first bucket of the new regime, and the evidence."""

    index: int
    before: float
    """The median of the raw values in the segment before."""
    after: float
    """The median of the raw values in the segment after."""
    mean_before: float
    mean_after: float
    effect: float
    """The shift in the robust scores, in units of their noise's standard deviation."""
    z: float
    p_value: float
    """Two-sided, Bonferroni over the positions tried: the step's tail with the noise's own
    distribution and the long-run variance (``saddle.Noise.tail``; ``z``'s normal tail when
    the noise is normal)."""
    segment_before: tuple[int, int]
    segment_after: tuple[int, int]


@dataclass
class Detection:
    """The change points of one series and how they were found."""

    points: list[Point]
    sigma: float
    rho: float
    penalty: float
    seasonal: bool
    spread: list[Point] = field(default_factory=list)
    """Change points in spread: ``before``/``after`` are the median distance of the values
    from their level segment's median (for an integrated series: of the increments from
    their segment's median increment, a change of volatility)."""
    slope: list[Point] = field(default_factory=list)
    """Changes of slope of an integrated series: ``before``/``after`` are the median
    increment per bucket either side; ``index`` the first bucket after the kink."""
    model: str = "level"
    """``level`` (steps around constant levels) or ``integrated`` (the series wanders: its
    increments carry the change points); see the module doc."""


def scores(values: np.ndarray) -> np.ndarray:
    """Normal scores of the ranks (ties averaged): robust to tails and to monotone transforms."""
    n = len(values)
    return np.asarray(special.ndtri(ranks(values) / (n + 1)), dtype=np.float64)


def detect(values: np.ndarray, period: int | None = None, beta: float = BETA) -> Detection:
    """Change points in level of ``values`` (one per bucket, no gaps), and in spread
    (``Detection.spread``); ``period``: buckets per day when a daily cycle may be present.
    The series is read three ways (module doc): levels; levels around one straight trend
    (``model`` "trend"); integrated, whose change points are changes of slope
    (``Detection.slope``) and of volatility (``spread``), and no level steps."""
    return detect_many([values], [period], beta)[0]


def detect_many(
    series: Sequence[np.ndarray], periods: Sequence[int | None] | None = None, beta: float = BETA
) -> list[Detection]:
    """``detect`` of each of ``series`` (``periods``: each one's, default none), the same
    change points; the binary segmentations of series of equal length run together
    (segment.binseg_many), the cost of hundreds of hosts' series in numpy calls per split
    rather than per series."""
    periods = list(periods) if periods is not None else [None] * len(series)
    prepared = [_readings(np.asarray(v, dtype=np.float64), p) for v, p in zip(series, periods, strict=True)]
    all_paths = _paths([w for r in prepared for w, _, _, _ in r[2].values()])
    level_cuts = _refit_trends(prepared, periods, all_paths, beta)
    listed = [reading for _, _, readings in prepared for reading in readings.values()]
    fitted = path_bics_many([(p, z, e, inc, 1.0) for p, (_, z, e, inc) in zip(all_paths, listed, strict=True)])
    every = iter(zip(all_paths, fitted, strict=True))
    chosen: list[tuple[Any, ...] | None] = []
    for i, (x, seasonal, readings) in enumerate(prepared):
        if not readings:
            chosen.append(None)
            continue
        fits = {}
        for name, (w, *_) in readings.items():
            path, bics = next(every)
            fits[name] = (w, path, float(np.min(bics)))  # readings.fit, all series at once
        model = min(fits, key=lambda name: fits[name][2])
        w, path, _ = fits[model]
        cuts, sigma, rho, lrv, penalty = level_cuts[i] if model == "level" else _segment(w, beta, path)
        dx = np.diff(x) if model == "integrated" else x
        points, cuts = _tested(w, dx, cuts, lrv)
        chosen.append((x, seasonal, model, w, dx, cuts, sigma, rho, lrv, penalty, points))
    sizes = [_sizes(c[3], c[4], c[5]) for c in chosen if c is not None]
    size_paths, sized = iter(_paths([size for size, _ in sizes])), iter(sizes)
    out = []
    for c in chosen:
        if c is None:
            out.append(Detection([], 0.0, 0.0, 0.0, False))
            continue
        x, seasonal, model, w, dx, cuts, sigma, rho, lrv, penalty, points = c
        size, level = next(sized)
        s_cuts, _, _, s_lrv, _ = _segment(size, beta * SPREAD_FACTOR, next(size_paths), own_fit=False)
        spread, _ = _tested(size, np.abs(dx - level), s_cuts, s_lrv)
        if model == "integrated":
            out.append(Detection([], sigma, rho, penalty, seasonal, _shifted(spread), _shifted(points), model))
        else:
            out.append(Detection(points, sigma, rho, penalty, seasonal, spread, [], model))
    return out


def _readings(x: np.ndarray, period: int | None) -> tuple[np.ndarray, bool, dict[str, tuple]]:
    """(x, seasonal, each reading's series its detector cuts, the scores its BIC is taken
    on, its extra parameters, whether they are increments); no readings when too short."""
    n = len(x)
    if n < MIN_POINTS:
        return x, False, {}
    z, seasonal = deseason(scores(x), period)
    readings: dict[str, tuple] = {"level": (z, z, 0, False)}
    if n > MIN_POINTS:
        y = standardized(x, period if seasonal else None)
        readings["integrated"] = (scores(np.diff(y)), np.diff(z), 0, True)
        t = np.arange(n, dtype=np.float64)
        readings["trend"] = (scores(y - theil(y) * t), z - theil(z) * t, 1, False)
    return x, seasonal, readings


def _refit_trends(
    prepared: list[tuple[np.ndarray, bool, dict[str, tuple]]],
    periods: list[int | None],
    paths: list[list[int]],
    beta: float,
) -> dict[int, tuple[list[int], float, float, float, float]]:
    """The trend reading's slope taken again within the segments the level reading cuts,
    in place (the reading and its path), where the series then needs fewer change points
    (the detector's, calibrated), or as many and its BIC (``fit``) is lower. One Theil–Sen
    line over a step takes part of the step as slope, and the values less that line are a
    saw whose teeth are cut as steps of their own (a step of 3 σ halfway along a slight
    rise: three cuts, one of them the step). Within the level reading's segments a step is
    no slope. Not always the better slope: on a steady trend the level reading's staircase
    has treads flatter than the trend (its cuts sit where the noise steepens it), and that
    slope leaves a trend to cut; the line over the whole series needs fewer cuts there and
    stays. A series the level reading does not cut keeps its line. The readings tried are
    segmented together (``_paths``). Returns each series' level reading's ``_segment``,
    by its place in ``prepared`` (a series too short to read has none)."""
    moved, level = [], {}
    starts = list(itertools.accumulate((len(r) for _, _, r in prepared), initial=0))
    own = _own_fits([(i, r["level"][0], paths[starts[i]]) for i, (_, _, r) in enumerate(prepared) if r])
    at = 0
    for i, (x, seasonal, readings) in enumerate(prepared):
        names = list(readings)
        if names:
            level[i] = _segment(readings["level"][0], beta, paths[at], own=own.get(i))
        if "trend" in names:
            cuts = level[i][0]
            if len(cuts) > 1:
                _, z, extra, increments = readings["trend"]
                y, base = standardized(x, periods[i] if seasonal else None), readings["level"][1]
                t = np.arange(len(x), dtype=np.float64)
                refit = (scores(y - theil(y, cuts) * t), base - theil(base, cuts) * t, extra, increments)
                moved.append((i, at + names.index("trend"), refit))
        at += len(names)
    for (i, k, refit), path in zip(moved, _paths([refit[0] for _, _, refit in moved]), strict=True):
        old = prepared[i][2]["trend"]
        more = len(_segment(refit[0], beta, path)[0]) - len(_segment(old[0], beta, paths[k])[0])
        if more < 0 or (more == 0 and fit(path, *refit[1:]) < fit(paths[k], *old[1:])):
            prepared[i][2]["trend"], paths[k] = refit, path
    return level


def _own_fits(items: list[tuple[int, np.ndarray, list[int]]]) -> dict[int, list[int]]:
    """``_own_fit(z, path)`` of each (key, z, path) of at least ``OWN_FIT_MIN_POINTS``
    values, by key, their BIC paths computed together (``path_bics_many``)."""
    items = [it for it in items if len(it[1]) >= OWN_FIT_MIN_POINTS]
    got = path_bics_many([(path, z, 0, False, OWN_FIT_WEIGHT) for _, z, path in items])
    return {key: [*sorted(path[: int(np.argmin(b))]), len(z)] for (key, z, path), b in zip(items, got, strict=True)}


def _paths(series: list[np.ndarray]) -> list[list[int]]:
    """Binary segmentation's first ``MAX_CANDIDATES`` cuts of each series, those of equal
    length together."""
    out: list[list[int]] = [[] for _ in series]
    by_length: dict[int, list[int]] = {}
    for i, w in enumerate(series):
        by_length.setdefault(len(w), []).append(i)
    for idx in by_length.values():
        for i, cuts in zip(idx, binseg_many(np.stack([series[i] for i in idx]), MAX_CANDIDATES, MIN_SIZE), strict=True):
            out[i] = cuts
    return out


def _sizes(z: np.ndarray, x: np.ndarray, cuts: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """The scores of the residuals' size around the level segments ``cuts`` (the series the
    spread channel cuts: ``_spread``), and each bucket's segment median of ``x``."""
    r = z.copy()
    level = np.empty(len(x))
    for a, b in zip([0, *cuts[:-1]], cuts, strict=True):
        r[a:b] -= r[a:b].mean()
        level[a:b] = median(x[a:b])
    return scores(np.abs(r)), level


def _shifted(points: list[Point]) -> list[Point]:
    """Points found on the increments as indices of the values: increment k is
    x[k + 1] − x[k], so the new regime's first value is k + 1."""
    for p in points:
        p.index += 1
        p.segment_before = (p.segment_before[0] + 1, p.segment_before[1] + 1)
        p.segment_after = (p.segment_after[0] + 1, p.segment_after[1] + 1)
    return points


def _segment(
    z: np.ndarray, beta: float, candidates: list[int] | None = None, own_fit: bool = True, own: list[int] | None = None
) -> tuple[list[int], float, float, float, float]:
    """(cuts ending with n, sigma, rho, long-run variance, penalty) of ``z``, chosen among
    ``candidates`` (binary segmentation's first cuts of ``z`` when not given). The noise
    is measured around the cuts the penalty claims (twice, from the robust estimate) and,
    with ``own_fit``, around the cuts the AR(1) likelihood itself prefers (``_own_fit``):
    the lower long-run variance of the two sets the penalty (``own``: those cuts, when
    already found)."""
    n = len(z)
    if candidates is None:
        candidates = binseg(z, MAX_CANDIDATES, MIN_SIZE)
    sigma, rho = noise(z)
    points, matrix = segment_costs(z, candidates)  # the same for every penalty tried
    cost = matrix.T.tolist()
    for _ in range(REFINE):  # the noise around the segments found, then cut again
        lrv = sigma**2 * (1 + rho) / (1 - rho)
        cuts = choose(points, cost, beta * lrv * math.log(n))
        sigma, rho = residual_noise(z, cuts)
    lrv = sigma**2 * (1 + rho) / (1 - rho)
    if own_fit and n >= OWN_FIT_MIN_POINTS:
        own_sigma, own_rho = residual_noise(z, own if own is not None else _own_fit(z, candidates))
        own_lrv = own_sigma**2 * (1 + own_rho) / (1 - own_rho)
        if own_lrv < lrv:
            sigma, rho, lrv = own_sigma, own_rho, own_lrv
    penalty = beta * lrv * math.log(n)
    return choose(points, cost, penalty), sigma, rho, lrv, penalty


def _own_fit(z: np.ndarray, candidates: list[int]) -> list[int]:
    """The first k cuts of the binary segmentation ``candidates`` (ending with n) whose
    segment means plus AR(1) noise have the lowest BIC with each segment's parameters
    counted ``OWN_FIT_WEIGHT`` times. The noise around the cuts the penalty claims is
    inflated by a step it missed, and the penalty grows with it (a step of the size
    annotators mark in a short, autocorrelated series is never claimed); the likelihood
    fits the step and the correlation together, so its noise is not. At BIC's own weight
    it cuts AR(1) noise, whose noise is then too small (16 % false alarms at 60 points;
    1.25: 9 %; 1.5, the smallest on that grid within the stated rate: 5 %)."""
    k = int(np.argmin(path_bics(candidates, z, weight=OWN_FIT_WEIGHT)))
    return [*sorted(candidates[:k]), len(z)]


def _tested(z: np.ndarray, x: np.ndarray, cuts: list[int], lrv: float) -> tuple[list[Point], list[int]]:
    """(points, cuts ending with n): the penalty's ``cuts`` less those whose own test fails
    (p at least ``FALSE_ALARM_RATE``), the weakest first, each time tested again: with
    values that tie (counts of rare errors), a spell the penalty claims can be noise."""
    while True:
        points = _points(z, x, cuts, lrv, median)
        weakest = max(points, key=lambda p: p.p_value, default=None)
        if weakest is None or weakest.p_value < FALSE_ALARM_RATE:
            return points, cuts
        cuts = [c for c in cuts if c != weakest.index]


def _points(z: np.ndarray, x: np.ndarray, cuts: list[int], lrv: float, summary: Any) -> list[Point]:
    """Each cut as a Point: ``summary`` (the median) of ``x`` either side, the shift of ``z``."""
    n = len(z)
    bounds = [0, *cuts]
    points = []
    residuals = np.concatenate([z[a:b] - z[a:b].mean() for a, b in itertools.pairwise(bounds)])
    draws = float(residuals @ residuals) / len(z) / lrv if lrv > 0 else 1.0  # a bucket's worth (saddle.py)
    tails = Noise(residuals)
    for i in range(1, len(bounds) - 1):
        a, k, b = bounds[i - 1], bounds[i], bounds[i + 1]
        diff = float(z[k:b].mean() - z[a:k].mean())
        se = math.sqrt(lrv * (1 / (k - a) + 1 / (b - k)))
        zz = diff / se if se > 0 else 0.0
        sides = ((b - k) * draws, (k - a) * draws)
        tail = tails.tail(abs(diff), *(sides if diff > 0 else sides[::-1]))
        p = min(1.0, 2 * tail * (n - 1))
        points.append(
            Point(
                index=k,
                before=float(summary(x[a:k])),
                after=float(summary(x[k:b])),
                mean_before=float(np.mean(x[a:k])),
                mean_after=float(np.mean(x[k:b])),
                effect=diff / math.sqrt(lrv) if lrv > 0 else 0.0,
                z=zz,
                p_value=p,
                segment_before=(a, k),
                segment_after=(k, b),
            )
        )
    return points
