"""nginx access logs: ``combined``, ``main``, combined + timing, or any ``log_format``.

With ``--log-format`` the given format (or a built-in's name) is compiled and used for
every line. Without it the first lines choose among the built-ins below; a ``combined``
line followed by anything else (``rt=0.120 urt="0.002, 0.004"``, a quoted
``$http_x_forwarded_for``, ...) is read as combined plus a *tail* of ``key=value`` pairs
whose well-known keys (``rt``, ``uct``, ``uht``, ``urt``, ``ua``, ``us``, or the full
variable names) are converted like the variables they name.
"""

from __future__ import annotations

import re
from datetime import UTC, tzinfo
from functools import lru_cache

from rootsift.errors import UsageError
from rootsift.ingest.formats import register
from rootsift.ingest.formats.access_common import AccessLog, Compiled, Template, Var, make_handler, sample
from rootsift.ingest.formats.access_fields import Handler, unescape_nginx
from rootsift.ingest.formats.access_logformat import read_log_format, tokenize, variable
from rootsift.ingest.formats.base import Event

COMBINED = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"'
)
TIMING = ' rt=$request_time uct="$upstream_connect_time" uht="$upstream_header_time" urt="$upstream_response_time"'
BUILTINS = {
    "upstream_time": COMBINED + TIMING,  # the example in nginx's own documentation
    "main_timing": COMBINED + ' "$http_x_forwarded_for"' + TIMING,
    "main": COMBINED + ' "$http_x_forwarded_for"',  # nginx.conf as packaged by nginx.org
    "combined": COMBINED,
}
"""Formats tried on the first lines when no ``--log-format`` is given, most specific first."""
NGINX_ONLY = ("upstream_time", "main_timing", "main")

ALIASES = {
    "rt": "request_time",
    "uct": "upstream_connect_time",
    "uht": "upstream_header_time",
    "urt": "upstream_response_time",
    "ua": "upstream_addr",
    "us": "upstream_status",
    "ucs": "upstream_cache_status",
    "cs": "upstream_cache_status",
}
"""Short keys people use for timing variables in ``key=$var`` tails."""

_TAIL = re.compile(r'([A-Za-z_][\w.-]*)=(?:"([^"]*)"|(-|[^\s,"]*(?:(?:, | : )[^\s,"]+)*))|"([^"]*)"|(\S+)')


_ADDRESSES = re.compile(r"-\Z|[0-9A-Fa-f.:]+(?:, ?[0-9A-Fa-f.:]+)*\Z")


@lru_cache(maxsize=256)
def _tail_handler(key: str) -> Handler:
    name = ALIASES.get(key, key).lower().replace("-", "_").replace(".", "_")
    return make_handler(variable(name), unescape_nginx, UTC, True)


def read_tail(ev: Event, text: str) -> None:
    """``rt=0.1 urt="0.002, 0.004" "1.2.3.4"`` → fields.

    A first quoted list of addresses is ``$http_x_forwarded_for``; other unnamed values
    are kept as they are, space-separated, in ``extra``. A pair never overwrites a field the
    line's fixed part gave (``timestamp=…`` in a tail is not the request's time): it is
    kept as written in ``extra`` too.
    """
    extra: list[str] = []
    fixed = set(ev)
    for m in _TAIL.finditer(text):
        key, quoted, bare, lone_quoted, word = m.groups()
        if key is not None:
            fields: Event = {}
            _tail_handler(key)(fields, quoted if quoted is not None else bare)
            if fixed.isdisjoint(fields):
                ev.update(fields)
            else:
                extra.append(m.group(0))
        elif lone_quoted is not None and not extra and _ADDRESSES.match(lone_quoted):
            if lone_quoted != "-":  # as in nginx's "main": "$http_x_forwarded_for"
                ev["http_x_forwarded_for"] = lone_quoted
        else:
            extra.append(word if word is not None else f'"{lone_quoted}"')
    if extra:
        ev["extra"] = " ".join(extra)


TAIL: Template = (*tokenize(COMBINED), " ", Var("(the rest)", "extra", "custom", None, read_tail))


@lru_cache(maxsize=16)
def builtins(zone: tzinfo) -> dict[str, Compiled]:
    """The built-in formats compiled (the tail one last)."""
    out = {name: Compiled(name, tokenize(fmt), "default", zone) for name, fmt in BUILTINS.items()}
    out["combined_tail"] = Compiled("combined", TAIL, "default", zone)
    return out


def detect(lines: list[str], zone: tzinfo = UTC) -> tuple[Compiled, float]:
    """The built-in that matches most of ``lines`` (ties: the most specific) and its share of them."""
    best, best_n = builtins(zone)["combined"], -1
    for compiled in builtins(zone).values():
        n = sum(1 for ln in lines if compiled.regex.match(ln))
        if n > best_n:
            best, best_n = compiled, n
    return best, (best_n / len(lines) if lines else 0.0)


def compile_user(text: str, zone: tzinfo) -> Compiled:
    """A ``--log-format`` value (a built-in's name, a format string or a directive) compiled."""
    if text.strip() in BUILTINS:
        return Compiled(text.strip(), tokenize(BUILTINS[text.strip()]), "default", zone)
    name, escape, fmt = read_log_format(text)
    template = tokenize(fmt)
    if not any(isinstance(t, Var) for t in template):
        raise UsageError(f"--log-format {fmt!r} has no $variable (use nginx log_format syntax, or a format name)")
    return Compiled(name, template, escape, zone)


_NGINX_NAME = re.compile(r"nginx|openresty|ingress", re.I)
_OTHER_NAME = re.compile(r"apache|httpd|jetty|request\.log", re.I)


@register
class NginxAccess(AccessLog):
    """nginx access log (see the module docstring and docs/formats/access.md)."""

    name = "nginx"
    summary = "nginx access log: combined, main, combined + timing, or any nginx log_format (--log-format)"
    compile_user = staticmethod(compile_user)
    detect = staticmethod(detect)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        """Sure when most lines match a built-in; nginx-only shapes (timing, ``key=value`` tails) beat Apache."""
        lines = sample(lines)
        compiled, share = detect(lines)
        if share < 0.6:
            return 0.0
        if _NGINX_NAME.search(name):
            return 0.95 * share
        if compiled.name in NGINX_ONLY:
            return 0.9 * share
        if compiled.template is TAIL:
            tails = [m.group(m.lastindex or 0) for ln in lines if (m := compiled.regex.match(ln))]
            if any("=" in t or '"' in t for t in tails):
                return 0.85 * share
        # plain combined (or combined + a bare number) is Apache's as much as nginx's
        return (0.3 if _OTHER_NAME.search(name) else 0.7) * share
