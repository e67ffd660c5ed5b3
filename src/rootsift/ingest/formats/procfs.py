"""Linux /proc snapshots: meminfo, slabinfo, cgroups, vmstat, pressure/*, loadavg, stat,
diskstats, zoneinfo, net/sockstat, net/tcp and PID/status.

One input file is one snapshot (``cat /proc/meminfo > meminfo_$(date +%Y-%m-%d.%H:%M)``).
Which /proc file it is comes from its first line when that is distinctive, else from a
word in its name; its time from the name (``snapshot_paths``), else the file's mtime. The
readers of each kind live in ``procfs_keyed``, ``procfs_tables`` and ``procfs_system``.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import PurePath

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.formats.procfs_keyed import cgroups, meminfo, sockstat, status
from rootsift.ingest.formats.procfs_system import diskstats, loadavg, pressure, stat, vmstat, zoneinfo
from rootsift.ingest.formats.procfs_tables import slabinfo, tcp
from rootsift.ingest.formats.snapshot_paths import host_from_path, time_from_path
from rootsift.ingest.rejects import Reject

Reader = Callable[[Lines, Event], Iterator[Item]]
READERS: dict[str, Reader] = {
    "meminfo": meminfo,
    "slabinfo": slabinfo,
    "cgroups": cgroups,
    "sockstat": sockstat,
    "tcp": tcp,
    "status": status,
    "vmstat": vmstat,
    "pressure": pressure,
    "loadavg": loadavg,
    "stat": stat,
    "diskstats": diskstats,
    "zoneinfo": zoneinfo,
}
_NAME_WORDS = {
    "meminfo": "meminfo",
    "slabinfo": "slabinfo",
    "cgroups": "cgroups",
    "sockstat": "sockstat",
    "sockstat6": "sockstat",
    "tcp": "tcp",
    "tcp6": "tcp",
    "status": "status",
    "vmstat": "vmstat",
    "pressure": "pressure",
    "loadavg": "loadavg",
    "diskstats": "diskstats",
    "zoneinfo": "zoneinfo",
}
"""File-name words that say the kind. Not ``stat``: /proc/PID/stat is another file; the
system-wide stat is known by its first line."""
PRESSURE_RESOURCES = ("cpu", "memory", "io", "irq")
"""The resources of /proc/pressure, named by the file (``pressure/memory``)."""
_UNREAD = frozenset({"udp", "udp6", "udplite", "udplite6", "raw", "raw6", "unix"})
"""/proc/net socket tables that look like net/tcp but are not read (their states differ)."""
_WORDS = re.compile(r"[a-z0-9]+")
_SOCKSTAT = re.compile(r"(?:sockets: used|(?:TCP|UDP|UDPLITE|RAW|FRAG)6?: inuse) ")
_TCP_HEAD = re.compile(r"\s*sl\s+local_address\s+rem(?:ote)?_address\s+st\s")
_PRESSURE_HEAD = re.compile(r"(?:some|full) avg10=\d")
_LOADAVG = re.compile(r"\d+\.\d+ \d+\.\d+ \d+\.\d+ \d+/\d+ \d+")
_STAT_HEAD = re.compile(r"cpu(?: +\d+){4,10}")
_DISK_ROW = re.compile(r"\s*\d+\s+\d+\s+\S+(?:(?:\s+\d+){4}|(?:\s+\d+){11}|(?:\s+\d+){15}|(?:\s+\d+){17})")
_ZONE_HEAD = re.compile(r"Node \d+, zone\s+\S+")


def kind_from_name(source: str) -> str | None:
    """The kind named by a word of the file's name (``meminfo_2020-01-02.10:15`` → meminfo,
    ``net_tcp6`` → tcp), ``"unread"`` for socket tables not read, or None."""
    path = PurePath(source)
    words = _WORDS.findall(path.name.lower())
    for word in words:
        if word in _NAME_WORDS:
            return _NAME_WORDS[word]
    if path.parent.name == "pressure" and path.name in PRESSURE_RESOURCES:
        return "pressure"
    return "unread" if any(w in _UNREAD for w in words) else None


def kind_from_content(first: str) -> str | None:
    """The kind whose first line ``first`` (the first non-blank line) is, or None."""
    if first.startswith(("MemTotal:", "MemFree:")) or (first.startswith("Node ") and " MemTotal:" in first):
        return "meminfo"
    if first.startswith("slabinfo - version:"):
        return "slabinfo"
    if first.startswith("#subsys_name"):
        return "cgroups"
    if _SOCKSTAT.match(first):
        return "sockstat"
    if _TCP_HEAD.match(first):
        return "tcp"
    if first.startswith("Name:"):
        return "status"
    if _PRESSURE_HEAD.match(first):
        return "pressure"
    if _LOADAVG.fullmatch(first):
        return "loadavg"
    if _STAT_HEAD.fullmatch(first):
        return "stat"
    if first.startswith("nr_free_pages "):
        return "vmstat"
    if _ZONE_HEAD.fullmatch(first):
        return "zoneinfo"
    if _DISK_ROW.fullmatch(first):
        return "diskstats"
    return None


def resource_from_name(source: str) -> str | None:
    """The resource a pressure file is of: a word of its name (``pressure/memory`` →
    memory, ``pressure_io_2024-01-01T10:00`` → io), or None."""
    words = _WORDS.findall(PurePath(source).name.lower())
    return next((w for w in words if w in PRESSURE_RESOURCES), None)


@register
class ProcfsFormat(TextFormat):
    """Linux /proc snapshot files, one event per snapshot (per cache, per controller)."""

    name = "procfs"
    summary = (
        "Linux /proc snapshots: meminfo, slabinfo, cgroups, vmstat, pressure/*, loadavg, stat, diskstats, "
        "zoneinfo, net/sockstat, net/tcp(6), PID/status"
    )
    reads = ("host", "tz")

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        first = next((ln for ln in lines if ln.strip()), "")
        kind = kind_from_content(first)
        if kind == "status":
            return 0.9 if any(ln.startswith(("State:", "Pid:", "VmRSS:")) for ln in lines[:20]) else 0.4
        if kind == "diskstats":  # rows of numbers around a name: sure only when most rows are
            rows = [ln for ln in lines[:50] if ln.strip()]
            good = sum(bool(_DISK_ROW.fullmatch(ln)) for ln in rows)
            return 0.9 if good > 1 and good >= 0.8 * len(rows) else 0.4
        if kind is not None:
            return 0.95
        return 0.3 if kind_from_name(name) not in (None, "unread") else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        it = iter(lines)
        head: list[tuple[int, str]] = []
        for n, line in it:
            head.append((n, line))
            if line.strip():
                break
        if not head or not head[-1][1].strip():
            return
        first_n, first = head[-1]
        source = self.options.source
        named = kind_from_name(source)
        kind = kind_from_content(first.strip()) or named
        if kind == "tcp" and named == "unread":
            kind = "unread"
        if kind not in READERS:
            yield from self._unknown(first_n, first, source, kind, it)
            return
        base: Event = {TIME_KEY: time_from_path(source, self.options.zone()) or self.options.file_time(), "kind": kind}
        host = self.options.host or host_from_path(source)
        if host:
            base["host"] = host
        if kind == "pressure" and (resource := resource_from_name(source)):
            base["resource"] = resource
        yield from READERS[kind](itertools.chain(head, it), base)

    @staticmethod
    def _unknown(first_n: int, first: str, source: str, kind: str | None, rest: Lines) -> Iterator[Reject]:
        name = PurePath(source).name
        if kind == "unread":
            reason = f"{name} is a /proc/net socket table other than tcp/tcp6, which procfs does not read"
        else:
            reason = (
                f"cannot tell which /proc file {name!r} is: its name names none of "
                f"{', '.join(READERS)} and its first line is none of theirs"
            )
        yield Reject(first_n, reason, first)
        for n, line in rest:
            if line.strip():
                yield Reject(n, f"{reason} (see line {first_n})", line)
