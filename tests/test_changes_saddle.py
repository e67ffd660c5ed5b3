"""The step's tail with the noise's own distribution (analysis/changes/saddle.py): the
normal tail on normal noise, close to the binomial on a two-point noise, where the normal
test is off by orders of magnitude."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rootsift.analysis.changes.saddle import step_tail


@pytest.mark.parametrize(("d", "first", "second"), [(1.0, 3, 997), (0.5, 50, 50), (0.3, 100, 900), (2.0, 3, 997)])
def test_normal_noise_gives_the_normal_tail(d: float, first: int, second: int) -> None:
    noise = np.random.default_rng(0).normal(size=20_000)
    normal = stats.norm.sf(d / (noise.std() * math.sqrt(1 / first + 1 / second)))
    assert step_tail(noise, d, first, second) == pytest.approx(normal, rel=0.35)


@pytest.mark.parametrize(("ones", "m"), [(2, 3), (5, 10), (10, 20)])
def test_a_two_point_noise_gives_about_the_binomial_tail(ones: int, m: int) -> None:
    """1s in 5 % of buckets: ``ones`` of ``m`` in a spell. The normal test puts it 10⁴–10⁶
    times too far out; the saddlepoint is within a factor of 4 (no continuity correction)."""
    noise = (np.random.default_rng(1).random(50_000) < 0.05).astype(float)
    share = noise.mean()
    d = ones / m - share - 1e-9
    exact = stats.binom.sf(ones - 1, m, share)
    got = step_tail(noise, d, m, 1e6)
    assert exact / 4 < got <= exact * 1.01
    assert stats.norm.sf(d / (noise.std() / math.sqrt(m))) < exact / 1_000


def test_a_step_of_the_whole_range_is_the_product_of_the_shares() -> None:
    """Every draw of the first mean at the top, every one of the second at the bottom."""
    noise = np.r_[np.zeros(95), np.ones(5)]
    assert step_tail(noise, 1.0, 3, 2) == pytest.approx(0.05**3 * 0.95**2, rel=1e-6)


def test_no_spread_or_no_step_is_no_evidence() -> None:
    assert step_tail(np.zeros(10), 1.0, 3, 7) == 1.0
    assert step_tail(np.arange(10.0), 0.0, 3, 7) == 1.0
