"""``avg(field)``: the difference of means, sizes discounted for serial correlation."""

from __future__ import annotations

import math
from typing import Any

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import stats
from rootsift.analysis.compare.cohorts import rounded, squares_of, weight_of
from rootsift.analysis.compare.metrics import Metric
from rootsift.analysis.frame import Frame
from rootsift.analysis.saturation import unit_field


def mean(fa: Frame, fb: Frame, metric: Metric, level: float) -> dict[str, Any]:
    """Welch on the difference of means, each cohort's size discounted for serial
    correlation: consecutive samples of one series (a gauge scraped every 15 s) say
    nearly the same thing. With lag-1 autocorrelation r within each unit's series (or
    the whole cohort's, in time order, without a unit field), n events count as
    n (1 − r) / (1 + r), the AR(1) effective size, and never fewer than the series.

    r is estimated on each value's deviation from its own unit's mean, pooled over the
    units: Σ (v_t − m_u)(v_{t−1} − m_u) / Σ (v_t − m_u)². Hosts at different levels
    would otherwise make r near 1 from the levels alone (a host's value is always close
    to its previous one when the hosts differ far more than the noise).

    With sample rates or counts each row weighs as the events it stands for (r·n) in the
    mean, the variance, the units' means and r, and n is Kish's effective size (a count
    row is n observations); r is over the rows' series, not over copies of one row."""
    col = q.col(str(metric.field))
    unit = unit_field(fa)
    previous = exp.Window(
        this=exp.Lag(this=col.copy()),
        partition_by=[q.col(unit)] if unit else None,
        order=exp.Order(expressions=[exp.Ordered(this=q.col("timestamp"))]),
    )
    v, w, w2, pv, u, mu = (exp.column(c) for c in ("v", "w", "w2", "pv", "u", "mu"))
    got = {}
    for name, frame in (("a", fa), ("b", fb)):
        items = [q.alias(col.copy(), "v"), q.alias(weight_of(frame), "w"), q.alias(squares_of(frame), "w2")]
        items += [q.alias(previous.copy(), "pv"), q.alias(q.col(unit) if unit else q.num(1), "u")]
        rows, params = frame.rows(items, q.not_null(col.copy()))
        # the mean (each row counting as the events it stands for), Kish's size, and the
        # lag-1 autocorrelation of the deviations from each unit's own mean, pooled over the
        # units, each row's pair weighing as its events
        unit_mean = exp.Div(
            this=q.over(exp.Sum(this=q.product([w, v])), [u]), expression=q.over(exp.Sum(this=w.copy()), [u])
        )
        centred = q.select([exp.Star(), q.alias(unit_mean, "mu")], rows)
        dev, prev_dev = (
            exp.paren(exp.Sub(this=v.copy(), expression=mu.copy())),
            exp.paren(exp.Sub(this=pv.copy(), expression=mu.copy())),
        )
        pooled = exp.Div(
            this=exp.Sum(this=q.product([w, dev, prev_dev])),
            expression=exp.Nullif(this=exp.Sum(this=q.product([w, dev, dev])), expression=q.num(0)),
        )
        summary = [
            exp.Count(this=v.copy()),
            exp.Sum(this=w.copy()),
            exp.Sum(this=w2.copy()),
            exp.Div(this=exp.Sum(this=q.product([w, v])), expression=exp.Sum(this=w.copy())),
            exp.Variance(this=v.copy()),
            pooled,
            exp.Count(this=exp.Distinct(expressions=[u.copy()])),
        ]
        n, total, squares, mean, var, r, units = frame.backend.execute(q.select(summary, centred), params).rows[0]
        eff = stats.effective_size(float(total or 0), float(squares or 0))
        if frame.row_weights and n and eff > 1:  # the weighted variance: a second pass, about the weighted mean
            bound: list[Any] = []
            around = exp.Sum(
                this=q.product(
                    [
                        w,
                        exp.paren(exp.Sub(this=v.copy(), expression=q.bind(bound, mean))),
                        exp.paren(exp.Sub(this=v.copy(), expression=q.bind(bound, mean))),
                    ]
                )
            )
            spread_of = q.select([exp.Div(this=around, expression=exp.Sum(this=w.copy()))], rows.copy())
            spread = frame.backend.execute(spread_of, [*bound, *params]).rows[0][0]
            var = float(spread) * eff / (eff - 1)
        elif frame.row_weights:
            var = None
        got[name] = (n, mean, var, r, units, eff)
    (n_a, m_a, v_a, r_a, u_a, k_a), (n_b, m_b, v_b, r_b, u_b, k_b) = got["a"], got["b"]
    out: dict[str, Any] = {"kind": "avg", "field": metric.field, "unit": "event", "n_a": n_a, "n_b": n_b}
    out.update(a=rounded(m_a), b=rounded(m_b))
    if not n_a or not n_b or n_a < 2 or n_b < 2 or not m_a:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    e_a, e_b = effective(k_a, r_a, u_a), effective(k_b, r_b, u_b)
    out.update(
        effective_n_a=rounded(e_a),
        effective_n_b=rounded(e_b),
        autocorrelation_a=rounded(r_a),
        autocorrelation_b=rounded(r_b),
    )
    se, df = stats.welch(v_a or 0.0, e_a, v_b or 0.0, e_b)
    diff = float(m_b) - float(m_a)
    base = abs(float(m_a))
    p, lo, hi = stats.t_interval(diff, se, df, level)
    return out | {
        "absolute_change": rounded(diff),
        "relative_change": diff / base,
        "ci": [lo / base, hi / base],
        "p_value": p,
        "test": "Welch (difference of means), sizes discounted for serial correlation",
    }


def effective(n: float, r: float | None, series: int) -> float:
    """The AR(1) effective size of n samples with lag-1 autocorrelation r, at least the
    number of series (and 2)."""
    if r is None or math.isnan(r) or r <= 0:
        return float(n)
    return float(min(n, max(n * (1 - r) / (1 + r), series, 2)))
