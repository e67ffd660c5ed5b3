"""The events an analysis compares: a dataset's time range and filter, each event marked
as selection or baseline (or neither, and then left out), with its weight.

``Frame`` builds that as one sub-query (a sqlglot expression, values bound as parameters);
the analyses put their aggregates on top (``analysis/sql.py``). A *sampled* frame reads its baseline from the store's uniform sample
(one event in ``SAMPLE_EVERY``), each sampled event weighing ``SAMPLE_EVERY``: the
weighted counts estimate the baseline's, and the effective sizes the statistics use are
the sample's. Its selection is read from every event, unless the sample already holds
``SAMPLED_SELECTION_MIN`` selected events: then from the sample too. (Reading a
selection scattered over the whole range costs nearly a full scan of every column, since
almost every block holds one of its events.) User text reaches SQL only as compiled filters (values bound) and
quoted identifiers of known fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.errors import QuerySpecError
from rootsift.query import compile as qc
from rootsift.query.filters import compile_filter, parse_filter
from rootsift.query.filters import fields as filter_fields
from rootsift.query.overflow import OVERFLOW_FIELD, key_checker
from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.dialects import render
from rootsift.store.duckdb import DuckDBBackend
from rootsift.store.segment import SAMPLE_EVERY

SAMPLED_SELECTION_MIN = 1000
UNIT_SCALE_US = {"_ms": 1_000.0, "_us": 1.0, "_sec": 1_000_000.0, "_seconds": 1_000_000.0, "_s": 1_000_000.0}


def micros_per_unit(name: str) -> float | None:
    """Microseconds in one unit of a duration field, from its name (``_ms``, ``_s``…); None if unknown."""
    low = name.lower()
    for suffix, us in UNIT_SCALE_US.items():
        if low.endswith(suffix):
            return us
    return 1_000.0 if "duration" in low or "latency" in low else None


SEL = "__sel"
W = "__w"
W2 = "__w2"
Column = tuple[exp.Expr, str, list[Any]]
"""A column an analysis adds to the frame: (expression over the dataset's columns, alias,
the parameters its placeholders bind, in order)."""


def row_weights(rate: str | None, count: str | None, every: int) -> tuple[exp.Expr, exp.Expr]:
    """``__w`` (the events a row stands for) and ``__w2`` (the sum of the squared weights
    of the events it observed). A row with sample rate r (kept 1 in r) and count n stands
    for r·n events of which n were observed, each weighing r: ``__w`` is r·n and ``__w2``
    is n·r², so Kish's effective size ``(Σw)²/Σw²`` counts a count row as n observations
    and a sampled event as one. A rate below 1 or absent is 1; a count that is absent is
    1, one below 0 is 0 (the row stands for nothing); counts need not be whole (rollups
    of rates)."""
    r = [exp.paren(q.positive_or_one(q.col(rate))), q.num(every)] if rate else [q.num(every)]
    if not count:
        return q.product(r), q.product(r + r)
    c = q.col(count)
    n = exp.paren(q.case([(q.is_null(c), q.num(1)), (c.copy() > q.num(0), c.copy())], q.num(0)))
    return q.product([*r, n]), q.product([*r, *r, n])


@dataclass
class Frame:
    """Selection and baseline over one dataset; ``sql()`` is the marked sub-query."""

    backend: DuckDBBackend
    dataset: str
    start: datetime | None
    end: datetime | None
    where: str | None = None
    select: str | None = None
    select_from: datetime | None = None
    select_to: datetime | None = None
    baseline: str | None = None
    sampled: bool = False
    """Baseline from the stored sample (set back to False when the store has none)."""
    select_start_of: str | None = None
    """A duration field: ``select_from``/``select_to`` bound each event's start, its
    timestamp less that duration (the timestamp is the end), not the timestamp."""
    count_field: str | None = None
    """The field saying how many identical events a row stands for (``--count-field``);
    None: the dataset's setting or the conventional ``event_count`` when present."""
    selection_sampled: bool = field(init=False, default=False)
    """The selection from the stored sample as well (it holds enough selected events)."""
    fields: dict[str, FieldInfo] = field(init=False)
    weight: str | None = field(init=False)
    count: str | None = field(init=False)
    """The count field in use (``count_field``, the setting, or None)."""
    relation: exp.Expr = field(init=False)
    """The dataset's events over the range (segments pruned to it): made once per frame."""
    relation_sql: str = field(init=False)
    """``relation`` rendered in the backend's dialect, for the modules that still write SQL
    text (docs/architecture.md, "How an analysis builds SQL")."""

    def __post_init__(self) -> None:
        ranges = (
            ("--from/--to", self.start, self.end),
            ("--select-from/--select-to", self.select_from, self.select_to),
        )
        for name, lo, hi in ranges:
            if lo is not None and hi is not None and lo >= hi:
                raise QuerySpecError(f"{name}: the start must be before the end")
        self.fields = {n: f for n, f in self.backend.fields(self.dataset).items() if not n.endswith(RAW_SUFFIX)}
        self.weight = self.backend.weight_field(self.dataset)
        self.count = self._count_field()
        self.relation = self.backend.relation(self.dataset, self.start, self.end)
        self.relation_sql = render(self.relation, self.backend.text_dialect)
        self._holds = key_checker(self.backend.execute, self.relation) if OVERFLOW_FIELD in self.fields else None
        self.sample = self.backend.sample_relation(self.dataset, self.start, self.end) if self.sampled else None
        self.sampled = self.sample is not None
        self.sql()  # unknown fields and bad expressions fail here, before anything runs
        if self.sample is not None:
            marked, params = self._marked([], self.sample, "selection", 1)
            found = self.backend.execute(q.select([q.count_rows()], marked), params).rows[0][0]
            self.selection_sampled = int(found) >= SAMPLED_SELECTION_MIN

    def _count_field(self) -> str | None:
        name = self.count_field
        if name is None:
            return self.backend.count_field(self.dataset)
        info = self.fields.get(name)
        if info is None:
            known = ", ".join(n for n, f in sorted(self.fields.items()) if f.type in ("DOUBLE", "BIGINT")) or "none"
            raise QuerySpecError(f"--count-field {name!r}: the dataset has no such field (numeric fields: {known})")
        if info.type not in ("DOUBLE", "BIGINT"):
            raise QuerySpecError(f"--count-field {name!r} holds {info.type.lower()} values, not numbers")
        return name

    @property
    def weighted(self) -> bool:
        """Weighted counts differ from the counts (a sample rate, a count, or the stored sample)."""
        return self.weight is not None or self.count is not None or self.sampled

    @property
    def row_weights(self) -> bool:
        """Each row carries its own weight (``__w``) and the weight its squares sum over
        (``__w2``): a sample rate, a count field, or both."""
        return self.weight is not None or self.count is not None

    @property
    def factors(self) -> tuple[float, float]:
        """What each selected and each baseline event weighs beyond its sample rate: the
        stored sample's ``SAMPLE_EVERY`` for a group read from it, else 1. Without a sample
        rate field the weights are these constants, and counts times them are the weighted
        counts: no per-event weight column is summed."""
        every = float(SAMPLE_EVERY)
        return (every if self.selection_sampled else 1.0, every if self.sampled else 1.0)

    def event_start(self) -> exp.Expr:
        """The time the selection's time box bounds: the timestamp, or the event's start
        (``select_start_of``)."""
        ts = q.col(TIME_COLUMN)
        name = self.select_start_of
        if name is None:
            return ts
        scale = micros_per_unit(name)
        if name not in self.fields or scale is None:
            raise QuerySpecError(f"no duration field {name!r} (named *_ms, *_s, *_us…) to take the start from")
        micros = exp.cast(
            exp.Mul(this=exp.Coalesce(this=q.col(name), expressions=[q.num(0)]), expression=q.num(scale)), "BIGINT"
        )
        return exp.paren(exp.Sub(this=ts, expression=exp.Interval(this=micros, unit=exp.Var(this="MICROSECOND"))))

    def has_selection(self) -> bool:
        return bool(self.select and self.select.strip()) or self.select_from is not None or self.select_to is not None

    def range_where(self) -> tuple[exp.Expr, list[Any]]:
        """The range and ``where`` over the dataset's relation (no selection), TRUE when
        neither is given: (condition, params)."""
        scope = qc.Compiler(self.fields, self.relation, overflow_holds=self._holds)
        where = scope.where(self.start, self.end, self.where)
        return (where if where is not None else exp.true()), list(scope.params)

    def rows(self, items: Sequence[exp.Expr], *also: exp.Expr) -> tuple[exp.Select, list[Any]]:
        """``SELECT items FROM relation WHERE (range and filter) AND (each of also)``; the
        parameters are the range's, so ``also`` binds none of its own."""
        where, params = self.range_where()
        return q.select(items, self.relation.copy(), q.and_(where, *also)), params

    def order_columns(self) -> list[Column]:
        """The store's row order (``Backend.row_order``) as columns ``__o0``, ``__o1``… of a
        sub-query whose first rows ``first`` takes; none on DuckDB."""
        return [(q.col(n), f"__o{i}", []) for i, n in enumerate(self.backend.row_order(self.dataset))]

    def first(self, query: exp.Select, rows: int, of_subquery: bool = False) -> exp.Select:
        """``query`` limited to its first ``rows`` rows in the store's order: by the
        dataset's columns, or (``of_subquery``) by the sub-query's ``order_columns``. The
        same rows on every run, as "the first N events" means on one DuckDB store."""
        order = self.backend.row_order(self.dataset)
        keys = [exp.column(q.name(f"__o{i}")) if of_subquery else q.col(n) for i, n in enumerate(order)]
        if keys:
            query = query.order_by(*keys, copy=False)
        return query.limit(q.num(rows), copy=False)

    def selection_fields(self) -> set[str]:
        """Fields the selection and baseline are defined by (their differences are by construction)."""
        names: set[str] = set()
        for text in (self.select, self.baseline):
            if text and text.strip():
                names |= filter_fields(parse_filter(text))
        return names

    def sql(self, columns: list[Column] | None = None) -> tuple[exp.Expr, list[Any]]:
        """``SELECT <columns>, __sel[, __w, __w2] FROM <dataset> WHERE range, filter and
        (selected or baseline)``: (query, params). ``columns``: see ``Column``."""
        if self.sample is None:
            return self._marked(columns, self.relation, "both", 1)
        if self.selection_sampled:
            return self._marked(columns, self.sample, "both", SAMPLE_EVERY)
        selected, p1 = self._marked(columns, self.relation, "selection", 1)
        again = [(expr.copy(), label, bound) for expr, label, bound in columns or []]  # a tree has one parent
        base, p2 = self._marked(again, self.sample, "baseline", SAMPLE_EVERY)
        return exp.union(selected, base, distinct=False, copy=False), p1 + p2

    def baseline_sql(self, columns: list[Column]) -> tuple[exp.Expr, list[Any]]:
        """Like ``sql()``, the baseline's events only (from the stored sample when there is
        one): a read of the baseline alone never scans for the selection."""
        return self._marked(columns, self.sample or self.relation, "baseline", 1)

    def _marked(
        self, columns: list[Column] | None, relation: exp.Expr, keep_only: str, every: int
    ) -> tuple[exp.Select, list[Any]]:
        """The marked events of ``relation``: ``both`` groups, only the ``selection`` or only
        the ``baseline``, each weighing ``every`` (times its sample rate). The columns'
        expressions become part of the query (not copied)."""
        params: list[Any] = []
        items: list[exp.Expr] = []
        for expr, label, bound in columns or []:
            items.append(q.alias(expr, label))
            params += bound
        sel = self._condition(self.select, self.select_from, self.select_to, params)
        items.append(q.alias(exp.Coalesce(this=sel, expressions=[exp.false()]), SEL))
        if self.row_weights:
            w, w2 = row_weights(self.weight, self.count, every)
            items += [q.alias(w, W), q.alias(w2, W2)]
        where, scope_params = self.range_where()
        params += scope_params
        keep: exp.Expr = exp.true()  # both groups, the baseline being the rest
        if keep_only != "both" or self.baseline:  # the selection condition again, in the filter: bound again
            cond = self._condition(self.select, self.select_from, self.select_to, params)
            again = exp.Coalesce(this=cond, expressions=[exp.false()])
            base: exp.Expr = exp.true()
            if self.baseline and keep_only != "selection":  # bound only where it is used
                base = exp.Coalesce(this=self._condition(self.baseline, None, None, params), expressions=[exp.false()])
            # the selection alone as a bare predicate (NULL drops the row), so DuckDB pushes it into the scan
            if keep_only == "both":
                keep = exp.or_(again, base, copy=False)
            elif keep_only == "selection":
                keep = cond.copy()
            else:
                keep = exp.and_(exp.Not(this=again.copy()), base, copy=False)
        query = exp.select(*items, copy=False).from_(relation.copy(), copy=False)
        return query.where(q.and_(where, keep), copy=False), params

    def _condition(self, text: str | None, lo: datetime | None, hi: datetime | None, params: list[Any]) -> exp.Expr:
        compiler = qc.Compiler(self.fields, self.relation, overflow_holds=self._holds)
        parts: list[exp.Expr] = []
        if text and text.strip():
            parts.append(exp.paren(compile_filter(parse_filter(text), compiler.column, compiler.bind), copy=False))
        ts = self.event_start() if lo is not None or hi is not None else q.col(TIME_COLUMN)
        if lo is not None:
            parts.append(ts.copy() >= compiler.bind(lo))
        if hi is not None:
            parts.append(ts.copy() < compiler.bind(hi))
        params += compiler.params
        return exp.paren(exp.and_(*parts, copy=False), copy=False) if parts else exp.true()
