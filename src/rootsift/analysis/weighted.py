"""Aggregates over rows that stand for many events (a count field, sample rates): the
events a bucket holds and quantiles as if every event were written out."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.frame import Frame, row_weights
from rootsift.store.duckdb import DuckDBBackend


def count_of(frame: Frame) -> exp.Expr:
    """The events observed in a row: its count (``Frame.count``), or 1. Sample rates are
    left out: a sampled event is one observation, and the scans count observations."""
    if frame.count is None:
        return q.num(1)
    return row_weights(None, frame.count, 1)[0]


def quantiles(
    backend: DuckDBBackend, rows: exp.Expr | str, params: list[Any], qs: list[float]
) -> tuple[int, list[float] | None]:
    """(rows, quantiles) of the values ``v`` weighted by ``w`` in ``rows`` (a query with
    those two columns; as text in the backend's dialect from modules that still write
    text), as ``quantile_cont`` interpolates them over the expanded events: with W events
    in all, quantile q lies at position h = q (W − 1) of the sorted events, between the
    events at ⌊h⌋ and ⌊h⌋ + 1; the event at position i is the value of the first row
    whose cumulative weight passes i. Whole weights give exactly what the expanded
    events give, from a sort of the rows."""
    if isinstance(rows, str):
        import sqlglot

        rows = sqlglot.parse_one(rows, dialect=backend.text_dialect)
    v, cw, tw = exp.column("v"), exp.column("cw"), exp.column("tw")
    picks: list[exp.Expr] = []
    for at in qs:
        h = exp.Greatest(
            this=exp.Mul(this=q.num(at), expression=exp.paren(exp.Sub(this=tw.copy(), expression=q.num(1)))),
            expressions=[q.num(0)],
        )
        at_lo = q.where(exp.Min(this=v.copy()), cw.copy() > exp.Floor(this=h.copy()))
        beyond = cw.copy() > exp.Add(this=exp.Floor(this=h.copy()), expression=q.num(1))
        at_hi = exp.Coalesce(this=q.where(exp.Min(this=v.copy()), beyond), expressions=[at_lo.copy()])
        top = exp.Max(this=h.copy())
        frac = exp.paren(exp.Sub(this=top, expression=exp.Floor(this=top.copy())))
        step = exp.Mul(this=exp.paren(exp.Sub(this=at_hi, expression=at_lo.copy())), expression=frac)
        picks.append(exp.Add(this=at_lo, expression=step))
    ranked = q.select(
        [
            v.copy(),
            q.alias(q.running_sum(exp.column("w"), v.copy()), "cw"),
            q.alias(q.over(exp.Sum(this=exp.column("w"))), "tw"),
        ],
        rows,
        q.not_null(v.copy()),
    )
    query = q.select([q.count_rows(), exp.Array(expressions=picks)], ranked)
    n, values = backend.execute(query, params).rows[0]
    return int(n), (values if n else None)
