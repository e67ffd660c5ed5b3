"""Query fingerprints: one text per statement shape, so statements group by what they do.

``mysql`` follows pt-query-digest's fingerprint rules; ``postgres`` normalises the way
pg_stat_statements does, as far as a text rewrite can. Both are chains of precompiled
regular expressions (no SQL parser: a few microseconds per statement) and never raise.
The rules, and where they differ from the originals, are in docs/formats/fingerprints.md.

>>> mysql("SELECT * FROM t WHERE id IN (1, 2, 3) LIMIT 10, 20")
'select * from t where id in(?+) limit ?'
>>> postgres("SELECT * FROM \\"Users\\" WHERE name = 'bob' AND id = $1")
'select * from "Users" where name = ? and id = ?'
"""

from __future__ import annotations

import re

__all__ = ["mysql", "postgres"]

# Every pattern starts with a literal or a character class (no group, no lookbehind, no
# \b first): then re skips to candidate characters in C instead of trying each position,
# which is most of the cost. Boundaries are checked by lookbehinds placed after the
# first character.
_STR = r"""'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"?"""
_BLOCK = r"/\*.*?(?:\*/|\Z)"
# Strings, comments and `quoted identifiers`, matched together so that a quote inside a
# comment (or "--" inside a string) is read as what it is. A run of identifiers is one
# match, so an ORM's `t`.`c` = ... costs one call, not one per identifier.
_MY_TOKENS = re.compile(
    r"`[^`]*`?(?:[^`'\"#/-]*`[^`]*`?)*|" + _STR + "|" + _BLOCK + r"|--(?=[ \t\r\n]|\Z)[^\n]*|#[^\n]*", re.S
)
_MY_STRINGS = re.compile(_STR)
# One quote character only: a pattern with a single literal first character is searched
# about twice as fast as one starting with a choice of two.
_SINGLE = re.compile(r"'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?")
_DOUBLE = re.compile(r'"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"?')
# x'1f', b'01', N'text', _utf8mb4'text': the prefix left before a replaced string.
_PREFIX = re.compile(r"[xXbBnN_](?<![\w$].)(?:(?<=_)[A-Za-z0-9]+)?\?")
_PREFIX_HINT = re.compile(r"\?(?<=\w\?)")
_MY_NUMBER = re.compile(r"[0-9](?:[xX][0-9a-fA-F]+|[bB][0-9]+|[0-9]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)")
_DOT_NUMBER = re.compile(r"\.\?(?<![\w$`)\]]\.\?)")
# A sign is part of the constant after an operator, "(", "," or a keyword ("+ -5",
# "then -1"), as pg_stat_statements folds it; "a - 5" stays a subtraction.
_SIGNED = re.compile(
    r"((?:[=<>(,+\-*/%|^&~\[]|\b(?:select|and|or|not|then|else|when|between|like|return|case|in|is)) ?)[-+]\?"
)
_MY_WORDS = re.compile(r"(?:null|true|false)(?<![\w$]null)(?<![\w$]true)(?<![\w$]false)(?![\w$])")
_LIST = re.compile(r"\([\s,]*\?[\s?,]*\)(?:[\s,]*\([\s,]*\?[\s?,]*\))*")
_LIST_WORDS = ("in", "values", "value")
_UNION = re.compile(r"(select\s(?<![\w$]select\s)(?:(?!\sunion\b).){0,2000}?)(?:(\sunion(?:\sall)?)\s\1)+")
# The union pass costs the statement's length times its SELECTs: skipped on huge ones.
_UNION_MAX = 100_000
_LIMIT = re.compile(r"limit \?(?<![\w$]limit \?)(?:, ?\?| offset \?)?")
_ASC = re.compile(r"\s+asc(?![\w$])")
_USE = re.compile(r"use\s+\S+", re.I)
_CALL = re.compile(r"\s*call\s+([^\s(;]+)", re.I)
_MYSQLDUMP = re.compile(r"\s*SELECT /\*!40001 SQL_NO_CACHE \*/ \* FROM `")
_PT_TOOL = re.compile(r"/\*\w+\.\w+:[0-9]/[0-9]\*/")
_ADMIN = "administrator command:"


def _my_token(m: re.Match[str]) -> str:
    c = m.group()
    if c[0] == "`":
        return c
    return "?" if c[0] in "'\"" else " "


def _list(m: re.Match[str]) -> str:
    """``(?, ?), (?)`` after IN or VALUES becomes ``(?+)``; other parentheses stay."""
    head = m.string[max(0, m.start() - 8) : m.start()].rstrip()
    for word in _LIST_WORDS:
        if head.endswith(word):
            before = head[-len(word) - 1 : -len(word)]
            if not before or not (before.isalnum() or before in "_$"):
                return "(?+)"
    return m.group()


def _collapse_lists(q: str) -> str:
    return _LIST.sub(_list, q).replace(" (?+)", "(?+)")


def mysql(statement: str) -> str:
    """The pt-query-digest fingerprint of a MySQL statement: literals become ``?``, lists
    collapse, comments go, everything is lower case with single spaces.

    >>> mysql("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')")
    'insert into t (a, b) values(?+)'
    >>> mysql("administrator command: Quit;")
    'administrator command: Quit'
    """
    try:
        return _mysql(statement if isinstance(statement, str) else str(statement))
    except Exception:  # noqa: BLE001 - a fingerprint must never stop an ingest
        return " ".join(str(statement).split()).lower()[:1000]


def _mysql(q: str) -> str:
    q = q.strip().rstrip(";").rstrip()
    if q.startswith(_ADMIN):
        return q
    if "/*" in q:
        if "/*!40001" in q and _MYSQLDUMP.match(q):
            return "mysqldump"
        if _PT_TOOL.search(q):
            return "percona-toolkit"
    if q[:4].lower() == "call" and (m := _CALL.match(q)):
        return "call " + m.group(1).lower()
    single = "'" in q
    double = '"' in q
    quoted = single or double
    if "`" in q or "/*" in q or "#" in q or "--" in q:
        q = _MY_TOKENS.sub(_my_token, q)
    elif single and double:
        q = _MY_STRINGS.sub("?", q)
    elif single:
        q = _SINGLE.sub("?", q)
    elif double:
        q = _DOUBLE.sub("?", q)
    if quoted and _PREFIX_HINT.search(q):
        q = _PREFIX.sub("?", q)
    q = " ".join(q.split())
    if q[:3].lower() == "use" and _USE.fullmatch(q):
        return "use ?"
    # pt's default also replaces digits inside identifiers (tbl_2019 -> tbl_?), so
    # sharded or dated table names group together.
    q = _MY_NUMBER.sub("?", q).lower()
    if "null" in q or "true" in q or "false" in q:
        q = _MY_WORDS.sub("?", q)
    if "?" in q:
        if ".?" in q:
            q = _DOT_NUMBER.sub("?", q)
        if "-?" in q or "+?" in q:
            q = _SIGNED.sub(r"\1?", q)
        q = _collapse_lists(q)
        if "limit ?" in q:
            q = _LIMIT.sub("limit ?", q)
    if "union" in q and len(q) < _UNION_MAX:
        q = _UNION.sub(r"\1 /*repeat\2*/", q)
    if " asc" in q:
        i = q.find("order by ")
        if i >= 0:
            q = q[:i] + _ASC.sub("", q[i:])
    return q.rstrip("; ")


# PostgreSQL: '' doubling, E'' with backslashes, B''/X''/U&''/N'' prefixes (left before
# the replaced string, removed by _PG_PREFIX), $tag$ quoting, "quoted identifiers" (kept
# as written), -- and /* */ comments (not nested).
_PG_TOKENS = re.compile(
    r"""\"(?:[^\"]|\"\")*\"?"""
    r"|e(?<![\w$]e)'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?|E(?<![\w$]E)'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'?"
    r"|'[^']*(?:''[^']*)*'?"
    r"|\$(?<![\w$]\$)(?P<tag>(?:[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?)\$.*?(?:\$(?P=tag)\$|\Z)"
    r"|" + _BLOCK + r"|--[^\n]*",
    re.S,
)
_PG_SINGLE = re.compile(r"'[^']*(?:''[^']*)*'?")
_DOLLAR_TAG = re.compile(r"\$[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*\$")
_PG_PREFIX = re.compile(r"[bBxXnNuU](?<![\w$].)(?:(?<=[uU])&)?\?")
_PG_NUMBER = re.compile(
    r"[$0-9.](?<![\w$].)"
    r"(?:(?<=\$)[0-9]+"
    r"|(?<=[0-9])(?:[xX][0-9a-fA-F_]+|[oO][0-7_]+|[bB][01_]+|[0-9_]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
    r"|(?<=\.)[0-9]+(?:[eE][-+]?[0-9]+)?)"
    r"(?![\w$])"
)
_PG_WORDS = re.compile(
    r"(?:null|true|false)(?<![\w$]null)(?<![\w$]true)(?<![\w$]false)(?<!is null)(?<!not null)(?![\w$])"
)
_PG_ARRAY = re.compile(r"\[[\s?,]*\]")
_PG_QUOTED = re.compile(r'("(?:[^"]|"")*"?)')
_SPACE = re.compile(r"\s+")


def _pg_token(m: re.Match[str]) -> str:
    c = m.group()[0]
    if c == '"':
        return m.group()
    return " " if c in "/-" else "?"


def _array(m: re.Match[str]) -> str:
    head = m.string[max(0, m.start() - 7) : m.start()].rstrip()
    if head.endswith("array") and not head[-6:-5].isalnum():
        return "[?+]"
    return m.group()


def postgres(statement: str) -> str:
    """The normalised form of a PostgreSQL statement: constants and ``$n`` parameters become
    ``?`` (as pg_stat_statements makes them ``$n``), IN/VALUES/ARRAY lists collapse,
    comments go, whitespace is single, case is lower outside "quoted identifiers".

    >>> postgres("select * from t where id = any(ARRAY[1,2,3]) and d > now() - interval '1 day'")
    'select * from t where id = any(array[?+]) and d > now() - interval ?'
    """
    try:
        return _postgres(statement if isinstance(statement, str) else str(statement))
    except Exception:  # noqa: BLE001 - a fingerprint must never stop an ingest
        return " ".join(str(statement).split())[:1000]


def _postgres(q: str) -> str:
    q = q.strip().rstrip(";").rstrip()
    quoted = '"' in q
    dollar = "$" in q and ("$$" in q or _DOLLAR_TAG.search(q) is not None)
    if quoted or dollar or "/*" in q or "--" in q or "e'" in q or "E'" in q:
        q = _PG_TOKENS.sub(_pg_token, q)
    elif "'" in q:
        q = _PG_SINGLE.sub("?", q)
    if "?" in q and _PREFIX_HINT.search(q):
        q = _PG_PREFIX.sub("?", q)
    q = _PG_NUMBER.sub("?", q)
    if quoted and '"' in q:
        parts = _PG_QUOTED.split(q)
        q = "".join(p if i % 2 else _SPACE.sub(" ", p).lower() for i, p in enumerate(parts)).strip()
    else:
        q = " ".join(q.split()).lower()
    if "null" in q or "true" in q or "false" in q:
        q = _PG_WORDS.sub("?", q)
    if "?" in q:
        if "-?" in q or "+?" in q:
            q = _SIGNED.sub(r"\1?", q)
        if "array" in q:
            q = _PG_ARRAY.sub(_array, q).replace("array [?+]", "array[?+]")
        q = _collapse_lists(q)
    return q.rstrip("; ")
