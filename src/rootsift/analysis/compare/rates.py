"""``rate(FILTER)``: the share of events matching a filter."""

from __future__ import annotations

import math
from typing import Any

from rootsift.analysis import distributions as dist
from rootsift.analysis.compare.cohorts import and_filters, rounded, totals
from rootsift.analysis.compare.fields import Fields
from rootsift.analysis.compare.metrics import Metric
from rootsift.analysis.frame import Frame


def rate(fields: Fields, metric: Metric, level: float) -> dict[str, Any]:
    """The share of events matching a filter. With sample rates or counts the shares are
    weighted and the counts tested are effective: the share of Kish's effective size,
    rounded for Fisher's test (with counts alone, the events the rows stand for)."""
    got = {}
    fa = fields.fa
    for name, frame in (("a", fa), ("b", fields.fb)):
        hit = Frame(
            frame.backend,
            frame.dataset,
            frame.start,
            frame.end,
            and_filters(frame.where, metric.filter),
            count_field=frame.count,
        )
        (k, k_w, _), (n, n_w, n_eff) = totals(hit), fields.totals[name]
        got[name] = (k, n, k_w / n_w if n_w else 0.0, n_eff)
    (k_a, n_a, p_a, e_a), (k_b, n_b, p_b, e_b) = got["a"], got["b"]
    out: dict[str, Any] = {"kind": "rate", "filter": metric.filter, "unit": "event", "n_a": n_a, "n_b": n_b}
    out.update(a=rounded(p_a) if n_a else None, b=rounded(p_b) if n_b else None, count_a=k_a, count_b=k_b)
    if not n_a or not n_b:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    if fa.row_weights:  # effective counts: the weighted share of the effective size
        ka_e, na_e, kb_e, nb_e = round(p_a * e_a), max(1, round(e_a)), round(p_b * e_b), max(1, round(e_b))
        out.update(effective_n_a=rounded(e_a), effective_n_b=rounded(e_b))
    else:
        ka_e, na_e, kb_e, nb_e = k_a, n_a, k_b, n_b
    p = dist.fisher_exact_p([[kb_e, nb_e - kb_e], [ka_e, na_e - ka_e]])
    lo, hi = _newcombe(p_a * na_e, na_e, p_b * nb_e, nb_e, level)
    if p_a > 0:
        change, ci = (p_b - p_a) / p_a, [lo / p_a, hi / p_a]
    else:  # none in A: any significant rate in B is beyond every tolerance; else judged absolutely
        change = math.inf if p_b > 0 else 0.0
        ci = [math.inf if lo > 0 else (0.0 if hi <= 0 else -math.inf), math.inf if hi > 0 else 0.0]
        out.update(_from_zero(lo, hi, level))
    return out | {
        "absolute_change": rounded(p_b - p_a),
        "absolute_ci": [rounded(lo), rounded(hi)],
        "relative_change": change,
        "ci": ci,
        "p_value": p,
        "test": "Fisher's exact (two proportions); Newcombe's interval for the difference",
    }


def _newcombe(k_a: float, n_a: float, k_b: float, n_b: float, level: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p_b − p_a (Wilson intervals of each)."""
    z = float(dist.norm_ppf(1 - level / 2))

    def wilson(k: float, n: float) -> tuple[float, float]:
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return centre - half, centre + half

    (la, ua), (lb, ub) = wilson(k_a, n_a), wilson(k_b, n_b)
    pa, pb = k_a / n_a, k_b / n_b
    d = pb - pa
    return d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2), d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)


ZERO_BASE_TOLERANCE = 0.001
"""When cohort A has no matching event, the difference of rates that does not matter: 0.1
percentage point (one event in a thousand). A relative tolerance of a zero rate is
meaningless; this one is absolute."""


def _from_zero(lo: float, hi: float, level: float) -> dict[str, Any]:
    """What a rate with no matching event in A is judged by: the absolute tolerance, and how
    many events per cohort bound the difference within it when neither cohort has any
    (Wilson's upper bound of 0 in n is z² / (n + z²), below the tolerance from
    n ≥ z² (1 / tolerance − 1))."""
    bound = ZERO_BASE_TOLERANCE
    z = float(dist.norm_ppf(1 - level / 2))
    needed = math.ceil(z * z * (1 / bound - 1))
    within = -bound < lo and hi < bound
    return {
        "absolute_tolerance": bound,
        "note": (
            f"A has no matching event: judged on the difference of rates, "
            f"{'within' if within else 'not bounded within'} ±{100 * bound:g} percentage point "
            f"(with none on either side, that needs about {needed:,} events per cohort)"
        ),
    }
