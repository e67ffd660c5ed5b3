"""Value conversions shared by the access-log formats (nginx, Apache, Jetty).

Each conversion is a *handler*: ``handler(event, text)`` writes the fields one log
value stands for into ``event`` (a time, a request split into its parts, a duration in
milliseconds, an upstream list summed over its attempts) and raises ``ValueError``
naming the problem when the text cannot be that value. ``-`` is how every server
writes an absent value, so it produces no field (``body_bytes_sent`` excepted: 0).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from rootsift.ingest.formats.base import Event

Handler = Callable[[Event, str], None]

MONTHS = {
    m: i for i, m in enumerate(["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1)
}
_CACHE_MAX = 4096
_OFFSETS: dict[str, tzinfo] = {}
_CLF_CACHE: dict[str, datetime] = {}
_ISO_CACHE: dict[str, datetime] = {}


def _offset(text: str) -> tzinfo:
    """``+0200`` → a fixed-offset zone (cached: a log has one or two offsets)."""
    tz = _OFFSETS.get(text)
    if tz is None:
        if len(text) != 5 or text[0] not in "+-" or not text[1:].isdigit():
            raise ValueError(f"time offset {text!r} is not +HHMM")
        minutes = int(text[1:3]) * 60 + int(text[3:5])
        tz = UTC if minutes == 0 else timezone(timedelta(minutes=-minutes if text[0] == "-" else minutes))
        _OFFSETS[text] = tz
    return tz


def parse_clf_time(text: str, zone: tzinfo = UTC) -> datetime:
    """``10/Oct/2000:13:55:36 -0700`` (the common log format time) → an aware datetime.

    Without an offset the time is read in ``zone``. Results are cached by text: a busy
    log repeats the same second many times.
    """
    dt = _CLF_CACHE.get(text)
    if dt is not None:
        return dt
    try:
        day, mon, rest = text.split("/", 2)
        year, hh, mm, ss = rest[:4], rest[5:7], rest[8:10], rest[11:13]
        if rest[4] != ":" or rest[7] != ":" or rest[10] != ":":
            raise ValueError
        tz = _offset(rest[14:]) if len(rest) > 13 else zone
        dt = datetime(int(year), MONTHS[mon], int(day), int(hh), int(mm), int(ss), tzinfo=tz)
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"time {text!r} is not dd/Mon/yyyy:HH:MM:SS +HHMM") from exc
    if len(rest) <= 13:  # no offset, read in the caller's zone: not cacheable by text alone
        return dt
    if len(_CLF_CACHE) >= _CACHE_MAX:
        _CLF_CACHE.clear()
    _CLF_CACHE[text] = dt
    return dt


def parse_iso_time(text: str, zone: tzinfo = UTC) -> datetime:
    """``2024-03-01T12:00:00+00:00`` (nginx ``$time_iso8601``) → an aware datetime (cached)."""
    dt = _ISO_CACHE.get(text)
    if dt is not None:
        return dt
    try:
        dt = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"time {text!r} is not ISO 8601") from exc
    if dt.tzinfo is None:
        return dt.replace(tzinfo=zone)  # read in the caller's zone: not cacheable by text alone
    if len(_ISO_CACHE) >= _CACHE_MAX:
        _ISO_CACHE.clear()
    _ISO_CACHE[text] = dt
    return dt


MS_CACHE: dict[str, float] = {}


def seconds_to_ms(text: str) -> float:
    """``0.007`` seconds → ``7.0`` ms, exact for nginx's three decimals (no ``7.000000000000001``).

    Cached by text: durations in milliseconds take a few thousand distinct values.
    """
    ms = MS_CACHE.get(text)
    if ms is None:
        whole, dot, frac = text.partition(".")
        if dot and len(frac) == 3 and whole.isdigit() and frac.isdigit():
            ms = float(whole + frac)
        else:
            ms = round(float(text) * 1000.0, 6)
            if not math.isfinite(ms):
                raise ValueError(f"{text!r} is not a finite number of seconds")
        if len(MS_CACHE) >= 65536:
            MS_CACHE.clear()
        MS_CACHE[text] = ms
    return ms


# --- escapes -------------------------------------------------------------------------

_X_RUN = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+")
_APACHE_ESC = re.compile(r"(?:\\x[0-9A-Fa-f]{2})+|\\(.)")
_APACHE_CHARS = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "v": "\v", "f": "\f"}


def _x_bytes(run: str) -> str:
    # a run of \xHH is decoded together so multi-byte UTF-8 characters come back whole;
    # bytes that are not UTF-8 (a cp1251 referer, a TLS probe) stay visible as \xHH
    return bytes.fromhex(run.replace("\\x", "")).decode("utf-8", "backslashreplace")


def unescape_nginx(text: str) -> str:
    """Undo nginx's default ``escape``: ``\\xHH`` for ``"``, ``\\``, control and non-ASCII bytes."""
    return _X_RUN.sub(lambda m: _x_bytes(m.group()), text) if "\\x" in text else text


def unescape_apache(text: str) -> str:
    """Undo Apache's log escaping: ``\\"``, ``\\\\``, ``\\n``/``\\t``/... and ``\\xhh``."""

    def one(m: re.Match[str]) -> str:
        ch = m.group(1)
        if ch is None:
            return _x_bytes(m.group())
        return _APACHE_CHARS.get(ch, ch)

    return _APACHE_ESC.sub(one, text)


def unescape_json(text: str) -> str:
    """Undo nginx ``escape=json`` (JSON string escapes); text that is not valid JSON is kept."""
    try:
        value = json.loads('"' + text + '"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text


UNESCAPE: dict[str, Callable[[str], str]] = {
    "default": unescape_nginx,
    "apache": unescape_apache,
    "json": unescape_json,
    "none": lambda s: s,
}


# --- the request line -----------------------------------------------------------------


def split_request(ev: Event, text: str, unescape: Callable[[str], str] | None = None) -> None:
    """``GET /a?b=1 HTTP/1.1`` → method, path, query (after ``?``), protocol.

    A request line that does not split (a TLS handshake sent to a plain-HTTP port, a
    truncated line, an empty request) is kept whole under ``request``, as written in
    the log (escapes kept): it is a real event, not a reject. ``unescape`` is applied to
    the parts of a request that splits.
    """
    raw = text
    if unescape is not None and "\\" in text:
        text = unescape(text)
    method, sep, rest = text.partition(" ")
    if sep and method.isascii() and method.isupper():
        target, sep, protocol = rest.rpartition(" ")
        if not (sep and protocol.startswith("HTTP/")):
            target, protocol = rest, ""  # HTTP/0.9 has no protocol
        if target and (protocol or " " not in target):
            ev["method"] = method
            path, q, query = target.partition("?")
            ev["path"] = path
            if q:
                ev["query"] = query
            if protocol:
                ev["protocol"] = protocol
            return
    if raw and raw != "-":
        ev["request"] = raw
