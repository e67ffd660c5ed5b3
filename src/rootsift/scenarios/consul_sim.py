"""The consul scenario's mechanism, one minute at a time.

- KV and health-check writers form a closed population (each waits for its write, then
  thinks); their number follows a diurnal curve that grows day over day.
- With streaming, every committed write is published through one shared channel to
  every subscriber, so a write holds the channel for ``subscribers × cost``. The channel
  is a queueing station (exact mean-value analysis of the closed network); once
  ``writers × demand`` passes the think time, it saturates and response time climbs.
- Writes slower than the health-check timeout make checks flap, and the flaps are
  themselves writes: churn adds writers while writes stay slow (the feedback).
- Commit is a delay station: the leader appends a batch (rewriting its BoltDB freelist
  with every append) and waits for a quorum of followers to append theirs.
- Snapshots truncate old log entries; their pages go on the freelist. Healthy servers
  reuse those pages; on the pathological ones the freed runs are fragmented and almost
  never reused, so the freelist, and every append's cost, grows.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

PAGE = 4096
SNAPSHOT_THRESHOLD = 16384  # raft entries between snapshots (Consul's raft_snapshot_threshold)


@dataclass
class Server:
    """One Consul server's Raft log store."""

    name: str
    voter: bool
    pathological: bool
    freelist_pages: int
    bw_bytes_per_ms: float  # effective bandwidth of an fsync'd append
    base_append_ms: float
    reuse: float  # fraction of the pages a minute's appends need that come off the freelist
    since_snapshot: int = 0

    @property
    def freelist_bytes(self) -> int:
        return self.freelist_pages * 8  # bolt stores one 8-byte page id per free page

    def append_ms(self) -> float:
        """One append: the 16 KiB of entries plus the whole freelist, written out."""
        return self.base_append_ms + (16384 + self.freelist_bytes) / self.bw_bytes_per_ms

    def log_writes(self, entries: int, entry_bytes: int) -> None:
        """Append ``entries``; snapshot and truncate when the threshold is crossed."""
        pages_needed = entries * entry_bytes / PAGE
        self.freelist_pages -= min(self.freelist_pages, int(pages_needed * self.reuse))
        self.since_snapshot += entries
        while self.since_snapshot >= SNAPSHOT_THRESHOLD:
            self.since_snapshot -= SNAPSHOT_THRESHOLD
            self.freelist_pages += int(SNAPSHOT_THRESHOLD * entry_bytes / PAGE)


@dataclass
class Load:
    """Seeded parameters of the workload and the streaming channel."""

    peak_writers: float
    peak_hour: float
    trough: float  # writers at the trough, as a fraction of the peak
    growth_per_day: float
    think_s: float
    channel_cost_ms: float  # channel time per subscriber per write
    churn_gain: float
    churn_tau_min: float
    hc_timeout_ms: float
    rtt_ms: float
    entry_bytes: int

    def writers(self, minute: int, churn: float) -> int:
        hour = (minute / 60) % 24
        shape = 0.5 + 0.5 * math.cos(2 * math.pi * (hour - self.peak_hour) / 24)
        diurnal = self.trough + (1 - self.trough) * shape
        return max(1, round(self.peak_writers * diurnal * self.growth_per_day ** (minute / 1440) * (1 + churn)))


def mva(writers: int, demand_s: float, delay_s: float) -> tuple[float, float]:
    """Exact MVA of ``writers`` over one queue (``demand_s``) and a delay: (residence s, throughput/s)."""
    queue, residence, throughput = 0.0, demand_s, 0.0
    for n in range(1, writers + 1):
        residence = demand_s * (1 + queue)
        throughput = n / (residence + delay_s)
        queue = throughput * residence
    return residence, throughput


@dataclass
class Minute:
    """What one minute looked like on the leader (times in ms)."""

    writers: int
    channel_ms: float
    commit_ms: float
    throughput: float
    last_contact_ms: float

    def p50_ms(self) -> float:
        return self.commit_ms + self.channel_ms * math.log(2)

    def draw_write_ms(self, rng: random.Random) -> float:
        """One write: a commit (log-normal around the cycle) plus its wait on the channel."""
        wait = rng.expovariate(1 / self.channel_ms) if self.channel_ms > 0 else 0.0
        return self.commit_ms * rng.lognormvariate(0, 0.25) + wait


def step(
    rng: random.Random, load: Load, servers: list[Server], leader: Server, subscribers: int, minute: int, churn: float
) -> tuple[Minute, float]:
    """Advance one minute; the leader's view of it and the new churn level."""
    writers = load.writers(minute, churn)
    followers = sorted(s.append_ms() for s in servers if s.voter and s is not leader)
    # A batch waits for the leader's append (half a cycle queued, one cycle writing) and a quorum.
    commit_ms = 1.5 * leader.append_ms() + followers[1] + load.rtt_ms
    demand_s = subscribers * load.channel_cost_ms / 1000
    residence_s, throughput = mva(writers, demand_s, load.think_s + commit_ms / 1000)
    channel_ms = residence_s * 1000
    for server in servers:
        server.log_writes(int(throughput * 60), load.entry_bytes)
    slow = math.exp(-max(0.0, load.hc_timeout_ms - commit_ms) / channel_ms) if channel_ms > 0 else 0.0
    churn += (load.churn_gain * slow - churn) * (1 - math.exp(-1 / load.churn_tau_min))
    contact = 8 + leader.append_ms() * rng.uniform(0.8, 1.3) + channel_ms * 0.05
    return Minute(writers, channel_ms, commit_ms, throughput, contact), churn
