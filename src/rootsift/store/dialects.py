"""The SQL dialects of the backends, as data: one sqlglot ``Dialect`` subclass per engine.

The query compiler and the analyses build dialect-neutral sqlglot nodes (``exp.Quantile``,
``exp.Log``, ``exp.TryCast``, ``TimeBucket`` below, ``exp.Placeholder``); each backend
renders them with its dialect, so a backend differs from another by these tables, in
the manner of sqlglot's own dialect classes, not by a second query compiler.

Placeholders are positional: the parameters of a query are bound in the order the
DuckDB rendering meets its ``exp.Placeholder`` nodes (the order every query builder
here appends them in). DuckDB renders ``?``; ClickHouse binds named, typed parameters
(``{p0:Float64}``), numbered in that same order by ``number_placeholders``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlglot import exp
from sqlglot.dialects.clickhouse import ClickHouse as _ClickHouse
from sqlglot.dialects.duckdb import DuckDB as _DuckDB
from sqlglot.generator import Generator
from sqlglot.generators.clickhouse import ClickHouseGenerator
from sqlglot.generators.duckdb import DuckDBGenerator

from rootsift.errors import UsageError


class TimeBucket(exp.Expression, exp.Func):
    """The start of an event's time bucket: ``this`` (a timestamp) floored to a whole
    multiple of ``width`` microseconds since 1970-01-01 (UTC)."""

    arg_types = {"this": True, "width": True}
    _sql_names = ["ROOTSIFT_TIME_BUCKET"]  # a dialect that does not render it fails loudly


CLICKHOUSE_NAMES = {
    "epoch_us": "toUnixTimestamp64Micro",
    "epoch_ms": "toUnixTimestamp64Milli",
    "make_timestamp": "fromUnixTimestamp64Micro",  # the one-argument form: microseconds since 1970
}
"""DuckDB functions sqlglot keeps as anonymous calls, by ClickHouse's name for the same function."""
DUCKDB_ONLY = ("json_extract_string", "json_exists", "json_keys", "list_")
"""Prefixes of DuckDB function names that ClickHouse has not; rendering one for ClickHouse
is an error naming it (the code that built it must build a neutral node instead)."""


def _log(self: Generator, e: exp.Log) -> str:
    """``log(2, x)`` as ``log2(x)``, which both engines have; other bases as ``ln(x) / ln(b)``."""
    base, x = e.this, e.expression
    if x is None:
        return self.func("LN", base)
    if isinstance(base, exp.Literal) and base.this == "2":
        return self.func("LOG2", x)
    return f"(LN({self.sql(x)}) / LN({self.sql(base)}))"


def _ch_quantiles(family: str, weighted: bool) -> Any:
    """DuckDB's ``quantile_cont(x, q)`` / ``quantile_disc(x, q)`` (``q`` a number or a list)
    as ClickHouse's exact ``quantile…`` (``quantiles…`` for a list) of the same definition."""

    def render(self: Generator, e: exp.Expr) -> str:
        x, q = e.this, e.args.get("expression")
        if q is None:
            raise UsageError(f"{e.sql('duckdb')} has no ClickHouse form here: write quantile_…(x, q)")
        levels = q.expressions if isinstance(q, exp.Array) else [q]
        name = ("quantiles" if isinstance(q, exp.Array) else "quantile") + family
        args = f"{self.sql(x)}, 1" if weighted else self.sql(x)
        return f"{name}({', '.join(self.sql(v) for v in levels)})({args})"

    return render


def _ch_sample(self: Generator, e: exp.TableSample) -> str:
    """``SAMPLE k``: a fraction of the rows by the table's sampling key (a percentage as its
    fraction; a row count as an approximate count, as ClickHouse reads ``SAMPLE n``)."""
    percent = e.args.get("percent")
    if percent is not None:
        return f" SAMPLE {float(percent.name) / 100!r}"
    return f" SAMPLE {self.sql(e, 'size')}"


def _duck_bucket(self: Generator, e: TimeBucket) -> str:
    width = self.sql(e, "width")
    return f"MAKE_TIMESTAMP(CAST(FLOOR(EPOCH_US({self.sql(e, 'this')}) / {width}) * {width} AS BIGINT))"


def _ch_bucket(self: Generator, e: TimeBucket) -> str:
    width = self.sql(e, "width")
    micros = f"toUnixTimestamp64Micro({self.sql(e, 'this')})"
    return f"fromUnixTimestamp64Micro(toInt64(floor({micros} / {width}) * {width}), 'UTC')"


class DuckDB(_DuckDB):
    """DuckDB as rootsift renders it: the embedded store's dialect."""

    class Generator(DuckDBGenerator):
        TRANSFORMS = {
            **DuckDBGenerator.TRANSFORMS,
            TimeBucket: _duck_bucket,
            exp.Quantile: lambda self, e: self.func("QUANTILE_DISC", e.this, e.args.get("quantile")),
            exp.Log: _log,
        }


class ClickHouse(_ClickHouse):
    """ClickHouse (chdb, a server): the differences from DuckDB, as renderings."""

    class Generator(ClickHouseGenerator):
        TRANSFORMS = {
            **ClickHouseGenerator.TRANSFORMS,
            TimeBucket: _ch_bucket,
            # quantileExactWeighted with weight 1 is the inverted CDF, as DuckDB's quantile_disc:
            # the smallest x whose cumulative count reaches ceil(q·n). quantileExact/Low/High take
            # position floor(q·n) instead (another value when q·n is whole); quantile() samples.
            exp.Quantile: lambda self, e: f"quantileExactWeighted({self.sql(e, 'quantile')})({self.sql(e, 'this')}, 1)",
            exp.Log: _log,
            exp.TryCast: lambda self, e: self.func("accurateCastOrNull", e.this, exp.Literal.string(_ch_type(e.to))),
            # R7 (linear between the two nearest ranks) on both; the inverted CDF on both
            exp.PercentileCont: _ch_quantiles("ExactInclusive", weighted=False),
            exp.PercentileDisc: _ch_quantiles("ExactWeighted", weighted=True),
            exp.TableSample: _ch_sample,
            exp.UnixMicros: lambda self, e: self.func("toUnixTimestamp64Micro", e.this),
            # DuckDB's epoch(ts): seconds as a double, the microseconds kept
            exp.TimeToUnix: lambda self, e: f"(toUnixTimestamp64Micro({self.sql(e, 'this')}) / 1000000.0)",
        }

        def select_sql(self, expression: exp.Select) -> str:
            """A condition selected as a column is a ``Bool`` (ClickHouse's comparisons and
            logic give ``UInt8`` 0/1; DuckDB's, and so the analyses, take them as booleans)."""
            if any(_is_condition(p.unalias()) for p in expression.expressions):
                expression = expression.copy()
                for p in expression.expressions:
                    if _is_condition(cond := p.unalias()):
                        cond.replace(exp.cast(cond.copy(), exp.DataType.build("BOOLEAN"), copy=False))
            return super().select_sql(expression)

        def anonymous_sql(self, expression: exp.Anonymous) -> str:
            name = str(expression.this).lower()
            if name.startswith(DUCKDB_ONLY):
                raise UsageError(f"{name}() is DuckDB's; this query cannot run on ClickHouse yet")
            if name in CLICKHOUSE_NAMES:
                args = list(expression.expressions)
                if name == "make_timestamp" and len(args) == 1:
                    args.append(exp.Literal.string("UTC"))
                return self.func(CLICKHOUSE_NAMES[name], *args)
            return super().anonymous_sql(expression)

        def placeholder_sql(self, expression: exp.Placeholder) -> str:
            if not expression.this:
                raise UsageError("a positional parameter reached ClickHouse unnumbered (see number_placeholders)")
            return f"{{{expression.name}:{expression.args.get('kind') or 'String'}}}"


def _is_condition(e: exp.Expr) -> bool:
    """A comparison, a test, or a logical combination of them (a value of type boolean)."""
    return isinstance(e, (exp.Predicate, exp.Connector, exp.Not)) or (
        isinstance(e, exp.Paren) and _is_condition(e.this)
    )


def _ch_type(to: exp.DataType) -> str:
    return exp.DataType.build(to).sql("clickhouse").removeprefix("Nullable(").removesuffix(")")


@dataclass(frozen=True)
class DialectInfo:
    """What a backend's SQL differs in, besides renderings: the record a test and a reader look up."""

    name: str
    dialect: type
    quantile: str
    """The aggregate a percentile renders to, and its definition."""
    sampling: str
    """How the stored 1-in-64 sample (ADR 0008) is read."""
    params: str
    """How bound parameters are written."""
    time_bucket: str
    storage_types: dict[str, str]
    """rootsift's storage type names (``base.STORAGE_TYPES``) → the engine's column types."""


DIALECTS = {
    "duckdb": DialectInfo(
        name="duckdb",
        dialect=DuckDB,
        quantile="quantile_disc(x, q): inverted CDF, the smallest x with at least q·n values at or below it",
        sampling="a second table per segment, events_sample (hash(rowid, segment) % 64 = 0)",
        params="? (positional)",
        time_bucket="make_timestamp(floor(epoch_us(ts) / w) * w)",
        storage_types={
            "DOUBLE": "DOUBLE",
            "VARCHAR": "VARCHAR",
            "TIMESTAMP": "TIMESTAMP",
            "BIGINT": "BIGINT",
            "BOOLEAN": "BOOLEAN",
        },
    ),
    "clickhouse": DialectInfo(
        name="clickhouse",
        dialect=ClickHouse,
        quantile="quantileExactWeighted(q)(x, 1): inverted CDF, as DuckDB's (a hash table of distinct values)",
        sampling="SAMPLE 1/64 on the table's sampling key (#sample, a hash of the row's ordinal)",
        params="{pN:Type} (named, typed; bound by the server)",
        time_bucket="fromUnixTimestamp64Micro(floor(toUnixTimestamp64Micro(ts) / w) * w)",
        storage_types={
            "DOUBLE": "Nullable(Float64)",
            "VARCHAR": "Nullable(String)",
            "TIMESTAMP": "Nullable(DateTime64(6, 'UTC'))",
            "BIGINT": "Nullable(Int64)",
            "BOOLEAN": "Nullable(Bool)",
        },
    ),
}


def render(query: exp.Expr, dialect: str) -> str:
    """``query`` as SQL text of ``dialect`` (``duckdb`` or ``clickhouse``)."""
    return query.sql(dialect=DIALECTS[dialect].dialect)


class _Recording(DuckDB.Generator):
    """DuckDB's rendering that notes the placeholders in the order it writes them. One class
    for every call: sqlglot builds a generator class's dispatch table once per class, which
    cost about 2 ms a query when this class was made per call."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[int] = []

    def placeholder_sql(self, expression: exp.Placeholder) -> str:
        self.seen.append(expression.meta["rootsift_param"])
        return "?"


def placeholder_order(query: exp.Expr) -> list[exp.Placeholder]:
    """The query's positional placeholders in the order their parameters are bound: the
    order DuckDB's rendering writes them."""
    nodes = [n for n in query.walk() if isinstance(n, exp.Placeholder)]
    if not nodes:
        return []
    for i, node in enumerate(nodes):
        node.meta["rootsift_param"] = i  # the generator renders a copy: find the nodes back by this
    recording = _Recording()
    recording.generate(query)
    return [nodes[i] for i in recording.seen]


def number_placeholders(query: exp.Expr, params: list[Any]) -> tuple[exp.Expr, dict[str, Any]]:
    """A copy of ``query`` whose positional placeholders are named ``p0``, ``p1`` … with
    the ClickHouse type of their parameter, and the parameters by those names."""
    query = query.copy()
    order = placeholder_order(query)
    if len(order) != len(params):
        raise UsageError(f"the query has {len(order)} placeholders but {len(params)} parameters were given")
    named: dict[str, Any] = {}
    for i, (node, value) in enumerate(zip(order, params)):
        kind, text = ch_param(value)
        node.set("this", f"p{i}")
        node.set("kind", kind)
        named[f"p{i}"] = text
    return query, named


def ch_param(value: Any) -> tuple[str, Any]:
    """A Python value as (ClickHouse type, value chdb binds)."""
    if value is None:
        return "Nullable(String)", None
    if isinstance(value, bool):
        return "Bool", value
    if isinstance(value, int):
        return "Int64", value
    if isinstance(value, float):
        return "Float64", value
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            from datetime import UTC

            value = value.astimezone(UTC).replace(tzinfo=None)
        return "DateTime64(6, 'UTC')", value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date):
        return "Date", value.isoformat()
    if isinstance(value, str):
        return "String", value
    raise UsageError(f"cannot bind a {type(value).__name__} parameter for ClickHouse")
