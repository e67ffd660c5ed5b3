"""Types on the way in: from what DuckDB's readers detect to the store's few types.

Storage types are deliberately few (ADR 0002): DOUBLE for every number (an integer
column would silently round a later fractional value in a streaming reader), VARCHAR
for strings, booleans, arrays and anything mixed, TIMESTAMP (UTC) for times. A value
that does not fit its field's stored type is kept as text in the ``field#raw`` column
and counted as a conflict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rootsift.store.base import RAW_SUFFIX, FieldInfo
from rootsift.store.sqltext import ident, literal

NUMERIC = re.compile(
    r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|UBIGINT|UHUGEINT|"
    r"FLOAT|DOUBLE|DECIMAL.*)$"
)


def storage_type(detected: str) -> str:
    """The stored type for a type DuckDB detected on input (leaves only)."""
    if NUMERIC.match(detected):
        return "DOUBLE"
    if detected.startswith("TIMESTAMP"):
        return "TIMESTAMP"
    return "VARCHAR"


def read_type(stored: str) -> str:
    """The type to read a leaf as, so DuckDB's reader does the conversion."""
    return "TIMESTAMPTZ" if stored == "TIMESTAMP" else stored


@dataclass
class Node:
    """A tree of input fields: a leaf has ``type``, an object has ``children``."""

    type: str | None = None
    children: dict[str, Node] = field(default_factory=dict)

    def leaves(self, prefix: tuple[str, ...] = ()) -> list[tuple[list[str], str]]:
        """(path, type) of every leaf below this node, depth first in key order."""
        out: list[tuple[list[str], str]] = []
        for key, child in self.children.items():
            if child.type is not None:
                out.append(([*prefix, key], child.type))
            else:
                out.extend(child.leaves((*prefix, key)))
        return out

    def structs(self, prefix: tuple[str, ...] = ()) -> list[list[str]]:
        """Paths of every object node below this node."""
        out: list[list[str]] = []
        for key, child in self.children.items():
            if child.type is None:
                out.append([*prefix, key])
                out.extend(child.structs((*prefix, key)))
        return out


def parse_type(text: str) -> Node:
    """Parse a DuckDB type string as DESCRIBE prints it (STRUCT nesting kept)."""
    node, rest = _parse(text.strip())
    return node


def _parse(text: str) -> tuple[Node, str]:
    if text.startswith("STRUCT("):
        node = Node()
        rest = text[len("STRUCT(") :]
        while True:
            rest = rest.lstrip()
            if rest.startswith(")"):
                rest = rest[1:]
                if rest.startswith("["):  # a list of structs is one leaf, kept as JSON text
                    end = rest.index("]") + 1
                    return Node(type=text[: len(text) - len(rest) + end]), rest[end:]
                return node, rest
            name, rest = _parse_name(rest)
            child, rest = _parse(rest.lstrip())
            node.children[name] = child
            rest = rest.lstrip()
            if rest.startswith(","):
                rest = rest[1:]
    depth = 0
    for i, ch in enumerate(text):
        if ch == "(" or ch == "[":
            depth += 1
        elif ch == ")" or ch == "]":
            if depth == 0:
                return Node(type=text[:i].strip()), text[i:]
            depth -= 1
        elif ch == "," and depth == 0:
            return Node(type=text[:i].strip()), text[i:]
    return Node(type=text.strip()), ""


def _parse_name(text: str) -> tuple[str, str]:
    if text.startswith('"'):
        i, out = 1, []
        while i < len(text):
            if text[i] == '"':
                if text[i + 1 : i + 2] == '"':
                    out.append('"')
                    i += 2
                    continue
                return "".join(out), text[i + 1 :]
            out.append(text[i])
            i += 1
        raise ValueError(f"unterminated name in type {text!r}")
    name, _, rest = text.partition(" ")
    return name, rest


def tree_from_fields(fields: dict[str, FieldInfo]) -> Node:
    """The input tree the catalog expects; a leaf wins over an object at the same path."""
    root = Node()
    for info in fields.values():
        if not info.path:
            continue
        node = root
        for key in info.path[:-1]:
            child = node.children.setdefault(key, Node())
            if child.type is not None:
                break
            node = child
        else:
            node.children[info.path[-1]] = Node(type=info.type)
    return root


def merge_detected(catalog: Node, detected: Node) -> Node:
    """Catalog types where known, detected (mapped to storage) types for new fields."""
    out = Node(children={k: v for k, v in catalog.children.items()})
    for key, child in detected.children.items():
        have = out.children.get(key)
        if child.type == "NULL":  # only nulls in the sample: no column until a value comes
            continue
        if have is None:
            out.children[key] = _storage_tree(child)
        elif have.type is None and child.type is None:
            out.children[key] = merge_detected(have, child)
    return out


def _storage_tree(node: Node) -> Node:
    if node.type is not None:
        return Node(type=storage_type(node.type))
    return Node(children={k: _storage_tree(v) for k, v in node.children.items()})


def read_tree(tree: Node, direct: frozenset[tuple[str, ...]] = frozenset(), at: tuple[str, ...] = ()) -> Node:
    """``tree`` with DOUBLE leaves read as VARCHAR (they are cast, exactly, after reading),
    except those whose paths are in ``direct``: the reader parses them as DOUBLE itself."""
    if tree.type is not None:
        return Node(type="VARCHAR" if tree.type == "DOUBLE" and at not in direct else tree.type)
    return Node(children={k: read_tree(v, direct, (*at, k)) for k, v in tree.children.items()})


def lists_as_json(tree: Node) -> Node:
    """``tree`` with list (and null-only) leaves read as JSON: their text as written, not
    DuckDB's re-rendering (``[1,2]`` would come back as ``[1.0,2.0]``)."""
    if tree.type is not None:
        return Node(
            type="JSON" if tree.type.endswith("]") or tree.type.startswith("MAP") or tree.type == "NULL" else tree.type
        )
    return Node(children={k: lists_as_json(v) for k, v in tree.children.items()})


def columns_spec(tree: Node, override: dict[str, str] | None = None) -> str:
    """The ``columns={...}`` argument of read_json for ``tree`` (top-level overrides by key)."""
    override = override or {}
    parts = [f"{literal(k)}: {literal(override.get(k) or _type_text(v))}" for k, v in tree.children.items()]
    return "{" + ", ".join(parts) + "}"


def _type_text(node: Node) -> str:
    if node.type is not None:
        return read_type(node.type)
    inner = ", ".join(f"{ident(k)} {_type_text(v)}" for k, v in node.children.items())
    return f"STRUCT({inner})" if inner else "JSON"


def display_name(path: list[str], taken: dict[str, list[str]]) -> str:
    """The dotted field name for ``path``, made unique against names of other paths.

    Names are compared without case, as DuckDB compares column names: a key ``Level``
    beside an existing ``level`` becomes ``Level~2``.
    """
    lowered = {k.lower(): v for k, v in taken.items()}
    name = ".".join(path)
    n = 2
    candidate = name
    while candidate.lower() in lowered and lowered[candidate.lower()] != path:
        candidate = f"{name}~{n}"
        n += 1
    return candidate


def as_text(expr: str, source_type: str) -> str:
    """SQL for a source value as text: JSON strings unquoted, others as written."""
    if source_type == "JSON":
        return f"({expr} ->> '$')"
    if source_type == "VARCHAR":
        return expr
    if source_type.startswith(("STRUCT", "MAP")) or source_type.endswith("]"):
        return f"CAST(to_json({expr}) AS VARCHAR)"
    return f"CAST({expr} AS VARCHAR)"


def convert(expr: str, source_type: str, target: str, name: str) -> list[str]:
    """SELECT items storing ``expr`` as ``target`` under ``name``, plus ``name#raw`` if it can conflict."""
    out = ident(name)
    raw = ident(name + RAW_SUFFIX)
    stored = storage_type(source_type) if not source_type.startswith(("STRUCT", "MAP", "JSON")) else "VARCHAR"
    if source_type == "JSON":
        stored = "JSON"
    if target == "VARCHAR":
        return [f"{as_text(expr, source_type)} AS {out}"]
    if stored == target and source_type != "JSON" and target != "DOUBLE":
        return [f"CAST({expr} AS TIMESTAMP) AS {out}"]
    text = as_text(expr, source_type)
    value = f"TRY_CAST({text} AS {'TIMESTAMPTZ' if target == 'TIMESTAMP' else target})"
    if target == "TIMESTAMP":
        value = f"CAST({value} AS TIMESTAMP)"
    if target == "DOUBLE":
        value = finite(value)
    return [f"{value} AS {out}", f"CASE WHEN {text} IS NOT NULL AND {value} IS NULL THEN {text} END AS {raw}"]


def finite(value: str) -> str:
    """``value`` when it is a finite number, else NULL: NaN and ±Infinity (which some JSON
    writers emit) are kept as text in ``#raw`` rather than poisoning sums and filters."""
    return f"(CASE WHEN isfinite({value}) THEN {value} END)"
