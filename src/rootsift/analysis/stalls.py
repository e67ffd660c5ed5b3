"""What happened in a stall: the events that complete right after it (investigate passes
the gap's end as ``start``), in the order they complete, and how rare each kind of event is outside it.

When work stops and then resumes, the first thing to complete is usually what everything
else was waiting for (a ``flush logs`` holding a lock): the stall's events are ranked by
how early they complete after the stall begins, grouped by what identifies an event
(its fingerprint, statement, endpoint…), each with its count outside the stall.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import weighted
from rootsift.analysis.findings import Finding, iso
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN

IDENTITY = (
    "fingerprint",
    "statement",
    "query",
    "endpoint",
    "path",
    "route",
    "operation",
    "span_name",
    "name",
    "message",
)
"""Fields that say what an event is, in order of preference."""
SHOWN = 10


def identity_field(frame: Frame) -> str | None:
    """The field that names what each event is (the first of ``IDENTITY`` the dataset has)."""
    return next((f for f in IDENTITY if f in frame.fields and frame.fields[f].type == "VARCHAR"), None)


def stall_events(
    frame: Frame, start: datetime, end: datetime, settle: timedelta, completion: str = TIME_COLUMN
) -> list[Finding]:
    """Kinds of events completing (by the ``completion`` field) in [start, end + settle),
    earliest first (of equal times, by the kind's value), with their count elsewhere (a
    row with a count is that many events)."""
    name = identity_field(frame)
    if name is None:
        return []
    col, ts = q.col(name), q.col(completion)
    window = [start, end + settle]
    n = weighted.count_of(frame)
    bound: list[Any] = []
    items = [
        col,
        q.alias(q.where(exp.Min(this=ts), q.within(ts, bound, *window)), "first"),
        q.alias(
            exp.Coalesce(this=q.where(exp.Sum(this=n), q.within(ts, bound, *window)), expressions=[q.num(0)]), "n_in"
        ),
        q.alias(
            exp.Coalesce(
                this=q.where(exp.Sum(this=n.copy()), exp.Not(this=q.within(ts, bound, *window))),
                expressions=[q.num(0)],
            ),
            "n_out",
        ),
        q.alias(exp.Sum(this=n.copy()), "n"),
    ]
    query, params = frame.rows(items)
    query = query.group_by(q.num(1), copy=False).having(exp.column(q.name("n_in")) > q.num(0), copy=False)
    query = q.order_by(query, exp.column(q.name("first")), q.nulls_last(q.num(1))).limit(SHOWN, copy=False)
    rows = frame.backend.execute(query, bound + params).rows
    total_out = _count_outside(frame, window, ts)
    found = []
    for rank, (value, first, n_in, n_out, _n) in enumerate(rows, 1):
        after = (first - end).total_seconds()
        share_out = n_out / total_out if total_out else 0.0
        found.append(
            Finding(
                "stall",
                1.0 / rank,
                1.0,
                field=name,
                value=value,
                selection_count=float(n_in),
                baseline_count=float(n_out),
                baseline_fraction=share_out,
                detail={
                    "rank": rank,
                    "first_completed": iso(first),
                    "seconds_after_stall_end": round(after, 6),
                    "only_in_stall": n_out == 0 or share_out < 0.001,
                },
            )
        )
    return found


def _count_outside(frame: Frame, window: list[Any], ts: exp.Expr) -> float:
    bound: list[Any] = []
    outside = exp.Not(this=q.within(ts.copy(), bound, *window))
    query, params = frame.rows([exp.Sum(this=weighted.count_of(frame))], outside)
    return float(frame.backend.execute(query, params + bound).rows[0][0] or 0)
