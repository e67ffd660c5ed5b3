"""Keys past a dataset's field limit, queried by their own names inside ``_overflow``.

Ingest moves a leaf past the limit, under its dotted name, into one JSON object stored
as text in the field ``_overflow`` (ADR 0011). A name that is not a column of a dataset
with an ``_overflow`` field resolves to that key's value, extracted by DuckDB's JSON
functions with a JSON pointer (``/key_4711``; ``~`` and ``/`` escaped as ``~0``, ``~1``),
so any key (dots, quotes, slashes) is one path step:

- as text (``json_extract_string``): ``=``/``in`` with strings, ``contains``,
  ``starts-with``, breakdowns and ``count_distinct``; a JSON ``true`` reads ``"true"``;
- as a number (``TRY_CAST(... AS DOUBLE)``) when compared with a number (``k > 3``,
  ``k = 3``, ``k in (1, 2)``) and in numeric calculations (``p99``, ``avg``, ``sum``,
  ``min``, ``max``, ``heatmap``): a value that is not a number is NULL there, so it
  does not match and is not aggregated;
- ``exists k``: the key is present with a non-null value.

The key's type is read per value, so a key holding numbers in some events and text
in others is never a usage error (the type checks of ``filter_sql`` apply to columns).
A name is accepted only when some event's ``_overflow`` holds it: one scan of the
``_overflow`` column (a substring test first, then ``json_exists``) before the query runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from rootsift.store.base import OVERFLOW_FIELD

OVERFLOW_TYPE = "OVERFLOW"
"""The pseudo type name the compiler gives an overflow key (its values are JSON)."""
SAMPLE_KEYS = 10


def pointer(name: str) -> str:
    """The JSON pointer of key ``name`` at the top of the overflow object."""
    return "/" + name.replace("~", "~0").replace("/", "~1")


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def text_value(name: str) -> exp.Expr:
    """The key's value as text (NULL when absent or JSON null).

    The pointer is a string literal, not a bound parameter: a compiled expression is
    reused (``col IS NULL OR NOT ...``) and rendered in another order than it is built,
    which placeholders cannot follow. sqlglot escapes it like any literal, and the name
    has been checked to be a key of the dataset's overflow first."""
    column = exp.column(exp.to_identifier(OVERFLOW_FIELD, quoted=True))
    return _call("json_extract_string", column, exp.Literal.string(pointer(name)))


def number_value(value: exp.Expr) -> exp.Expr:
    """``TRY_CAST(value AS DOUBLE)``: a value that is not a number is NULL."""
    return exp.TryCast(this=value.copy(), to=exp.DataType.build("DOUBLE"))


def holds_key_query(relation: exp.Expr, name: str) -> tuple[exp.Expr, list[Any]]:
    """A query returning one row when some event's overflow holds key ``name``."""
    column = exp.column(exp.to_identifier(OVERFLOW_FIELD, quoted=True))
    test: exp.Expr = _call("json_exists", column, exp.Placeholder())
    params: list[Any] = [pointer(name)]
    if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name and "/" not in name:
        # Such a key is written verbatim in the JSON text: a substring test skips most rows cheaply.
        test = exp.and_(_call("contains", column.copy(), exp.Placeholder()), test)
        params.insert(0, f'"{name}":')
    query = exp.select(exp.Literal.number(1)).from_(relation.copy()).where(test).limit(1)
    return query, params


def key_checker(execute: Callable[[exp.Expr, list[Any]], Any], relation: exp.Expr) -> Callable[[str], bool]:
    """``holds(name)``: whether any event's overflow holds key ``name`` (answers cached)."""
    seen: dict[str, bool] = {}

    def holds(name: str) -> bool:
        if name not in seen:
            query, params = holds_key_query(relation, name)
            seen[name] = bool(execute(query, params).rows)
        return seen[name]

    return holds


def keys_query(relation: exp.Expr, sample: int = SAMPLE_KEYS) -> exp.Expr:
    """One row: the number of distinct overflow keys and the first ``sample`` of them by name."""
    column = exp.column(exp.to_identifier(OVERFLOW_FIELD, quoted=True))
    keys = exp.select(exp.alias_(_call("unnest", _call("json_keys", column)), "k")).from_(relation.copy())
    k = exp.column("k")
    first = _call("list_slice", _call("list_sort", _call("list", exp.Distinct(expressions=[k]))), exp.Literal.number(1))
    first.append("expressions", exp.Literal.number(sample))
    return exp.select(exp.Count(this=exp.Distinct(expressions=[k.copy()])), first).from_(keys.subquery("o"))
