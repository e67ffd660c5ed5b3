"""The tabular /proc files: slabinfo (one event per cache) and net/tcp(6) (one event per file).

See docs/formats/procfs.md for the fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rootsift.ingest.formats.base import Event, Item, Lines
from rootsift.ingest.rejects import Reject

_SLAB_HEAD = ("active_objs", "num_objs", "objsize", "objperslab", "pagesperslab")
# Tunables are printed as limit, batchcount, sharedfactor by every 2.x kernel, although the
# header line of 2.0 and early 2.1 kernels says "<batchcount> <limit>" (limit >= batchcount).
_SLAB_SECTIONS = {
    "tunables": ("limit", "batchcount", "sharedfactor"),
    "slabdata": ("active_slabs", "num_slabs", "sharedavail"),
    # only with CONFIG_DEBUG_SLAB ("2.1 (statistics)"); older kernels name other globalstat
    # columns in their header line, which then wins
    "globalstat": ("listallocs", "maxobjs", "grown", "reaped", "error", "maxfreeable", "nodeallocs")
    + ("remotefrees", "alienoverflow"),
    "cpustat": ("allochit", "allocmiss", "freehit", "freemiss"),
}
_VERSION = re.compile(r"slabinfo - version:\s*(\d+)\.(\d+)")
_COLUMN = re.compile(r"<([a-z_]+)>")
_TAKEN = frozenset(
    {"name", "kind", "host", "timestamp", "bytes", "active_objs_bytes", *_SLAB_HEAD}
    | {*_SLAB_SECTIONS["tunables"], *_SLAB_SECTIONS["slabdata"]}
)
"""Field names a header's statistics columns may not take."""


def slabinfo(lines: Lines, base: Event) -> Iterator[Item]:
    """One event per cache of a version 2.x slabinfo; a 1.x header rejects the file."""
    old_version = ""
    sections = dict(_SLAB_SECTIONS)
    for n, line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            for part in text.split(" : ")[1:]:
                section, _, columns = part.partition(" ")
                names = tuple(_COLUMN.findall(columns))
                if section in ("globalstat", "cpustat") and len(set(names)) == len(names) and _TAKEN.isdisjoint(names):
                    sections[section] = names
            continue
        if text.startswith("slabinfo"):
            m = _VERSION.match(text)
            if m is None or m.group(1) != "2":
                old_version = m.group(0).rpartition(":")[2].strip() if m else text
                yield Reject(n, f"slabinfo version {old_version!r} is not read (only 2.0 and 2.1)", line)
            continue
        if old_version:
            yield Reject(n, f"slabinfo version {old_version!r} is not read (only 2.0 and 2.1)", line)
            continue
        ev, error = _slab_row(text.split(), sections)
        if ev is None:
            yield Reject(n, f"slabinfo row {error}", line)
            continue
        yield n, {**base, **ev}


def _slab_row(tokens: list[str], sections: dict[str, tuple[str, ...]]) -> tuple[Event | None, str]:
    """A cache row as an event, or None and what is wrong with it."""
    try:
        cut = tokens.index(":")
    except ValueError:
        return None, "has no ': tunables ...' part"
    if cut < 6:
        return None, "has fewer than name and five counts before ':'"
    ev: Event = {"name": " ".join(tokens[: cut - 5])}
    groups = [("", tokens[cut - 5 : cut])]
    rest = tokens[cut + 1 :]
    while rest:
        section, values = rest[0], rest[1:]
        if ":" in values:
            values, rest = values[: values.index(":")], values[values.index(":") + 1 :]
        else:
            rest = []
        groups.append((section, values))
    for section, values in groups:
        names = _SLAB_HEAD if not section else sections.get(section)
        if names is None:
            return None, f"has an unknown part {section!r}"
        if len(values) != len(names) or not all(v.isdigit() for v in values):
            return None, f"{section or 'counts'} part is not {len(names)} whole numbers"
        ev.update(zip(names, map(int, values)))
    if "num_slabs" not in ev:
        return None, "has no slabdata part"
    active_objs, num_objs, objsize = (int(t) for t in tokens[cut - 5 : cut - 2])
    ev["bytes"] = num_objs * objsize
    ev["active_objs_bytes"] = active_objs * objsize
    return ev, ""


TCP_STATES = {
    "01": "established",
    "02": "syn_sent",
    "03": "syn_recv",
    "04": "fin_wait1",
    "05": "fin_wait2",
    "06": "time_wait",
    "07": "close",
    "08": "close_wait",
    "09": "last_ack",
    "0A": "listen",
    "0B": "closing",
    "0C": "new_syn_recv",
}
"""The kernel's TCP state codes (include/net/tcp_states.h) as they appear in net/tcp."""
_LISTEN = "0A"


def tcp(lines: Lines, base: Event) -> Iterator[Item]:
    """One event per net/tcp or net/tcp6 file: ``state_<name>`` counts, ``total``, queue sums.

    For LISTEN sockets the kernel shows the accept backlog in the rx_queue column, so it
    is summed as ``listen_backlog`` rather than into ``rx_queue_bytes``.
    """
    counts = dict.fromkeys(TCP_STATES, 0)
    tx = rx = backlog = 0
    first = 0
    version = None
    for n, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        first = first or n
        if tokens[0] == "sl":
            continue
        queues = tokens[4].split(":") if len(tokens) > 4 else []
        if len(queues) != 2 or not tokens[0].endswith(":") or ":" not in tokens[1]:
            yield Reject(n, "tcp row is not 'sl: local remote st tx_queue:rx_queue ...'", line)
            continue
        state = tokens[3].upper()
        if state not in counts:
            yield Reject(n, f"tcp state {tokens[3]!r} is not a known kernel state code", line)
            continue
        try:
            tx_q, rx_q = int(queues[0], 16), int(queues[1], 16)
        except ValueError:
            yield Reject(n, f"tcp queues {tokens[4]!r} are not hexadecimal", line)
            continue
        counts[state] += 1
        tx += tx_q
        if state == _LISTEN:
            backlog += rx_q
        else:
            rx += rx_q
        version = version or (6 if len(tokens[1].partition(":")[0]) == 32 else 4)
    if not first:
        return
    ev = dict(base)
    if version:
        ev["ip_version"] = version
    for code, name in TCP_STATES.items():
        ev["state_" + name] = counts[code]
    ev.update(total=sum(counts.values()), tx_queue_bytes=tx, rx_queue_bytes=rx, listen_backlog=backlog)
    yield first, ev
