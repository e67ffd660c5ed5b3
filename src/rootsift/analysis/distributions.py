"""The tails and quantiles the analyses test against, the same floats as ``scipy.stats``
without importing it.

``import scipy.stats`` costs 0.5–1 s of CPU in every process (its distributions' docstrings
are assembled at import, and it pulls in scipy.optimize, linalg, interpolate, integrate,
sparse, spatial, ndimage and fft), more than anything else an ``investigate``, ``explain``
or ``changes`` process imports (bench/README.md, "Start-up of the analysis commands").
Each ``scipy.stats`` method used here only checks its arguments, handles the support's
edges and calls one ``scipy.special`` function; this module does the same, step for step
(``rv_continuous.sf/ppf/isf``, ``rv_discrete.sf/cdf/logsf/logcdf``): ``norm_sf(x)`` is
``scipy.stats.norm.sf(x)``, bit for bit, at every x, ``nan`` and ``±inf`` included.
``tests/test_distributions.py`` checks that on grids that reach into the tails.

The binomial and hypergeometric tails are Boost's, which scipy exposes only as private
ufuncs of ``scipy.special`` (``bdtrc`` is another algorithm: it differs by up to 10²³
relatively in the far tail); with a scipy that lacks them, those two go through
``scipy.stats`` itself. Mann–Whitney is in mannwhitney.py, Kendall's tau with ties in
trends/fitting.py, Brent's root and the two-column NNLS in stats.py, each the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from scipy import special

try:  # Boost's tails, as scipy.stats.binom and .hypergeom call them (scipy ≥ 1.15)
    from scipy.special._ufuncs import _binom_sf, _hypergeom_cdf, _hypergeom_pmf, _hypergeom_sf
except ImportError:  # pragma: no cover - older scipy: through scipy.stats
    _binom_sf = _hypergeom_cdf = _hypergeom_pmf = _hypergeom_sf = None

ArrayLike = Any
Kernel = Callable[..., Any]


def _arrays(*values: ArrayLike) -> list[np.ndarray]:
    return list(np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in values)))


def _done(out: np.ndarray) -> Any:
    return out[()] if out.ndim == 0 else out


def _integral(x: np.ndarray) -> np.ndarray:
    return np.asarray(x == np.round(x))


# continuous: rv_continuous.sf, .ppf and .isf with loc 0 and scale 1


def _sf(kernel: Kernel, x: ArrayLike, low: float, high: float, valid: ArrayLike, *args: ArrayLike) -> Any:
    x, ok, *args_ = _arrays(x, valid, *args)
    ok = ok.astype(bool)
    out = np.zeros(x.shape)
    out[~ok | np.isnan(x)] = np.nan
    out[ok & (x <= low)] = 1.0
    inside = ok & (low < x) & (x < high)
    if inside.any():
        out[inside] = kernel(x[inside], *(a[inside] for a in args_))
    return _done(out)


def _quantile(kernel: Kernel, q: ArrayLike, at_zero: float, at_one: float, valid: ArrayLike, *args: ArrayLike) -> Any:
    q, ok, *args_ = _arrays(q, valid, *args)
    ok = ok.astype(bool)
    out = np.full(q.shape, np.nan)
    out[ok & (q == 0)] = at_zero
    out[ok & (q == 1)] = at_one
    inside = ok & (q > 0) & (q < 1)
    if inside.any():
        out[inside] = kernel(q[inside], *(a[inside] for a in args_)) * 1.0 + 0  # as scipy: -0.0 → 0.0
    return _done(out)


def norm_sf(x: ArrayLike) -> Any:
    """``scipy.stats.norm.sf(x)``: P(Z > x) for a standard normal Z."""
    return _sf(lambda v: special.ndtr(-v), x, -np.inf, np.inf, True)


def norm_ppf(q: ArrayLike) -> Any:
    """``scipy.stats.norm.ppf(q)``: the standard normal's q-quantile."""
    return _quantile(special.ndtri, q, -np.inf, np.inf, True)


def norm_isf(q: ArrayLike) -> Any:
    """``scipy.stats.norm.isf(q)``: the z with P(Z > z) = q."""
    return _quantile(lambda v: -special.ndtri(v), q, np.inf, -np.inf, True)


def t_sf(x: ArrayLike, df: ArrayLike) -> Any:
    """``scipy.stats.t.sf(x, df)``: P(T > x) for Student's t on ``df`` degrees of freedom."""
    return _sf(lambda v, d: special.stdtr(d, -v), x, -np.inf, np.inf, np.asarray(df) > 0, df)


def t_ppf(q: ArrayLike, df: ArrayLike) -> Any:
    """``scipy.stats.t.ppf(q, df)``: Student's t's q-quantile."""
    return _quantile(lambda v, d: special.stdtrit(d, v), q, -np.inf, np.inf, np.asarray(df) > 0, df)


def t_isf(q: ArrayLike, df: ArrayLike) -> Any:
    """``scipy.stats.t.isf(q, df)``: the t with P(T > t) = q."""
    return _quantile(lambda v, d: -special.stdtrit(d, v), q, np.inf, -np.inf, np.asarray(df) > 0, df)


def chi2_sf(x: ArrayLike, df: ArrayLike) -> Any:
    """``scipy.stats.chi2.sf(x, df)``: P(X > x) for a chi-squared X on ``df`` degrees of freedom."""
    return _sf(lambda v, d: special.chdtrc(d, v), x, 0.0, np.inf, np.asarray(df) > 0, df)


def chi2_isf(q: ArrayLike, df: ArrayLike) -> Any:
    """``scipy.stats.chi2.isf(q, df)``: the x with P(X > x) = q."""
    return _quantile(lambda v, d: special.chdtri(d, v), q, np.inf, 0.0, np.asarray(df) > 0, df)


def kstwobign_sf(x: ArrayLike) -> Any:
    """``scipy.stats.kstwobign.sf(x)``: Kolmogorov's limiting distribution of √n·D."""
    return _sf(special.kolmogorov, x, 0.0, np.inf, True)


# discrete: rv_discrete.sf, .cdf, .logsf and .logcdf with loc 0


def _discrete(
    kind: str, kernel: Kernel, k: ArrayLike, low: ArrayLike, high: ArrayLike, valid: ArrayLike, *args: ArrayLike
) -> Any:
    k, lo, hi, ok, *args_ = _arrays(k, low, high, valid, *args)
    ok = ok.astype(bool)
    log = kind.startswith("log")
    out = np.full(k.shape, -np.inf) if log else np.zeros(k.shape)
    below, above = k < lo, k >= hi
    if kind == "sf":
        out[~ok | np.isnan(k)] = np.nan
        out[(below | np.isneginf(k)) & ok] = 1.0
    elif kind == "cdf":
        out[above] = 1.0
        out[np.isneginf(k)] = 0.0
        out[~ok | np.isnan(k)] = np.nan
    elif kind == "logsf":
        out[~ok | np.isnan(k)] = np.nan
        out[below & ok] = 0.0
    else:  # logcdf
        out[~ok | np.isnan(k)] = np.nan
        out[above] = 0.0
    inside = ok & (k >= lo) & ~above
    if not log:
        inside &= np.isfinite(k)
    if inside.any():
        value = kernel(k[inside], *(a[inside] for a in args_))
        if log:
            with np.errstate(divide="ignore"):
                out[inside] = np.log(value)
        else:
            out[inside] = np.clip(value, 0, 1)
    return _done(out)


def _binomial(kind: str, k: ArrayLike, n: ArrayLike, p: ArrayLike) -> Any:
    n_, p_ = np.asarray(n, dtype=np.float64), np.asarray(p, dtype=np.float64)
    valid = (n_ >= 0) & _integral(n_) & (p_ >= 0) & (p_ <= 1)
    return _discrete(kind, lambda k_, n_, p_: _binom_sf(np.floor(k_), n_, p_), k, 0.0, n_, valid, n_, p_)


def binom_sf(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> Any:
    """``scipy.stats.binom.sf(k, n, p)``: P(X > k) for X ~ Binomial(n, p)."""
    if _binom_sf is None:  # pragma: no cover
        from scipy import stats

        return stats.binom.sf(k, n, p)
    return _binomial("sf", k, n, p)


def _hypergeometric(kind: str, k: ArrayLike, total: ArrayLike, good: ArrayLike, draws: ArrayLike) -> Any:
    m, n, d = _arrays(total, good, draws)
    valid = (m > 0) & (n >= 0) & (d >= 0) & (n <= m) & (d <= m) & _integral(m) & _integral(n) & _integral(d)
    low, high = np.maximum(d - (m - n), 0), np.minimum(n, d)
    kernel = _hypergeom_sf if kind == "sf" else _hypergeom_cdf
    return _discrete(kind, lambda k_, m_, n_, d_: kernel(k_, n_, d_, m_), k, low, high, valid, m, n, d)


def hypergeom_sf(k: ArrayLike, total: ArrayLike, good: ArrayLike, draws: ArrayLike) -> Any:
    """``scipy.stats.hypergeom.sf(k, M, n, N)``: P(X > k) for the number X of ``good`` of
    ``total`` items among ``draws`` drawn without replacement."""
    if _hypergeom_sf is None:  # pragma: no cover
        from scipy import stats

        return stats.hypergeom.sf(k, total, good, draws)
    return _hypergeometric("sf", k, total, good, draws)


def hypergeom_cdf(k: ArrayLike, total: ArrayLike, good: ArrayLike, draws: ArrayLike) -> Any:
    """``scipy.stats.hypergeom.cdf(k, M, n, N)``: P(X ≤ k), X as in ``hypergeom_sf``."""
    if _hypergeom_cdf is None:  # pragma: no cover
        from scipy import stats

        return stats.hypergeom.cdf(k, total, good, draws)
    return _hypergeometric("cdf", k, total, good, draws)


def hypergeom_pmf(k: ArrayLike, total: ArrayLike, good: ArrayLike, draws: ArrayLike) -> Any:
    """``scipy.stats.hypergeom.pmf(k, M, n, N)``: P(X = k), X as in ``hypergeom_sf``."""
    if _hypergeom_pmf is None:  # pragma: no cover
        from scipy import stats

        return stats.hypergeom.pmf(k, total, good, draws)
    k_, m, n, d = _arrays(k, total, good, draws)
    valid = (m > 0) & (n >= 0) & (d >= 0) & (n <= m) & (d <= m) & _integral(m) & _integral(n) & _integral(d)
    inside = valid & (k_ >= np.maximum(d - (m - n), 0)) & (k_ <= np.minimum(n, d)) & (np.floor(k_) == k_)
    out = np.zeros(k_.shape)
    out[~valid | np.isnan(k_)] = np.nan
    if inside.any():
        out[inside] = np.clip(_hypergeom_pmf(k_[inside], n[inside], d[inside], m[inside]), 0, 1)
    return _done(out)


def fisher_exact_p(table: ArrayLike) -> float:
    """``scipy.stats.fisher_exact(table)[1]`` for a 2×2 table of counts: the two-sided
    p-value, the tables at most as likely as this one summed, as scipy finds them."""
    c = np.asarray(table, dtype=np.int64)
    if c.shape != (2, 2) or np.any(c < 0) or _hypergeom_pmf is None:
        from scipy import stats  # what scipy does with anything else: its own business

        return float(stats.fisher_exact(table)[1])
    if 0 in c.sum(axis=0) or 0 in c.sum(axis=1):
        return 1.0
    n1, n2, n = c[0, 0] + c[0, 1], c[1, 0] + c[1, 1], c[0, 0] + c[1, 0]

    def pmf(x: Any) -> Any:
        return hypergeom_pmf(x, n1 + n2, n1, n)

    mode = int((n + 1) * (n1 + 1) / (n1 + n2 + 2))
    exact, at_mode = pmf(c[0, 0]), pmf(mode)
    gamma = 1 + 1e-14
    if np.abs(exact - at_mode) / np.maximum(exact, at_mode) <= 1e-14:
        return 1.0
    if c[0, 0] < mode:
        lower = hypergeom_cdf(c[0, 0], n1 + n2, n1, n)
        if pmf(n) > exact * gamma:
            return float(lower)
        guess = _search(lambda x: -pmf(x), -exact * gamma, int(mode), int(n))
        p = lower + hypergeom_sf(guess, n1 + n2, n1, n)
    else:
        upper = hypergeom_sf(c[0, 0] - 1, n1 + n2, n1, n)
        if pmf(0) > exact * gamma:
            return float(upper)
        guess = _search(pmf, exact * gamma, 0, int(mode))
        p = upper + hypergeom_cdf(guess, n1 + n2, n1, n)
    return float(min(p, 1.0))


def _search(f: Callable[[int], Any], d: float, lo: int, hi: int) -> int:
    """The i in [lo, hi] with f(i) ≤ d < f(i + 1), f increasing there (scipy's binary search)."""
    while lo < hi:
        mid = lo + (hi - lo) // 2
        value = f(mid)
        if value < d:
            lo = mid + 1
        elif value > d:
            hi = mid - 1
        else:
            return mid
    return lo if f(lo) <= d else lo - 1


def _poisson(kind: str, kernel: Kernel, k: ArrayLike, mu: ArrayLike) -> Any:
    mu_ = np.asarray(mu, dtype=np.float64)
    return _discrete(kind, lambda k_, m_: kernel(np.floor(k_), m_), k, 0.0, np.inf, mu_ >= 0, mu_)


def poisson_logsf(k: ArrayLike, mu: ArrayLike) -> Any:
    """``scipy.stats.poisson.logsf(k, mu)``: log P(X > k) for X ~ Poisson(mu)."""
    return _poisson("logsf", special.pdtrc, k, mu)


def poisson_logcdf(k: ArrayLike, mu: ArrayLike) -> Any:
    """``scipy.stats.poisson.logcdf(k, mu)``: log P(X ≤ k) for X ~ Poisson(mu)."""
    return _poisson("logcdf", special.pdtr, k, mu)


def rankdata(values: ArrayLike) -> np.ndarray:
    """``scipy.stats.rankdata(values)`` of a 1-d array: ranks from 1, ties at their mean
    rank; all NaN when any value is NaN (scipy's ``nan_policy='propagate'``)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    n = len(v)
    if np.isnan(v).any():
        return np.full(n, np.nan)
    order = np.argsort(v, kind="stable")
    s = v[order]
    starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]])) if n else np.zeros(0, dtype=np.int64)
    lengths = np.diff(np.append(starts, n))
    out = np.empty(n)
    out[order] = np.repeat((2 * starts + lengths + 1) / 2, lengths)
    return out
