"""Apache httpd access logs: ``common``, ``combined`` (optionally + ``%D`` or ``%T``), or any ``LogFormat``.

Fields are named as nginx names the same values (``%h`` → ``remote_addr``, ``%b`` →
``body_bytes_sent``, ``%{Referer}i`` → ``http_referer``), so Apache and nginx logs can
be queried together. Apache escapes ``"`` and ``\\`` in logged values (``\\"``,
``\\\\``, ``\\xhh``); quoted values are read with those escapes and unescaped.
"""

from __future__ import annotations

import re
from datetime import UTC, tzinfo
from functools import lru_cache

from rootsift.errors import UsageError
from rootsift.ingest.formats import register
from rootsift.ingest.formats.access_common import CLF_TIME, INT, NUM, AccessLog, Compiled, Template, Var, sample

# directive letter → (field, kind, value regex)
DIRECTIVES: dict[str, tuple[str, str, str | None]] = {
    "h": ("remote_addr", "str", r"\S+"),
    "a": ("client_ip", "str", r"\S+"),
    "A": ("server_addr", "str", r"\S+"),
    "l": ("ident", "str", r"\S+"),
    "u": ("remote_user", "str", None),
    "r": ("request", "request", None),
    "s": ("status", "int", INT),
    "b": ("body_bytes_sent", "bytes", INT),
    "B": ("body_bytes_sent", "int", INT),
    "O": ("bytes_sent", "int", INT),
    "I": ("request_length", "int", INT),
    "S": ("bytes_transferred", "int", INT),
    "D": ("request_time_ms", "us_ms", INT),
    "T": ("request_time_ms", "sec_ms", NUM),
    "v": ("server_name", "str", r"[^\s:]+"),
    "V": ("host", "str", r"[^\s:]+"),
    "p": ("server_port", "int", INT),
    "P": ("pid", "int", INT),
    "f": ("request_filename", "str", None),
    "H": ("server_protocol", "str", r"\S+"),
    "m": ("method", "str", r"\S+"),
    "U": ("path", "str", None),
    "q": ("query", "qmark", r"\S*"),
    "X": ("connection_status", "str", r"[X+-]"),
    "k": ("keepalive_requests", "int", INT),
    "L": ("log_id", "str", r"\S+"),
    "R": ("handler", "str", None),
}
HEADER_PREFIX = {"i": "http_", "o": "sent_http_", "C": "cookie_", "e": "env_", "n": "note_"}
BRACE_NAMED = {
    ("c", "a"): "peer_ip",
    ("remote", "p"): "remote_port",
    ("local", "p"): "local_port",
    ("canonical", "p"): "server_port",
    ("tid", "P"): "tid",
    ("hextid", "P"): "tid",
}
TIME_UNITS = {"ms": "ms", "us": "us_ms", "s": "sec_ms"}
EPOCHS = {"sec": ("epoch", r"\d+"), "msec": ("epoch_ms", r"\d+"), "usec": ("epoch_us", r"\d+")}

_DIRECTIVE = re.compile(r"%(?:!?\d+(?:,\d+)*)?([<>]?)(?:\{([^}]*)\})?([<>]?)([a-zA-Z%]|\^t[io])")


def _snake(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def directive(param: str | None, letter: str, source: str) -> list[str | Var]:
    """The template pieces for one ``%...`` directive (``%t`` brings its own brackets)."""
    if letter == "t":
        if param is None:
            return ["[", Var(source, "timestamp", "clf_time", CLF_TIME), "]"]
        fmt = param.removeprefix("begin:").removeprefix("end:")
        if fmt in EPOCHS:
            return [Var(source, "timestamp", *EPOCHS[fmt])]
        if fmt in ("msec_frac", "usec_frac"):
            return [Var(source, "time_" + fmt, "str", r"\d+")]
        return [Var(source, "timestamp", "strftime:" + fmt, None)]
    if letter == "T" and param in TIME_UNITS:
        return [Var(source, "request_time_ms", TIME_UNITS[param], NUM)]
    if param is not None and letter in HEADER_PREFIX:
        return [Var(source, HEADER_PREFIX[letter] + _snake(param), "str", None)]
    if param is not None and (param, letter) in BRACE_NAMED:
        key = BRACE_NAMED[(param, letter)]
        return [Var(source, key, "int" if key != "peer_ip" else "str", INT if key != "peer_ip" else r"\S+")]
    if letter in DIRECTIVES:
        key, kind, pattern = DIRECTIVES[letter]
        return [Var(source, key, kind, pattern)]
    return [Var(source, "apache_" + _snake(letter + (param or "")), "str", None)]


def tokenize(fmt: str) -> Template:
    """An Apache ``LogFormat`` string → a ``Template``."""
    out: list[str | Var] = []
    pos = 0
    for m in _DIRECTIVE.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        if m.group(4) == "%":
            out.append("%")
        else:
            out.extend(directive(m.group(2), m.group(4), m.group()))
    out.append(fmt[pos:])
    merged: list[str | Var] = []
    for tok in out:
        if isinstance(tok, str) and merged and isinstance(merged[-1], str):
            merged[-1] += tok
        elif tok != "":
            merged.append(tok)
    return tuple(merged)


_CONF_ESC = re.compile(r"\\(.)")


def read_log_format(text: str) -> tuple[str, str]:
    """A ``LogFormat`` directive or string (as written in httpd.conf, ``\\"`` and all) → (name, format)."""
    text = text.strip()
    name = "custom"
    if text.startswith(("LogFormat ", "CustomLog ")):
        m = re.match(r'\w+\s+(?:\S+\s+)?"((?:[^"\\]|\\.)*)"\s*(\S*)', text)
        if m is None:
            raise UsageError('--log-format: a LogFormat directive is: LogFormat "FORMAT" [name]')
        text, name = m.group(1), m.group(2) or name
    elif len(text) > 1 and text[0] == text[-1] == '"':
        text = text[1:-1]
    if "\\" in text:
        text = _CONF_ESC.sub(lambda m: {"t": "\t", "n": "\n"}.get(m.group(1), m.group(1)), text)
    if "%" not in text:
        raise UsageError(f"--log-format {text!r} has no %directive (use Apache LogFormat syntax, or a format name)")
    return name, text


COMMON = '%h %l %u %t "%r" %>s %b'
COMBINED = COMMON + ' "%{Referer}i" "%{User-Agent}i"'
BUILTINS = {
    "combinedio": COMBINED + " %I %O",
    "combined_D": COMBINED + " %D",
    "combined": COMBINED,
    "vhost_combined": '%v:%p %h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i"',
    "common_D": COMMON + " %D",
    "common": COMMON,
}
"""Formats tried on the first lines when no ``--log-format`` is given, most specific first.
A trailing number is ``%D`` (µs) unless the sample says ``%T`` (see ``detect``)."""


@lru_cache(maxsize=16)
def builtins(zone: tzinfo) -> dict[str, Compiled]:
    return {name: Compiled(name, tokenize(fmt), "apache", zone) for name, fmt in BUILTINS.items()}


def detect(lines: list[str], zone: tzinfo = UTC) -> tuple[Compiled, float]:
    """The built-in matching most of ``lines`` and its share; a trailing number that is
    always small (≤ 60) and sometimes 0 is taken as ``%T`` seconds, else ``%D`` µs."""
    best, best_n = builtins(zone)["combined"], -1
    for compiled in builtins(zone).values():
        n = sum(1 for ln in lines if compiled.regex.match(ln))
        if n > best_n:
            best, best_n = compiled, n
    if best.name.endswith("_D"):
        last = [int(m.group(m.lastindex or 0)) for ln in lines if (m := best.regex.match(ln))]
        if last and max(last) <= 60 and 0 in last:
            fmt = BUILTINS[best.name].replace("%D", "%T")
            best = Compiled(best.name.replace("_D", "_T"), tokenize(fmt), "apache", zone)
    return best, (best_n / len(lines) if lines else 0.0)


def compile_user(text: str, zone: tzinfo) -> Compiled:
    """A ``--log-format`` value (a built-in's name, a LogFormat string or directive) compiled."""
    named = {**BUILTINS, "combined_T": COMBINED + " %T", "common_T": COMMON + " %T"}
    if text.strip() in named:
        return Compiled(text.strip(), tokenize(named[text.strip()]), "apache", zone)
    name, fmt = read_log_format(text)
    return Compiled(name, tokenize(fmt), "apache", zone)


_APACHE_NAME = re.compile(r"apache|httpd|access_log", re.I)
_OTHER_NAME = re.compile(r"nginx|jetty|request\.log", re.I)


@register
class ApacheAccess(AccessLog):
    """Apache httpd access log (see the module docstring and docs/formats/access.md)."""

    name = "apache"
    summary = "Apache httpd access log: common, combined (+ %D / %T), vhost_combined, or any LogFormat (--log-format)"
    compile_user = staticmethod(compile_user)
    detect = staticmethod(detect)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        """Sure when most lines match a built-in; plain ``combined`` goes to Apache unless the name says nginx/jetty."""
        _, share = detect(sample(lines))
        if share < 0.6:
            return 0.0
        if _APACHE_NAME.search(name):
            return 0.95 * share
        return (0.3 if _OTHER_NAME.search(name) else 0.75) * share
