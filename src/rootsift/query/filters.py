"""The filter expression language: parse user filters into an AST (compiled in filter_sql).

Examples: ``duration_ms > 1000``, ``status in (500, 503)``, ``exists user_id``,
``msg does-not-contain 'x'``, ``status != 200 and (az = "a" or az = b)``, ``not (a = 1)``.
Keywords are case-insensitive and ``and`` binds tighter than ``or``. A field name that is
not a plain identifier (letters, digits, ``_ . - @ / :``), or is a keyword, goes in
backquotes, a doubled backquote standing for one: ```my field```, ```select```.

Missing fields: as in most observability tools, a row where the field is missing (NULL)
*does* match the negative operators. ``f != x`` compiles to ``f IS DISTINCT FROM ?``,
``f not in (...)`` to ``(f IS NULL OR f NOT IN (...))``, ``f does-not-contain x`` to
``(f IS NULL OR f NOT LIKE ...)`` and ``not (...)`` to ``NOT COALESCE(..., FALSE)``, so each
negation matches exactly the rows its positive form does not. ``f = null`` and
``f != null`` mean ``IS NULL`` and ``IS NOT NULL``.

User values reach SQL only through the ``bind`` callback, never as SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

from sqlglot import exp

from rootsift.errors import FilterSyntaxError


@dataclass(frozen=True)
class Literal:
    """A value: ``kind`` is number, string, bool or null. ``text`` is the source text of
    numbers and bools (``1.40`` stays distinct from ``1.4``), the decoded text of strings."""

    kind: str
    value: object
    text: str


@dataclass(frozen=True)
class Compare:
    """``field op value`` with ``op`` one of = != > >= < <=."""

    field: str
    op: str
    value: Literal


@dataclass(frozen=True)
class InList:
    """``field in (...)``, or ``field not in (...)`` when ``negate``."""

    field: str
    values: tuple[Literal, ...]
    negate: bool = False


@dataclass(frozen=True)
class Exists:
    """``exists field``, or ``not exists field`` when ``negate``."""

    field: str
    negate: bool = False


@dataclass(frozen=True)
class TextMatch:
    """``field contains v`` or ``starts-with v`` (``kind``); does-not-contain has ``negate``."""

    field: str
    kind: str
    value: Literal
    negate: bool = False


@dataclass(frozen=True)
class And:
    """All of ``items``."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Any of ``items``."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    """Exactly the rows ``item`` does not match."""

    item: Node


Node = Compare | InList | Exists | TextMatch | And | Or | Not
Column = Callable[[str], tuple[exp.Expr, str]]
Bind = Callable[[object], exp.Expr]

KEYWORDS = frozenset(
    ["and", "or", "not", "in", "exists", "contains", "does-not-contain", "starts-with", "true", "false", "null"]
)
OPERATORS = "=, !=, >, >=, <, <=, in, not in, contains, does-not-contain, starts-with"
_COMPARE: dict[str, type[exp.Expr]] = {
    "=": exp.EQ,
    "!=": exp.NullSafeNEQ,
    ">": exp.GT,
    ">=": exp.GTE,
    "<": exp.LT,
    "<=": exp.LTE,
}
_HINTS = {
    "==": "'='",
    "===": "'='",
    "<>": "'!='",
    "=>": "'>='",
    "=<": "'<='",
    "!": "'!=' or 'not'",
    "&&": "'and'",
    "&": "'and'",
    "||": "'or'",
    "|": "'or'",
    "~": "'contains'",
    "=~": "'contains'",
    "like": "'contains' or 'starts-with'",
    "is": "'=' or 'exists'",
    "has": "'contains'",
    "contain": "'contains'",
    "startswith": "'starts-with'",
    "starts_with": "'starts-with'",
    "does_not_contain": "'does-not-contain'",
    "doesnotcontain": "'does-not-contain'",
}
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
# Combining accents (U+0300-U+036F) count as word characters so a decomposed "é" stays in its name.
_WORD_CHAR = r"[\w\u0300-\u036f.@/:-]"
_TOKEN = re.compile(
    rf"(?P<space>\s+)|(?P<punct>[(),])|(?P<op>[=!<>~&|]+)"
    rf"|(?P<number>{_NUMBER.pattern})(?!{_WORD_CHAR})|(?P<word>(?:\+(?=\d))?{_WORD_CHAR}+)"
)
_QUOTED = {
    '"': re.compile(r'"((?:[^"\\]|\\.)*)"', re.DOTALL),
    "'": re.compile(r"'((?:[^'\\]|\\.)*)'", re.DOTALL),
    "`": re.compile(r"`((?:[^`]|``)*)`", re.DOTALL),
}
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "n": "\n", "t": "\t"}
_MAX_DEPTH = 100


class Token(NamedTuple):
    """A lexed token; ``kind`` is ( ) , op string field number word or end."""

    kind: str
    text: str
    pos: int
    value: str = ""


def parse_filter(text: str) -> Node:
    """Parse a filter expression into its AST; raise FilterSyntaxError with a position."""
    return _Parser(text).parse()


def fields(node: Node) -> set[str]:
    """Return the names of all fields a filter refers to."""
    if isinstance(node, (And, Or)):
        return set().union(*(fields(item) for item in node.items))
    if isinstance(node, Not):
        return fields(node.item)
    return {node.field}


def _lex(text: str) -> list[Token]:
    """Split a filter into tokens, ending with an ``end`` token."""
    tokens, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch in _QUOTED:
            match = _QUOTED[ch].match(text, i)
            if match is None:
                what = "backquoted field name" if ch == "`" else "string"
                raise FilterSyntaxError(f"unclosed {what} starting at column {i + 1}", text, i)
            tokens.append(Token("field" if ch == "`" else "string", match[0], i, _unquote(text, match)))
        else:
            match = _TOKEN.match(text, i)
            if match is None:
                raise FilterSyntaxError(f"unexpected character {ch!r} at column {i + 1}", text, i)
            kind = match[0] if match.lastgroup == "punct" else str(match.lastgroup)
            if kind != "space":
                tokens.append(Token(kind, match[0], i))
        i = match.end()
    return [*tokens, Token("end", "", len(text))]


def _unquote(text: str, match: re.Match[str]) -> str:
    """Decode the body of a quoted string (backslash escapes) or backquoted name (````)."""
    body = match[1]
    if text[match.start()] == "`":
        if not body:
            raise FilterSyntaxError("empty field name in backquotes", text, match.start())
        return body.replace("``", "`")
    for escape in re.finditer(r"\\(.)", body, re.DOTALL):
        if escape[1] not in _ESCAPES:
            where = match.start(1) + escape.start()
            message = f"unknown escape '{escape[0]}' in string; write \\\\ for a backslash"
            raise FilterSyntaxError(message, text, where)
    return re.sub(r"\\(.)", lambda escape: _ESCAPES[escape[1]], body, flags=re.DOTALL)


class _Parser:
    """Recursive-descent parser over the token list of one filter."""

    def __init__(self, text: str) -> None:
        self.text, self.tokens, self.i, self.depth = text, _lex(text), 0, 0

    def parse(self) -> Node:
        if self.peek().kind == "end":
            self.fail("empty filter; write a condition such as: duration_ms > 1000", Token("end", "", 0))
        node = self.or_expr()
        tok = self.peek()
        if tok.kind == ")":
            self.fail("unexpected ')' with no matching '('", tok)
        if tok.kind == "op" and tok.text in _HINTS:
            self.fail(f"unknown operator '{tok.text}'; use {_HINTS[tok.text]}", tok)
        if tok.kind != "end":
            self.fail(f"expected 'and' or 'or' before {_describe(tok)}", tok)
        return node

    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        self.i = min(self.i + 1, len(self.tokens) - 1)
        return tok

    def fail(self, message: str, tok: Token) -> NoReturn:
        raise FilterSyntaxError(message, self.text, tok.pos)

    def or_expr(self) -> Node:
        items = [self.and_expr()]
        while _is_kw(self.peek(), "or") and self.next():
            items.append(self.and_expr())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def and_expr(self) -> Node:
        items = [self.unary()]
        while _is_kw(self.peek(), "and") and self.next():
            items.append(self.unary())
        return items[0] if len(items) == 1 else And(tuple(items))

    def unary(self) -> Node:
        tok = self.peek()
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            self.fail(f"filter is nested more than {_MAX_DEPTH} levels deep", tok)
        try:
            if _is_kw(tok, "not"):
                self.next()
                if _is_kw(self.peek(), "exists") and self.next():
                    return Exists(self.field("after 'not exists'"), negate=True)
                if self.peek().kind != "(" and not _is_kw(self.peek(), "not"):
                    self.fail(
                        "'not' must be followed by '(' or 'exists', as in: not (status = 500); "
                        "or use !=, not in, does-not-contain",
                        self.peek(),
                    )
                return Not(self.unary())
            if tok.kind == "(" and self.next():
                inner, close = self.or_expr(), self.next()
                if close.kind == "end":
                    self.fail(f"unclosed '(' at column {tok.pos + 1}", tok)
                if close.kind != ")":
                    self.fail(f"expected ')', 'and' or 'or' before {_describe(close)}", close)
                return inner
            if _is_kw(tok, "exists") and self.next():
                return Exists(self.field("after 'exists'"))
            return self.condition()
        finally:
            self.depth -= 1

    def field(self, where: str) -> str:
        tok = self.next()
        if tok.kind == "field":
            return tok.value
        if tok.kind == "word" and tok.text.lower() not in KEYWORDS:
            return tok.text
        if tok.kind in ("word", "number"):
            self.fail(f"'{tok.text}' is not a field name; to use it as one write `{tok.text}`", tok)
        if tok.kind == "string":
            self.fail(f"field names go in backquotes, not quotes: `{tok.value}`", tok)
        self.fail(f"expected a field name {where}{_found(tok)}", tok)

    def condition(self) -> Node:
        tok = self.peek()
        if tok.kind in ("end", ")", ",") or _is_kw(tok, "and", "or"):
            where = f"after '{self.tokens[self.i - 1].text}'" if self.i else f"before {_describe(tok)}"
            self.fail(f"expected a condition {where}", tok)
        name = self.field("")
        op = self.next()
        word = op.text.lower() if op.kind == "word" else ""
        if op.kind == "op" and op.text in _COMPARE:
            return Compare(name, op.text, self.value(op, allow_null=op.text in ("=", "!=")))
        if word == "in":
            return InList(name, self.value_list(op))
        if word == "not" and _is_kw(self.peek(), "in"):
            return InList(name, self.value_list(self.next()), negate=True)
        if word == "not" and _is_kw(self.peek(), "exists"):
            self.fail(f"write 'not exists {name}', with the field after 'exists'", op)
        if word == "not":
            self.fail(
                "expected 'in' after 'not'; the negative operators are 'not in', '!=' and 'does-not-contain'",
                self.peek(),
            )
        if word in ("contains", "does-not-contain", "starts-with"):
            kind = "starts-with" if word == "starts-with" else "contains"
            return TextMatch(name, kind, self.value(op), negate=word == "does-not-contain")
        if word == "exists":
            self.fail(f"'exists' goes before the field: exists {name}", op)
        if op.kind in ("op", "word") and op.text.lower() in _HINTS:
            self.fail(f"unknown operator '{op.text}'; use {_HINTS[op.text.lower()]}", op)
        if op.kind == "op":
            self.fail(f"unknown operator '{op.text}'; use one of {OPERATORS}", op)
        self.fail(f"expected an operator after '{name}' ({OPERATORS}){_found(op)}", op)

    def value(self, after: Token, allow_null: bool = False) -> Literal:
        tok = self.next()
        word = tok.text.lower() if tok.kind == "word" else ""
        if tok.kind == "number":
            number = int(tok.text) if re.fullmatch(r"[+-]?\d+", tok.text) else float(tok.text)
            return Literal("number", number, tok.text)
        if tok.kind == "string":
            return Literal("string", tok.value, tok.value)
        if word in ("true", "false"):
            return Literal("bool", word == "true", tok.text)
        if word == "null" and allow_null:
            return Literal("null", None, tok.text)
        if word == "null":
            self.fail("null can only be used with = or !=; to test for a missing field use 'not exists'", tok)
        if word in KEYWORDS:
            self.fail(
                f"expected a value after '{after.text}', found the keyword '{tok.text}'; "
                f'to use it as text write "{tok.text}"',
                tok,
            )
        if tok.kind == "word":
            return Literal("string", tok.text, tok.text)
        if tok.kind == "field":
            self.fail("backquotes are for field names; quote values with \" or '", tok)
        self.fail(f"expected a value after '{after.text}'{_found(tok)}", tok)

    def value_list(self, after: Token) -> tuple[Literal, ...]:
        opening = self.next()
        if opening.kind != "(":
            self.fail(f"expected '(' after '{after.text}', as in: status {after.text} (500, 503)", opening)
        if self.peek().kind == ")":
            self.fail("empty list; give at least one value", self.peek())
        values = [self.value(opening)]
        while (tok := self.next()).kind == ",":
            values.append(self.value(tok))
        if tok.kind == "end":
            self.fail(f"unclosed list starting at column {opening.pos + 1}", opening)
        if tok.kind != ")":
            self.fail(f"expected ',' or ')' in the list{_found(tok)}", tok)
        return tuple(values)


def _is_kw(tok: Token, *words: str) -> bool:
    return tok.kind == "word" and tok.text.lower() in words


def _describe(tok: Token) -> str:
    if tok.kind == "end":
        return "the end of the filter"
    return f"string {tok.text}" if tok.kind == "string" else f"'{tok.text}'"


def _found(tok: Token) -> str:
    return "" if tok.kind == "end" else f", found {_describe(tok)}"


from rootsift.query.filter_sql import compile_filter, escape_like  # noqa: E402  (re-exported)

__all__ = [
    "parse_filter",
    "fields",
    "compile_filter",
    "escape_like",
    "Node",
    "Literal",
    "Compare",
    "InList",
    "Exists",
    "TextMatch",
    "And",
    "Or",
    "Not",
]
