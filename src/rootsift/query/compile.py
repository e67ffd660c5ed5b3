"""QuerySpec → sqlglot expressions with bound parameters, rendered per backend dialect.

User text never becomes SQL text: field names are checked against the dataset's
schema and become quoted identifiers; every value becomes a positional parameter
(``exp.Placeholder``). Only dialect-neutral nodes are built here (``exp.Quantile``,
``exp.Log``, ``exp.Floor``, ``dialects.TimeBucket``): the backend's dialect renders
them (``rootsift.store.dialects``). Weights (sample rates) change the aggregate forms,
not the query's shape.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlglot import exp

from rootsift.errors import QuerySpecError, UnknownFieldError
from rootsift.query import overflow
from rootsift.query.filters import compile_filter, parse_filter
from rootsift.query.spec import HEAT_STEPS_PER_DOUBLING, Calculation
from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.dialects import TimeBucket

NUMERIC = ("DOUBLE", "BIGINT")


@dataclass
class Compiler:
    """Builds the SQL of one query against one dataset's relation."""

    fields: dict[str, FieldInfo]
    relation: exp.Expr
    weight: str | None = None
    params: list[Any] = field(default_factory=list)
    where_clause: exp.Expr | None = None
    overflow_holds: Callable[[str], bool] | None = None
    """Whether some event's ``_overflow`` holds a key (``overflow.key_checker``); when None,
    names that are not columns stay unknown fields even if the dataset has an overflow."""

    # -- names and values --------------------------------------------------------
    def column(self, name: str) -> tuple[exp.Expr, str]:
        """The quoted column for a field name, with its type; UnknownFieldError if absent.

        A name that is no column but a key of the dataset's ``_overflow`` is its value as
        text, of type ``OVERFLOW`` (see ``rootsift.query.overflow``)."""
        info = self.fields.get(name)
        if info is not None and not name.endswith(RAW_SUFFIX):
            return exp.column(exp.to_identifier(name, quoted=True)), info.type
        if info is None and self.is_overflow_key(name):
            return overflow.text_value(name), overflow.OVERFLOW_TYPE
        close = difflib.get_close_matches(name, [f for f in self.fields if not f.endswith(RAW_SUFFIX)], n=3)
        raise UnknownFieldError(name, close)

    def is_overflow_key(self, name: str) -> bool:
        return (
            self.overflow_holds is not None
            and overflow.OVERFLOW_FIELD in self.fields
            and "\x00" not in name
            and not name.endswith(RAW_SUFFIX)
            and self.overflow_holds(name)
        )

    def bind(self, value: object) -> exp.Expr:
        """A placeholder for ``value``, appended to the parameters."""
        self.params.append(value)
        return exp.Placeholder()

    def numeric(self, name: str, calc: str) -> exp.Expr:
        col, ctype = self.column(name)
        if ctype == overflow.OVERFLOW_TYPE:
            return overflow.number_value(col)
        if ctype not in NUMERIC:
            raise QuerySpecError(f"{calc} needs a numeric field, but {name!r} holds {ctype.lower()} values")
        return col

    @property
    def w(self) -> exp.Expr:
        """The weight of an event: its sample rate when >= 1, else 1."""
        assert self.weight is not None
        col = exp.column(exp.to_identifier(self.weight, quoted=True))
        return exp.If(this=col >= exp.Literal.number(1), true=col, false=exp.Literal.number(1))

    # -- clauses -----------------------------------------------------------------
    def where(self, start: datetime | None, end: datetime | None, text: str | None) -> exp.Expr | None:
        """Time range and filter, ANDed."""
        ts = exp.column(exp.to_identifier(TIME_COLUMN, quoted=True))
        parts: list[exp.Expr] = []
        if start is not None:
            parts.append(ts >= self.bind(start))
        if end is not None:
            parts.append(ts < self.bind(end))
        if text and text.strip():
            parts.append(exp.paren(compile_filter(parse_filter(text), self.column, self.bind)))
        return exp.and_(*parts) if parts else None

    def bucket(self, granularity_us: int) -> exp.Expr:
        """The start of the time bucket of each event."""
        ts = exp.column(exp.to_identifier(TIME_COLUMN, quoted=True))
        return TimeBucket(this=ts, width=exp.Literal.number(granularity_us))

    def aggregate(self, calc: Calculation) -> exp.Expr:
        """The aggregate for a calculation; percentiles here are the unweighted form."""
        if calc.op == "count":
            if self.weight:
                return exp.Coalesce(this=exp.Sum(this=self.w), expressions=[exp.Literal.number(0)])
            return exp.Count(this=exp.Star())
        if calc.op == "count_distinct":
            col, _ = self.column(calc.field or "")
            return exp.Count(this=exp.Distinct(expressions=[col]))
        col, ctype = self.column(calc.field or "")
        x = self.numeric(calc.field or "", calc.label) if calc.op not in ("min", "max") else col
        if ctype == overflow.OVERFLOW_TYPE:  # min/max of an overflow key: as numbers
            x = overflow.number_value(col)
        if calc.op in ("min", "max"):
            return exp.Min(this=x) if calc.op == "min" else exp.Max(this=x)
        if calc.op == "sum":
            return exp.Sum(this=x * self.w) if self.weight else exp.Sum(this=x)
        if calc.op == "avg":
            if not self.weight:
                return exp.Avg(this=x)
            present = exp.If(this=exp.Not(this=exp.Is(this=x, expression=exp.Null())), true=self.w)
            return exp.Div(this=exp.Sum(this=x * self.w), expression=exp.Sum(this=present))
        if calc.op == "percentile":
            return exp.Quantile(this=x, quantile=exp.Literal.number(calc.q))
        raise QuerySpecError(f"{calc.label} cannot be computed in a table query")


def group_keys(compiler: Compiler, breakdowns: list[str], granularity_us: int | None) -> list[tuple[str, exp.Expr]]:
    """(label, expression) of each group key: the time bucket first, then the breakdowns."""
    keys: list[tuple[str, exp.Expr]] = []
    if granularity_us:
        keys.append(("time", compiler.bucket(granularity_us)))
    keys += [(b, compiler.column(b)[0]) for b in breakdowns]
    return keys


def select(
    keys: list[tuple[str, exp.Expr]], values: list[tuple[str, exp.Expr]], source: exp.Expr, where: exp.Expr | None
) -> exp.Select:
    """SELECT keys and values FROM source WHERE … GROUP BY the keys (by ordinal)."""
    items = [exp.alias_(e, exp.to_identifier(label, quoted=True)) for label, e in keys + values]
    # copy=False: each builder call would otherwise deep-copy the whole query built so far.
    query = exp.select(*items).from_(source.copy(), copy=False)
    if where is not None:
        query = query.where(where, copy=False)
    if keys:
        query = query.group_by(*[exp.Literal.number(i + 1) for i in range(len(keys))], copy=False)
    return query


def weighted_percentile(
    compiler: Compiler, keys: list[tuple[str, exp.Expr]], calc: Calculation, where: exp.Expr | None
) -> exp.Select:
    """Inverted-CDF percentile with weights: the smallest x whose cumulative weight reaches q × total."""
    x = compiler.numeric(calc.field or "", calc.label)
    key_ids = [exp.to_identifier(f"k{i}", quoted=True) for i in range(len(keys))]
    inner_items = [exp.alias_(e, k) for (_, e), k in zip(keys, key_ids)]
    inner_items += [exp.alias_(x, "x"), exp.alias_(compiler.w, "w")]
    base_where = exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))
    base = (
        exp.select(*inner_items)
        .from_(compiler.relation.copy())
        .where(exp.and_(where, base_where) if where is not None else base_where)
    )
    part = [exp.column(k) for k in key_ids]
    cum = exp.Window(
        this=exp.Sum(this=exp.column("w")),
        partition_by=part,
        order=exp.Order(expressions=[exp.Ordered(this=exp.column("x"))]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING"),
    )
    tot = exp.Window(this=exp.Sum(this=exp.column("w")), partition_by=[p.copy() for p in part])
    ranked = exp.select(*[exp.column(k) for k in key_ids], "x", exp.alias_(cum, "cw"), exp.alias_(tot, "tw")).from_(
        base.subquery("b")
    )
    reach = exp.column("cw") >= exp.Mul(this=exp.Literal.number(calc.q), expression=exp.column("tw"))
    value = exp.Filter(this=exp.Min(this=exp.column("x")), expression=exp.Where(this=reach))
    out = exp.select(*[exp.column(k) for k in key_ids], exp.alias_(value, "v")).from_(ranked.subquery("r"))
    if key_ids:
        out = out.group_by(*[exp.Literal.number(i + 1) for i in range(len(key_ids))])
    return out


def heatmap(compiler: Compiler, calc: Calculation, granularity_us: int, where: exp.Expr | None) -> exp.Select:
    """Counts per (time bucket, log-scaled value bucket); value bucket NULL holds values <= 0."""
    x = compiler.numeric(calc.field or "", calc.label)
    steps = exp.Literal.number(HEAT_STEPS_PER_DOUBLING)
    positive = x.copy() > exp.Literal.number(0)
    log2 = exp.Log(this=exp.Literal.number(2), expression=x.copy())
    vbucket = exp.If(this=positive, true=exp.cast(exp.Floor(this=exp.Mul(this=log2, expression=steps)), "BIGINT"))
    count = exp.Sum(this=compiler.w) if compiler.weight else exp.Count(this=exp.Star())
    present = exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))
    keys = [("time", compiler.bucket(granularity_us)), ("bucket", vbucket)]
    return select(
        keys, [("count", count)], compiler.relation, exp.and_(where, present) if where is not None else present
    )
