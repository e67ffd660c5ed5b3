"""Tests of the filter language: parsing, errors, and compiled SQL run against DuckDB."""

from __future__ import annotations

import duckdb
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from rootsift.errors import FilterSyntaxError, UnknownFieldError, UsageError
from rootsift.query.filters import (
    And,
    Compare,
    Exists,
    InList,
    Literal,
    Node,
    Not,
    Or,
    TextMatch,
    compile_filter,
    fields,
    parse_filter,
)


def N(text: str) -> Literal:
    """A number literal as the parser builds it."""
    return Literal("number", int(text) if text.lstrip("-").isdigit() else float(text), text)


def S(text: str) -> Literal:
    """A string literal as the parser builds it."""
    return Literal("string", text, text)


A, B = Compare("a", "=", N("1")), Compare("b", "=", N("2"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("duration_ms > 1000", Compare("duration_ms", ">", N("1000"))),
        ("a >= -1.5", Compare("a", ">=", N("-1.5"))),
        ("a < 1e3", Compare("a", "<", N("1e3"))),
        ("a <= 2.5E-3", Compare("a", "<=", N("2.5E-3"))),
        ("a != 200", Compare("a", "!=", N("200"))),
        ('endpoint = "/spectate"', Compare("endpoint", "=", S("/spectate"))),
        ("endpoint = /spectate", Compare("endpoint", "=", S("/spectate"))),
        ("v = 1.2.3", Compare("v", "=", S("1.2.3"))),
        ("v = -2h", Compare("v", "=", S("-2h"))),
        (r"""m = 'it\'s \"q\" \\ \n\t'""", Compare("m", "=", S('it\'s "q" \\ \n\t'))),
        ("ok = TRUE", Compare("ok", "=", Literal("bool", True, "TRUE"))),
        ("ok != false", Compare("ok", "!=", Literal("bool", False, "false"))),
        ("e = null", Compare("e", "=", Literal("null", None, "null"))),
        ("status in (500, 503)", InList("status", (N("500"), N("503")))),
        ("status NOT IN (200,'x', y)", InList("status", (N("200"), S("x"), S("y")), negate=True)),
        ("exists user_id", Exists("user_id")),
        ("Not Exists error", Exists("error", negate=True)),
        ('msg contains "timeout"', TextMatch("msg", "contains", S("timeout"))),
        ("msg DOES-NOT-CONTAIN 'x'", TextMatch("msg", "contains", S("x"), negate=True)),
        ('path starts-with "/api"', TextMatch("path", "starts-with", S("/api"))),
        ("a = 1 or b = 2 and c = 3", Or((A, And((B, Compare("c", "=", N("3"))))))),
        ("(a = 1 or b = 2) AND c = 3", And((Or((A, B)), Compare("c", "=", N("3"))))),
        ("a = 1 and b = 2 and a = 1", And((A, B, A))),
        ("not (a = 1)", Not(A)),
        ("not not (a = 1 or b = 2)", Not(Not(Or((A, B))))),
        ("((a = 1))", A),
        ("k8s.pod = x", Compare("k8s.pod", "=", S("x"))),
        ("@timestamp > 5", Compare("@timestamp", ">", N("5"))),
        ("résumé = ok", Compare("résumé", "=", S("ok"))),
        ("re\u0301sume\u0301 = ok", Compare("re\u0301sume\u0301", "=", S("ok"))),
        ("`field with spaces` = 1", Compare("field with spaces", "=", N("1"))),
        ("`select` = 1", Compare("select", "=", N("1"))),
        ("`and` = 1", Compare("and", "=", N("1"))),
        ("`a``b` = 1", Compare("a`b", "=", N("1"))),
        ("5xx = 1", Compare("5xx", "=", N("1"))),
    ],
)
def test_parse(text: str, expected: Node) -> None:
    assert parse_filter(text) == expected


def test_fields() -> None:
    node = parse_filter("a = 1 and (not (b in (1)) or exists `c d`) and e contains x")
    assert fields(node) == {"a", "b", "c d", "e"}


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("", "empty filter", 0),
        ("   ", "empty filter", 0),
        ("a == 1", "unknown operator '=='; use '='", 2),
        ("a <> 1", "use '!='", 2),
        ("a =! 1", "unknown operator '=!'", 2),
        ("a = 1 && b = 2", "use 'and'", 6),
        ("a > ", "expected a value after '>'", 4),
        ('msg = "abc', "unclosed string starting at column 7", 6),
        ("msg = 'abc\\", "unclosed string starting at column 7", 6),
        ('m = "a\\d"', "unknown escape '\\d'", 6),
        ("a = 1 and", "expected a condition after 'and'", 9),
        ("a = 1 or or b = 2", "expected a condition after 'or'", 9),
        ("and a = 1", "expected a condition", 0),
        ("(a = 1", "unclosed '(' at column 1", 0),
        ("(a = 1 b", "expected ')', 'and' or 'or' before 'b'", 7),
        ("()", "expected a condition after '('", 1),
        ("a = 1)", "unexpected ')'", 5),
        ("a = 1 b = 2", "expected 'and' or 'or' before 'b'", 6),
        ("a in 1", "expected '(' after 'in'", 5),
        ("a in (1, 2", "unclosed list starting at column 6", 5),
        ("a in ()", "empty list", 6),
        ("a in (1,)", "expected a value after ','", 8),
        ("a in (1 2)", "expected ',' or ')'", 8),
        ("a in (1, null)", "null can only be used with = or !=", 9),
        ("a > null", "null can only be used with = or !=", 4),
        ("a contains null", "null can only be used", 11),
        ("in = 1", "'in' is not a field name; to use it as one write `in`", 0),
        ("200 = status", "'200' is not a field name", 0),
        ("'a' = 1", "field names go in backquotes", 0),
        ("a = and", "found the keyword 'and'", 4),
        ("a = `b`", "backquotes are for field names", 4),
        ("a like 'x%'", "unknown operator 'like'; use 'contains' or 'starts-with'", 2),
        ("a", "expected an operator after 'a'", 1),
        ("a b", "expected an operator after 'a'", 2),
        ("not a = 1", "'not' must be followed by '(' or 'exists'", 4),
        ("a not contains x", "expected 'in' after 'not'", 6),
        ("a not exists", "write 'not exists a'", 2),
        ("a exists", "'exists' goes before the field", 2),
        ("exists", "expected a field name after 'exists'", 6),
        ("exists 'x'", "field names go in backquotes", 7),
        ("`abc = 1", "unclosed backquoted field name starting at column 1", 0),
        ("`` = 1", "empty field name", 0),
        ("a = 1 # x", "unexpected character '#' at column 7", 6),
        ("(" * 200 + "a = 1" + ")" * 200, "nested more than 100 levels", 100),
        ("not " * 200 + "(a = 1)", "nested more than 100 levels", 400),
    ],
)
def test_syntax_errors(text: str, message: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError) as info:
        parse_filter(text)
    assert message in str(info.value)
    assert info.value.position == position
    assert info.value.text == text


# Hostile column names and values, executed for real against DuckDB.
SCHEMA = {
    "id": "BIGINT",
    "select": "VARCHAR",
    "my field": "VARCHAR",
    "k8s.pod": "VARCHAR",
    'a"b': "VARCHAR",
    "it's": "VARCHAR",
    "--x": "VARCHAR",
    "résumé": "VARCHAR",
    "back\\slash": "VARCHAR",
    "`tick`": "VARCHAR",
    "status": "BIGINT",
    "dur": "DOUBLE",
    "ok": "BOOLEAN",
    "ts": "TIMESTAMP",
    "ver": "VARCHAR",
}
ROWS = [
    (
        1,
        "'; drop table events; --",
        "a%b",
        "pod-1",
        '"',
        "it's",
        "--",
        "日本語",
        "c:\\tmp",
        "x",
        200,
        1.5,
        True,
        "2026-11-21 08:00:00",
        "1.4",
    ),
    (
        2,
        'say "hi"',
        "a_b",
        "pod-2",
        "'",
        "",
        "/* */",
        "naïve",
        "\\",
        "`",
        500,
        20.0,
        False,
        "2026-11-21 09:00:00",
        "1.40",
    ),
    (3, None, "axb", None, None, None, None, None, None, None, None, None, None, None, None),
]


def quote_ident(name: str) -> str:
    """A DuckDB identifier for ``name``, quoted by sqlglot."""
    return exp.to_identifier(name, quoted=True).sql("duckdb")


@pytest.fixture(scope="module")
def db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    cols = ", ".join(f"{quote_ident(name)} {type_name}" for name, type_name in SCHEMA.items())
    con.execute(f"CREATE TABLE events ({cols})")
    con.executemany(f"INSERT INTO events VALUES ({', '.join('?' * len(SCHEMA))})", ROWS)
    return con


def run(con: duckdb.DuckDBPyConnection, text: str, schema: dict[str, str] = SCHEMA) -> list[int]:
    """Compile ``text`` against ``schema`` and return the matching ids, in order."""
    params: list[object] = []

    def column(name: str) -> tuple[exp.Expression, str]:
        if name not in schema:
            raise UnknownFieldError(name)
        return exp.Column(this=exp.to_identifier(name, quoted=True)), schema[name]

    def bind(value: object) -> exp.Expression:
        params.append(value)
        return exp.Placeholder()

    where = compile_filter(parse_filter(text), column, bind).sql(dialect="duckdb")
    return [r[0] for r in con.execute(f"SELECT id FROM events WHERE {where} ORDER BY id", params).fetchall()]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ('`select` = "\'; drop table events; --"', [1]),
        ("`select` = '\\'; drop table events; --'", [1]),
        ("`select` contains 'drop table'", [1]),
        ('`select` = "say \\"hi\\""', [2]),
        ("`my field` = 'a%b'", [1]),
        ("k8s.pod = pod-2", [2]),
        ("k8s.pod starts-with pod", [1, 2]),
        ("`a\"b` = '\"'", [1]),
        ('`a"b` = "\'"', [2]),
        ("`it's` = \"it's\"", [1]),
        ("`it's` = ''", [2]),
        ("exists `it's`", [1, 2]),
        ("`--x` = '--'", [1]),
        ('`--x` = "/* */"', [2]),
        ("résumé = 日本語", [1]),
        ("résumé contains ï", [2]),
        ("`back\\slash` = 'c:\\\\tmp'", [1]),
        ("`back\\slash` = '\\\\'", [2]),
        ("`back\\slash` contains '\\\\'", [1, 2]),
        ("```tick``` = '`'", [2]),
        ("status = 500", [2]),
        ("status = '500'", [2]),
        ("status in ('200', 500)", [1, 2]),
        ("status >= 200 and status < 500", [1]),
        ("status contains 50", [2]),
        ("dur > 1.4", [1, 2]),
        ("dur = 20", [2]),
        ("ok = true", [1]),
        ("ok = 'FALSE'", [2]),
        ("ts >= '2026-11-21T08:30:00Z'", [2]),
        ("ts < 1795305600", [1, 2]),
        ("ts = 1795248000", [1]),
        ("ts > +1000w", []),
        ("ts < -1000w", []),
        ("ver = 1.4", [1]),
        ("ver = 1.40", [2]),
        ("ver in (1.40)", [2]),
        ("not (status = 200) and exists status", [2]),
    ],
)
def test_hostile_names_and_values(db: duckdb.DuckDBPyConnection, text: str, ids: list[int]) -> None:
    assert run(db, text) == ids
    assert db.execute("SELECT count(*) FROM events").fetchone() == (3,)


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("status != 200", [2, 3]),
        ("status not in (200, 201)", [2, 3]),
        ("`select` does-not-contain drop", [2, 3]),
        ("not (status = 200)", [2, 3]),
        ("not (status = 200 or ok = false)", [3]),
        ("status = null", [3]),
        ("status != null", [1, 2]),
        ("not exists status", [3]),
        ("exists status", [1, 2]),
    ],
)
def test_missing_fields_match_negations(db: duckdb.DuckDBPyConnection, text: str, ids: list[int]) -> None:
    assert run(db, text) == ids


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("`my field` contains '%'", [1]),
        ("`my field` contains '_'", [2]),
        ("`my field` starts-with 'a_'", [2]),
        ("`my field` starts-with 'a%'", [1]),
        ("`my field` does-not-contain '_'", [1, 3]),
        ("`back\\slash` starts-with '\\\\'", [2]),
        ("`my field` contains 'a'", [1, 2, 3]),
    ],
)
def test_like_escaping(db: duckdb.DuckDBPyConnection, text: str, ids: list[int]) -> None:
    assert run(db, text) == ids


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("status > abc", "field 'status' is numeric and 'abc' is not a number"),
        ("dur = true", "field 'dur' is numeric"),
        ("status = '1_000'", "is not a number"),
        ("ok = 1", "field 'ok' holds true/false"),
        ("ts > yesterday", "field 'ts' holds times"),
        ("ver > 5", "field 'ver' holds text .varchar., so '> 5' would compare text"),
        ("ver <= 1.4", "field 'ver' holds text"),
        ("`my field` >= true", "field 'my field' holds text"),
        ("not (ver < 2)", "field 'ver' holds text"),
    ],
)
def test_coercion_errors(db: duckdb.DuckDBPyConnection, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        run(db, text)


def test_text_fields_compare_as_text_when_the_value_is_quoted(db: duckdb.DuckDBPyConnection) -> None:
    """An ordering comparison of a text field with a number is refused (above); with a
    quoted value it is the text comparison the user asked for, and = with a number binds text."""
    assert run(db, 'ver > "1.4"') == [2]
    assert run(db, "ver = 1.40") == [2]
    assert run(db, "ver in (1.4, 2)") == [1]


def test_unknown_field_propagates(db: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(UnknownFieldError):
        run(db, "nope = 1")


def test_values_only_reach_sql_through_bind() -> None:
    params: list[object] = []

    def bind(value: object) -> exp.Expression:
        params.append(value)
        return exp.Placeholder()

    node = parse_filter("a = 'x; drop' or a in (1.40, 2) or a contains '50%' or a != -3")
    sql = compile_filter(node, lambda n: (exp.column(n, quoted=True), "VARCHAR"), bind).sql(dialect="duckdb")
    assert params == ["x; drop", "1.40", "2", "%50\\%%", "-3"]
    assert "drop" not in sql and "1.4" not in sql and "3" not in sql
    sqlglot.parse_one(sql, read="duckdb")


# Random input: only FilterSyntaxError / UsageError, and valid DuckDB SQL when it parses.
WORDS = [
    "a",
    "b",
    "`c d`",
    "t",
    "d",
    "and",
    "or",
    "not",
    "in",
    "exists",
    "contains",
    "does-not-contain",
    "starts-with",
    "=",
    "!=",
    ">",
    ">=",
    "<",
    "<=",
    "==",
    "(",
    ")",
    ",",
    "1",
    "-2.5",
    "1e400",
    "'x'",
    '"y\\"',
    "true",
    "null",
    "/p",
    "-2h",
    "'2026-01-01'",
    "`",
    "'",
    "\\",
]
SMALL = {"id": "BIGINT", "a": "BIGINT", "b": "VARCHAR", "c d": "BOOLEAN", "t": "TIMESTAMP", "d": "DOUBLE"}


@pytest.fixture(scope="module")
def small_db() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE events ({', '.join(f'{quote_ident(n)} {t}' for n, t in SMALL.items())})")
    con.execute("INSERT INTO events VALUES (1, 5, 'x', true, '2026-01-01', 1e300), (2, NULL, NULL, NULL, NULL, NULL)")
    return con


FIELDS = st.sampled_from(["a", "b", "`c d`", "t", "d"])
VALUES = st.sampled_from(["5", "-2.5", "'x'", "x", "true", "FALSE", "'2026-01-01'", "-2h", "1e400", '"y\\""'])
CONDITIONS = st.one_of(
    st.tuples(FIELDS, st.sampled_from(["=", "!=", ">", ">=", "<", "<="]), VALUES).map(" ".join),
    st.tuples(FIELDS, st.sampled_from(["= null", "!= NULL"])).map(" ".join),
    st.tuples(st.sampled_from(["exists", "not exists"]), FIELDS).map(" ".join),
    st.tuples(FIELDS, st.sampled_from(["contains", "does-not-contain", "starts-with"]), VALUES).map(" ".join),
    st.tuples(FIELDS, st.sampled_from(["in", "not in"]), st.lists(VALUES, min_size=1, max_size=3)).map(
        lambda t: f"{t[0]} {t[1]} ({', '.join(t[2])})"
    ),
)
FILTERS = st.recursive(
    CONDITIONS,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["and", "or", "OR"]), inner).map(" ".join),
        inner.map(lambda text: f"not ({text})"),
        inner.map(lambda text: f"({text})"),
    ),
    max_leaves=6,
)


@settings(max_examples=400, deadline=1000)
@given(st.one_of(st.text(max_size=60), st.lists(st.sampled_from(WORDS), max_size=14).map(" ".join)))
def test_random_text_fails_cleanly(small_db: duckdb.DuckDBPyConnection, text: str) -> None:
    try:
        ids = run(small_db, text, SMALL)
    except UsageError:  # FilterSyntaxError, UnknownFieldError and coercion errors are all UsageErrors
        return
    assert sorted(ids + run(small_db, f"not ({text})", SMALL)) == [1, 2]


@settings(max_examples=300, deadline=1000)
@given(FILTERS)
def test_generated_filters_run_and_negate_exactly(small_db: duckdb.DuckDBPyConnection, text: str) -> None:
    parse_filter(text)
    try:
        ids = run(small_db, text, SMALL)
    except UsageError as exc:  # only value coercion may fail on a well-formed filter
        assert not isinstance(exc, FilterSyntaxError)
        return
    assert sorted(ids + run(small_db, f"not ({text})", SMALL)) == [1, 2]


@settings(max_examples=150, deadline=1000)
@given(
    name=st.text(min_size=1, max_size=12).filter(lambda s: "\x00" not in s and s.lower() != "id"),
    value=st.text(max_size=12).filter(lambda s: "\x00" not in s),
)
def test_any_name_and_value_round_trip(name: str, value: str) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE events (id BIGINT, {quote_ident(name)} VARCHAR)")
    con.execute("INSERT INTO events VALUES (1, ?), (2, ?)", [value, value + "!"])
    field = "`" + name.replace("`", "``") + "`"
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    schema = {"id": "BIGINT", name: "VARCHAR"}
    assert run(con, f"{field} = {quoted}", schema) == [1]
    assert run(con, f"{field} starts-with {quoted}", schema) == [1, 2]
    assert run(con, f"{field} in ({quoted}, 'zz')", schema) == [1] + ([2] if value + "!" == "zz" else [])


def test_long_input_is_fast() -> None:
    node = parse_filter(" or ".join(f"f{i} = {i}" for i in range(20_000)))
    assert isinstance(node, Or) and len(node.items) == 20_000
    with pytest.raises(FilterSyntaxError):
        parse_filter("(" * 100_000)
