"""Running a QuerySpec on a backend and shaping the result (table or heatmap grid)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rootsift.errors import QuerySpecError, RootsiftError, TimeFormatError
from rootsift.query.plan import Inputs, Plan, Statement
from rootsift.query.spec import HEAT_STEPS_PER_DOUBLING, QuerySpec
from rootsift.store.base import OVERFLOW_FIELD, QueryResult
from rootsift.timeutil import format_duration, iso_z, nice_granularity, parse_duration, parse_time

if TYPE_CHECKING:
    from rootsift.store.base import Backend

HEATMAP_COLUMNS = 60
MAX_HEATMAP_COLUMNS = 10_000


@dataclass
class Heatmap:
    """Counts per time bucket (columns) and log-scaled value bucket (rows, low to high)."""

    field: str
    times: list[datetime]
    bucket_edges: list[float]  # lower edge of each value bucket; bucket i covers [edges[i], edges[i] * 2^(1/4))
    counts: list[list[float]]  # counts[bucket][time]
    nonpositive: list[float]  # events with a value <= 0, per time bucket

    def as_dict(self) -> dict[str, Any]:
        step = 2 ** (1 / HEAT_STEPS_PER_DOUBLING)
        return {
            "field": self.field,
            "times": [_iso(t) for t in self.times],
            "buckets": [{"lo": lo, "hi": lo * step} for lo in self.bucket_edges],
            "counts": self.counts,
            "nonpositive": self.nonpositive,
        }


@dataclass
class QueryOutput:
    """A query's result with the resolved range, granularity and any warnings."""

    spec: QuerySpec
    columns: list[str]
    rows: list[list[Any]]
    start: datetime | None
    end: datetime | None
    granularity: timedelta | None
    warnings: list[str] = field(default_factory=list)
    heatmap: Heatmap | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.spec.to_dict(),
            "start": _iso(self.start),
            "end": _iso(self.end),
            "granularity": format_duration(self.granularity) if self.granularity else None,
            "columns": self.columns,
            "rows": [[_iso(v) if isinstance(v, datetime) else v for v in row] for row in self.rows],
            "heatmap": self.heatmap.as_dict() if self.heatmap else None,
            "warnings": self.warnings,
        }


def run_query(
    backend: Backend, spec: QuerySpec, now: datetime | None = None, *, keep_plan: bool = False
) -> QueryOutput:
    """Execute ``spec``; see QuerySpec for the fields. Returns rows or a heatmap grid.

    ``keep_plan``: reuse the plan kept for the same inputs, or keep this one
    (``rootsift.query.plan``; the backend decides whether it keeps plans at all). The
    checks below run before anything is compiled; when one fails, what compiling did
    before it (the filter; the breakdowns before ``--order``) is compiled first, so a
    query with several faults reports the one it always has.
    """
    now = now or datetime.now(UTC)
    start = _naive(parse_time(spec.start, now)) if spec.start else None
    end = _naive(parse_time(spec.end, now)) if spec.end else None
    if start and end and start >= end:
        raise QuerySpecError(f"--from ({_iso(start)}) must be before --to ({_iso(end)})")
    fields = backend.fields(spec.dataset)
    weight = backend.weight_field(spec.dataset)
    warnings: list[str] = []
    if weight and any(c.op == "count_distinct" for c in spec.calculations):
        warnings.append(f"count_distinct counts distinct stored values; sample rates ({weight!r}) cannot apply to it")
    inputs = Inputs(backend, spec, fields, weight, start, end)
    with _compiled_first(inputs):
        granularity = _granularity(spec.granularity)
        if granularity is not None:
            _check_range(backend.span(spec.dataset), start, end, granularity)
    order: list[tuple[str, bool]] = []
    if spec.heatmap is not None:
        span = _data_span(backend, spec.dataset, start, end)
        if granularity is None:
            granularity = _auto_granularity(span)
        with _compiled_first(inputs):
            _check_columns(span, granularity)
    else:
        labels = (["time"] if granularity else []) + list(spec.breakdowns) + [c.label for c in spec.calculations]
        with _compiled_first(inputs, breakdowns=True):
            order = _order(spec, labels, granularity is not None)
    g_us = _us(granularity) if granularity else None
    plan = _plan(inputs, g_us, order, keep_plan)
    if plan.kind == "heatmap":
        return QueryOutput(spec, [], [], start, end, granularity, warnings, _heatmap(backend, plan, g_us or 1))
    labels, rows = _table(backend, plan, spec, order)
    return QueryOutput(spec, labels, rows, start, end, granularity, warnings)


@contextlib.contextmanager
def _compiled_first(inputs: Inputs, *, breakdowns: bool = False) -> Iterator[None]:
    """Around a check: its error is raised unless compiling the query's filter (and with
    ``breakdowns`` its group keys) raises first."""
    try:
        yield
    except RootsiftError:
        from rootsift.query.planner import compile_up_to

        compile_up_to(inputs, breakdowns=breakdowns)
        raise


def _plan(inputs: Inputs, g_us: int | None, order: list[tuple[str, bool]], keep: bool) -> Plan:
    """The kept plan of these inputs, or a new one (kept when ``keep`` and the backend keeps plans)."""
    backend, spec, fields, span = inputs.backend, inputs.spec, inputs.fields, inputs.span
    cache = backend.plan_cache() if keep and OVERFLOW_FIELD not in fields else None
    key = ""
    if cache is not None:
        query = {k: v for k, v in spec.to_dict().items() if k not in ("start", "end")}
        query["calculations"] = [repr(c) for c in spec.calculations]  # a label rounds p99.9999999
        key = cache.key(
            {
                "dialect": backend.dialect,
                "query": query,
                "range": [span[0] is not None, span[1] is not None],
                "granularity_us": g_us,
                "order": order,
                "fields": sorted([f.name, f.type, f.path, f.conflicts] for f in fields.values()),
                "weight": inputs.weight,
                "relation": backend.relation_text(spec.dataset, *span),
            }
        )
        kept = cache.load(key, *span)
        if kept is not None:
            return kept
    from rootsift.query.planner import plan_query  # sqlglot: only when no kept plan answers

    plan = plan_query(inputs, g_us, order)
    if cache is not None:
        for st in plan.statements():
            st.sql = backend.render(st.tree)
        cache.store(key, plan, *span)
    return plan


def _run(backend: Backend, st: Statement) -> QueryResult:
    return backend.execute_sql(st.sql, st.params) if st.sql is not None else backend.execute(st.tree, st.params)


def _table(
    backend: Backend, plan: Plan, spec: QuerySpec, order: list[tuple[str, bool]]
) -> tuple[list[str], list[list[Any]]]:
    """Rows of a table plan; weighted percentiles, each its own statement, merged by group key."""
    result = _run(backend, plan.main)
    nkeys = plan.keys
    if not plan.percentiles:
        return plan.labels, [list(r) for r in result.rows]
    found: dict[tuple[Any, ...], dict[str, Any]] = {
        tuple(r[:nkeys]): dict(zip(plan.plain, r[nkeys:])) for r in result.rows
    }
    for label, st in plan.percentiles:
        for r in _run(backend, st).rows:
            if tuple(r[:nkeys]) in found:
                found[tuple(r[:nkeys])][label] = r[nkeys]
    rows = [list(k) + [vals.get(c.label) for c in spec.calculations] for k, vals in found.items()]
    return plan.labels, _sort(rows, plan.labels, order)[: spec.limit]


def _order(spec: QuerySpec, labels: list[str], timed: bool) -> list[tuple[str, bool]]:
    if not spec.order:
        first_calc = labels[len(labels) - len(spec.calculations)]
        return [("time", False), (first_calc, True)] if timed else [(first_calc, True)]
    out = []
    for item in spec.order:
        text = item.strip()
        desc = True
        for suffix, flag in ((" desc", True), (" asc", False)):
            if text.lower().endswith(suffix):
                text, desc = text[: -len(suffix)].strip(), flag
        if text.startswith("-"):
            text, desc = text[1:], True
        if text not in labels:
            raise QuerySpecError(f"--order {item!r}: order by one of {', '.join(labels)}")
        out.append((text, desc))
    return out


def _sort(rows: list[list[Any]], labels: list[str], order: list[tuple[str, bool]]) -> list[list[Any]]:
    """Stable multi-key sort in Python (for merged weighted-percentile rows); NULLs last."""
    for label, desc in reversed(order):
        i = labels.index(label)
        present = [r for r in rows if r[i] is not None]
        present.sort(key=lambda r: r[i], reverse=desc)
        rows = present + [r for r in rows if r[i] is None]
    return rows


def _heatmap(backend: Backend, plan: Plan, g_us: int) -> Heatmap:
    res = _run(backend, plan.main)
    cells = [(t, b, float(c)) for t, b, c in res.rows]
    times = sorted({t for t, _, _ in cells})
    if times:
        first, last = times[0], times[-1]
        step = timedelta(microseconds=g_us)
        times = [first + i * step for i in range(int((last - first) / step) + 1)]
    index = {t: i for i, t in enumerate(times)}
    buckets = sorted({b for _, b, _ in cells if b is not None})
    lo, hi = (buckets[0], buckets[-1]) if buckets else (0, -1)
    edges = [2 ** (b / HEAT_STEPS_PER_DOUBLING) for b in range(lo, hi + 1)]
    counts = [[0.0] * len(times) for _ in edges]
    nonpositive = [0.0] * len(times)
    for t, b, c in cells:
        if b is None:
            nonpositive[index[t]] += c
        else:
            counts[b - lo][index[t]] += c
    return Heatmap(plan.heatmap_field, times, edges, counts, nonpositive)


def _granularity(text: str | None) -> timedelta | None:
    """The ``--granularity`` (``-g``) of a spec as a positive duration, or None."""
    if not text:
        return None
    try:
        granularity = parse_duration(text)
    except TimeFormatError as exc:
        raise TimeFormatError(f"--granularity (-g): {exc}") from None
    if granularity.total_seconds() <= 0:
        raise QuerySpecError(f"--granularity (-g) must be positive, not {text!r}")
    return granularity


def _check_range(
    data: tuple[datetime | None, datetime | None], start: datetime | None, end: datetime | None, g: timedelta
) -> None:
    """Refuse a granularity whose one bucket would start on 1970-01-01: longer than the
    queried range (--from to --to, a missing side taken from the dataset's first or last
    event) and than the time since 1970 of its start. Buckets start at whole multiples of
    the granularity since 1970, so ``-g 1d`` over three hours is one bucket from midnight,
    which is fine, but ``-g 99999999d`` draws one bucket dated 1970. No events and no
    range: no check."""
    lo, hi = start or data[0], end or data[1]
    if lo is None or hi is None or g <= hi - lo or g <= lo - datetime(1970, 1, 1, tzinfo=lo.tzinfo):
        return
    width = max(hi - lo, timedelta(0))
    raise QuerySpecError(
        f"--granularity (-g) {format_duration(g)} is longer than the queried range ({format_duration(width)}, "
        f"{_iso(lo)} to {_iso(hi)}), so its one bucket would start on 1970-01-01; use at most "
        f"{format_duration(width)}, or leave -g out for one total"
    )


def _data_span(
    backend: Backend, dataset: str, start: datetime | None, end: datetime | None
) -> tuple[datetime, datetime] | None:
    """The query range clipped to where the dataset has events; None if they do not meet."""
    first, last = backend.span(dataset)
    lo = max(filter(None, [start, first]), default=None)
    hi = min(filter(None, [end, last]), default=None)
    return (lo, hi) if lo is not None and hi is not None and hi > lo else None


def _auto_granularity(span: tuple[datetime, datetime] | None) -> timedelta:
    if span is None:
        return timedelta(minutes=1)
    return nice_granularity(span[1] - span[0] + timedelta(microseconds=1), HEATMAP_COLUMNS)


def _check_columns(span: tuple[datetime, datetime] | None, granularity: timedelta) -> None:
    """Refuse a heatmap whose time axis would have more than MAX_HEATMAP_COLUMNS columns."""
    if span is not None and (span[1] - span[0]) / granularity > MAX_HEATMAP_COLUMNS:
        width = span[1] - span[0]
        raise QuerySpecError(
            f"--granularity {format_duration(granularity)} would draw {int(width / granularity):,} columns over "
            f"{format_duration(width)}; use a coarser granularity or a shorter range (at most {MAX_HEATMAP_COLUMNS:,})"
        )


def _us(td: timedelta) -> int:
    return max(1, math.floor(td / timedelta(microseconds=1)))


def _naive(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(tzinfo=None)


_iso = iso_z
