"""Access-log templates: a log format as literals and variables, compiled once into one regex.

nginx ``log_format`` and Apache ``LogFormat`` strings are both read into a ``Template``
(a tuple of literal strings and ``Var``s); ``Compiled`` turns it into a single anchored
regex with one group per variable and one generated converter for the groups. A
variable's value pattern is chosen from what follows it (``value_pattern``): up to the
closing quote when it is quoted (values cannot hold a bare ``"`` once escaped), its own
value class when it has one (numbers, times, upstream lists: this is what lets two
variables touch without a separator), otherwise everything up to the next literal."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import datetime, tzinfo
from itertools import chain, islice

from rootsift.errors import UsageError
from rootsift.ingest.formats import access_fields as af
from rootsift.ingest.formats.access_handlers import Var, make_handler
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

Template = tuple[str | Var, ...]

INT = r"-|\d+"
NUM = r"-|\d+(?:\.\d+)?"
UPSTREAM = r"[^\s,]+(?:(?:, | : )[^\s,]+)*"
CLF_TIME = r"\d{1,2}/[A-Za-z]{3}/\d{4}:\d\d:\d\d:\d\d(?: [+-]\d{4})?"
ISO_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?"
_QUOTED = {"default": r'[^"]*'}
_QUOTED_ESC = r'[^"\\]*(?:\\.[^"\\]*)*'


ANY_TEXT = (".*", ".*?", r"\S+")
"""Value patterns that take any text (or any word): two of them touching cannot be split."""
SPACEY = frozenset({"http_user_agent", "http_referer", "http_cookie", "remote_user"})
"""Text fields that often hold spaces: when left unquoted they take the shortest match."""


def value_pattern(var: Var, following: str, escape: str, final: bool = False) -> str:
    """The regex for ``var``'s value given the literal that follows it.

    ``following`` is ``''`` at the end of the format and ``'$'`` when another variable
    touches it; ``final`` says only that literal comes after it (so the value may hold
    it). Lazy matches are kept to touching variables and fields that hold spaces, so no
    format backtracks explosively on a line that does not match.
    """
    quoted = following.startswith('"')
    if quoted and escape != "none":
        return _QUOTED.get(escape, _QUOTED_ESC)
    if var.pattern and not quoted:
        return var.pattern
    if not following or final:
        return ".*"
    if following == "$" or var.kind == "request" or var.key in SPACEY:
        return ".*?"
    if len(following) == 1:
        return "[^" + re.escape(following) + "]*"
    return "(?:(?!" + re.escape(following) + ").)*"  # anything up to the next literal


_INLINE = {
    "str": "    if {g} != '-' and {g}: ev[{key!r}] = {g} if '\\\\' not in {g} else unescape({g})",
    "int": "    if {g} != '-' and {g}: ev[{key!r}] = int({g})",
}


def build_converter(
    keys: list[str], kinds: list[str], handlers: list[af.Handler | None], unescape: Callable[[str], str]
) -> Callable[[Event, tuple[str, ...]], None]:
    """One function that writes a match's groups into an event, text and integer fields inlined.

    Generated once per format: a loop over per-field handlers costs a call and a branch per
    field on every line, which is most of the parse time. A conversion error raises
    ``ValueError``; ``Compiled.why_not`` then names the field.
    """
    names = [f"g{i}" for i in range(len(keys))]
    body = [f"    {', '.join(names)}, = groups" if names else "    pass"]
    env: dict[str, object] = {"unescape": unescape}
    for g, key, kind, h in zip(names, keys, kinds, handlers):
        if kind in _INLINE:
            body.append(_INLINE[kind].format(g=g, key=key))
        else:
            env["h" + g] = h
            body.append(f"    h{g}(ev, {g})")
    src = "def convert(ev, groups):\n" + "\n".join(body) + "\n"
    exec(compile(src, "<access-log converter>", "exec"), env)  # noqa: S102 - source built from field names only
    return env["convert"]  # type: ignore[return-value]


class Compiled:
    """A template compiled for one input: its regex, handlers, and a way to explain a miss."""

    def __init__(self, name: str, template: Template, escape: str, zone: tzinfo) -> None:
        self.name = name
        self.template = template
        self.parts: list[str] = []
        has_time = any(isinstance(t, Var) and t.kind in ("clf_time", "iso_time") for t in template)
        has_time = has_time or any(isinstance(t, Var) and t.kind.startswith("strftime:") for t in template)
        unescape = af.UNESCAPE.get(escape, af.unescape_nginx)
        handlers: list[af.Handler | None] = []
        keys: list[str] = []
        kinds: list[str] = []
        loose: Var | None = None  # the variable just before, when it takes any text
        for i, tok in enumerate(template):
            if isinstance(tok, str):
                self.parts.append(re.escape(tok))
                loose = None
            else:
                nxt = template[i + 1] if i + 1 < len(template) else ""
                following = nxt if isinstance(nxt, str) else "$"
                final = i + 2 == len(template) and isinstance(nxt, str)  # only a literal after it
                pattern = value_pattern(tok, following, escape, final)
                if loose is not None and pattern in ANY_TEXT:
                    raise UsageError(
                        f"--log-format: {loose.source} and {tok.source} touch and both may hold any "
                        "text, so where one ends and the next begins cannot be told (and trying every split "
                        "takes time that grows with a power of the line's length); put a separator between them"
                    )
                loose = tok if pattern in ANY_TEXT else None
                self.parts.append("(" + pattern + ")")
                plain = tok.kind == "str" and tok.handler is None
                handlers.append(None if plain else make_handler(tok, unescape, zone, has_time))
                keys.append(tok.key)
                kinds.append("str" if plain else tok.kind if tok.handler is None else "custom")
        self.regex = re.compile("".join(self.parts) + r"\Z")
        # a line cut short inside its last quoted value (a truncated write) is still read
        last = template[-1] if template else ""
        self.lenient = None
        if isinstance(last, str) and last.endswith('"'):
            self.lenient = re.compile("".join(self.parts[:-1]) + re.escape(last[:-1]) + r"\Z").match
        self.unescape = unescape
        self.steps = tuple(zip(keys, handlers))
        self.convert = build_converter(keys, kinds, handlers, unescape)
        self.has_time = has_time or any(isinstance(t, Var) and t.kind.startswith("epoch") for t in template)

    def explain(self, line: str) -> str:
        """Why ``line`` does not match: the column where the template stops matching and what it expected."""
        lo, hi = 0, len(self.parts)  # the longest matching prefix of parts, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if re.match("".join(self.parts[:mid]), line):
                lo = mid
            else:
                hi = mid - 1
        m = re.match("".join(self.parts[:lo]), line)
        col = (m.end() if m else 0) + 1
        if lo == len(self.parts):
            return f"does not match log_format {self.name} at column {col}: unexpected text after the last field"
        tok = self.template[lo]
        want = f"{tok!r}" if isinstance(tok, str) else tok.source
        return f"does not match log_format {self.name} at column {col}: expected {want}"

    def why_not(self, groups: tuple[str, ...]) -> str:
        """The message of the first handler that fails on ``groups`` (the converter raised)."""
        for (_, h), v in zip(self.steps, groups):
            if h is not None:
                try:
                    h({}, v)
                except ValueError as exc:
                    return str(exc)
        return "a value could not be converted"

    def parse(self, lines: Lines, file_time: Callable[[], datetime]) -> Iterator[Item]:
        """Events and rejects for ``lines`` (blank lines are skipped)."""
        match = self.regex.match
        convert = self.convert
        lenient = self.lenient
        fallback = None if self.has_time else file_time()
        for num, line in lines:
            m = match(line)
            cut = m is None
            if m is None:
                m = lenient(line) if lenient is not None else None
                if m is None:
                    if line.strip():
                        yield Reject(num, self.explain(line), line)
                    continue
            ev: Event = {}
            try:
                convert(ev, m.groups())
            except ValueError:
                yield Reject(num, self.why_not(m.groups()), line)
                continue
            if cut:
                ev["truncated"] = True
            if fallback is not None:
                ev.setdefault(TIME_KEY, fallback)
            elif TIME_KEY not in ev:
                yield Reject(num, "no time: the time field is '-'", line)
                continue
            yield num, ev


def sample(lines: list[str], limit: int = 50) -> list[str]:
    """The non-blank lines among the first ``limit`` (what sniffers and detection look at)."""
    return [ln for ln in lines[:limit] if ln.strip()]


def match_share(regex: re.Pattern[str], lines: list[str]) -> float:
    """The share of ``lines`` that ``regex`` matches (0 for none)."""
    return sum(1 for ln in lines if regex.match(ln)) / len(lines) if lines else 0.0


class AccessLog(TextFormat):
    """What the nginx and Apache formats share: the user's format compiled once, else the
    built-in layout the first 50 lines match best. Subclasses set ``compile_user`` and ``detect``."""

    reads = ("log_format", "tz")

    @staticmethod
    def compile_user(text: str, zone: tzinfo) -> Compiled:
        """The user's ``--log-format`` compiled."""
        raise NotImplementedError

    @staticmethod
    def detect(lines: list[str], zone: tzinfo) -> tuple[Compiled, float]:
        """The built-in layout most of ``lines`` match, and the share they match."""
        raise NotImplementedError

    def compiled(self, head: list[str]) -> Compiled:
        """The template this input is read with: ``--log-format``, else the built-in ``head``
        (the first 50 lines) matches best."""
        zone = self.options.zone()
        if self.options.log_format:
            return type(self).compile_user(self.options.log_format, zone)
        return type(self).detect(sample(head), zone)[0]

    def parse(self, lines: Lines) -> Iterator[Item]:
        if self.options.log_format:
            yield from self.compiled([]).parse(lines, self.options.file_time)
            return
        it = iter(lines)
        head = list(islice(it, 50))
        yield from self.compiled([ln for _, ln in head]).parse(chain(head, it), self.options.file_time)
