"""The upgrade scenario's cluster and load generator: nodes with buffers, flushes, restarts,
quorum writes, verification reads, scrapes and CPU profiles, driven by ``sim.Loop``."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rootsift.scenarios.sim import Loop
from rootsift.scenarios.upgrade_telemetry import (
    BACKGROUND_STACKS,
    READ_STACKS,
    SEAL_PREFIX,
    WRITE_STACKS,
    Profile,
    Scrapes,
)

SCRAPE_S = 30.0
PROFILE_S = 1800.0  # each version's CPU profile covers 30 min on every node


@dataclass
class Params:
    """What the seed chose (seconds, ms, bytes as named)."""

    old: str
    new: str
    names: list[str]
    order: list[str]
    duration: float
    block: float
    flush_offset: dict[str, float]
    restarts: dict[str, float]
    down: dict[str, float]
    write_rate: float
    read_rate: float
    weight: float
    n_series: int
    point_bytes: float
    seal_fraction: float
    write_cpu_ms: float
    cpu_factor: float
    mem_factor: float
    seal_cpu_ms: dict[str, float]
    seal_wait_ms: float
    base_rss: float
    bytes_per_point: float
    background_cores: float
    regressed: str


@dataclass
class Node:
    """One storage node: its version, its in-memory buffer per block and what it flushed."""

    name: str
    version: str
    up: bool = True
    cpu: float = 0.0  # process CPU seconds since the process started
    accounted: float = 0.0  # background CPU is charged up to this time
    buffered: dict[int, set[int]] = field(default_factory=dict)
    durable: set[int] = field(default_factory=set)
    encoder: dict[str, float] = field(default_factory=dict)  # bytes in each series' open block
    scrapes: Scrapes = field(init=False)

    def __post_init__(self) -> None:
        self.scrapes = Scrapes(self.name)

    def has(self, point: int) -> bool:
        return point in self.durable or any(point in b for b in self.buffered.values())

    def buffered_points(self) -> int:
        return sum(len(b) for b in self.buffered.values())


class Load:
    """The cluster and its load generator; events and samples collect in lists."""

    def __init__(self, p: Params, rng: random.Random, start: datetime) -> None:
        self.p, self.rng, self.start = p, rng, start
        self.nodes = [Node(n, p.old) for n in p.names]
        self.by_name = {n.name: n for n in self.nodes}
        self.series = [
            f"{rng.choice(['http_requests', 'cpu_usage', 'queue_depth', 'rpc_latency'])}.svc{i:03d}"
            for i in range(p.n_series)
        ]
        self.replicas = {s: rng.sample(p.names, 3) for s in self.series}  # replica 0, 1, 2 of the series' shard
        self.requests: list[dict[str, Any]] = []
        self.quorum: list[dict[str, Any]] = []
        self.written: list[tuple[float, int, str]] = []  # acked points: (time, id, series)
        self.written_t: list[float] = []
        self.ids = itertools.count()
        self.profiles = {v: Profile(v) for v in (p.old, p.new)}
        first = min(p.restarts.values())
        self.profile_windows = {p.old: (first - PROFILE_S, first), p.new: (p.duration - PROFILE_S, p.duration)}

    def schedule(self, loop: Loop) -> None:
        p = self.p
        self.loop = loop
        loop.at(self.rng.expovariate(p.write_rate), self.write)
        loop.at(self.rng.expovariate(p.read_rate), self.read)
        loop.at(0.0, self.scrape)
        for n in self.nodes:
            for b in range(1, math.ceil(p.duration / p.block) + 1):
                loop.at(b * p.block + p.flush_offset[n.name], self.flush, n, b - 1)
            loop.at(p.restarts[n.name], self.restart, n)

    def finish(self) -> None:
        self.requests.sort(key=lambda e: e["timestamp"])

    def iso(self, t: float) -> str:
        return (self.start + timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _in_profile(self, node: Node, t: float) -> bool:
        lo, hi = self.profile_windows[node.version]
        return lo <= t < hi

    def _cpu(self, node: Node, t: float, stacks: tuple[tuple[str, float], ...], cpu_ms: float) -> None:
        """Charge ``cpu_ms`` of one sampled request (times the sample weight) to the node."""
        secs = cpu_ms / 1000 * self.p.weight
        node.cpu += secs
        if self._in_profile(node, t):
            self.profiles[node.version].add(stacks, secs)

    def write(self) -> None:
        p, rng, t = self.p, self.rng, self.loop.now
        series = rng.choice(self.series)
        point = next(self.ids)
        size = rng.uniform(0.5, 1.5) * p.point_bytes
        block_bytes = p.point_bytes / p.seal_fraction
        acks = 0
        for replica, name in enumerate(self.replicas[series]):
            node = self.by_name[name]
            event = {"timestamp": self.iso(t), "op": "write", "node": name, "replica": replica, "version": node.version}
            if not node.up:
                event |= {"duration_ms": round(rng.uniform(0.2, 1.0), 3), "status": "unavailable", "series": series}
                self.requests.append(event)
                continue
            node.buffered.setdefault(int(t // p.block), set()).add(point)
            fill = node.encoder.get(series, 0.0) + size
            sealed = fill >= block_bytes
            node.encoder[series] = 0.0 if sealed else fill
            new = node.version == p.new
            cpu_ms = p.write_cpu_ms * rng.lognormvariate(0, 0.3) * (p.cpu_factor if new else 1.0)
            self._cpu(node, t, WRITE_STACKS, cpu_ms)
            ms = rng.lognormvariate(math.log(0.9), 0.35) + cpu_ms
            if sealed:
                seal_ms = p.seal_cpu_ms["new" if new else "old"] * rng.lognormvariate(0, 0.3)
                self._cpu(node, t, ((f"{SEAL_PREFIX};{p.regressed}", 1.0),), seal_ms)
                ms += seal_ms + (p.seal_wait_ms * rng.lognormvariate(0, 0.3) if new else 0.0)
            event |= {"duration_ms": round(ms, 3), "status": "ok", "series": series}
            self.requests.append(event)
            acks += 1
        if acks >= 2:
            self.written.append((t, point, series))
            self.written_t.append(t)
        self.loop.after(rng.expovariate(p.write_rate), self.write)

    def read(self) -> None:
        """Read back a point written earlier (mostly the last minutes, as dashboards do; some
        up to an hour back, the verification pass), asking all three replicas."""
        p, rng, t = self.p, self.rng, self.loop.now
        self.loop.after(rng.expovariate(p.read_rate), self.read)
        lag = 30 + rng.expovariate(1 / 600) if rng.random() < 0.8 else rng.uniform(60, 3600)
        i = bisect.bisect_left(self.written_t, t - lag)
        if i >= len(self.written_t) or self.written_t[i] > t - 30:
            return
        wt, point, series = self.written[i]
        holders = []
        for replica, name in enumerate(self.replicas[series]):
            node = self.by_name[name]
            event = {"timestamp": self.iso(t), "op": "read", "node": name, "replica": replica, "version": node.version}
            if not node.up:
                event |= {"duration_ms": round(rng.uniform(0.2, 1.0), 3), "status": "unavailable", "series": series}
            else:
                found = node.has(point)
                cpu_ms = rng.lognormvariate(math.log(0.5), 0.4) * (p.cpu_factor if node.version == p.new else 1.0)
                self._cpu(node, t, READ_STACKS, cpu_ms)
                ms = rng.lognormvariate(math.log(1.5), 0.4) + cpu_ms
                event |= {"duration_ms": round(ms, 3), "status": "ok", "series": series, "datapoints": int(found)}
                if found:
                    holders.append(name)
            self.requests.append(event)
        n = len(holders)
        self.quorum.append(
            {
                "timestamp": self.iso(t),
                "series": series,
                "data_timestamp": self.iso(wt),
                "replicas_with_data": n,
                "nodes": holders,
                "consistency": "majority",
                "result": "complete" if n >= 2 else ("partial" if n == 1 else "empty"),
            }
        )

    def flush(self, node: Node, block: int) -> None:
        """Persist every buffered block up to ``block`` (a down node skips the cycle)."""
        if not node.up:
            return
        for b in [b for b in node.buffered if b <= block]:
            node.durable |= node.buffered.pop(b)

    def restart(self, node: Node) -> None:
        """Stop the node (its unflushed buffer is gone) and start v2 after the downtime."""
        self._account(node, self.loop.now)
        node.up = False
        node.buffered.clear()
        node.encoder.clear()
        self.loop.after(self.p.down[node.name], self._start, node)

    def _start(self, node: Node) -> None:
        node.up, node.version, node.cpu, node.accounted = True, self.p.new, 0.0, self.loop.now

    def _rss(self, node: Node) -> float:
        factor = self.p.mem_factor if node.version == self.p.new else 1.0
        return factor * (self.p.base_rss + node.buffered_points() * self.p.weight * self.p.bytes_per_point)

    def _account(self, node: Node, t: float) -> None:
        """Background CPU (tick, GC in proportion to the heap, flush) since the last scrape."""
        if not node.up:
            return
        dt, node.accounted = t - node.accounted, t
        factor = self.p.cpu_factor if node.version == self.p.new else 1.0
        cores = factor * (self.p.background_cores + 0.15 * self._rss(node) / (1 << 30))
        secs = cores * dt
        node.cpu += secs
        if self._in_profile(node, t):
            self.profiles[node.version].add(BACKGROUND_STACKS, secs)

    def scrape(self) -> None:
        t = self.loop.now
        for node in self.nodes:
            if not node.up:
                continue
            self._account(node, t)
            rss = self._rss(node) * self.rng.uniform(0.98, 1.02)
            ms = round((self.start + timedelta(seconds=t)).timestamp() * 1000)
            node.scrapes.rows.append((ms, round(rss), node.cpu, node.version))
        self.loop.after(SCRAPE_S, self.scrape)

    def _rows(self, lo: float, hi: float) -> list[list[tuple[int, int, float, str]]]:
        """Each node's scrapes from ``lo`` to ``hi`` seconds."""
        base = self.start.timestamp() * 1000
        return [[r for r in n.scrapes.rows if base + lo * 1000 <= r[0] < base + hi * 1000] for n in self.nodes]

    def memory_ratio(self, first: float, last_up: float) -> float:
        """Mean RSS after the upgrade over mean RSS before it, as the scrapes show."""
        before = [r[1] for rows in self._rows(0, first) for r in rows]
        after = [r[1] for rows in self._rows(last_up, self.p.duration) for r in rows]
        return round(sum(after) / len(after) / (sum(before) / len(before)), 3)

    def cpu_ratio(self, first: float, last_up: float) -> float:
        """Mean CPU rate (cores) after the upgrade over before it, from counter increases."""

        def rate(lo: float, hi: float) -> float:
            used = span = 0.0
            for rows in self._rows(lo, hi):
                for a, b in zip(rows, rows[1:]):
                    if b[2] >= a[2]:
                        used, span = used + b[2] - a[2], span + (b[0] - a[0]) / 1000
            return used / span

        return round(rate(last_up, self.p.duration) / rate(0, first), 3)
