"""Quoting for the few SQL strings the DuckDB backend writes by hand (DDL, ingest).

User-facing queries are built as sqlglot expressions (``rootsift.query.compile``);
the DDL and ingest statements here need only identifiers and string literals, and
these two functions are the only way any name or path reaches that SQL text.
"""

from __future__ import annotations


def ident(name: str) -> str:
    """Quote ``name`` as one SQL identifier (double quotes, inner quotes doubled)."""
    if "\x00" in name:
        raise ValueError("identifier contains a NUL byte")
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """Quote ``text`` as one SQL string literal (single quotes, inner quotes doubled)."""
    if "\x00" in text:
        raise ValueError("string literal contains a NUL byte")
    return "'" + text.replace("'", "''") + "'"


def path_expr(alias: str, path: list[str]) -> str:
    """``alias."a"."b"``: a column and its nested struct fields, each quoted."""
    return ".".join([alias, *(ident(p) for p in path)])
