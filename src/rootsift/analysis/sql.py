"""How an analysis builds SQL: sqlglot expressions, rendered by the backend's dialect.

An analysis never writes SQL text. It builds a dialect-neutral sqlglot tree (sqlglot's
own nodes for anything spelled differently per engine: ``exp.PercentileCont`` for a
quantile, ``exp.UnixMicros`` for epoch microseconds, ``exp.Filter`` for an aggregate's
``FILTER (WHERE …)``), binds every value as an ``exp.Placeholder`` with a positional
parameter, and hands the tree to ``backend.execute(tree, params)``, which renders it in
``backend.dialect``. The helpers here are the shapes the analyses share.

Where sqlglot has no neutral node, the construct is isolated in one function below and
named in ``ENGINE_FUNCTIONS``, so a backend's dialect can map it (``store/dialects.py``):
``tests/test_sql_built.py`` fails if an analysis calls a function by name that is not
listed there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlglot import exp

ENGINE_FUNCTIONS = {
    "log2": "the base-2 logarithm; sqlglot's exp.Log(2, x) renders LOG(2, x) in DuckDB, whose last bit can differ",
}
"""Functions called by name (``exp.Anonymous``): no sqlglot node renders them as every
engine spells them. Each is spelled the same in DuckDB and ClickHouse unless said."""

Value = float | int


# -- names and values ----------------------------------------------------------------
def col(name: str) -> exp.Column:
    """A field as a quoted column: any name is an identifier, never SQL text."""
    return exp.column(exp.to_identifier(name, quoted=True))


def name(alias: str) -> exp.Identifier:
    """A quoted identifier (an alias, a CTE's or a sub-query's column)."""
    return exp.to_identifier(alias, quoted=True)


def num(value: Value) -> exp.Expr:
    """A number literal written as Python's ``repr`` writes it (every digit kept)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is no number")
    if value < 0:
        return exp.Neg(this=exp.Literal.number(repr(-value)))
    return exp.Literal.number(repr(value))


def bind(params: list[Any], value: object) -> exp.Placeholder:
    """A placeholder for ``value``, appended to ``params`` (bound in the order rendered)."""
    params.append(value)
    return exp.Placeholder()


def binds(params: list[Any], values: Sequence[object]) -> list[exp.Expr]:
    return [bind(params, v) for v in values]


def alias(expr: exp.Expr, label: str) -> exp.Expr:
    """``expr AS "label"``; ``expr`` is taken as it is (not copied): pass a fresh one."""
    return exp.alias_(expr, name(label), copy=False)


# -- conditions and cases ---------------------------------------------------------------
def and_(*parts: exp.Expr | None) -> exp.Expr:
    """The conjunction of the parts given (each parenthesised), TRUE when none is."""
    kept = [exp.paren(p, copy=False) for p in parts if p is not None]
    return exp.and_(*kept, copy=False) if kept else exp.true()


def is_null(x: exp.Expr) -> exp.Is:
    return exp.Is(this=x, expression=exp.Null())


def not_null(x: exp.Expr) -> exp.Not:
    return exp.Not(this=is_null(x))


def case(whens: Sequence[tuple[exp.Expr, exp.Expr]], default: exp.Expr | None = None) -> exp.Case:
    """``CASE WHEN c THEN v … ELSE default END``."""
    out = exp.Case()
    for cond, value in whens:
        out = out.when(cond, value, copy=False)
    return out.else_(default, copy=False) if default is not None else out


def positive_or_one(x: exp.Expr) -> exp.Expr:
    """``x`` when it is at least 1, else 1 (a sample rate: kept 1 in x)."""
    return case([(x >= num(1), x.copy())], num(1))


def product(factors: Sequence[exp.Expr]) -> exp.Expr:
    """``f1 * f2 * …``, multiplied left to right as SQL text would be (the same rounding)."""
    out = factors[0].copy()
    for f in factors[1:]:
        out = exp.Mul(this=out, expression=f.copy())
    return out


# -- aggregates -------------------------------------------------------------------------
def count_rows() -> exp.Count:
    return exp.Count(this=exp.Star())


def where(agg: exp.Expr, cond: exp.Expr) -> exp.Filter:
    """``agg FILTER (WHERE cond)``: sqlglot's node for an aggregate over some rows."""
    return exp.Filter(this=agg, expression=exp.Where(this=cond))


def quantile_cont(x: exp.Expr, q: Value | Sequence[Value]) -> exp.PercentileCont:
    """The interpolated quantile(s) of ``x`` (a list of them for a list of ``q``)."""
    at = exp.Array(expressions=[num(v) for v in q]) if isinstance(q, Sequence) else num(q)
    return exp.PercentileCont(this=x, expression=at)


def quantile_disc(x: exp.Expr, q: Value) -> exp.PercentileDisc:
    """The lower quantile of ``x``: a value it holds."""
    return exp.PercentileDisc(this=x, expression=num(q))


def running_sum(x: exp.Expr, order: exp.Expr, partition: Sequence[exp.Expr] = ()) -> exp.Window:
    """``sum(x) OVER ([PARTITION BY …] ORDER BY order ROWS UNBOUNDED PRECEDING)``."""
    return exp.Window(
        this=exp.Sum(this=x),
        partition_by=[p.copy() for p in partition] or None,
        order=exp.Order(expressions=[exp.Ordered(this=order)]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING"),
    )


def over(agg: exp.Expr, partition: Sequence[exp.Expr] = ()) -> exp.Window:
    """``agg OVER ([PARTITION BY …])``."""
    return exp.Window(this=agg, partition_by=[p.copy() for p in partition] or None)


# -- numbers ----------------------------------------------------------------------------
def log2(x: exp.Expr) -> exp.Expr:
    """The base-2 logarithm (see ``ENGINE_FUNCTIONS``)."""
    return exp.Anonymous(this="log2", expressions=[x])


def floor_int(x: exp.Expr) -> exp.Expr:
    """``CAST(floor(x) AS BIGINT)``."""
    return exp.cast(exp.Floor(this=x), "BIGINT", copy=False)


def log_bin(x: exp.Expr, steps: int, offset: int, below: exp.Expr | None = None) -> exp.Expr:
    """The log-spaced bin of a number, ``steps`` per doubling: ``floor(log2(x) · steps) +
    offset`` for x > 0, its mirror (negated) for x < 0 and 0 for zero when ``below`` is
    None, else ``below`` for every x <= 0."""

    def key(v: exp.Expr) -> exp.Expr:
        return exp.Add(this=floor_int(exp.Mul(this=log2(v), expression=num(steps))), expression=num(offset))

    if below is not None:
        return exp.paren(case([(x > num(0), key(x.copy()))], below), copy=False)
    return exp.paren(
        case(
            [
                (x > num(0), key(x.copy())),
                (x.copy() < num(0), exp.Neg(this=exp.paren(key(exp.Neg(this=x.copy()))))),
                (exp.EQ(this=x.copy(), expression=num(0)), num(0)),
            ]
        ),
        copy=False,
    )


# -- queries ----------------------------------------------------------------------------
def select(items: Sequence[exp.Expr], source: exp.Expr, where_: exp.Expr | None = None, group: int = 0) -> exp.Select:
    """``SELECT items FROM source [WHERE …] [GROUP BY 1..group]``; a source that is a
    query is made a sub-query. The source is used as given (not copied)."""
    if isinstance(source, (exp.Select, exp.SetOperation)):
        source = source.subquery(copy=False)
    query = exp.select(*items, copy=False).from_(source, copy=False)
    if where_ is not None:
        query = query.where(where_, copy=False)
    if group:
        query = query.group_by(*[num(i + 1) for i in range(group)], copy=False)
    return query


def order_by(query: exp.Select, *keys: exp.Expr | exp.Ordered) -> exp.Select:
    return query.order_by(*keys, copy=False)


def desc(x: exp.Expr) -> exp.Ordered:
    return exp.Ordered(this=x, desc=True)


def nulls_last(x: exp.Expr) -> exp.Ordered:
    return exp.Ordered(this=x, nulls_first=False)


def lookup(values: Sequence[float], index: exp.Expr) -> exp.Expr:
    """The ``index``-th (from 0; an integer expression) of a list of numbers. sqlglot's
    ``exp.Bracket`` counts from 0 and adds each dialect's offset (DuckDB and ClickHouse
    count from 1: ``CAST([…] AS DOUBLE[])[index + 1]``)."""
    array = exp.Array(expressions=[num(float(v)) for v in values])
    doubles = exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[exp.DataType.build("DOUBLE")], nested=True)
    return exp.Bracket(this=exp.cast(array, doubles), expressions=[index])


def hour_of_day(ts: exp.Expr) -> exp.Expr:
    """The hour (0–23) of a timestamp, as an integer."""
    return exp.cast(exp.Hour(this=ts), "BIGINT", copy=False)


# -- time buckets and counts (anomaly, timescale, stalls, saturation, investigate) ------
def epoch_us(ts: exp.Expr) -> exp.Expr:
    """Microseconds since 1970-01-01 (UTC) of a timestamp, as an integer."""
    return exp.UnixMicros(this=ts)


def bucket_index(micros: exp.Expr, width_us: int, origin_us: int = 0) -> exp.Expr:
    """``CAST(floor((micros - origin_us) / width_us) AS BIGINT)``: the bucket of ``width_us``
    microseconds (counted from ``origin_us``) a time in microseconds falls in."""
    shifted = exp.paren(exp.Sub(this=micros, expression=num(origin_us))) if origin_us else micros
    return floor_int(exp.Div(this=shifted, expression=num(width_us)))


def event_count(n: exp.Expr) -> exp.Expr:
    """The events rows stand for, each row ``n`` of them: ``count(*)`` when ``n`` is the
    literal 1 (``weighted.count_of`` without a count field), else ``sum(n)``."""
    if isinstance(n, exp.Literal) and n.this == "1":
        return count_rows()
    return exp.Sum(this=n.copy())


def clamp(x: exp.Expr, lo: int, hi: int) -> exp.Expr:
    """``least(hi, greatest(lo, x))``."""
    return exp.Least(this=num(hi), expressions=[exp.Greatest(this=num(lo), expressions=[x])])


def listed(x: exp.Expr) -> exp.ArrayAgg:
    """The values of ``x`` over a group as one list (two lists of one group pair up)."""
    return exp.ArrayAgg(this=x)


def within(ts: exp.Expr, params: list[Any], lo: object, hi: object) -> exp.Expr:
    """``(ts >= lo AND ts < hi)``, both bound (appended to ``params`` in that order)."""
    return exp.paren(exp.and_(ts >= bind(params, lo), ts.copy() < bind(params, hi), copy=False), copy=False)


def union_all(queries: Sequence[exp.Select]) -> exp.Expr:
    """``q1 UNION ALL q2 …``, in order (their parameters bind in that order)."""
    out: exp.Expr = queries[0]
    for query in queries[1:]:
        out = exp.union(out, query, distinct=False, copy=False)
    return out
