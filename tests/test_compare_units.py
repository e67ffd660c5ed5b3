"""compare's test of units (one value per host): the ratio scale for positive values, the
linear scale otherwise, pairing, and its A/A rate with a handful of hosts."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from rootsift import Rootsift
from rootsift.analysis import stats
from rootsift.analysis.compare.units import compare_units
from test_explain import write_events


def test_positive_values_compare_as_ratios() -> None:
    """Every B host at twice an A host: the change is +100 % exactly, whatever the hosts'
    own levels (a factor of 100 apart here), with the interval of the ratio."""
    a = {"a1": 1e6, "a2": 1e7, "a3": 1e8}
    b = {"b1": 2e6, "b2": 2e7, "b3": 2e8}
    got = compare_units(a, b, 0.05)
    assert got["scale"] == "log" and not got["paired"]
    assert got["relative_change"] == pytest.approx(1.0)
    assert got["a"] == pytest.approx(1e7) and got["b"] == pytest.approx(2e7)  # geometric means
    lo, hi = got["ci"]
    assert lo < 1.0 < hi and lo > -1.0  # a ratio's interval: never below −100 %
    assert (1 + lo) * (1 + hi) == pytest.approx(4.0)  # symmetric about ×2 on the log scale
    assert "logarithms" in got["test"] and "Behrens" in got["test"]


def test_a_value_at_or_below_zero_falls_back_to_the_linear_scale() -> None:
    """Slopes of hosts that do not grow have either sign: no logarithms, the difference of
    means relative to A's."""
    a = {"a1": 10.0, "a2": 12.0, "a3": 11.0}
    b = {"b1": -1.0, "b2": 1.0, "b3": 0.0}
    got = compare_units(a, b, 0.05)
    assert got["scale"] == "linear" and "difference of means" in got["test"]
    assert got["relative_change"] == pytest.approx(-1.0)
    assert got["ci"][0] < -1.0 < got["ci"][1] < 0  # linear: the interval may pass −100 %
    zero = compare_units({"a1": 0.0, "a2": 2.0}, {"b1": 1.0, "b2": 3.0}, 0.05)
    assert zero["scale"] == "linear"  # a zero has no logarithm either


def test_the_same_units_on_both_sides_are_paired() -> None:
    a = {"h1": 100.0, "h2": 1000.0, "h3": 10000.0}
    b = {"h1": 90.0, "h2": 910.0, "h3": 8950.0}
    got = compare_units(a, b, 0.05)
    assert got["paired"] and got["relative_change"] == pytest.approx(-0.1, abs=0.01)
    assert got["p_value"] < 0.01  # the hosts' factor-of-100 levels drop out


def test_fewer_than_two_units_a_side_test_nothing() -> None:
    got = compare_units({"a1": 5.0}, {"b1": 1.0, "b2": 2.0}, 0.05)
    assert math.isnan(got["relative_change"]) and got["p_value"] == 1.0


@pytest.mark.parametrize(
    ("n_a", "n_b", "sigma_a", "sigma_b"),
    [(3, 5, 0.6, 0.02), (3, 5, 0.6, 0.2), (3, 10, 0.6, 0.3), (3, 5, 0.02, 0.6), (5, 5, 0.5, 0.5)],
)
def test_a_a_rate_holds_with_a_handful_of_hosts(n_a: int, n_b: int, sigma_a: float, sigma_b: float) -> None:
    """Hosts of both cohorts with the same geometric mean, their spreads up to 30:1 apart:
    the test rejects at most its level, within Monte Carlo error (2,000 seeded trials: a
    rate of 5 % lies below 6.5 % with 99 % confidence; 1.25 % below 2.1 %). Welch's t,
    the test before, rejected 7.2 % of these draws at 5 % for 3 hosts against 5 with
    spreads 3:1, and 7.4 % for 3 against 10 with spreads 2:1."""
    rng = np.random.default_rng(n_a * 1000 + n_b * 100 + int(sigma_a * 100) + int(sigma_b * 10))
    at_5 = at_125 = 0
    trials = 2000
    for _ in range(trials):
        a = dict(enumerate(rng.lognormal(21.0, sigma_a, n_a)))
        b = {f"b{i}": v for i, v in enumerate(rng.lognormal(21.0, sigma_b, n_b))}
        p = compare_units(a, b, 0.05)["p_value"]
        at_5 += p < 0.05
        at_125 += p < 0.0125
    assert at_5 / trials < 0.065 and at_125 / trials < 0.021


def test_behrens_fisher_is_students_t_when_one_side_has_no_error() -> None:
    """Three leaking hosts against five alike: the test is Student's t on 2 degrees of
    freedom, as sharp as any test of three values can be."""
    p, lo, hi = stats.behrens_fisher(2.55, 0.317, 2, 0.0, 4, 0.0125)
    assert p == pytest.approx(2 * sps.t.sf(2.55 / 0.317, 2), rel=1e-9)
    assert hi - 2.55 == pytest.approx(sps.t.isf(0.0125 / 2, 2) * 0.317, rel=1e-6)


@pytest.mark.parametrize(("se_a", "df_a", "se_b", "df_b"), [(0.8, 2, 0.6, 4), (0.3, 9, 0.9, 9), (1.0, 1, 0.1, 4)])
def test_behrens_fisher_tail_matches_its_integral(se_a: float, df_a: int, se_b: float, df_b: int) -> None:
    """The p-value is P(|sin θ T_a + cos θ T_b| > t), checked against adaptive quadrature,
    and the interval's half-width is where that tail equals the level."""
    se = math.hypot(se_a, se_b)
    s, c = se_a / se, se_b / se
    for diff in (0.5 * se, 2.0 * se, 6.0 * se):
        x = diff / se

        def density(u: float, x: float = x) -> float:
            return float(sps.t.pdf(u, df_b) * (sps.t.sf((x - c * u) / s, df_a) + sps.t.sf((x + c * u) / s, df_a)))

        exact = integrate.quad(density, -np.inf, np.inf, epsabs=1e-12, limit=500)[0]
        assert stats.behrens_fisher(diff, se_a, df_a, se_b, df_b, 0.05)[0] == pytest.approx(exact, abs=2e-5)
    _, lo, hi = stats.behrens_fisher(0.0, se_a, df_a, se_b, df_b, 0.05)
    assert stats.behrens_fisher(hi, se_a, df_a, se_b, df_b, 0.05)[0] == pytest.approx(0.05, abs=1e-6)
    assert lo == pytest.approx(-hi)


def test_compare_reports_the_scale_of_a_per_host_metric(tmp_path: Path) -> None:
    """Through compare: a per-host peak of bytes is compared as a ratio; a per-host slope
    that falls on some hosts, on the linear scale."""
    start = datetime(2024, 3, 1, tzinfo=UTC)
    rows = []
    for h, (kernel, level, growth) in enumerate(
        [("a", 4e9, 1e6), ("a", 6e9, 2e6), ("a", 5e9, 1.5e6), ("b", 1e9, -50.0), ("b", 1.1e9, 80.0), ("b", 0.9e9, 10.0)]
    ):
        for k in range(24):
            when = start + timedelta(hours=k)
            rows.append({"timestamp": when.isoformat(), "host": f"h{h}", "kernel": kernel, "slab": level + growth * k})
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "m.jsonl", rows), "mem")
        got = rs.compare("mem", a='kernel = "a"', b='kernel = "b"', metrics="max(slab),slope(slab)", per="host")
    peak, slope = got.metrics
    assert peak["scale"] == "log" and peak["unit"] == "host"
    assert peak["relative_change"] == pytest.approx(1e9 * (1 * 1.1 * 0.9) ** (1 / 3) / peak["a"] - 1, rel=1e-3)
    assert slope["scale"] == "linear"


def test_behrens_fisher_interval_past_the_heavier_t() -> None:
    """Equal-ish weights on two t's of 4 degrees of freedom: the 5 % point lies just past
    Student's (2.776); the interval is still found, its tail at the level."""
    p, lo, hi = stats.behrens_fisher(0.0, 0.5, 4, math.sqrt(0.75), 4, 0.05)
    assert p == 1.0 and hi > sps.t.isf(0.025, 4) and lo == pytest.approx(-hi)
    assert stats.behrens_fisher(hi, 0.5, 4, math.sqrt(0.75), 4, 0.05)[0] == pytest.approx(0.05, abs=1e-7)


def test_a_unit_without_a_finite_value_is_left_out_and_said() -> None:
    got = compare_units({"a1": 1.0, "a2": 2.0, "a3": math.inf}, {"b1": 1.0, "b2": 3.0}, 0.05)
    assert "1 units left out" in got["note"] and got["scale"] == "log"
    assert got["a"] == pytest.approx(math.sqrt(2.0), rel=1e-5)  # the geometric mean of the finite two
