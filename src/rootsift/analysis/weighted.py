"""Aggregates over rows that stand for many events (a count field, sample rates): the
events a bucket holds and quantiles as if every event were written out."""

from __future__ import annotations

from typing import Any

from rootsift.analysis.frame import Frame, W, row_weight_sql
from rootsift.store.duckdb import DuckDBBackend


def count_sql(frame: Frame) -> str:
    """SQL for the events observed in a row: its count (``Frame.count``), or 1. Sample rates
    are left out: a sampled event is one observation, and the scans count observations."""
    if frame.count is None:
        return "1"
    return row_weight_sql(None, frame.count, 1)[0].removesuffix(f" AS {W}")


def quantiles(
    backend: DuckDBBackend, rows_sql: str, params: list[Any], qs: list[float]
) -> tuple[int, list[float] | None]:
    """(rows, quantiles) of the values ``v`` weighted by ``w`` in ``rows_sql`` (a query
    with those two columns), as ``quantile_cont`` interpolates them over the expanded
    events: with W events in all, quantile q lies at position h = q (W − 1) of the sorted
    events, between the events at ⌊h⌋ and ⌊h⌋ + 1; the event at position i is the value of
    the first row whose cumulative weight passes i. Whole weights give exactly what the
    expanded events give, from a sort of the rows."""
    picks = []
    for q in qs:
        h = f"greatest({q!r} * (tw - 1), 0)"
        at_lo = f"min(v) FILTER (WHERE cw > floor({h}))"
        at_hi = f"coalesce(min(v) FILTER (WHERE cw > floor({h}) + 1), {at_lo})"
        frac = f"(max({h}) - floor(max({h})))"
        picks.append(f"{at_lo} + ({at_hi} - {at_lo}) * {frac}")
    n, values = backend.execute_sql(
        f"SELECT count(*), [{', '.join(picks)}] FROM (SELECT v, sum(w) OVER (ORDER BY v ROWS UNBOUNDED PRECEDING) "
        f"AS cw, sum(w) OVER () AS tw FROM ({rows_sql}) WHERE v IS NOT NULL)",
        params,
    ).rows[0]
    return int(n), (values if n else None)
