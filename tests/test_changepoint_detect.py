"""The change-point detector's readings (analysis/changes/detect.py): a trend or a random
walk is not a staircase of level shifts, a change of slope is found at its kink, a steady
trend is no daily cycle; and the TCPD scorer of bench/changepoints.py against the values
its README gives."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from rootsift.analysis.changes import detect as det

SEEDS = 60


def ar1(rng: np.random.Generator, n: int, rho: float) -> np.ndarray:
    e, x = rng.normal(size=n), np.zeros(n)
    for i in range(n):
        x[i] = rho * x[i - 1] + e[i] if i else e[i]
    return x


def alarms(found: list[det.Detection]) -> float:
    """The share of series with any change point (level, spread or slope)."""
    return sum(bool(d.points or d.spread or getattr(d, "slope", [])) for d in found) / len(found)


def test_a_random_walk_is_not_cut_into_level_steps() -> None:
    """A random walk has no change; the level reading alone found one in about half of
    120-point walks (rho capped at 0.9 cannot widen the penalty enough). Read as
    integrated, its increments are white noise. Not the stated 5 %: which reading holds
    is a BIC choice, and a short walk may still read as levels (measured: 8 %)."""
    found = [det.detect(np.cumsum(np.random.default_rng(s).normal(size=120))) for s in range(SEEDS)]
    assert alarms(found) <= 0.15
    assert sum(d.model == "level" for d in found) < SEEDS / 2


def test_a_straight_trend_in_autocorrelated_noise_has_no_change_point() -> None:
    """A steady rise in AR(1) noise (rho 0.5): the level reading cut it into steps in
    every series; the trend reading (values less one Theil–Sen line) has nothing to cut."""
    n = 200
    found = [det.detect(ar1(np.random.default_rng(s), n, 0.5) + np.linspace(0, 6, n)) for s in range(SEEDS)]
    assert alarms(found) <= 0.1
    assert sum(d.model == "trend" for d in found) > SEEDS / 2


def test_a_change_of_slope_is_found_at_its_kink_not_as_steps() -> None:
    """Flat, then a decline over 60 points, then flat again (children per woman, a disk
    that fills and then is full): two changes of slope near the kinks, with the increments
    either side as the values, and no level step."""
    rng = np.random.default_rng(4)
    level = np.r_[np.zeros(150), np.linspace(0, -30, 60), np.full(150, -30.0)]
    x = 100 + level + np.cumsum(rng.normal(0, 0.3, 360))
    found = det.detect(x)
    assert len(found.points) <= 1  # the level reading alone made a staircase of 4 steps
    assert found.model == "integrated" and found.points == []
    at = sorted(p.index for p in found.slope)
    assert len(at) == 2 and abs(at[0] - 150) <= 5 and abs(at[1] - 210) <= 5
    first = min(found.slope, key=lambda p: p.index)
    assert abs(first.before) < 0.2 and first.after == pytest.approx(-0.5, abs=0.2)
    assert first.p_value < 1e-3


def test_a_level_step_in_a_stationary_series_stays_a_level_change() -> None:
    rng = np.random.default_rng(9)
    x = ar1(rng, 400, 0.3) + np.r_[np.zeros(250), np.full(150, 3.0)]
    found = det.detect(x)
    assert [abs(p.index - 250) <= 8 for p in found.points] == [True]  # the noise dips at 253
    assert found.model == "level" and found.slope == []


def test_a_steady_trend_is_no_daily_cycle() -> None:
    """Every day of a steadily rising series rises alike: its days correlate as a cycle's
    would. Compared less each day's own line they do not, and nothing is taken out; a real
    cycle on the same trend still is."""
    rng = np.random.default_rng(0)
    t = np.arange(120)
    rising = 0.5 * t + rng.normal(size=120)
    assert det.deseason(det.scores(rising), 24)[1] is False
    cycle = 3 * np.sin(2 * np.pi * t / 24) + 0.05 * t + rng.normal(size=120)
    assert det.deseason(det.scores(cycle), 24)[1] is True


@pytest.fixture(scope="module")
def scorer():  # type: ignore[no-untyped-def]
    bench = Path(__file__).resolve().parent.parent / "bench"
    sys.path.insert(0, str(bench))
    try:
        import changepoints
    finally:
        sys.path.remove(str(bench))
    return changepoints


@pytest.mark.parametrize(
    ("notes", "predicted", "expected"),
    [
        ({"1": [10, 20], "2": [11, 20], "3": [10], "4": [0, 5]}, [10, 20], 1.0),
        ({"1": [], "2": [10], "3": [50]}, [10], 10 / 11),
        ({"1": [], "2": [10], "3": [50]}, [], 0.8),
    ],
)
def test_tcpd_f1_matches_the_published_examples(scorer, notes, predicted, expected) -> None:  # type: ignore[no-untyped-def]
    assert scorer.f1(notes, predicted) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("notes", "predicted", "expected"),
    [
        ({"1": [10, 20], "2": [10], "3": [0, 5]}, [10, 20], 0.7962962963),
        ({"1": [], "2": [10], "3": [40]}, [10], 0.7954144621),
        ({"1": [], "2": [10], "3": [40]}, [], 0.8189300412),
    ],
)
def test_tcpd_covering_matches_the_published_examples(scorer, notes, predicted, expected) -> None:  # type: ignore[no-untyped-def]
    assert scorer.covering(notes, predicted, 45) == pytest.approx(expected, abs=1e-9)


def test_tcpd_against_counts_the_series_helped_and_hurt(scorer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    before = {"a": (0.5, 0.6), "b": (0.7, 0.7), "c": (0.4, 0.9), "d": (0.3, 0.3), "gone": (0.1, 0.1)}
    after = {"a": (0.8, 0.6), "b": (0.6, 0.7), "c": (0.3995, 0.9), "d": (0.1, 0.5), "new": (0.9, 0.9)}
    helped, hurt = scorer.helps_hurts(before, after, 0)
    assert [name for name, _ in helped] == ["a"]
    assert [name for name, _ in hurt] == ["d", "b"]  # largest loss first; c moved less than 0.001
    assert hurt[0][1] == pytest.approx(-0.2) and helped[0][1] == pytest.approx(0.3)
    assert [name for name, _ in scorer.helps_hurts(before, after, 1)[0]] == ["d"]
    saved = tmp_path / "before.json"
    saved.write_text('{"a": [0.5, 0.6]}')
    assert scorer._saved(saved) == {"a": (0.5, 0.6)}
    saved.write_text("[0.5]")
    with pytest.raises(ValueError, match="not a --save file"):
        scorer._saved(saved)


def test_default_binseg_is_calibrated_to_the_stated_rate_exactly(scorer) -> None:  # type: ignore[no-untyped-def]
    """bench/changepoints.py's matched comparison: a series' ``binseg_no_cut`` is where the
    default binseg stops claiming cuts in it, and the calibrated multiplier is the smallest
    at which no kind shows more than the stated rate of false alarms."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.normal(size=40), 1.5 + rng.normal(size=40)])
    low = scorer.binseg_no_cut(x)
    assert low > 3 and scorer.binseg_default(x, low * 0.99) and not scorer.binseg_default(x, low * 1.01)
    multiplier, rates = scorer.calibrated_binseg(seeds=20, lengths=(60,))
    assert set(rates) == {f"{kind} 60" for kind in scorer.CALIBRATED}
    assert max(rates.values()) <= scorer.det.FALSE_ALARM_RATE
    found = [
        sum(
            bool(scorer.binseg_default(scorer.no_change(kind, 60, np.random.default_rng(s))[0], multiplier * 0.99))
            for s in range(20)
        )
        for kind in scorer.CALIBRATED
    ]
    assert max(found) / 20 > scorer.det.FALSE_ALARM_RATE  # any smaller multiplier alarms more often


def test_binseg_over_many_rows_makes_each_rows_ruptures_cuts() -> None:
    """segment.binseg_many on a matrix (a row per host) proposes, for every row, exactly
    ruptures' Binseg cuts of that row alone, rows stopping at different rounds included."""
    ruptures = pytest.importorskip("ruptures")
    from rootsift.analysis.changes.segment import binseg_many

    rng = np.random.default_rng(5)
    rows = [rng.normal(size=200) + np.r_[np.zeros(80), np.full(40, 2.0 * k), np.zeros(80)] for k in range(6)]
    rows.append(np.r_[np.zeros(100), np.ones(100)])  # two flat segments: no split gains after the first
    got = binseg_many(np.stack(rows), 12, 3)
    for x, cuts in zip(rows, got, strict=True):
        expected = ruptures.Binseg(model="l2", min_size=3, jump=1).fit(x).predict(n_bkps=len(cuts) or 1)[:-1]
        assert sorted(cuts) == (expected if cuts else []), (cuts, expected)
    assert len(got[-1]) == 1 and all(len(c) == 12 for c in got[:-1])


def test_detect_many_finds_what_detect_finds_on_each_series() -> None:
    """``detect_many`` (binary segmentation of series of one length together) gives every
    series the change points, values and p-values one ``detect`` gives it: mixed lengths,
    a daily period, a series too short to cut, steps, a kink and no change."""
    rng = np.random.default_rng(11)
    kink = np.cumsum(np.where(np.arange(300) >= 150, 3.0, 0.5) + rng.normal(size=300))
    step = rng.normal(size=300) + np.r_[np.zeros(200), np.full(100, 2.0)]
    daily = 3 * np.sin(2 * np.pi * np.arange(120) / 24) + rng.normal(size=120) + np.r_[np.zeros(80), np.full(40, 3.0)]
    series = [kink, step, rng.normal(size=300), daily, rng.standard_t(2, size=120), rng.normal(size=5), step[:77]]
    periods = [None, None, None, 24, None, None, None]

    def key(d: det.Detection) -> tuple:
        pts = [(p.index, p.before, p.after, p.effect, p.p_value) for p in d.points + d.slope + d.spread]
        return d.model, len(d.points), len(d.slope), pts, d.sigma, d.rho, d.penalty, d.seasonal

    many = det.detect_many(series, periods)
    assert [key(d) for d in many] == [key(det.detect(x, p)) for x, p in zip(series, periods, strict=True)]
    assert many[0].model == "integrated" and [p.index for p in many[0].slope] == [150]
    assert [p.index for p in many[1].points] == [200]


def test_a_step_on_a_slight_trend_is_one_change_point_not_a_saw() -> None:
    """A step of 3 σ halfway along a slight rise (0.01 σ a bucket; TCPD's quality_control_1):
    one Theil–Sen line over the whole series takes part of the step as slope, and the
    values less it are a saw whose teeth were cut as steps of their own (no seed of 40
    gave the step alone). The slope taken within the level reading's segments, kept when
    the series then needs fewer change points, finds the step alone in about half of the
    seeds, and the step in all."""
    t = np.arange(300)
    alone = 0
    for s in range(40):
        x = 0.01 * t + np.random.default_rng(s).normal(size=300) + np.where(t >= 150, 3.0, 0.0)
        found = det.detect(x)
        at = [p.index for p in found.points + found.slope + found.spread]
        assert any(abs(i - 150) <= 5 for i in at)
        alone += len(at) == 1
    assert alone >= 15  # measured 21 of 40 (0 before)


def test_a_step_in_autocorrelated_noise_is_claimed_by_the_likelihoods_own_noise() -> None:
    """A step of 3 innovation sigmas halfway along 60 points of AR(1) noise (rho 0.7): the
    noise measured around the cuts the penalty claims takes in the step it missed, and the
    penalty grows with it; measured also around the AR(1) likelihood's own cuts, the step
    is found (within 2 buckets) in 25 of 40 seeds (15 before), with no more cuts elsewhere."""
    n, at = 60, 30
    found = [det.detect(ar1(np.random.default_rng(s), n, 0.7) + 3.0 * (np.arange(n) >= at)) for s in range(40)]
    hits = sum(any(abs(p.index - at) <= 2 for p in d.points) for d in found)
    elsewhere = sum(abs(p.index - at) > 2 for d in found for p in d.points)
    assert hits >= 21
    assert elsewhere <= 6
