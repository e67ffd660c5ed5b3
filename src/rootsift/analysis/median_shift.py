"""When the typical event of a latency region changed: the time its median stepped.

- **The population that shifted.** A measure often mixes populations of which only some
  moved (reads at 5 ms that stayed put, writes that went from 300 ms to 2 s). The median
  of all events then sits in the gap between them, where a few events more or less of one
  kind move it far: a noisy step. So the step is read on the events that shifted, when a
  text field splits them off: of the fields with 2 to ``SPLIT_VALUES`` values, each value
  with at least ``MIN_EVENTS`` events in the time just before the region (as long as the
  region) and in its second half has its median's move measured (log ratio, the region's
  way). The values that moved at least half as much as the one that moved most are the
  shifted population; the others must have moved at most a quarter as much, either way
  (every event's median is no reference: in the gap it may even move the other way). Of
  the fields that split so, the cleanest is used: the one whose other values moved least
  against the shifted ones (a field whose values are all the same mixture splits by
  chance, its medians swinging in the gap either way); with none, every event is read.
- **The line** is half-way from that population's median outside the region to its median
  in the region's second half (after the shift, not while it ramps up).
- **The step** is the bucket where the population's bucket medians step across the line
  (``shifts.step_at``: fewest buckets on the wrong side, so a slow turn that ends before it
  or a dip after it does not move it).

Assumptions: the measure is positive when it rises (the moves compare as ratios); the
median is of rows (a row with a count is one row here, as in the scan's line).
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from sqlglot import exp

from rootsift.analysis import anomaly as an
from rootsift.analysis import sql as q
from rootsift.analysis.findings import iso
from rootsift.analysis.frame import Frame
from rootsift.analysis.shifts import step_at
from rootsift.store.base import TIME_COLUMN

SPLIT_VALUES = 20
"""Fields with more values than this are attributes of single events (ids, hosts by the
hundred), not populations."""
MIN_EVENTS = 30
"""Events of a value needed on each side (outside the region, its second half) for its
median's move to count."""


def median_shift(frame: Frame, a: an.Anomaly, width: timedelta) -> None:
    """Set ``median_shift_at`` (with ``median_before``/``median_after``, and
    ``median_population`` when a field split the shifted events off) in ``a.detail``: the
    bucket of ``width`` where the median of the events that shifted stepped across the line
    half-way between its level outside the region and in the region's second half (module
    docstring). Nothing is set when the median did not move the region's way."""
    sign = -1.0 if a.detail.get("direction") == "down" else 1.0
    half = a.start + (a.end - a.start) / 2
    population = _population(frame, a, sign, half)
    only: list[exp.Expr] = []
    only_params: list[Any] = []
    if population is not None:
        name, values = population
        only.append(q.col(name).isin(*q.binds(only_params, values)))
    col, ts = q.col(str(a.measure)), q.col(TIME_COLUMN)
    params: list[Any] = []
    items = [
        q.where(q.quantile_cont(col.copy(), 0.5), _outside(ts, a, params)),
        q.where(q.quantile_cont(col.copy(), 0.5), _between(ts, half, a.end, params)),
    ]
    query, scope = frame.rows(items, *[o.copy() for o in only])
    before, after = frame.backend.execute(query, [*params, *scope, *only_params]).rows[0]
    if before is None or after is None or sign * (after - before) <= 0 or (sign > 0 and before <= 0):
        return
    middle = (float(before) + float(after)) / 2
    us = max(1, int(width / timedelta(microseconds=1)))
    bucket = q.floor_int(exp.Div(this=exp.UnixMicros(this=ts.copy()), expression=q.num(us)))
    params = []
    inside = _between(ts, a.start, a.end, params)
    query, scope = frame.rows([q.alias(bucket, "b"), q.quantile_cont(col.copy(), 0.5)], *only, inside)
    query = q.order_by(query.group_by(q.num(1), copy=False), q.num(1))
    rows = frame.backend.execute(query, [*scope, *only_params, *params]).rows
    medians = [(b, m) for b, m in rows if m is not None]
    k = step_at([sign * (m - middle) >= 0 for _, m in medians])
    if k is None:
        return
    at = datetime(1970, 1, 1) + timedelta(microseconds=int(medians[k][0]) * us)
    a.detail.update(median_shift_at=iso(at), median_before=round(float(before), 6), median_after=round(float(after), 6))
    if population is not None:
        a.detail["median_population"] = {"field": population[0], "values": population[1]}


def _outside(ts: exp.Expr, a: an.Anomaly, params: list[Any]) -> exp.Expr:
    return exp.paren(exp.or_(ts.copy() < q.bind(params, a.start), ts.copy() >= q.bind(params, a.end)))


def _between(ts: exp.Expr, lo: datetime, hi: datetime, params: list[Any]) -> exp.Expr:
    return exp.paren(exp.and_(ts.copy() >= q.bind(params, lo), ts.copy() < q.bind(params, hi)))


def _population(frame: Frame, a: an.Anomaly, sign: float, half: datetime) -> tuple[str, list[Any]] | None:
    """(field, values) of the events that shifted, or None (module docstring)."""
    texty = [n for n, f in frame.fields.items() if f.type == "VARCHAR" and not n.startswith("_")]
    if not texty or a.measure is None:
        return None
    candidates = _few_valued(frame, texty)
    if not candidates:
        return None
    col, ts = q.col(str(a.measure)), q.col(TIME_COLUMN)
    # the time just before the region, as long as it, is the population's baseline: a
    # local one, and a pass over the region's length twice, not the whole range
    lo = a.start - (a.end - a.start)
    bound: list[Any] = []
    outside, second = _between(ts, lo, a.start, bound), _between(ts, half, a.end, bound)
    bound += bound[:]  # the two conditions again, in the counts
    keys = [q.col(n) for n in candidates]
    items = [
        exp.Grouping(expressions=[k.copy() for k in keys]),
        *[k.copy() for k in keys],
        q.where(q.quantile_cont(col.copy(), 0.5), outside),
        q.where(q.quantile_cont(col.copy(), 0.5), second),
        q.where(q.count_rows(), outside.copy()),
        q.where(q.count_rows(), second.copy()),
    ]
    span: list[Any] = []
    query, scope = frame.rows(items, _between(ts, lo, a.end, span))  # every field in one pass: a grouping set each
    sets = exp.GroupingSets(expressions=[exp.Tuple(expressions=[k.copy()]) for k in keys])
    query.set("group", exp.Group(expressions=[sets]))
    per_field: dict[int, list[tuple[Any, ...]]] = {}
    everything = (1 << len(keys)) - 1
    for g, *row in frame.backend.execute(query, [*bound, *scope, *span]).rows:
        i = len(keys) - (everything ^ int(g)).bit_length()  # the field of this set: its bit is clear
        per_field.setdefault(i, []).append((row[i], *row[len(keys) :]))
    best: tuple[float, str, list[Any]] | None = None
    for i, name in enumerate(candidates):
        rows = [r for r in per_field.get(i, []) if r[0] is not None]
        if len(rows) > SPLIT_VALUES:  # more values here than a population has
            continue
        moves = {v: m for v, b, af, nb, na in rows if (m := _move(b, af, nb, na, sign)) is not None}
        top = max(moves.values(), default=0.0)
        shifted = sorted((v for v, m in moves.items() if m >= top / 2), key=str)
        rest = [abs(m) for m in moves.values() if m < top / 2]  # neither way: a median in a gap swings
        if top <= 0 or not rest or max(rest) > top / 4:
            continue
        still = max(rest) / top  # how far the values that did not shift moved, against it
        if best is None or still < best[0]:
            best = (still, name, shifted)
    return (best[1], best[2]) if best is not None else None


def _few_valued(frame: Frame, names: list[str]) -> list[str]:
    """The fields of ``names`` with at most ``SPLIT_VALUES`` values (at least 2 when counted
    over every event): counted on the store's sample when it holds at least
    ``an.TAIL_MIN_SAMPLED`` events (a sample sees no more values than there are, so no
    field that has few is missed; one with a few more, all rare, may pass, and the values
    counted where the population is read rule it out), else on every event of the range.
    Counting every event's distinct values of every text field (ids, trace ids) cost a
    third of investigate at 10M events."""
    distinct = [exp.ApproxDistinct(this=q.col(n)) for n in names]
    sample = frame.backend.sample_relation(frame.dataset, frame.start, frame.end)
    if sample is not None:
        where, params = frame.range_where()
        got = frame.backend.execute(q.select([q.count_rows(), *distinct], sample, where), params).rows[0]
        if int(got[0] or 0) >= an.TAIL_MIN_SAMPLED:
            return [n for n, d in zip(names, got[1:], strict=True) if d is not None and int(d) <= SPLIT_VALUES]
    query, params = frame.rows(distinct)
    counted = frame.backend.execute(query, params).rows[0]
    return [n for n, d in zip(names, counted, strict=True) if d is not None and 2 <= int(d) <= SPLIT_VALUES]


def _move(before: Any, after: Any, n_before: Any, n_after: Any, sign: float) -> float | None:
    """The log ratio of the medians, the region's way; None when either side is thin or a
    median is not positive."""
    if before is None or after is None or (n_before or 0) < MIN_EVENTS or (n_after or 0) < MIN_EVENTS:
        return None
    if before <= 0 or after <= 0:
        return None
    return sign * math.log(float(after) / float(before))
