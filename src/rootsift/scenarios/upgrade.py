"""upgrade: a rolling v1 → v2 upgrade of a 3-replica time-series store under a load generator.

The mechanism of tsdb-upgrade-2024.txt, on the event loop of ``sim``:

- a load generator writes points to series at quorum (2 of 3 acks) and reads back points it
  wrote earlier (a verification read), asking every replica;
- each node buffers the points of the current block in memory and flushes a block to disk
  ``buffer_past`` after it ends, all nodes at almost the same time (the namespace setting);
- the upgrade restarts one node at a time: a short unavailability, and with the default
  bootstrap mode (commit log, but no WAL in use) the node comes back with nothing of its
  unflushed buffer and never asks its peers. The two nodes restarted before the flush lose
  the block the third one flushed: reads of that data find it on one replica of three;
- each write appends to the series' encoder block; the write that fills the block seals it.
  v2 spends ~20-30 % less CPU and memory everywhere except the sealing function, which on v2
  costs several ms (CPU and a lock held), paid by the fraction of writes that seal a block:
  the write latency tail from ~p85 up grows while p50 does not.

The load generator logs a 1-in-``weight`` sample of the real traffic (its events); host CPU and
memory follow the real traffic. Writers are in ``upgrade_telemetry``.
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from rootsift.scenarios import register
from rootsift.scenarios.base import Manifest, Scenario, Source
from rootsift.scenarios.sim import Loop
from rootsift.scenarios.upgrade_loads import Load, Params
from rootsift.scenarios.upgrade_telemetry import (
    SEAL_FUNCTIONS,
    quantile_ratios,
    regressed_from,
)

HOUR = 3600.0
LATENCY_METRICS = "p50(duration_ms),p85(duration_ms),p99(duration_ms)"
VERSIONS = (("1.1.0", "1.5.0"), ("0.15.17", "1.4.2"), ("1.2.0", "1.5.1"), ("1.3.1", "1.6.0"))


@register
class Upgrade(Scenario):
    name = "upgrade"
    summary = "rolling upgrade of a 3-replica TSDB: v2 leaner but a write-path function adds tail latency; restarts lose unflushed blocks"

    def generate(self, out: Path) -> tuple[Manifest, dict[str, Any]]:
        rng = self.rng
        p = self._params()
        start = datetime(2024, rng.randint(1, 11), rng.randint(1, 28), rng.randint(0, 12), tzinfo=UTC)
        load = Load(p, rng, start)
        loop = Loop()
        load.schedule(loop)
        loop.run(until=p.duration)
        load.finish()

        def iso(t: float) -> str:
            return (start + timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z")

        with open(out / "requests.jsonl", "wb") as fh:
            fh.writelines(orjson.dumps(e) + b"\n" for e in load.requests)
        with open(out / "read_quorum.jsonl", "wb") as fh:
            fh.writelines(orjson.dumps(e) + b"\n" for e in load.quorum)
        sources = [
            Source("upgrade_requests", "requests.jsonl", "jsonl"),
            Source("upgrade_read_quorum", "read_quorum.jsonl", "jsonl"),
        ]
        for node in load.nodes:
            node.scrapes.write(out / "metrics" / node.name)
            sources.append(
                Source("upgrade_hosts", f"metrics/{node.name}/metrics.prom", "prometheus", {"host": node.name})
            )
        profiles = []
        for prof in load.profiles.values():
            rel = f"profiles/cpu_{prof.version}.folded"
            (out / "profiles").mkdir(exist_ok=True)
            (out / rel).write_text(prof.folded(rng))
            written = (start + timedelta(seconds=load.profile_windows[prof.version][1])).timestamp()
            os.utime(out / rel, (written, written))  # a profile's only time: when it was written
            profiles.append(rel)
            sources.append(Source("upgrade_profiles", rel, "folded", {"labels": {"version": prof.version}}))
        notes = (
            f"3 nodes, {len(load.requests)} request events, {len(load.quorum)} verification reads, "
            f"CPU profiles per version (folded stacks, labelled with their version): {', '.join(profiles)}"
        )
        # the operator knows the versions and when the rollout ran (its own deploy log)
        cohorts = ["--a", f'version = "{p.old}"', "--b", f'version = "{p.new}"']
        first, last_up = min(p.restarts.values()), max(t + p.down[n] for n, t in p.restarts.items())
        before_after = ["--a-from", iso(0), "--a-to", iso(first), "--b-from", iso(last_up), "--b-to", iso(p.duration)]
        analyses = [
            ["compare", "upgrade_requests", *cohorts, "--where", 'op = "write"', "--metrics", LATENCY_METRICS],
            [
                "compare",
                "upgrade_hosts",
                *before_after,
                "--where",
                'metric = "process_resident_memory_bytes"',
                "--metrics",
                "avg(value)",
            ],
            ["profile-diff", "upgrade_profiles", *cohorts],
        ]
        manifest = Manifest(self.name, self.seed, self.scale, sources, notes, analyses)
        return manifest, self._truth(p, load, iso, profiles)

    def _params(self) -> Params:
        rng = self.rng
        old, new = rng.choice(VERSIONS)
        prefix = rng.choice(["m3db", "tsdb", "m3storage"])
        names = [f"{prefix}-{rng.choice(['a', 'b', 'c', 'dca', 'phx'])}{rng.randrange(10, 99)}-{i}" for i in range(3)]
        block = 2 * HOUR
        buffer_past = rng.uniform(480, 720)
        jitter = {n: rng.uniform(0, 240) for n in names}
        flush = {n: 2 * block + buffer_past + jitter[n] for n in names}  # flush of the block ending at 4 h
        order = names[:]
        rng.shuffle(order)
        # The rollout starts 25-40 min before the flush: the second node restarts before its flush,
        # the third after its own (one node at a time, with a health wait between them).
        first = min(flush.values()) - rng.uniform(1500, 2400)
        lo = (flush[order[2]] + 120 - first) / 2
        hi = flush[order[1]] - 60 - first
        interval = rng.uniform(lo, lo + (hi - lo) * 0.8)
        restarts = {n: first + i * interval for i, n in enumerate(order)}
        seal_fraction = rng.uniform(0.165, 0.19)
        return Params(
            old=old,
            new=new,
            names=names,
            order=order,
            duration=6.5 * HOUR,
            block=block,
            flush_offset={n: buffer_past + jitter[n] for n in names},
            restarts=restarts,
            down={n: rng.uniform(90, 240) for n in names},
            write_rate=1.6 * self.scale,
            read_rate=0.35 * self.scale,
            weight=2000 / self.scale,
            n_series=max(20, round(rng.randint(120, 200) * min(self.scale, 10))),
            point_bytes=rng.uniform(14, 22),
            seal_fraction=seal_fraction,
            write_cpu_ms=rng.uniform(0.25, 0.4),
            cpu_factor=rng.uniform(0.7, 0.8),
            mem_factor=rng.uniform(0.75, 0.85),
            seal_cpu_ms={"old": rng.uniform(0.1, 0.2), "new": rng.uniform(0.6, 1.0)},
            seal_wait_ms=rng.uniform(2.5, 5.0),
            base_rss=rng.uniform(5, 8) * (1 << 30),
            bytes_per_point=rng.uniform(110, 170),
            background_cores=rng.uniform(1.5, 2.5),
            regressed=rng.choice(SEAL_FUNCTIONS),
        )

    def _truth(self, p: Params, load: Load, iso: Any, profiles: list[str]) -> dict[str, Any]:
        first = min(p.restarts.values())
        last_up = max(t + p.down[n] for n, t in p.restarts.items())
        old_ms = [e["duration_ms"] for e in load.requests if _ok_write(e) and e["version"] == p.old]
        new_ms = [e["duration_ms"] for e in load.requests if _ok_write(e) and e["version"] == p.new]
        ratios = quantile_ratios(old_ms, new_ms)
        one = [q for q in load.quorum if q["replicas_with_data"] <= 1]
        counts = Counter(q["replicas_with_data"] for q in load.quorum)
        return {
            "versions": {"old": p.old, "new": p.new},
            "nodes": p.names,
            "upgrade_order": p.order,
            "restarts": [
                {"node": n, "down_at": iso(p.restarts[n]), "up_at": iso(p.restarts[n] + p.down[n])} for n in p.order
            ],
            "upgrade_window": {"start": iso(first), "end": iso(last_up)},
            "baseline_window": {"start": iso(0), "end": iso(first)},
            "after_window": {"start": iso(last_up), "end": iso(p.duration)},
            "regressed_function": p.regressed,
            "write_latency_ratio_new_over_old": ratios,
            "write_latency_regressed_from_quantile": regressed_from(ratios),
            "write_latency_not_regressed": ["p50"],
            "fraction_of_writes_paying_the_regression": round(p.seal_fraction, 3),
            "memory_ratio_new_over_old": load.memory_ratio(first, last_up),
            "cpu_ratio_new_over_old": load.cpu_ratio(first, last_up),
            "designed": {"cpu_factor": round(p.cpu_factor, 3), "mem_factor": round(p.mem_factor, 3)},
            "under_replicated_reads": {
                "replicas_with_data_counts": {str(k): v for k, v in sorted(counts.items())},
                "at_most_one_replica": len(one),
                "share_in_upgrade_window": round(
                    sum(iso(first) <= q["timestamp"] <= iso(last_up) for q in one) / max(1, len(one)), 3
                ),
                "read_window": {"start": one[0]["timestamp"], "end": one[-1]["timestamp"]} if one else None,
                "data_window": {
                    "start": min(q["data_timestamp"] for q in one),
                    "end": max(q["data_timestamp"] for q in one),
                }
                if one
                else None,
            },
            "bootstrap_mode": "default (commitlog, no WAL: unflushed buffer not recovered from peers)",
            "cpu_profiles": profiles,
            "sample_weight": round(p.weight, 1),
        }


def _ok_write(e: dict[str, Any]) -> bool:
    return bool(e["op"] == "write" and e["status"] == "ok")
