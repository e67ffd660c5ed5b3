"""The "key: value" /proc files: meminfo, PID/status, net/sockstat(6) and cgroups.

Each reader takes the numbered lines of one file and the fields every event of the file
carries (time, kind, host) and yields events and rejects. See docs/formats/procfs.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rootsift.ingest.formats.base import Event, Item, Lines
from rootsift.ingest.rejects import Reject

_OVERRIDES = {
    "PPid": "ppid",
    "NStgid": "ns_tgid",
    "NSpid": "ns_pid",
    "NSpgid": "ns_pgid",
    "NSsid": "ns_sid",
    "SReclaimable": "sreclaimable",
    "SUnreclaim": "sunreclaim",
    "KReclaimable": "kreclaimable",
    "Hugepagesize": "huge_page_size",
}
_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL = re.compile(r"([a-z])([A-Z])")
_WORD_DIGIT = re.compile(r"([a-z]{2,})(\d)")
_NONWORD = re.compile(r"[^0-9A-Za-z]+")
_SNAKE: dict[str, str] = {}
_INT = re.compile(r"-?(?:0|[1-9]\d*)")


def snake(key: str) -> str:
    """A /proc key as a snake_case field name.

    >>> [snake(k) for k in ("Active(file)", "VmHWM", "HugePages_Total", "DirectMap2M")]
    ['active_file', 'vm_hwm', 'huge_pages_total', 'direct_map_2m']
    """
    done = _SNAKE.get(key)
    if done is None:
        done = _OVERRIDES.get(key)
        if done is None:
            text = _ACRONYM.sub(r"\1_\2", _NONWORD.sub("_", key))
            done = _WORD_DIGIT.sub(r"\1_\2", _CAMEL.sub(r"\1_\2", text)).strip("_").lower()
        _SNAKE[key] = done
    return done


def _bad(n: int, reason: str, line: str) -> Reject:
    return Reject(n, reason, line)


def meminfo(lines: Lines, base: Event) -> Iterator[Item]:
    """One event for the whole file: each key in bytes (``kB`` × 1024) or as a count, plus
    ``available_estimate_bytes`` and ``used_fraction``."""
    ev = dict(base)
    raw: dict[str, int] = {}
    first = 0
    for n, line in lines:
        text = line.strip()
        if not text:
            continue
        key, sep, rest = text.partition(":")
        if key.startswith("Node "):  # /sys/devices/system/node/nodeN/meminfo
            node, _, key = key[5:].partition(" ")
            if node.isdigit():
                ev["numa_node"] = int(node)
        parts = rest.split()
        if not sep or not key:
            yield _bad(n, "meminfo line has no 'Key:' before its value", line)
            continue
        if not parts or len(parts) > 2 or (len(parts) == 2 and parts[1] != "kB"):
            yield _bad(n, f"meminfo {key} is not 'number' or 'number kB'", line)
            continue
        if not _INT.fullmatch(parts[0]):
            yield _bad(n, f"meminfo {key} value {parts[0]!r} is not a whole number", line)
            continue
        value = int(parts[0]) * (1024 if len(parts) == 2 else 1)
        name = snake(key) + ("_bytes" if len(parts) == 2 else "")
        if name in ev:
            yield _bad(n, f"meminfo {key} appears twice", line)
            continue
        ev[name] = raw[key] = value
        first = first or n
    if not first:
        return
    parts_of_estimate = ("MemFree", "Active(file)", "Inactive(file)", "SReclaimable")
    if all(k in raw for k in parts_of_estimate):
        ev["available_estimate_bytes"] = sum(raw[k] for k in parts_of_estimate)
    total = raw.get("MemTotal")
    available, basis = raw.get("MemAvailable"), "mem_available"
    if available is None:  # kernels before 3.14 have no MemAvailable
        estimate = ev.get("available_estimate_bytes")
        available, basis = (estimate if isinstance(estimate, int) else None), "available_estimate"
    if total and available is not None:
        ev["used_fraction"] = (total - available) / total
        ev["used_fraction_from"] = basis
    yield first, ev


_STATUS_STRINGS = frozenset(
    {"name", "umask", "sig_q", "groups", "ns_tgid", "ns_pid", "ns_pgid", "ns_sid", "cpus_allowed", "mems_allowed"}
    | {"cpus_allowed_list", "mems_allowed_list", "sig_pnd", "shd_pnd", "sig_blk", "sig_ign", "sig_cgt"}
    | {"cap_inh", "cap_prm", "cap_eff", "cap_bnd", "cap_amb"}
)
_IDS = {"Uid": ("uid", "euid", "suid", "fsuid"), "Gid": ("gid", "egid", "sgid", "fsgid")}


def status(lines: Lines, base: Event) -> Iterator[Item]:
    """One event for /proc/PID/status: sizes in bytes, numbers as ints, masks and lists as text."""
    ev = dict(base)
    first = 0
    for n, line in lines:
        if not line.strip():
            continue
        key, sep, rest = line.partition(":")
        key = key.strip()
        if not sep or not key or " " in key:
            yield _bad(n, "status line has no 'Key:' before its value", line)
            continue
        value = " ".join(rest.split()) if key != "Name" else rest.strip("\t ")
        name = snake(key)
        fields: dict[str, object] = {}
        if key in _IDS:
            ids = value.split()
            if not all(_INT.fullmatch(i) for i in ids) or not 1 <= len(ids) <= 4:
                yield _bad(n, f"status {key} is not up to four numeric ids", line)
                continue
            fields = {f: int(i) for f, i in zip(_IDS[key], ids)}
        elif value.endswith(" kB"):
            number = value[:-3]
            if not _INT.fullmatch(number):
                yield _bad(n, f"status {key} size {number!r} is not a whole number of kB", line)
                continue
            fields = {name + "_bytes": int(number) * 1024}
        elif key == "State":
            code, _, label = value.partition(" ")
            fields = {"state": code, "state_name": label.strip("()")} if label else {"state": code}
        elif value == "":
            fields = {}
        elif name not in _STATUS_STRINGS and _INT.fullmatch(value):
            fields = {name: int(value)}
        else:
            fields = {name: value}
        if any(f in ev for f in fields):
            yield _bad(n, f"status {key} appears twice", line)
            continue
        ev.update(fields)
        first = first or n
    if first:
        yield first, ev


def sockstat(lines: Lines, base: Event) -> Iterator[Item]:
    """One event for net/sockstat or net/sockstat6: ``<protocol>_<counter>`` fields;
    ``mem`` is in pages (``*_mem_pages``), FRAG ``memory`` in bytes."""
    ev = dict(base)
    first = 0
    for n, line in lines:
        if not line.strip():
            continue
        proto, sep, rest = line.partition(":")
        tokens = rest.split()
        if not sep or not proto.strip() or not tokens or len(tokens) % 2:
            yield _bad(n, "sockstat line is not 'PROTO: name value ...'", line)
            continue
        prefix = proto.strip().lower()
        fields: dict[str, int] = {}
        for key, value in zip(tokens[::2], tokens[1::2]):
            if not _INT.fullmatch(value):
                break
            suffix = "_pages" if key == "mem" else "_bytes" if key == "memory" else ""
            fields[f"{prefix}_{key}{suffix}"] = int(value)
        else:
            if any(f in ev for f in fields):
                yield _bad(n, f"sockstat {proto.strip()} appears twice", line)
                continue
            ev.update(fields)
            first = first or n
            continue
        yield _bad(n, f"sockstat {proto.strip()} has a value that is not a whole number", line)
    if first:
        yield first, ev


def cgroups(lines: Lines, base: Event) -> Iterator[Item]:
    """One event per controller row of /proc/cgroups (the ``#subsys_name`` header skipped)."""
    for n, line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        cols = text.split()
        if len(cols) != 4 or not all(_INT.fullmatch(c) for c in cols[1:]):
            yield _bad(n, "cgroups row is not 'subsys_name hierarchy num_cgroups enabled'", line)
            continue
        yield (
            n,
            {
                **base,
                "subsys_name": cols[0],
                "hierarchy": int(cols[1]),
                "num_cgroups": int(cols[2]),
                "enabled": cols[3] != "0",
            },
        )
