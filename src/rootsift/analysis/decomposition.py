"""Where the extra time went: the rise of the measure's mean in the anomalous region split
among its parts (other duration fields lying inside it).

**Waiting vs service.** When the measure has parts among the other duration fields
(``pool_wait_ms``, ``db_time_ms``: fields never larger than the measure on the same
event), the rise of the measure's mean in the region over the same length before and
after it (``around``) is split into each part's rise, with
a Welch test per part (Bonferroni over the parts). A part named like waiting (``wait``,
``queue``, ``pending``, ``acquire``, ``connect``) that carries most of the rise says the
time went to waiting for a resource, not to doing the work.

**Nesting.** Parts can lie inside one another (nginx's ``upstream_header_time`` is inside
``upstream_response_time``, inside ``request_time``): their shares do not add up. Part A
is *nested* in part B when, on the events that have both, A ≤ B on ``NESTED_WITHIN`` of
them and A + B exceeds the measure on at least ``NESTED_OVERFLOW`` (side by side they
would not fit in it). A part that is merely always smaller than another, but fits beside
it (a pool wait before the query), stays its sibling: from the data alone the two cannot
be told apart, and additive is the reading that never double-counts. Each part's
``parent`` is the smallest part it is nested in (None: directly in the measure), and
``share_of_parent`` its share of that part's rise: shares add up among siblings only.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rootsift.analysis import distributions as dist
from rootsift.analysis import sql as q
from rootsift.analysis import stats
from rootsift.analysis.anomaly import Anomaly
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame, micros_per_unit
from rootsift.analysis.saturation import around, role
from rootsift.store.base import TIME_COLUMN

NESTED_WITHIN = 0.99
NESTED_OVERFLOW = 0.05


def decomposition(frame: Frame, a: Anomaly, measure: str, parts: list[str], alpha: float) -> Finding | None:
    """The rise of the measure's mean in the region split into its parts (see the module docstring)."""
    m = micros_per_unit(measure)
    scaled = {p: s for p in parts if p != measure and (s := micros_per_unit(p)) is not None}
    if m is None or not scaled:
        return None
    per: float = m
    window = around(frame, a)
    where, params = window.range_where()
    ts = q.col(TIME_COLUMN)
    cols: dict[str, exp.Expr] = {measure: q.col(measure)}
    cols.update({p: exp.paren(exp.Mul(this=q.col(p), expression=q.num(s / per))) for p, s in scaled.items()})
    items: list[exp.Expr] = []
    bound: list[Any] = []  # six aggregates per field, each bound to the region
    for name, col in cols.items():
        for outside in (False, True):
            for agg in (exp.Count, exp.Avg, exp.Variance):
                inside: exp.Expr = exp.paren(exp.and_(ts >= q.bind(bound, a.start), ts.copy() < q.bind(bound, a.end)))
                items.append(q.where(agg(this=col.copy()), exp.Not(this=inside) if outside else inside))
        if name != measure:  # a part is never larger than the whole on the same event
            items.append(q.where(exp.Avg(this=_share(col <= _slack(cols[measure]))), _both(col, cols[measure])))
    row = frame.backend.execute(q.select(items, window.relation.copy(), where), bound + params).rows[0]
    stats, k = {}, 0
    for name in cols:
        stats[name] = row[k : k + 6]
        k += 6
        if name != measure:
            contained = row[k]
            k += 1
            if contained is None or contained < 0.99:
                stats.pop(name)
    whole = _rise(stats[measure])
    if whole is None or whole[0] <= 0 or whole[1] >= alpha:
        return None
    rise, p_whole, n_in, n_out = whole
    shares: list[dict[str, Any]] = []
    for name in stats:
        if name == measure:
            continue
        got = _rise(stats[name])
        if got is None:
            continue
        part_rise, p, _, _ = got
        shares.append(
            {
                "field": name,
                "role": role(name),
                "region_mean": _r(stats[name][1]),
                "outside_mean": _r(stats[name][4]),
                "rise": _r(part_rise),
                "share_of_rise": _r(part_rise / rise),
                "p_value": float(f"{min(1.0, p * len(scaled)):.4g}"),
            }
        )
    if not any(float(s["p_value"]) < alpha and float(s["rise"] or 0) > 0 for s in shares):
        return None  # no part took the extra time: nothing to split
    means = {n: _overall_mean(stats[n]) for n in stats}
    shares = _as_tree(shares, _nesting(window, cols, measure, [str(s["field"]) for s in shares], means))
    top = shares[0]  # the top-level part with the largest share
    return Finding(
        "decomposition",
        float(top["share_of_rise"] or 0),
        p_whole,
        q_value=p_whole,
        field=str(top["field"]),
        value=None,
        selection_count=n_in,
        baseline_count=n_out,
        effect=float(top["share_of_rise"] or 0),
        detail={
            "measure": measure,
            "region_mean": _r(stats[measure][1]),
            "outside_mean": _r(stats[measure][4]),
            "rise": _r(rise),
            "parts": shares,
            "nested": any(s["parent"] is not None for s in shares),
            "dominated_by": top["role"] if top["p_value"] < alpha and (top["share_of_rise"] or 0) >= 0.5 else None,
        },
    )


def _nesting(
    window: Frame, cols: dict[str, exp.Expr], measure: str, names: list[str], means: dict[str, float]
) -> dict[str, str | None]:
    """Each part's parent: the smallest other part it is nested in, or None (see the module
    docstring). Only a part larger on average can be a parent, so the nesting is a tree."""
    order = sorted(names, key=lambda n: (-means[n], n))
    pairs = [(a, b) for i, a in enumerate(order) for b in order[:i]]  # b: larger first
    parent: dict[str, str | None] = dict.fromkeys(names)
    if not pairs:
        return parent
    m = cols[measure]
    items: list[exp.Expr] = []
    for a, b in pairs:
        items.append(q.where(exp.Avg(this=_share(cols[a] <= _slack(cols[b]))), _both(cols[a], cols[b])))
        beside = exp.Add(this=cols[a].copy(), expression=cols[b].copy()) > _slack(m)
        items.append(q.where(exp.Avg(this=_share(beside)), exp.and_(_both(cols[a], cols[b]), q.not_null(m.copy()))))
    where, params = window.range_where()
    row = window.backend.execute(q.select(items, window.relation.copy(), where), params)
    got = row.rows[0]
    for k, (a, b) in enumerate(pairs):
        within, overflow = got[2 * k], got[2 * k + 1]
        if within is not None and overflow is not None and within >= NESTED_WITHIN and overflow >= NESTED_OVERFLOW:
            parent[a] = b  # the last that holds is the smallest container
    return parent


def _slack(x: exp.Expr) -> exp.Expr:
    """``x * 1.01 + 0.001``: at most ``x``, give or take rounding."""
    return exp.Add(this=exp.Mul(this=x.copy(), expression=q.num(1.01)), expression=q.num(0.001))


def _share(cond: exp.Expr) -> exp.Expr:
    """1.0 where ``cond`` holds, else 0.0: averaged, the share of rows where it holds."""
    return q.case([(cond, q.num(1.0))], q.num(0.0))


def _both(x: exp.Expr, y: exp.Expr) -> exp.Expr:
    return exp.and_(q.not_null(x.copy()), q.not_null(y.copy()))


def _as_tree(shares: list[dict[str, Any]], parent: dict[str, str | None]) -> list[dict[str, Any]]:
    """The parts in tree order (each followed by the parts nested in it, the largest share
    first), each with its ``parent``, ``depth`` and ``share_of_parent``."""
    by = {str(s["field"]): s for s in shares}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for s in sorted(shares, key=lambda s: (-float(s["share_of_rise"] or 0), str(s["field"]))):
        up = parent.get(str(s["field"]))
        s["parent"] = up
        if up is None:
            s["share_of_parent"] = s["share_of_rise"]
        else:
            above = float(by[up]["rise"] or 0)
            s["share_of_parent"] = _r(float(s["rise"] or 0) / above) if above > 0 else None
        children.setdefault(up, []).append(s)
    out: list[dict[str, Any]] = []

    def walk(up: str | None, depth: int) -> None:
        for s in children.get(up, []):
            s["depth"] = depth
            out.append(s)
            walk(str(s["field"]), depth + 1)

    walk(None, 0)
    return out


def _overall_mean(s: tuple[Any, ...]) -> float:
    """The mean over the region and around it, from (count, mean, variance) of each side."""
    n1, m1, _, n0, m0, _ = s
    total = (n1 or 0) + (n0 or 0)
    return ((n1 or 0) * float(m1 or 0) + (n0 or 0) * float(m0 or 0)) / total if total else 0.0


def _rise(s: tuple[Any, ...]) -> tuple[float, float, float, float] | None:
    """(mean inside − mean outside, Welch p-value one-sided, n inside, n outside) from count/mean/variance."""
    n1, m1, v1, n0, m0, v0 = s
    if not n1 or not n0 or n1 < 2 or n0 < 2 or m1 is None or m0 is None:
        return None
    se, df = stats.welch(v1 or 0.0, n1, v0 or 0.0, n0)
    diff = float(m1) - float(m0)
    if se == 0:
        return diff, 0.0 if diff > 0 else 1.0, float(n1), float(n0)
    return diff, float(dist.t_sf(diff / se, df)), float(n1), float(n0)


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)
