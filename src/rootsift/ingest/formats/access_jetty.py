"""Jetty request logs: ``NCSARequestLog`` (common or extended) and ``CustomRequestLog``'s NCSA formats.

Jetty's NCSA writer (``AbstractNCSARequestLog``, Jetty 7-9) builds each line as::

    [server ]addr - user [dd/MMM/yyyy:HH:mm:ss Z] "METHOD URI PROTOCOL" status bytes␠
        ["referer" "agent"]            (extended)
        [ -| "name=value;..."]         (logCookies)
        [ dispatch_ms] [ latency_ms]   (logDispatch, Jetty 7/8; logLatency)

``bytes`` is followed by a space even in the common form (so a common line ends in a
space, and a latency follows two spaces); a negative byte count is written ``-``. The
address is the ``X-Forwarded-For`` header when ``preferProxiedForAddress`` is set (a
comma-separated list); ``logServer`` puts the server name first. Values are written
as they are, unescaped, so a user agent may hold a ``"``. ``CustomRequestLog.NCSA_FORMAT``
and ``EXTENDED_NCSA_FORMAT`` (Jetty 9.4+) give the same lines without the trailing space.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, tzinfo

from rootsift.ingest.formats import register
from rootsift.ingest.formats.access_common import sample
from rootsift.ingest.formats.access_fields import parse_clf_time, split_request
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

LINE = re.compile(
    r'(.+?) - (\S+) \[([^\]]+)\] "(.*?)" (-?\d+|Async) (-|\d+)'
    r'(?: ?"([^"]*)" "(.*?)")?'  # extended: referer, agent (lazy: the agent may hold a bare ")
    r'(?: {1,2}(-|"[^"]*"))?'  # cookies
    r"(?: {1,2}(-?\d+))?(?: (-?\d+))? ?\Z"  # dispatch and/or latency, ms
)
_NAME = re.compile(r"request\.log|jetty", re.I)
_COMMON_TRAIL = re.compile(r'" (?:-?\d+|Async) (?:\d+|-) (?: ?-?\d+)?\Z')


def read_line(m: re.Match[str], zone: tzinfo = UTC) -> Event:
    """The event for one matched line (raises ValueError for a bad time)."""
    head, user, when, request, status, size, referer, agent, cookies, lat1, lat2 = m.groups()
    ev: Event = {TIME_KEY: parse_clf_time(when, zone)}
    server, sep, addr = head.partition(" ")
    if sep and not server.endswith(","):  # "host 1.2.3.4", not "1.2.3.4, 5.6.7.8"
        ev["server_name"] = server
        head = addr
    ev["remote_addr"] = head
    if user != "-":
        ev["remote_user"] = user
    split_request(ev, request)
    if status != "Async":
        ev["status"] = int(status)
    if size != "-":
        ev["body_bytes_sent"] = int(size)
    if referer and referer != "-":
        ev["http_referer"] = referer
    if agent and agent != "-":
        ev["http_user_agent"] = agent
    if cookies and cookies != "-":
        ev["cookies"] = cookies.strip('"')
    if lat2 is not None:
        ev["handle_time_ms"] = float(lat1)
        ev["request_time_ms"] = float(lat2)
    elif lat1 is not None:
        ev["request_time_ms"] = float(lat1)
    return ev


@register
class JettyAccess(TextFormat):
    """Jetty NCSA request log (see the module docstring and docs/formats/access.md)."""

    name = "jetty"
    summary = "Jetty NCSARequestLog / CustomRequestLog NCSA request log (common or extended, optional latency)"
    reads = ("tz",)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        """Sure with a Jetty file name (``yyyy_mm_dd.request.log``) or Jetty-only shapes (a
        trailing space after the byte count, an ``Async`` status); else too unsure to pick."""
        lines = sample(lines)
        matched = [ln for ln in lines if LINE.match(ln)]
        share = len(matched) / len(lines) if lines else 0.0
        if share < 0.6:
            return 0.0
        if _NAME.search(name):
            return 0.95 * share
        if any(_COMMON_TRAIL.search(ln) for ln in matched) or any('" Async ' in ln for ln in matched):
            return 0.8 * share
        return 0.4 * share

    def parse(self, lines: Lines) -> Iterator[Item]:
        match = LINE.match
        zone = self.options.zone()
        for num, line in lines:
            m = match(line)
            if m is None:
                if line.strip():
                    yield Reject(num, _explain(line), line)
                continue
            try:
                yield num, read_line(m, zone)
            except ValueError as exc:
                yield Reject(num, str(exc), line)


def _explain(line: str) -> str:
    if " - " not in line:
        return "not a Jetty NCSA request line: no ' - ' after the client address"
    if not re.search(r" \[[^\]]+\] ", line):
        return "not a Jetty NCSA request line: no [time] after the user"
    if not re.search(r'\] ".*" (?:-?\d+|Async) ', line):
        return 'not a Jetty NCSA request line: no "request" and status after the time'
    return "not a Jetty NCSA request line: unexpected text after the byte count"
