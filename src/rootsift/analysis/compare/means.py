"""``avg(field)``: the difference of means, sizes discounted for serial correlation."""

from __future__ import annotations

import math
from typing import Any

from rootsift.analysis import stats
from rootsift.analysis.compare.cohorts import rounded, squares_of, values_sql, weight_of
from rootsift.analysis.compare.metrics import Metric
from rootsift.analysis.frame import Frame
from rootsift.analysis.saturation import unit_field
from rootsift.store.sqltext import ident


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
    col = ident(str(metric.field))
    unit = unit_field(fa)
    part = f"PARTITION BY {ident(unit)} " if unit else ""
    got = {}
    for name, frame in (("a", fa), ("b", fb)):
        sql, params = values_sql(
            frame,
            f"{col} AS v, {weight_of(frame)} AS w, {squares_of(frame)} AS w2, lag({col}) OVER ({part}ORDER BY {ident('timestamp')}) AS pv"
            + (f", {ident(unit)} AS u" if unit else ", 1 AS u"),
        )
        # the mean (each row counting as the events it stands for), Kish's size, and the
        # lag-1 autocorrelation of the deviations from each unit's own mean, pooled over the
        # units, each row's pair weighing as its events
        n, total, squares, mean, var, r, units = frame.backend.execute_sql(
            "SELECT count(v), sum(w), sum(w2), sum(w * v) / sum(w), var_samp(v), "
            "sum(w * (v - mu) * (pv - mu)) / nullif(sum(w * (v - mu) * (v - mu)), 0), count(DISTINCT u) "
            f"FROM (SELECT *, sum(w * v) OVER (PARTITION BY u) / sum(w) OVER (PARTITION BY u) AS mu "
            f"FROM ({sql} AND {col} IS NOT NULL))",
            params,
        ).rows[0]
        eff = stats.effective_size(float(total or 0), float(squares or 0))
        if frame.row_weights and n and eff > 1:  # the weighted variance: a second pass, about the weighted mean
            spread = frame.backend.execute_sql(
                f"SELECT sum(w * (v - ?) * (v - ?)) / sum(w) FROM ({sql} AND {col} IS NOT NULL)",
                [mean, mean, *params],
            ).rows[0][0]
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
