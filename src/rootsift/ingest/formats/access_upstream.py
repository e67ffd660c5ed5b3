"""nginx upstream lists: one value per attempt, ``, `` between servers, `` : `` between groups.

``$upstream_response_time`` and friends list one value per upstream server tried
(``0.002, 0.004 : 0.001``: two servers of one upstream, then, after an internal
redirect, one of another). The rule: times and byte counts are summed over the
attempts, ``upstream_attempts`` counts them, ``upstream_addr`` / ``upstream_status``
keep the whole text and ``*_last`` holds the attempt that answered. ``-`` in a list
is an attempt without that value (no header received, say); ``-`` alone is no upstream.
"""

from __future__ import annotations

import re

from rootsift.ingest.formats.access_fields import MS_CACHE, Handler, seconds_to_ms
from rootsift.ingest.formats.base import Event

_UPSTREAM_SPLIT = re.compile(r", | : ")
"""Separators in nginx upstream lists: ``, `` between servers of one upstream, `` : ``
between upstream groups after an internal redirect."""


def upstream_items(text: str) -> list[str]:
    """``"0.002, 0.004 : 0.001"`` → ``["0.002", "0.004", "0.001"]`` (one per attempt)."""
    if "," not in text and " : " not in text:
        return [text]
    return _UPSTREAM_SPLIT.split(text)


def _attempts(ev: Event, n: int) -> None:
    prev = ev.get("upstream_attempts")
    if not isinstance(prev, int) or n > prev:
        ev["upstream_attempts"] = n


def upstream_time(key: str) -> Handler:
    """An upstream timing list → ``key`` = the sum of the attempts' times in ms."""
    cached = MS_CACHE.get

    def h(ev: Event, text: str) -> None:
        ms = cached(text)
        if ms is not None:  # one attempt, seen before: the common case, kept fast
            ev[key] = ms
            if "upstream_attempts" not in ev:
                ev["upstream_attempts"] = 1
            return
        if text == "-" or not text:
            return
        items = upstream_items(text)
        total, seen = 0.0, False
        for item in items:
            if item != "-":
                try:
                    total += seconds_to_ms(item)
                except ValueError:
                    raise ValueError(f"{text!r} is not a list of seconds") from None
                seen = True
        _attempts(ev, len(items))
        if seen:
            ev[key] = round(total, 6) if len(items) > 1 else total

    return h


def upstream_int(key: str) -> Handler:
    """An upstream byte-count list → ``key`` = the sum over the attempts."""

    def h(ev: Event, text: str) -> None:
        if text == "-" or not text:
            return
        items = upstream_items(text)
        nums = [int(i) for i in items if i != "-"]
        _attempts(ev, len(items))
        if nums:
            ev[key] = sum(nums)

    return h


def upstream_addr(ev: Event, text: str) -> None:
    """``$upstream_addr``: kept whole, plus the address of the attempt that answered."""
    if text == "-" or not text:
        return
    items = upstream_items(text)
    ev["upstream_addr"] = text
    ev["upstream_addr_last"] = items[-1]
    _attempts(ev, len(items))


def upstream_status(ev: Event, text: str) -> None:
    """``$upstream_status``: kept whole (text), plus the last attempt's status as an int."""
    if text == "-" or not text:
        return
    items = upstream_items(text)
    ev["upstream_status"] = text
    last = items[-1]
    if last.isdigit():
        ev["upstream_status_last"] = int(last)
    _attempts(ev, len(items))
