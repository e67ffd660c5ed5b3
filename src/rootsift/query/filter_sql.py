"""Compiling a filter AST to a sqlglot condition, with every value a bound parameter.

See ``rootsift.query.filters`` for the language and the missing-field rules.
"""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from rootsift.errors import TimeFormatError, UsageError
from rootsift.query.filters import (
    _COMPARE,
    _NUMBER,
    And,
    Bind,
    Column,
    Compare,
    Exists,
    InList,
    Literal,
    Node,
    Not,
    Or,
    TextMatch,
)
from rootsift.query.overflow import OVERFLOW_TYPE, number_value
from rootsift.timeutil import parse_time

_FAMILIES = {
    **dict.fromkeys(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR"), "varchar"),
    **dict.fromkeys(
        (
            "TINYINT",
            "SMALLINT",
            "INTEGER",
            "INT",
            "BIGINT",
            "HUGEINT",
            "UTINYINT",
            "USMALLINT",
            "UINTEGER",
            "UBIGINT",
            "UHUGEINT",
            "INT1",
            "INT2",
            "INT4",
            "INT8",
        ),
        "int",
    ),
    **dict.fromkeys(("FLOAT", "REAL", "DOUBLE", "FLOAT4", "FLOAT8", "DECIMAL", "NUMERIC"), "float"),
    **dict.fromkeys(("BOOLEAN", "BOOL"), "bool"),
    **dict.fromkeys(("TIMESTAMP", "DATETIME", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP_NS"), "timestamp"),
    **dict.fromkeys(("TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE"), "timestamptz"),
    "DATE": "date",
}


_ORDERING = (">", ">=", "<", "<=")


def compile_filter(node: Node, column: Column, bind: Bind) -> exp.Expr:
    """Compile a filter AST into a sqlglot boolean expression.

    ``column(name)`` gives the column expression and its DuckDB type name (and raises
    UnknownFieldError for unknown fields); ``bind(value)`` gives a parameter placeholder.
    Each literal is coerced to its column's type and reaches SQL only through ``bind``.
    """
    if isinstance(node, (And, Or)):
        connector = exp.And if isinstance(node, And) else exp.Or
        joined: exp.Expr | None = None
        for item in node.items:
            part = compile_filter(item, column, bind)
            part = exp.Paren(this=part) if isinstance(part, exp.Connector) else part
            joined = part if joined is None else connector(this=joined, expression=part)
        assert joined is not None  # the parser never builds an empty And/Or
        return joined
    if isinstance(node, Not):
        inner = compile_filter(node.item, column, bind)
        return exp.Not(this=exp.Coalesce(this=inner, expressions=[exp.false()]))
    col, type_name = column(node.field)
    family = _FAMILIES.get(type_name.upper().split("(")[0].strip(), "other")
    if isinstance(node, Exists):
        return _is_null(col) if node.negate else exp.Not(this=_is_null(col))
    if type_name == OVERFLOW_TYPE:
        col, family = _overflow_operand(node, col)
    if family == "other" or (isinstance(node, TextMatch) and family != "varchar"):
        col, family = exp.Cast(this=col, to=exp.DataType.build("VARCHAR")), "varchar"
    if isinstance(node, TextMatch):
        pattern = escape_like(node.value.text) + "%"
        pattern = "%" + pattern if node.kind == "contains" else pattern
        like = exp.Escape(this=exp.Like(this=col, expression=bind(pattern)), expression=exp.Literal.string("\\"))
        return _or_missing(col, like) if node.negate else like
    if isinstance(node, InList):
        test = exp.In(this=col, expressions=[bind(_coerce(node.field, v, family)) for v in node.values])
        return _or_missing(col, test) if node.negate else test
    if node.value.kind == "null":
        return _is_null(col) if node.op == "=" else exp.Not(this=_is_null(col))
    if family == "varchar" and node.op in _ORDERING and node.value.kind in ("number", "bool"):
        raise UsageError(
            f"field {node.field!r} holds text ({type_name.lower()}), so '{node.op} {node.value.text}' would compare "
            f'text, not numbers ("10" < "9"); compare it with =, in or contains, or quote the value to compare as text'
        )
    return _COMPARE[node.op](this=col, expression=bind(_coerce(node.field, node.value, family)))


def _overflow_operand(node: Node, col: exp.Expr) -> tuple[exp.Expr, str]:
    """An overflow key's value (text, any JSON type) as this condition compares it: as a
    number (TRY_CAST to DOUBLE, non-numbers NULL) against numbers, else as text."""
    values = node.values if isinstance(node, InList) else (node.value,) if isinstance(node, Compare) else ()
    if values and all(v.kind == "number" for v in values):
        return number_value(col), "float"
    return col, "varchar"


def escape_like(text: str) -> str:
    """Escape ``\\``, ``%`` and ``_`` with a backslash so LIKE ... ESCAPE '\\' matches them literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _is_null(col: exp.Expr) -> exp.Expr:
    return exp.Is(this=col.copy(), expression=exp.Null())


def _or_missing(col: exp.Expr, test: exp.Expr) -> exp.Expr:
    """``(col IS NULL OR NOT test)``: the negation that also matches missing fields."""
    return exp.Paren(this=exp.Or(this=_is_null(col), expression=exp.Not(this=test)))


def _coerce(field: str, lit: Literal, family: str) -> object:
    """Convert a literal to the Python value to bind against a column of ``family``."""
    if family == "varchar":
        return lit.text
    if family == "bool":
        if lit.text.lower() in ("true", "false"):
            return lit.text.lower() == "true"
        raise UsageError(f"field {field!r} holds true/false; {lit.text!r} is neither")
    if family in ("int", "float"):
        if lit.kind == "bool" or not _NUMBER.fullmatch(lit.text.strip()):
            raise UsageError(f"field {field!r} is numeric and {lit.text!r} is not a number")
        number = Decimal(lit.text)
        if family == "int" and number == number.to_integral_value() and abs(number) < 2**63:
            return int(number)
        return float(number)
    try:
        moment = parse_time(lit.text)
    except TimeFormatError as exc:
        raise TimeFormatError(f"field {field!r} holds times: {exc}") from None
    if family == "date":
        return moment.date()
    return moment if family == "timestamptz" else moment.replace(tzinfo=None)
