"""trends --by host against the plain per-host query it rests on, same run, same store.

    .venv/bin/python bench/trends.py                        # 1,000 hosts × 30 days at 5 min × 4 fields
    .venv/bin/python bench/trends.py --hosts 200 --runs 5   # 1.7M events: a quicker look

The fleet: each host samples ``mem_used_bytes``, ``mem_cache_bytes``, ``slab_bytes`` and
``load`` every 5 minutes for 30 days (8,640 samples a host: 1,000 hosts = 8.64M events,
34.6M values); a daily cycle and noise on every host, a leak in the slab of one host in
five. The store is kept in ``--out`` between runs (generated and ingested once).

Contenders, alternated run by run (the machine is shared):

- ``query``: the plain per-host query, ``avg(slab_bytes)`` by host at the bucket trends
  picks (3 h over 30 days): what a dashboard draws, and what trends reads;
- ``trends``: ``Rootsift.trends(measure='avg(slab_bytes)', by='host')``: the same read,
  the bucket choice, each host's fit, the labels, cohorts and findings.

Prints the median wall and CPU time (user + sys of this process, DuckDB's threads
included) of each, and trends' ratio to the query on each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from common import BENCH, kept_store, use_source_tree

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.query.spec import Calculation, QuerySpec  # noqa: E402

START = datetime(2026, 1, 5, tzinfo=UTC)
STEP_S = 300
DAYS = 30
DATASET = "fleet"


def write(path: Path, hosts: int, seed: int) -> list[Path]:
    """One JSON-lines file per 100 hosts (bounded memory while writing)."""
    rng = np.random.default_rng(seed)
    n = DAYS * 86400 // STEP_S
    t = np.arange(n) * STEP_S
    stamps = [datetime.fromtimestamp(START.timestamp() + s, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for s in t]
    day = np.sin(2 * np.pi * t / 86400)
    paths = []
    for first in range(0, hosts, 100):
        out = path / f"fleet-{first:05d}.jsonl"
        with out.open("w") as f:
            for h in range(first, min(hosts, first + 100)):
                leak = h % 5 == 0
                slab = 1e9 + (rng.uniform(2e6, 8e6) * t / 3600 if leak else 0) + rng.normal(0, 2e7, n)
                used = 3e10 + 4e9 * day + rng.normal(0, 5e8, n) + (slab - 1e9)
                cache = 2e10 - 2e9 * day + rng.normal(0, 3e8, n)
                load = 4 + 2 * day + rng.normal(0, 0.5, n)
                kernel = "5.0" if leak else rng.choice(["5.3", "5.4"])
                host = f"h{h:04d}"
                for k in range(n):
                    f.write(
                        f'{{"timestamp":"{stamps[k]}","host":"{host}","kernel":"{kernel}",'
                        f'"mem_used_bytes":{used[k]:.0f},"mem_cache_bytes":{cache[k]:.0f},'
                        f'"slab_bytes":{slab[k]:.0f},"load":{load[k]:.3f}}}\n'
                    )
        paths.append(out)
    return paths


def cpu() -> float:
    usage = os.times()
    return usage.user + usage.system


def measure(fn: object) -> tuple[float, float]:
    wall, used = time.perf_counter(), cpu()
    fn()  # type: ignore[operator]
    return time.perf_counter() - wall, cpu() - used


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=BENCH / "out" / "trends")
    args = ap.parse_args()
    events = args.hosts * DAYS * 86400 // STEP_S
    work = args.out / f"hosts-{args.hosts}"
    work.mkdir(parents=True, exist_ok=True)
    data = kept_store(work / "data", DATASET, events, lambda: write(work, args.hosts, args.seed))
    for p in work.glob("fleet-*.jsonl"):
        p.unlink()
    with Rootsift(data, read_only=True) as rs:
        found = rs.trends(DATASET, measure="avg(slab_bytes)", by="host")
        bucket = found.bucket
        spec = QuerySpec(
            DATASET,
            breakdowns=["host"],
            calculations=[Calculation.parse("avg(slab_bytes)")],
            granularity=bucket,
            limit=10_000_000,
        )
        rows = len(rs.query(spec).rows)
        contenders = {
            "query": lambda: rs.query(spec),
            "trends": lambda: rs.trends(DATASET, measure="avg(slab_bytes)", by="host"),
        }
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in contenders}
        for run in range(args.runs):
            order = list(contenders) if run % 2 == 0 else list(reversed(contenders))
            for name in order:
                times[name].append(measure(contenders[name]))
    leaking = sum(1 for f in found.findings if f["kind"] == "trend")
    print(f"{args.hosts:,} hosts × {DAYS} days at 5 min: {events:,} events; bucket {bucket}, {rows:,} series points")
    print(f"trends flagged {leaking} hosts (planted: {len(range(0, args.hosts, 5))})")
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in times.items()}
    for name, (wall, used) in med.items():
        print(f"{name:>7}: wall {wall:6.2f} s   cpu {used:6.2f} s   (median of {args.runs})")
    print(
        f"trends / query: wall {med['trends'][0] / med['query'][0]:.2f}x   cpu {med['trends'][1] / med['query'][1]:.2f}x"
    )


if __name__ == "__main__":
    main()
