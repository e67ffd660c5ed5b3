"""Reading an nginx ``log_format`` into a ``Template``.

Accepted: the format string itself (``$remote_addr - ...``), the same with a leading
``escape=json``, or a whole directive copied from nginx.conf (``log_format main
escape=default '$remote_addr ' '"$request"';``: the quoted pieces are joined, as nginx
does). Variables are ``$name`` and ``${name}``; a ``$`` not followed by a name is text.
"""

from __future__ import annotations

import re

from rootsift.errors import UsageError
from rootsift.ingest.formats.access_common import INT, ISO_TIME, NUM, UPSTREAM, Template, Var

CLF_TIME_VAR = r"\d{1,2}/[A-Za-z]{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}"

KNOWN: dict[str, tuple[str, str | None]] = {
    "time_local": ("clf_time", CLF_TIME_VAR),
    "time_iso8601": ("iso_time", ISO_TIME),
    "msec": ("epoch", r"\d+(?:\.\d+)?"),
    "request": ("request", None),
    "status": ("int", INT),
    "body_bytes_sent": ("bytes", INT),
    "bytes_sent": ("int", INT),
    "request_length": ("int", INT),
    "connection": ("int", INT),
    "connection_requests": ("int", INT),
    "pid": ("int", INT),
    "server_port": ("int", INT),
    "remote_port": ("int", INT),
    "upstream_addr": ("up_addr", UPSTREAM),
    "upstream_status": ("up_status", UPSTREAM),
    "upstream_bytes_received": ("up_int", UPSTREAM),
    "upstream_bytes_sent": ("up_int", UPSTREAM),
    "upstream_response_length": ("up_int", UPSTREAM),
    "remote_addr": ("str", r"\S+"),
    "realip_remote_addr": ("str", r"\S+"),
    "server_addr": ("str", r"\S+"),
}
"""nginx variables whose values have a known shape: (conversion kind, value regex)."""


def variable(name: str, source: str | None = None) -> Var:
    """The ``Var`` for nginx variable ``name``: its field, conversion and value pattern.

    ``*_time`` variables become ``*_time_ms`` (ms); upstream ones are lists summed over
    the attempts; ``$time_local`` / ``$time_iso8601`` become the event time; unknown
    variables are text fields named after the variable.
    """
    src = source or "$" + name
    if name in KNOWN:
        kind, pattern = KNOWN[name]
        return Var(src, name, kind, pattern)
    if name.endswith("_time"):
        if name.startswith("upstream_"):
            return Var(src, name + "_ms", "up_time", UPSTREAM)
        return Var(src, name + "_ms", "sec_ms", NUM)
    return Var(src, name, "str", None)


_VAR = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")


def tokenize(fmt: str) -> Template:
    """``'$a - [$b]'`` → ``(Var a, ' - [', Var b, ']')``."""
    out: list[str | Var] = []
    pos = 0
    for m in _VAR.finditer(fmt):
        if m.start() > pos:
            out.append(fmt[pos : m.start()])
        name = m.group(1) or m.group(2)
        out.append(variable(name, m.group()))
        pos = m.end()
    if pos < len(fmt):
        out.append(fmt[pos:])
    # literals split by a lone "$" are joined back
    merged: list[str | Var] = []
    for tok in out:
        if isinstance(tok, str) and merged and isinstance(merged[-1], str):
            merged[-1] += tok
        else:
            merged.append(tok)
    return tuple(merged)


_QUOTED_PIECE = re.compile(r"""'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|(\S+)""")
_CONF_ESC = re.compile(r"\\(.)")
_CONF_CHARS = {"t": "\t", "n": "\n", "r": "\r"}


def _conf_unescape(text: str) -> str:
    return _CONF_ESC.sub(lambda m: _CONF_CHARS.get(m.group(1), m.group(1)), text)


def _conf_args(text: str) -> list[str]:
    """The arguments of an nginx directive: quoted pieces unescaped, bare words as they are."""
    args: list[str] = []
    for m in _QUOTED_PIECE.finditer(text.strip().removesuffix(";")):
        quoted = m.group(1) if m.group(1) is not None else m.group(2)
        args.append(_conf_unescape(quoted) if quoted is not None else m.group(3))
    return args


def read_log_format(text: str) -> tuple[str, str, str]:
    """A user's ``log_format`` → (name, escape mode, format string).

    >>> read_log_format("log_format t escape=json '$a ' '$b';")
    ('t', 'json', '$a $b')
    """
    name, escape, stripped = "custom", "default", text.strip()
    directive = stripped.startswith("log_format") and stripped[10:11].isspace()
    if directive or stripped.startswith("'"):
        args = _conf_args(stripped[10:] if directive else stripped)
        if directive:
            if len(args) < 2:
                raise UsageError("--log-format: a log_format directive is: log_format NAME [escape=...] 'FORMAT' ...;")
            name, args = args[0], args[1:]
        if args and args[0].startswith("escape=") and len(args) > 1:
            escape, args = args[0].removeprefix("escape="), args[1:]
        fmt = "".join(args)  # nginx joins the pieces as they are
    else:
        fmt = text.strip("\r\n")
        if fmt.startswith("escape="):
            head, _, fmt = fmt.partition(" ")
            escape = head.removeprefix("escape=")
    if escape not in ("default", "json", "none"):
        raise UsageError(f"--log-format: escape={escape} is not default, json or none")
    if "$" not in fmt:
        raise UsageError(f"--log-format {fmt!r} has no $variable (use nginx log_format syntax, or a format name)")
    return name, escape, fmt
