"""memleak: game-server hosts whose unreclaimable slab grows on kernel 5.0 and not on 5.3.

The mechanism of game-server-memory-leak-2020.txt, simulated per host in one-hour steps
over ~8 weeks:

- game containers arrive (Poisson, scheduled only while the host has capacity) and run
  for a log-normal time; each creates a cgroup in every controller's hierarchy and
  charges slab objects (dentries, inodes, kmalloc) to its memory cgroup;
- when a container stops its cgroups are removed; on kernel 5.0 the memory cgroup stays
  as a *dying* cgroup, pinned by the slab objects still charged to it, and is freed only
  rarely (when reclaim happens to free all of its objects); on 5.3 the objects are
  reparented and the cgroup goes away;
- page cache fills free memory as games load assets, and gives it back under pressure;
- capacity (games a host takes) follows available memory: MemFree + Active(file) +
  Inactive(file) + SReclaimable, less a reserve, over the memory a game needs.

A cron job snapshots /proc/meminfo, /proc/slabinfo and /proc/cgroups every few hours
into ``proc/<host>/<kind>_<YYYY-MM-DD.HH:MM>`` in the kernel's formats; the game fleet
reports each host's capacity as JSON lines. Writers are in ``procfs_writer``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rootsift.scenarios import register
from rootsift.scenarios.base import Manifest, Scenario, Source
from rootsift.scenarios.procfs_writer import CONTROLLERS, cgroups_text, meminfo_text, slabinfo_text

KIB = 1024
GIB = 1 << 30
START = datetime(2020, 1, 6, tzinfo=UTC)


@dataclass
class Host:
    """One host's state during the simulation (bytes unless named otherwise)."""

    name: str
    kernel: str
    total: int
    game_bytes: int
    arrivals_per_hour: float
    slab_per_cgroup: int
    release_per_day: float
    running: list[float] = field(default_factory=list)  # hours left for each running game
    dying: int = 0  # memory cgroups removed but pinned (kernel 5.0)
    live_cgroups: int = 40  # system cgroups
    page_cache: int = 0
    reclaimable_slab: int = 2 * GIB
    base_unreclaimable: int = GIB
    first_low: datetime | None = None

    @property
    def unreclaimable_slab(self) -> int:
        return self.base_unreclaimable + (self.dying + len(self.running)) * self.slab_per_cgroup

    def anon(self) -> int:
        return 3 * GIB + len(self.running) * self.game_bytes

    def free(self) -> int:
        return self.total - self.anon() - self.page_cache - self.reclaimable_slab - self.unreclaimable_slab

    def available(self) -> int:
        return self.free() + self.page_cache + self.reclaimable_slab

    def capacity(self) -> int:
        """Games the host can take: available memory less a 10 % reserve, over a game's size."""
        return max(0, int((self.available() - self.total // 10) // self.game_bytes))


@register
class MemLeak(Scenario):
    name = "memleak"
    summary = (
        "game-server fleet over 8 weeks: dying cgroups pinned by slab on kernel 5.0 (SUnreclaim grows), not on 5.3"
    )

    def generate(self, out: Path) -> tuple[Manifest, dict[str, Any]]:
        rng = self.rng
        weeks = 8
        hours = weeks * 7 * 24
        snapshot_every = max(1, round(12 / self.scale))  # ci: every 12 h
        # up to scale 4 more hosts, up to 12 hourly snapshots; beyond that the fleet grows
        # (scale 256: ~200 hosts, ~10M events)
        n_hosts = max(4, round(rng.randint(5, 8) * max(min(self.scale, 4), self.scale / 8)))
        hosts = self._hosts(n_hosts)
        capacity_lines: list[str] = []
        for hour in range(hours + 1):
            now = START + timedelta(hours=hour)
            for host in hosts:
                self._step(host)
                if host.first_low is None and host.available() < host.total // 10:
                    host.first_low = now
                if hour % snapshot_every == 0:
                    self._snapshot(out, host, now, hour)
                    capacity_lines.append(
                        json.dumps(
                            {
                                "timestamp": now.isoformat(),
                                "host": host.name,
                                "kernel": host.kernel,
                                "capacity_games": host.capacity(),
                                "running_games": len(host.running),
                            }
                        )
                    )
        (out / "capacity.jsonl").write_text("\n".join(capacity_lines) + "\n")
        # the kernel each host runs is inventory an operator has (it is the cohort, not the answer)
        sources = [
            Source("memleak_hosts", f"proc/{h.name}", "procfs", {"host": h.name, "labels": {"kernel": h.kernel}})
            for h in hosts
        ]
        sources.append(Source("memleak_capacity", "capacity.jsonl", "jsonl"))
        old, new = sorted({h.kernel for h in hosts})
        analyses = [
            ["trends", "memleak_hosts", "--where", 'kind = "meminfo"'],
            [
                "compare",
                "memleak_hosts",
                "--a",
                f'kernel = "{old}"',
                "--b",
                f'kernel = "{new}"',
                "--where",
                'kind = "meminfo"',
                "--metrics",
                "slope(sunreclaim_bytes),max(sunreclaim_bytes),max(active_file_bytes),min(mem_available_bytes)",
                "--better",  # more memory left is better: said, as a user would, not guessed from the name
                "min(mem_available_bytes)=higher",
            ],
        ]
        manifest = Manifest(self.name, self.seed, self.scale, sources, f"{n_hosts} hosts, {weeks} weeks", analyses)
        leaking = sorted(h.name for h in hosts if h.kernel.startswith("5.0"))
        truth = {
            "leaking_hosts": leaking,
            "healthy_hosts": sorted(h.name for h in hosts if h.name not in leaking),
            "cohort_field": "kernel",
            "leaking_cohort": "5.0",
            "growing_fields": ["sunreclaim_bytes", "num_cgroups (subsys_name = memory)"],
            "not_growing": ["active_file_bytes", "inactive_file_bytes"],
            "first_below_10pct_available": {h.name: h.first_low for h in hosts if h.first_low},
        }
        return manifest, truth

    def _hosts(self, n: int) -> list[Host]:
        rng = self.rng
        leaking = max(1, min(n - 1, round(n * rng.uniform(0.3, 0.6))))
        kernels = ["5.0.0-1023-aws"] * leaking + ["5.3.0-1019-aws"] * (n - leaking)
        rng.shuffle(kernels)
        total = rng.choice([128, 192, 256]) * GIB
        return [
            Host(
                name=f"{rng.choice(['gs', 'game', 'srv'])}-{rng.randrange(100, 999)}-{i:02d}",
                kernel=kernel,
                total=total,
                game_bytes=int(rng.uniform(1.5, 3.0) * GIB),
                arrivals_per_hour=rng.uniform(8, 16),
                slab_per_cgroup=int(rng.uniform(1.0, 3.0) * (1 << 20)),  # per-memcg kmem caches and objects
                release_per_day=rng.uniform(0.005, 0.03),
            )
            for i, kernel in enumerate(kernels)
        ]

    def _step(self, host: Host) -> None:
        """One hour: games end and start, dying cgroups are (rarely) freed, page cache moves."""
        rng = self.rng
        host.running = [left - 1 for left in host.running]
        ended = sum(1 for left in host.running if left <= 0)
        host.running = [left for left in host.running if left > 0]
        if host.kernel.startswith("5.0"):
            host.dying += ended
            freed = _binomial(rng, host.dying, host.release_per_day / 24)
            host.dying -= freed
        arrivals = _poisson(rng, host.arrivals_per_hour)
        room = host.capacity() - len(host.running)
        for _ in range(max(0, min(arrivals, room))):
            host.running.append(rng.lognormvariate(math.log(0.75), 0.5))
        # Page cache fills toward what is free (game assets, logs) and is reclaimed under pressure.
        target = max(0, host.free() + host.page_cache - host.total // 20)
        host.page_cache += int((target - host.page_cache) * rng.uniform(0.02, 0.08))
        host.reclaimable_slab = int(2 * GIB + host.page_cache * 0.02)

    def _snapshot(self, out: Path, host: Host, now: datetime, hour: int) -> None:
        folder = out / "proc" / host.name
        folder.mkdir(parents=True, exist_ok=True)
        stamp = now.strftime("%Y-%m-%d.%H:%M")
        rng = self.rng
        (folder / f"meminfo_{stamp}").write_text(meminfo_text(host, rng))
        (folder / f"slabinfo_{stamp}").write_text(slabinfo_text(host, rng))
        memory_cgroups = host.live_cgroups + len(host.running) + host.dying
        counts = {c: host.live_cgroups + len(host.running) for c in CONTROLLERS}
        counts["memory"] = memory_cgroups
        (folder / f"cgroups_{stamp}").write_text(cgroups_text(counts))


def _poisson(rng: Any, lam: float) -> int:
    threshold, k, p = math.exp(-lam), 0, 1.0
    while True:
        p *= rng.random()
        if p <= threshold:
            return k
        k += 1


def _binomial(rng: Any, n: int, p: float) -> int:
    if n <= 0 or p <= 0:
        return 0
    if n > 200:  # normal approximation: thousands of dying cgroups per host
        return max(0, min(n, round(rng.gauss(n * p, math.sqrt(n * p * (1 - p))))))
    return sum(1 for _ in range(n) if rng.random() < p)
