"""analysis/distributions.py gives the same floats as scipy.stats (which it replaces on the
analyses' paths to spare its import), on grids that reach into the tails, the support's
edges, invalid parameters, NaN and ±inf included."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from rootsift.analysis import distributions as dist

EDGES = [-np.inf, -1e300, -1e10, -40.0, -1.0, -0.0, 0.0, 1e-300, 0.5, 1.0, 40.0, 1e10, np.inf, np.nan]
REALS = np.concatenate([np.linspace(-60, 60, 481), -np.logspace(-12, 3, 61), np.logspace(-12, 3, 61), EDGES])
PROBS = np.concatenate(
    [[0.0, 1.0, -0.1, 1.1, np.nan, 0.5, 1e-320], np.logspace(-300, -1, 300), 1 - np.logspace(-16, -1, 60)]
)
DFS = [-1.0, 0.0, np.nan, 0.3, 1.0, 2.0, 2.5, 7.0, 30.0, 1e3, 1e8, np.inf]


def same(ours: object, theirs: object) -> None:
    """The same floats: equal, NaN where NaN, and zeros of the same sign."""
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    assert a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=True), np.flatnonzero(~((a == b) | (np.isnan(a) & np.isnan(b))))[:10]
    assert np.array_equal(np.signbit(a[a == 0]), np.signbit(b[b == 0]))
    assert type(ours) is type(theirs) or np.ndim(theirs) == 0


@pytest.mark.parametrize("x", [REALS, 1.5, -0.0, np.float64(3.0), [0.1, 2.0]])
def test_normal(x: object) -> None:
    same(dist.norm_sf(x), stats.norm.sf(x))
    same(dist.kstwobign_sf(x), stats.kstwobign.sf(x))


@pytest.mark.parametrize("q", [PROBS, 0.025, 0.5, 1e-300])
def test_normal_quantiles(q: object) -> None:
    same(dist.norm_ppf(q), stats.norm.ppf(q))
    same(dist.norm_isf(q), stats.norm.isf(q))


@pytest.mark.parametrize("df", DFS)
def test_student_t(df: float) -> None:
    same(dist.t_sf(REALS, df), stats.t.sf(REALS, df))
    same(dist.t_ppf(PROBS, df), stats.t.ppf(PROBS, df))
    same(dist.t_isf(PROBS, df), stats.t.isf(PROBS, df))


@pytest.mark.parametrize("df", DFS)
def test_chi_squared(df: float) -> None:
    same(dist.chi2_sf(REALS, df), stats.chi2.sf(REALS, df))
    same(dist.chi2_isf(PROBS, df), stats.chi2.isf(PROBS, df))


def test_scalars_and_broadcasting() -> None:
    same(dist.t_sf(2.0, 3.5), stats.t.sf(2.0, 3.5))
    same(dist.chi2_sf(np.array([1.0, 50.0]), 1), stats.chi2.sf(np.array([1.0, 50.0]), 1))
    df = np.array([[1.0], [4.0], [np.inf]])
    same(dist.t_sf(REALS[None, :], df), stats.t.sf(REALS[None, :], df))
    same(dist.chi2_isf(np.array([0.05, 1e-9]), np.array([1.0, 3.0])), stats.chi2.isf([0.05, 1e-9], [1.0, 3.0]))


def test_binomial() -> None:
    rng = np.random.default_rng(7)
    n = np.concatenate([rng.integers(0, 5000, 3000), [0, 1, 2, 10, 10, 10, 5, 5]]).astype(np.float64)
    k = np.concatenate([np.floor(rng.random(3000) * (n[:3000] + 3)) - 2, [-1, 0, 1, 10, 11, 9.5, np.nan, -np.inf]])
    p = np.concatenate([rng.random(3000) ** 4, [0.5, 0.0, 1.0, 0.3, 0.3, 0.3, 0.2, 0.2]])
    same(dist.binom_sf(k, n, p), stats.binom.sf(k, n, p))
    same(dist.binom_sf(k, n, 1e-9), stats.binom.sf(k, n, 1e-9))
    bad = [(3, 10, -0.1), (3, 10, 1.5), (3, 10.5, 0.5), (3, -1, 0.5), (3, 10, np.nan)]
    for args in bad:
        same(dist.binom_sf(*args), stats.binom.sf(*args))
    same(dist.binom_sf(4.0, 100.0, 0.01), stats.binom.sf(4.0, 100.0, 0.01))


def test_hypergeometric() -> None:
    """share_test's use: a of n1 selected and b of n0 baseline events hold a value."""
    rng = np.random.default_rng(11)
    n1 = rng.integers(0, 3000, 4000).astype(np.float64)
    n0 = rng.integers(0, 300000, 4000).astype(np.float64)
    a = np.floor(rng.random(4000) ** 3 * (n1 + 1))
    b = np.floor(rng.random(4000) ** 5 * (n0 + 1))
    total, good = n1 + n0, a + b
    for k in (a - 1, a, a + 5, a - 10):
        same(dist.hypergeom_sf(k, total, good, n1), stats.hypergeom.sf(k, total, good, n1))
        same(dist.hypergeom_cdf(k, total, good, n1), stats.hypergeom.cdf(k, total, good, n1))
    cases = list(
        itertools.product([-1, 0, 1, 2, 3, 5, np.nan, np.inf, -np.inf], [0, 1, 5, 10], [0, 1, 3, 10, 12], [0, 2, 5, 11])
    )
    k, m, n, d = (np.array(c, dtype=np.float64) for c in zip(*cases, strict=True))
    same(dist.hypergeom_sf(k, m, n, d), stats.hypergeom.sf(k, m, n, d))
    same(dist.hypergeom_cdf(k, m, n, d), stats.hypergeom.cdf(k, m, n, d))
    same(dist.hypergeom_sf(2.0, 10.5, 3, 4), stats.hypergeom.sf(2.0, 10.5, 3, 4))
    same(dist.hypergeom_sf(2, 100, 30, 10), stats.hypergeom.sf(2, 100, 30, 10))


def test_poisson_logs() -> None:
    """timescale.py's use: log tails of counts of completions against a rate."""
    rng = np.random.default_rng(3)
    mu = np.concatenate([rng.random(3000) * 10 ** rng.uniform(-6, 4, 3000), [0, 0, 0, -1, np.nan, 5, 5, 5, np.inf]])
    k = np.concatenate([np.floor(rng.random(3000) * 3 * mu[:3000]) - 1, [-1, 0, 3, 2, 2, np.nan, np.inf, -np.inf, 4]])
    k[::7] += 0.5
    same(dist.poisson_logsf(k, mu), stats.poisson.logsf(k, mu))
    same(dist.poisson_logcdf(k, mu), stats.poisson.logcdf(k, mu))
    same(dist.poisson_logsf(3.0, 0.5), stats.poisson.logsf(3.0, 0.5))


@pytest.mark.parametrize(
    "values",
    [[], [1.0], [3.0, 1.0, 2.0], [2.0, 2.0, 1.0, 2.0, -0.0, 0.0], [1.0, np.nan, 0.0], np.arange(50) % 7 * 1.5],
)
def test_ranks(values: list[float]) -> None:
    same(dist.rankdata(values), stats.rankdata(values))
    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=2000), 1)
    same(dist.rankdata(x), stats.rankdata(x))


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_mann_whitney(alternative: str) -> None:
    """Every size from 1 (the exact distribution up to 8 a side without ties), ties,
    shifted and equal samples, large ones: scipy's p-value, bit for bit."""
    from rootsift.analysis.mannwhitney import mannwhitneyu_p

    rng = np.random.default_rng(13)
    sizes = [(1, 1), (1, 5), (3, 3), (3, 8), (8, 8), (5, 40), (8, 300), (9, 9), (12, 7), (30, 30), (200, 150)]
    for n1, n2 in sizes:
        for shift in (0.0, 0.5, 3.0):
            for tied in (False, True):
                x, y = rng.normal(shift, 1, n1), rng.normal(0, 1, n2)
                if tied:
                    x, y = np.round(x), np.round(y)
                for a, b in ((x, y), (y, x)):
                    theirs = float(stats.mannwhitneyu(a, b, alternative=alternative).pvalue)
                    same(mannwhitneyu_p(a, b, alternative), theirs)
    same(
        mannwhitneyu_p([1.0, 2.0], [1.0, 2.0], alternative),
        float(stats.mannwhitneyu([1.0, 2.0], [1.0, 2.0], alternative=alternative).pvalue),
    )
    same(
        mannwhitneyu_p(np.ones(5), np.ones(4), alternative),
        float(stats.mannwhitneyu(np.ones(5), np.ones(4), alternative=alternative).pvalue),
    )


def test_kendall_tied() -> None:
    """trends' block Mann–Kendall on tied block means: scipy's kendalltau p-value, bit for bit."""
    from rootsift.analysis.trends.fitting import kendall_tied

    rng = np.random.default_rng(17)
    for k in [3, 4, 5, 8, 12, 20, 33, 34, 60]:
        for levels in (2, 3, 5, 20):
            means = rng.integers(0, levels, k).astype(np.float64) + np.arange(k) * rng.choice([0.0, 0.1])
            means[rng.integers(0, k)] = means[0]  # at least one tie
            i, j = np.triu_indices(k, 1)
            signs = np.sign(means[j] - means[i])
            score = int(signs.sum())
            if score == 0 or not (signs == 0).any():  # used only when means tie
                continue
            same(kendall_tied(means, score), float(stats.kendalltau(np.arange(k), means).pvalue))


def test_fisher_exact() -> None:
    """compare's rate test: scipy's two-sided Fisher p-value, bit for bit, zeros, one-sided
    tables and thousands of events included."""
    rng = np.random.default_rng(19)
    tables = [[[0, 0], [3, 4]], [[0, 5], [0, 7]], [[1, 0], [0, 1]], [[5, 5], [5, 5]], [[0, 100], [9, 91]]]
    for _ in range(600):
        n_a, n_b = rng.integers(1, [60, 5000])
        k_a, k_b = rng.binomial(n_a, rng.random() ** 2), rng.binomial(n_b, rng.random() ** 2)
        tables.append([[int(k_b), int(n_b - k_b)], [int(k_a), int(n_a - k_a)]])
    for t in tables:
        same(dist.fisher_exact_p(t), float(stats.fisher_exact(t)[1]))
    k = np.array([-1, 0, 1, 2.5, 3, 5, 7, 8, np.nan])
    for m, n, d in [(12, 5, 7), (12, 0, 7), (0, 0, 0), (10, 11, 2), (5000, 60, 900)]:
        same(dist.hypergeom_pmf(k, m, n, d), stats.hypergeom.pmf(k, m, n, d))


def test_brentq() -> None:
    """compare's Behrens–Fisher critical value: scipy.optimize.brentq's root, bit for bit."""
    from scipy import optimize

    from rootsift.analysis import stats as st

    rng = np.random.default_rng(23)
    problems = [
        (lambda x: x**3 - 2, 0.0, 3.0),
        (lambda x: np.cos(x) - x, 0.0, 1.0),
        (lambda x: np.exp(x) - 5, -3.0, 10.0),
    ]
    for _ in range(150):
        sa, sb = rng.uniform(0.01, 3, 2)
        da, db = rng.integers(1, 30, 2).astype(float)
        level = float(rng.choice([0.05, 0.01, 0.0025]))
        tail = st._BehrensFisherTail(sa / np.hypot(sa, sb), sb / np.hypot(sa, sb), da, db)
        top = float(dist.t_isf(level / 2, min(da, db)))
        low = 0.0
        while tail(top) > level:
            low, top = top, top * 2
        problems.append((lambda x, t=tail, lv=level: t(x) - lv, low, top))
    for f, a, b in problems:
        for xtol in (1e-9, 2e-12):
            same(st.brentq(f, a, b, xtol=xtol), float(optimize.brentq(f, a, b, xtol=xtol)))


def _noise_problems(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """causes.fit_noise's least-squares problems on cells of many shapes: bins of cells
    sorted by size, each bin's size against its variance (1 to 20 bins)."""
    rng = np.random.default_rng(2)
    out = []
    for _ in range(count):
        n, k, over = int(rng.integers(40, 2000)), rng.uniform(0.05, 3), rng.uniform(1e-3, 0.3)
        base = rng.gamma(0.3, rng.uniform(1, 500), n)
        sel = rng.poisson(k * base * rng.gamma(1 / over, over, n))
        m, d2 = (sel + k * base) / 2, (sel - k * base) ** 2
        order = np.argsort(m, kind="stable")
        bins = np.array_split(order, max(1, min(20, n // 40)))
        size = np.array([m[b].mean() for b in bins])
        var = np.array([np.median(d2[b]) / 0.454936423119572 for b in bins])
        scale = 1.0 / np.maximum(var, 1e-12 * max(float(var.max()), 1e-300))
        out.append((np.column_stack([size * scale, size * size * scale]), np.ones(len(size))))
    edge = [np.array([[1.0, 2.0]]), np.array([[2.0, 1.0], [1.0, 0.5]]), np.array([[1.0, -1.0], [2.0, -3.0]])]
    out += [(a, np.ones(len(a))) for a in edge] + [(np.array([[1.0, 2.0], [3.0, 1.0]]), np.array([-1.0, 1.0]))]
    return out


def test_nonnegative_least_squares() -> None:
    """causes.fit_noise's fit: scipy.optimize.nnls's solution, the same zeros, to 1e-12."""
    from scipy.optimize import nnls

    from rootsift.analysis.stats import nonnegative_least_squares

    for a, b in _noise_problems(1500):
        theirs, ours = nnls(a, b)[0], nonnegative_least_squares(a, b)
        assert np.array_equal(theirs == 0, ours == 0), (a, b, theirs, ours)
        assert np.allclose(ours, theirs, rtol=1e-12, atol=0), (theirs, ours)


def test_analyses_do_not_import_scipy_stats() -> None:
    """investigate, explain and changes (and their modules) leave scipy.stats and
    scipy.optimize unimported: 0.5–1 s of CPU per process (bench/README.md)."""
    code = (
        "import sys\n"
        "import rootsift.analysis.investigate, rootsift.analysis.explain, rootsift.analysis.changes\n"
        "import rootsift.analysis.compare, rootsift.analysis.trends, rootsift.api_analyses, rootsift.cli\n"
        "import rootsift.analysis.onset_suspects\n"
        "print(sorted(m for m in sys.modules if m.startswith(('scipy.stats', 'scipy.optimize'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
