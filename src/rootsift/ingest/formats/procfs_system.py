"""The system-wide /proc counters: pressure/*, loadavg, stat, vmstat, diskstats and zoneinfo.

Each reader takes the numbered lines of one file and the fields every event of the file
carries (time, kind, host, and ``resource`` for pressure) and yields events and rejects.
Units follow docs/formats.md: times in milliseconds (``*_ms``), sizes in bytes, page
counts as the kernel gives them (``*_pages`` where the name alone would not say so).
See docs/formats/procfs.md for the fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rootsift.ingest.formats.base import Event, Item, Lines
from rootsift.ingest.formats.procfs_keyed import snake
from rootsift.ingest.rejects import Reject

USER_HZ = 100
"""Clock ticks per second of /proc/stat's cpu times: the kernel's userspace ABI fixes
USER_HZ at 100 on every mainstream architecture (x86, arm, arm64, ppc, s390, riscv)."""
SECTOR_BYTES = 512
"""/proc/diskstats counts sectors of 512 bytes whatever the device's own sector size."""

_INT = re.compile(r"-?(?:0|[1-9]\d*)")
_PRESSURE = re.compile(r"(some|full) avg10=(\d+\.\d+) avg60=(\d+\.\d+) avg300=(\d+\.\d+) total=(\d+)")
_LOADAVG = re.compile(r"(\d+\.\d+) (\d+\.\d+) (\d+\.\d+) (\d+)/(\d+) (\d+)")
STAT_CPU = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice")
"""The columns of a /proc/stat cpu line, in ticks of USER_HZ (kernels before 2.6.11 print fewer)."""
_STAT_TOTALS = {"intr": "intr_total", "softirq": "softirq_total"}
_STAT_PAIRS = {"page": ("page_in", "page_out"), "swap": ("swap_in", "swap_out")}  # 2.4 kernels
DISK_COLUMNS = (
    ("reads_completed", "reads_merged", "sectors_read", "read_ms")
    + ("writes_completed", "writes_merged", "sectors_written", "write_ms")
    + ("ios_in_progress", "io_ms", "weighted_io_ms")
    + ("discards_completed", "discards_merged", "sectors_discarded", "discard_ms")  # 4.18+
    + ("flushes_completed", "flush_ms")  # 5.5+
)
"""The statistics of a /proc/diskstats row after major, minor and name (Documentation/admin-guide/iostats.rst)."""
_DISK_PARTITION_OLD = ("reads_completed", "sectors_read", "writes_completed", "sectors_written")
"""The four statistics a partition row had before 2.6.25."""
_ZONE = re.compile(r"Node (\d+), zone\s+(\S+)")
_ZONE_PAGES = frozenset({"boost", "min", "low", "high", "promo", "spanned", "present", "managed", "cma"})
"""A zone's watermarks and sizes, in pages: stored as ``<name>_pages``."""


def _bad(n: int, reason: str, line: str) -> Reject:
    return Reject(n, reason, line)


def pressure(lines: Lines, base: Event) -> Iterator[Item]:
    """One event per pressure file: ``some_``/``full_`` ``avg10_pct``, ``avg60_pct``,
    ``avg300_pct`` (share of wall time stalled, in percent) and ``total_ms`` (stall time
    since boot)."""
    ev = dict(base)
    first = 0
    for n, line in lines:
        text = line.strip()
        if not text:
            continue
        m = _PRESSURE.fullmatch(text)
        if m is None:
            yield _bad(n, "pressure line is not 'some|full avg10=X avg60=X avg300=X total=N'", line)
            continue
        which = m.group(1)
        if which + "_total_ms" in ev:
            yield _bad(n, f"pressure {which} appears twice", line)
            continue
        for span, value in zip(("avg10", "avg60", "avg300"), m.group(2, 3, 4)):
            ev[f"{which}_{span}_pct"] = float(value)
        ev[which + "_total_ms"] = int(m.group(5)) / 1000  # the kernel counts microseconds
        first = first or n
    if first:
        yield first, ev


def loadavg(lines: Lines, base: Event) -> Iterator[Item]:
    """One event: ``load1``, ``load5``, ``load15``, ``procs_runnable``, ``procs_total``, ``last_pid``."""
    first = 0
    for n, line in lines:
        text = line.strip()
        if not text:
            continue
        if first:
            yield _bad(n, f"a loadavg snapshot is one line (line {first} was read): save each in its own file", line)
            continue
        m = _LOADAVG.fullmatch(text)
        if m is None:
            yield _bad(n, "loadavg is not 'load1 load5 load15 runnable/total last_pid'", line)
            continue
        first = n
        load1, load5, load15, runnable, total, last = m.groups()
        yield (
            n,
            {
                **base,
                "load1": float(load1),
                "load5": float(load5),
                "load15": float(load15),
                "procs_runnable": int(runnable),
                "procs_total": int(total),
                "last_pid": int(last),
            },
        )


def stat(lines: Lines, base: Event) -> Iterator[Item]:
    """One event for the file (the ``cpu`` line's times as ``cpu_<column>_ms``, ``ctxt``,
    ``processes``, ``procs_running``, ``procs_blocked``, ``btime``, ``intr_total``,
    ``softirq_total``, ``cpus``) and one per ``cpuN`` line with ``cpu`` = N."""
    ev = dict(base)
    per_cpu: list[tuple[int, Event]] = []
    first = 0
    for n, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        key, values = tokens[0], tokens[1:]
        if not values or not all(_INT.fullmatch(v) for v in values):
            yield _bad(n, f"stat line {key!r} is not a name followed by whole numbers", line)
            continue
        numbers = [int(v) for v in values]
        if key.startswith("cpu"):
            index = key[3:]
            if (index and not index.isdigit()) or len(numbers) > len(STAT_CPU):
                yield _bad(n, f"stat {key!r} is not 'cpu' or 'cpuN' with up to {len(STAT_CPU)} times", line)
                continue
            times: dict[str, object] = {f"cpu_{c}_ms": v * 1000 // USER_HZ for c, v in zip(STAT_CPU, numbers)}
            if index:
                per_cpu.append((n, {**base, "cpu": int(index), **times}))
                continue
            fields = times
        elif key in _STAT_TOTALS:
            fields = {_STAT_TOTALS[key]: numbers[0]}
        elif key in _STAT_PAIRS and len(numbers) == 2:
            fields = dict(zip(_STAT_PAIRS[key], numbers))
        elif len(numbers) == 1:
            fields = {snake(key): numbers[0]}
        else:
            yield _bad(
                n, f"stat line {key!r} has {len(numbers)} numbers; only cpu, intr and softirq have several", line
            )
            continue
        if any(f in ev for f in fields):
            yield _bad(n, f"stat {key!r} appears twice", line)
            continue
        ev.update(fields)
        first = first or n
    if per_cpu:
        ev["cpus"] = len(per_cpu)
        first = first or per_cpu[0][0]
    if first:
        yield first, ev
    yield from per_cpu


def vmstat(lines: Lines, base: Event) -> Iterator[Item]:
    """One event: every ``name value`` line as an integer field of that name (``nr_free_pages``,
    ``pgfault``, ``oom_kill``…)."""
    ev = dict(base)
    first = 0
    for n, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if len(tokens) != 2 or not _INT.fullmatch(tokens[1]):
            yield _bad(n, "vmstat line is not 'name value' with a whole number", line)
            continue
        name = snake(tokens[0])
        if name in ev:
            yield _bad(n, f"vmstat {tokens[0]} appears twice", line)
            continue
        ev[name] = int(tokens[1])
        first = first or n
    if first:
        yield first, ev


def diskstats(lines: Lines, base: Event) -> Iterator[Item]:
    """One event per device row: ``major``, ``minor``, ``device``, the counters of
    ``DISK_COLUMNS`` the kernel prints (11, 15 or 17; 4 for a pre-2.6.25 partition) and
    ``read_bytes``/``written_bytes`` (sectors × 512)."""
    for n, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        counts = tokens[3:]
        names = _DISK_PARTITION_OLD if len(counts) == 4 else DISK_COLUMNS[: len(counts)]
        if len(tokens) < 3 or len(counts) not in (4, 11, 15, 17) or not all(t.isdigit() for t in tokens[:2] + counts):
            yield _bad(n, "diskstats row is not 'major minor device' and 4, 11, 15 or 17 counters", line)
            continue
        ev: Event = {**base, "major": int(tokens[0]), "minor": int(tokens[1]), "device": tokens[2]}
        ev.update(zip(names, map(int, counts)))
        ev["read_bytes"] = int(ev["sectors_read"]) * SECTOR_BYTES  # type: ignore[call-overload]
        ev["written_bytes"] = int(ev["sectors_written"]) * SECTOR_BYTES  # type: ignore[call-overload]
        yield n, ev


def zoneinfo(lines: Lines, base: Event) -> Iterator[Item]:
    """One event per zone (``numa_node``, ``zone``, ``free_pages``, watermarks and sizes as
    ``<name>_pages``, every ``nr_*``/``numa_*`` counter, ``protection`` as text) and one per
    node for its ``per-node stats`` (``numa_node`` without ``zone``, numbered with the line
    ``per-node stats``); per-CPU pagesets are skipped."""
    zone: Event | None = None
    events: list[tuple[int, Event]] = []
    target: Event = {}
    pagesets = False
    for n, line in lines:
        text = line.strip()
        if not text:
            continue
        head = _ZONE.fullmatch(text)
        if head is not None:
            yield from events
            zone = {**base, "numa_node": int(head.group(1)), "zone": head.group(2)}
            events, target, pagesets = [(n, zone)], zone, False
            continue
        if zone is None:
            yield _bad(n, "zoneinfo line comes before any 'Node N, zone NAME' line", line)
            continue
        if text == "per-node stats":
            target = {**base, "numa_node": zone["numa_node"]}
            events.append((n, target))
            continue
        if text == "pagesets":
            pagesets = True
            continue
        indent = len(line) - len(line.lstrip())
        if pagesets and (indent > 2 or text.startswith("vm stats threshold")):
            continue  # the per-CPU page lists: not the zone's state
        key, colon, rest = text.partition(":")
        if colon and key == "protection":
            zone["protection"] = rest.strip()
            continue
        tokens = text.replace(":", " ").split()
        if tokens[:2] == ["pages", "free"]:
            tokens, target = ["free_pages", *tokens[2:]], zone  # the zone's own part starts here
        if len(tokens) != 2 or not _INT.fullmatch(tokens[1]):
            yield _bad(n, "zoneinfo line is not 'name value' with a whole number", line)
            continue
        name = tokens[0] + "_pages" if tokens[0] in _ZONE_PAGES else snake(tokens[0])
        if name in target:
            yield _bad(n, f"zoneinfo {tokens[0]} appears twice in one zone", line)
            continue
        target[name] = int(tokens[1])
    yield from events
