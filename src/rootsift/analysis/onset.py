"""Explaining investigate's headline region: what its rows have in common, against the
rows outside it.

- A latency or error region: its **onset**, the region's earliest ``ONSET_EVENTS`` bad
  events (the cause shows before its consequences spread), with explain's statistics,
  against every event outside the region. Findings on a status field (a 499, a 502:
  what the slowness produced) come after the others.
- A stall: the kinds of events completing right after it, earliest first
  (``stalls.py``), then the region's events explained against those outside it.

The baseline is always the complement of the region itself (``anomaly.from``/``to``),
and the selection lies within it: the headline is what is explained.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlglot import exp

from rootsift.analysis import anomaly as an
from rootsift.analysis import sql as q
from rootsift.analysis import timeouts as to
from rootsift.analysis import weighted
from rootsift.analysis.explain import Explanation, explain
from rootsift.analysis.findings import Finding, iso
from rootsift.analysis.frame import Frame
from rootsift.analysis.stalls import stall_events

OPERATOR = {"up": ">", "down": "<"}
"""Bad events of a shift up (above the line) and down (below it)."""
ONSET_EVENTS = 30
"""The onset is the region's earliest 30 bad events: enough for explain's tests to tell a
culprit from chance, and no more. Not a share of the region's bad events: a share grows
with the incident's length, and in an hour-long incident 2 % of them spanned a minute,
long after a pool had filled and every request on its host was slow (gateway seeds 119
and 131: the culprit upstream fell out of the top three behind the hosts)."""


def direction(a: an.Anomaly) -> str:
    """``up`` (more events above the line) or ``down`` (more below it)."""
    return str(a.detail.get("direction", "up"))


def explain_in(frame: Frame, alpha: float, sampled: bool, **kw: Any) -> Explanation:
    return explain(
        frame.backend,
        frame.dataset,
        start=frame.start,
        end=frame.end,
        where=frame.where,
        alpha=alpha,
        sampled=sampled,
        count_field=frame.count,
        **kw,
    )


def _outside(a: an.Anomaly) -> str:
    return f'timestamp < "{iso(a.start)}" or timestamp >= "{iso(a.end)}"'


def _onset_end(frame: Frame, a: an.Anomaly, bad: exp.Expr, bound: list[Any]) -> datetime:
    """Just after the region's earliest ``ONSET_EVENTS`` bad events (``bad``, binding
    ``bound``): where the cause shows before its consequences spread. Earliest by start
    when the frame says where events start (their timestamp is the end)."""
    rel = frame.backend.relation(frame.dataset, a.start, a.end)
    where, params = frame.range_where()
    ts, n = frame.event_start(), weighted.count_of(frame)  # a row with a count is that many events
    args = [*params, a.start, a.end, *bound]
    inside = q.and_(where, ts.copy() >= exp.Placeholder(), ts.copy() < exp.Placeholder(), bad)
    total = frame.backend.execute(q.select([exp.Sum(this=n.copy())], rel.copy(), inside.copy()), args).rows[0][0]
    k = ONSET_EVENTS
    if k >= float(total or 0):
        return a.end
    items = [q.alias(ts.copy(), "t"), q.alias(q.running_sum(n, ts), "c")]
    ranked = q.select(items, rel, inside)  # the time of the k-th event (from 0) in time order
    row = frame.backend.execute(
        q.select([exp.Min(this=exp.column("t"))], ranked, exp.column("c") > q.num(k)), args
    ).rows
    return min(a.end, row[0][0] + timedelta(microseconds=1)) if row and row[0][0] is not None else a.end


def explain_region(
    frame: Frame, a: an.Anomaly, alpha: float, sampled: bool, start_of: str | None
) -> tuple[Explanation, list[Finding]]:
    """The region explained against the time outside it: (explain's result, the findings in
    the order shown; a stall's events first). ``start_of``: the duration field that gives
    each event's start (its timestamp is its end)."""
    findings: list[Finding] = []
    if a.kind == "stall":
        settle = timedelta(seconds=2 * float(a.detail["bucket_seconds"]))
        # ranked from the gap's end: what completes first after it is what everything waited
        # for (a gap found at a coarse scale may begin a little before the stall did)
        findings.extend(stall_events(frame, a.end, a.end, settle, an.completion_column(frame)))
        a.detail["completion_field"] = an.completion_column(frame)
        # the events of the region itself, against those outside it: the headline is what is explained
        result = explain_in(frame, alpha, sampled, select_from=a.start, select_to=a.end, baseline=_outside(a))
    else:
        column = q.col(str(a.measure))
        op = OPERATOR[direction(a)]
        compared = exp.GT if op == ">" else exp.LT
        bad_sql, bad = (
            (compared(this=column, expression=exp.Placeholder()), [a.threshold])
            if a.kind == "latency"
            else (exp.GTE(this=column, expression=q.num(500)), [])
        )
        starts = Frame(
            frame.backend,
            frame.dataset,
            frame.start,
            frame.end,
            frame.where,
            select_start_of=start_of,
            count_field=frame.count,
        )
        onset_end = _onset_end(starts, a, bad_sql, bad)
        text = f"{to.ident_text(str(a.measure))} {op if a.kind == 'latency' else '>='} {a.threshold if a.kind == 'latency' else 500!r}"
        result = explain_in(
            frame,
            alpha,
            sampled,
            select=text,
            select_from=a.start,
            select_to=onset_end,
            baseline=_outside(a),
            select_start_of=start_of,
            # a status (499, 502) is what the slowness produced: no cause of it
            outcomes=[
                n for n in frame.fields if a.kind == "latency" and to.outcome(Finding("dimension", 0, 1, field=n))
            ],
        )
        a.detail["onset_to"] = iso(onset_end)
    # a status (499, 502) is what slowness produced: kept, but after where it happened
    causes = [f for f in result.findings if not to.outcome(f)]
    outcomes = [f for f in result.findings if to.outcome(f)]
    for f in outcomes:
        f.detail["outcome"] = True
    findings.extend(causes + outcomes if a.kind != "errors" else result.findings)
    return result, findings
