"""Access logs read by DuckDB: a compiled template as one RE2 regex and typed SQL columns.

DuckDB splits every line with the template's own regex (``regexp_extract``, RE2, on all
cores) and converts the values in SQL. The SQL reads only the common shape of each value,
where it gives exactly what the Python handlers give (``access_handlers``): a plain value
or ``-``, an integer of up to 15 digits, seconds with three decimals, a CLF time with its
offset, a ``METHOD target HTTP/x`` request, a list of upstream attempts of those shapes.
A line that is not printable ASCII, holds a backslash (an escape), or has any value of
another shape (a TLS handshake as the request, a truncated line, a 20-digit number) is
left to the Python parser, line by line, with the same result as before (``ok`` says
which). The columns are computed for those lines too and dropped, so they never fail
(``TRY_CAST``).

Assumptions: printable ASCII is where Python's ``re`` and RE2 agree on ``\\d``, ``\\s``,
``\\S`` and ``.``; both take the leftmost-first split of a lazy ``.*?``. A template with
a part that RE2 cannot express the same way (a negative lookahead) or a value kind the
SQL does not know (times without an offset, epochs, custom handlers such as nginx's
``key=value`` tail) has no plan and is parsed in Python.
"""

from __future__ import annotations

from dataclasses import dataclass

from rootsift.ingest.formats.access_common import Compiled, Var
from rootsift.ingest.formats.base import TIME_KEY
from rootsift.store.sqltext import literal

_RE2_SPECIAL = set("\\.+*?()|[]{}^$")
_DIGITS = "'0123456789'"
_SECONDS = r"\d{1,12}\.\d{3}"
_CLF = r"\d\d/(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)/[1-9]\d{3}:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d [+-](?:[01]\d|2[0-3])[0-5]\d"  # noqa: E501
_ADDRESSES = r"[^\s,]+(?:(?:, | : )[^\s,]+)*"
_REQUEST = r"([A-Z]+) ([^ ?]+)(\?[^ ]*)? (HTTP/[^ ]*)"
_ODD_CHAR = r"[^ -\[\]-~]"
PRINTABLE = "NOT regexp_matches(line, " + literal(_ODD_CHAR) + ")"
"""SQL: the line is printable ASCII without a backslash (others go to Python)."""
NO_BACKSLASH = "NOT contains(line, '\\')"
"""The same for a block known to be printable ASCII (``clean``)."""
_ODD_SPACES = (b"\x0b", b"\x1c", b"\x1d", b"\x1e", b"\x1f")


def clean(block: bytes) -> bool:
    """Whether ``block`` is ASCII without the control bytes Python's ``\\s`` counts as space and
    RE2's does not (VT, FS, GS, RS, US): then only a backslash sends a line to Python."""
    # five scans for one byte each (memchr): 4x faster than one regex search for the class
    return block.isascii() and not any(byte in block for byte in _ODD_SPACES)


@dataclass(frozen=True)
class SqlPlan:
    """How DuckDB reads one template: the regex, its group names, the typed columns, and which lines."""

    regex: str
    names: list[str]
    derived: list[str]
    """``expr AS rN`` over ``m``, computed once per line for the columns (a request's parts)."""
    columns: list[tuple[str, str]]
    """(field, SQL over ``m``, the struct of groups, and ``derived``); the time column first."""
    ok: str
    """SQL over ``m``: true where these columns are the parser's event, when the line is
    also ``PRINTABLE`` (or, in a ``clean`` block, has ``NO_BACKSLASH``)."""


def _escape(text: str) -> str:
    return "".join("\\" + c if c in _RE2_SPECIAL else c for c in text)


def _absent(g: str) -> str:
    return f"{g} IN ('-', '')"


def _full(g: str, regex: str) -> str:
    return f"regexp_full_match({g}, {literal(regex)})"


def _items(g: str) -> str:
    """An upstream list's attempts (``, `` between servers, `` : `` between groups), as a list."""
    return f"string_split_regex({g}, ', | : ')"


def _list_of(item: str) -> str:
    return f"(?:-|{item})(?:(?:, | : )(?:-|{item}))*"


def _sum_of(g: str, many: str, number: str, kind: str) -> str:
    """The sum of the attempts' numbers (``-`` skipped, as ``kind``), NULL when every attempt is ``-``.

    ``many`` is true where ``g`` lists more than one attempt (lists are rare: split only then)."""
    one = number.replace("x", g) if number != "x" else g
    items = f"list_filter({_items(g)}, lambda x: x <> '-')"
    total = f"list_sum(list_transform({items}, lambda x: TRY_CAST({number} AS {kind})))"
    return f"CASE WHEN {many} THEN TRY_CAST({total} AS {kind}) WHEN NOT {_absent(g)} THEN TRY_CAST({one} AS {kind}) END"


Columns = list[tuple[str, str]]


def _var_sql(var: Var, g: str, r: str) -> tuple[Columns, str, str | None, str | None] | None:
    """What ``var``'s group ``g`` gives: the (field, SQL) columns, the condition its value is
    read right, its attempts when it is an upstream list, and an expression computed once
    per line as ``r``; None when the SQL does not know its kind."""
    key, kind = var.key, var.kind
    if var.handler is not None:
        return None
    if kind == "str":
        return [(key, f"CASE WHEN NOT {_absent(g)} THEN {g} END")], "true", None, None
    if kind in ("int", "bytes", "us_ms", "ms"):
        # integers stay BIGINT (stored as DOUBLE; as text "200", not "200.0", as from JSON)
        absent = "0" if kind == "bytes" else "NULL"
        div = {"us_ms": " / 1000.0", "ms": " / 1.0"}.get(kind, "")
        value = f"CASE WHEN {_absent(g)} THEN {absent} ELSE TRY_CAST({g} AS {'DOUBLE' if div else 'BIGINT'}){div} END"
        ok = f"({_absent(g)} OR (length({g}) <= 15 AND ltrim({g}, {_DIGITS}) = ''))"
        return [(key, value)], ok, None, None
    if kind == "sec_ms":
        # "0.007" -> 7.0 exactly, as seconds_to_ms does for three decimals
        value = f"CASE WHEN {_absent(g)} THEN NULL ELSE TRY_CAST(replace({g}, '.', '') AS DOUBLE) END"
        return [(key, value)], f"({_absent(g)} OR {_full(g, _SECONDS)})", None, None
    # An upstream list: one derived flag per line says whether it lists several attempts. In a
    # value that is read right (``ok``) neither an attempt nor "-" holds a space and both
    # separators do, so one ``contains`` tells it (as Python's test for "," or " : " does).
    many = r
    attempts = f"CASE WHEN {many} THEN len({_items(g)}) WHEN NOT {_absent(g)} THEN 1 END"
    flag = f"contains({g}, ' ') AS {r}"
    if kind in ("up_time", "up_int"):
        # whole milliseconds (three decimals) and integers of up to 12 digits add up exactly
        # in doubles, in any order: the same sums as the Python handlers'
        item, number = (r"\d{1,9}\.\d{3}", "replace(x, '.', '')") if kind == "up_time" else (r"\d{1,12}", "x")
        value = _sum_of(g, many, number, "DOUBLE" if kind == "up_time" else "BIGINT")
        ok = f"CASE WHEN {many} THEN {_full(g, _list_of(item))} ELSE {_absent(g)} OR {_full(g, item)} END"
        return [(key, value)], f"({ok})", attempts, flag
    if kind in ("up_addr", "up_status"):
        value = f"CASE WHEN NOT {_absent(g)} THEN {g} END"
        last = f"CASE WHEN {many} THEN {_items(g)}[-1] WHEN NOT {_absent(g)} THEN {g} END"
        ok = f"({_absent(g)} OR {_full(g, _ADDRESSES)})"  # no empty attempt
        if kind == "up_addr":
            return [("upstream_addr", value), ("upstream_addr_last", last)], ok, attempts, flag
        number = f"CASE WHEN ltrim({last}, {_DIGITS}) = '' THEN TRY_CAST({last} AS BIGINT) END"
        ok += f" AND NOT (ltrim({last}, {_DIGITS}) = '' AND length({last}) > 15)"  # a huge number: Python
        return [("upstream_status", value), ("upstream_status_last", number)], ok, attempts, flag
    if kind == "clf_time":
        value = f"CAST(try_strptime({g}, '%d/%b/%Y:%H:%M:%S %z') AS TIMESTAMP)"
        return [(TIME_KEY, r)], f"{_full(g, _CLF)} AND {r} IS NOT NULL", None, f"{value} AS {r}"
    if kind == "request":
        parts = f"regexp_extract({g}, {literal('^' + _REQUEST + '$')}, ['method', 'path', 'query', 'protocol'])"
        cols, ok = _request(g, f"{r}.")
        return cols, ok, None, f"{parts} AS {r}"
    return None


def _request(g: str, part: str) -> tuple[Columns, str]:
    """A request's fields from its parts (``{part}method``... empty when it does not split)."""
    split = f"{part}method <> ''"
    cols = [
        ("method", f"CASE WHEN {split} THEN {part}method END"),
        ("path", f"CASE WHEN {split} THEN {part}path END"),
        ("query", f"CASE WHEN {part}query <> '' THEN {part}query[2:] END"),
        ("protocol", f"CASE WHEN {split} THEN {part}protocol END"),
    ]
    return cols, f"({_absent(g)} OR {split})"


def sql_plan(compiled: Compiled) -> SqlPlan | None:
    """DuckDB's way to read the lines ``compiled`` reads, or None when it has none (see the module)."""
    if not compiled.has_time:
        return None
    template = compiled.template
    regex: list[str] = []
    names: list[str] = []
    columns: Columns = []
    oks: list[str] = []
    attempts: list[str] = []
    derived: list[str] = []
    for tok, part in zip(template, compiled.parts):
        if isinstance(tok, str):
            regex.append(_escape(tok))
            continue
        pattern = part[1:-1]  # the value pattern the Python regex uses, without its group
        if "(?" in pattern.replace("(?:", ""):
            return None  # a lookahead: RE2 has none
        g = f"m.g{len(names)}"
        made = _var_sql(tok, g, f"r{len(names)}")
        if made is None:
            return None
        cols, ok, attempt, once = made
        names.append(f"g{len(names)}")
        regex.append("(" + pattern + ")")
        columns += cols
        oks.append(ok)
        if attempt:
            attempts.append(attempt)
        if once:
            derived.append(once)
    fields = [name for name, _ in columns]
    if len(set(fields)) != len(fields) or TIME_KEY not in fields:
        return None  # a field written twice: the Python parser's last-value-wins rules apply
    if attempts:
        most = attempts[0] if len(attempts) == 1 else f"greatest({', '.join(attempts)})"
        columns.append(("upstream_attempts", f"CAST({most} AS BIGINT)"))
    columns.sort(key=lambda c: c[0] != TIME_KEY)
    return SqlPlan(
        regex="^(" + "".join(regex) + ")$",
        names=["whole", *names],
        derived=derived,
        columns=columns,
        ok="m.whole <> '' AND " + " AND ".join(oks),
    )
