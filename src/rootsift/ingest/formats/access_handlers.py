"""Handlers: what each kind of access-log variable writes into an event.

A ``Var`` names one variable of a log format and how its text is converted;
``make_handler`` returns the function that does it (see ``access_fields`` for the
conversions themselves).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo

from rootsift.ingest.formats import access_fields as af
from rootsift.ingest.formats import access_upstream as up
from rootsift.ingest.formats.base import TIME_KEY, Event


@dataclass(frozen=True)
class Var:
    """One variable of a log format."""

    source: str
    """As written in the format (``$status``, ``%>s``), for messages."""
    key: str
    """The event field it fills (for ``time``/``request`` kinds: several fields)."""
    kind: str = "str"
    """How its text is converted: see ``make_handler``."""
    pattern: str | None = None
    """Regex of its values, used when no quote delimits it."""
    handler: af.Handler | None = field(default=None, compare=False)
    """A ready-made handler (kind ``custom``), for values only one format knows how to read."""


def make_handler(var: Var, unescape: Callable[[str], str], zone: tzinfo, has_time: bool) -> af.Handler:
    """The handler that writes ``var``'s fields into an event.

    Kinds: ``str`` (text, escapes undone), ``int``, ``bytes`` (``-`` is 0), ``float``,
    ``sec_ms`` / ``us_ms`` / ``ms`` (a duration → ``key`` in ms), ``clf_time`` /
    ``iso_time`` / ``epoch`` (the event's time), ``request`` (method, path, query,
    protocol), ``up_time`` / ``up_int`` / ``up_addr`` / ``up_status`` (nginx upstream
    lists), ``qmark`` (Apache ``%q``: the query without its ``?``), ``strftime:FMT``.
    """
    key, kind = var.key, var.kind
    if var.handler is not None:
        return var.handler
    if kind == "str":

        def h(ev: Event, v: str) -> None:
            if v != "-" and v:
                ev[key] = unescape(v) if "\\" in v else v

    elif kind in ("int", "bytes", "float"):
        conv: Callable[[str], object] = float if kind == "float" else int
        absent = 0 if kind == "bytes" else None

        def h(ev: Event, v: str) -> None:
            if v == "-" or not v:
                if absent is not None:
                    ev[key] = absent
                return
            try:
                ev[key] = conv(v)
            except ValueError:
                raise ValueError(f"{var.source} {v!r} is not a number") from None

    elif kind == "sec_ms":
        cached, to_ms = af.MS_CACHE.get, af.seconds_to_ms

        def h(ev: Event, v: str) -> None:
            ms = cached(v)
            if ms is not None:
                ev[key] = ms
            elif v != "-" and v:
                try:
                    ev[key] = to_ms(v)
                except ValueError:
                    raise ValueError(f"{var.source} {v!r} is not a duration") from None

    elif kind in ("us_ms", "ms"):
        div = 1000.0 if kind == "us_ms" else 1.0  # a division rounds correctly: 1234 µs → 1.234

        def h(ev: Event, v: str) -> None:
            if v == "-" or not v:
                return
            try:
                ev[key] = float(v) / div
            except ValueError:
                raise ValueError(f"{var.source} {v!r} is not a duration") from None

    elif kind == "clf_time":

        def h(ev: Event, v: str) -> None:
            ev[TIME_KEY] = af.parse_clf_time(v, zone)

    elif kind == "iso_time":

        def h(ev: Event, v: str) -> None:
            ev[TIME_KEY] = af.parse_iso_time(v, zone)

    elif kind == "epoch" and not has_time:

        def h(ev: Event, v: str) -> None:
            try:
                ev[TIME_KEY] = datetime.fromtimestamp(float(v), UTC)
            except (ValueError, OverflowError, OSError):
                raise ValueError(f"{var.source} {v!r} is not epoch seconds") from None

    elif kind == "epoch":
        return make_handler(Var(var.source, key, "float"), unescape, zone, has_time)
    elif kind in ("epoch_ms", "epoch_us"):
        div = 1e3 if kind == "epoch_ms" else 1e6

        def h(ev: Event, v: str) -> None:
            try:
                ev[TIME_KEY] = datetime.fromtimestamp(int(v) / div, UTC)
            except (ValueError, OverflowError, OSError):
                raise ValueError(f"{var.source} {v!r} is not an epoch time") from None
    elif kind.startswith("strftime:"):
        fmt = kind.removeprefix("strftime:")
        cache: dict[str, datetime] = {}

        def h(ev: Event, v: str) -> None:
            dt = cache.get(v)
            if dt is None:
                try:
                    dt = datetime.strptime(v, fmt)
                except ValueError:
                    raise ValueError(f"{var.source} {v!r} is not a time in the form {fmt}") from None
                dt = dt if dt.tzinfo else dt.replace(tzinfo=zone)
                if len(cache) >= 4096:
                    cache.clear()
                cache[v] = dt
            ev[TIME_KEY] = dt

    elif kind == "request":

        def h(ev: Event, v: str) -> None:
            af.split_request(ev, v, unescape)

    elif kind == "qmark":

        def h(ev: Event, v: str) -> None:
            if v.startswith("?"):
                ev[key] = v[1:]

    else:
        simple = {"up_addr": up.upstream_addr, "up_status": up.upstream_status}
        made = {"up_time": up.upstream_time, "up_int": up.upstream_int}
        if kind in simple:
            return simple[kind]
        if kind in made:
            return made[kind](key)
        raise ValueError(f"unknown value kind {kind!r} for {var.source}")
    return h
