"""DuckDB vs chdb (embedded ClickHouse) on the same events: ingest, queries, explain, and
rootsift's ClickHouse SQL vs hand-written ClickHouse SQL.

Each backend runs in its own child process (chdb opens one store per process; the child's
CPU time is its own, every thread counted), ingesting the same JSON-lines file once and
then timing each case ``--rounds`` times; rounds alternate which backend runs first.
Ratios are chdb / DuckDB (wall and CPU), and rootsift-on-chdb / hand-written ClickHouse
SQL (the issue's ≤ 1.2× target), each measured in the same run.

    python bench/backends.py --events 1000000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import DATASET, median, use_source_tree
from gen import cached_jsonl

CASES = {
    "p99 per minute": {"calculations": ["p99(duration_ms)"], "granularity": "1m"},
    "breakdown": {
        "calculations": ["count", "avg(duration_ms)", "p50(duration_ms)"],
        "breakdowns": ["endpoint"],
        "where": "status >= 500",
    },
    "heatmap": {"calculations": ["heatmap(duration_ms)"], "granularity": "10m"},
    "count by service": {"calculations": ["count"], "breakdowns": ["service", "version"]},
}
HAND = {  # the same answers, as one would write them for ClickHouse by hand
    "p99 per minute": "SELECT toStartOfMinute(timestamp) AS t, quantileExactWeighted(0.99)(duration_ms, 1) "
    "FROM rootsift.bench GROUP BY t ORDER BY t",
    "breakdown": "SELECT endpoint, count(), avg(duration_ms), quantileExactWeighted(0.5)(duration_ms, 1) "
    "FROM rootsift.bench WHERE status >= 500 GROUP BY endpoint ORDER BY count() DESC",
    "heatmap": "SELECT toStartOfInterval(timestamp, INTERVAL 10 MINUTE) AS t, "
    "toInt64(floor(log2(duration_ms) * 4)) AS b, count() FROM rootsift.bench WHERE duration_ms > 0 GROUP BY t, b",
    "count by service": "SELECT service, version, count() FROM rootsift.bench GROUP BY service, version "
    "ORDER BY count() DESC",
}


def child(backend: str, data: Path, source: Path, rounds: int) -> dict[str, Any]:
    """In the child: ingest (if the store is new), then time each case; return seconds."""
    use_source_tree()
    from rootsift.api import Rootsift
    from rootsift.query.spec import Calculation, QuerySpec

    out: dict[str, Any] = {}
    with Rootsift(data, engine=backend) as rs:
        if not any(d.name == DATASET for d in rs.datasets()):
            w, c = time.perf_counter(), time.process_time()
            rs.ingest(source, dataset=DATASET)
            out["ingest"] = (time.perf_counter() - w, time.process_time() - c)
        for name, kw in CASES.items():
            spec = QuerySpec(DATASET, **{**kw, "calculations": [Calculation.parse(x) for x in kw["calculations"]]})
            rs.query(spec)  # warm: the first run reads the files into the page cache
            times = []
            for _ in range(rounds):
                w, c = time.perf_counter(), time.process_time()
                rs.query(spec)
                times.append((time.perf_counter() - w, time.process_time() - c))
            out[name] = (median([t[0] for t in times]), median([t[1] for t in times]))
            if backend == "chdb":
                session = rs.backend.session  # type: ignore[attr-defined]
                session.query(HAND[name], "ArrowTable")
                hand = []
                for _ in range(rounds):
                    w, c = time.perf_counter(), time.process_time()
                    session.query(HAND[name], "ArrowTable")
                    hand.append((time.perf_counter() - w, time.process_time() - c))
                out[f"hand: {name}"] = (median([t[0] for t in hand]), median([t[1] for t in hand]))
        w, c = time.perf_counter(), time.process_time()
        rs.explain(DATASET, select="duration_ms > 500")
        out["explain"] = (time.perf_counter() - w, time.process_time() - c)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", choices=("duckdb", "chdb"))
    parser.add_argument("--data", type=Path)
    parser.add_argument("--source", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.data, args.source, args.rounds)))
        return
    source = cached_jsonl(Path(tempfile.gettempdir()) / "rootsift-bench", args.events)
    results: dict[str, list[dict[str, Any]]] = {"duckdb": [], "chdb": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(2):  # the first pass ingests; the order alternates
            for backend in ("duckdb", "chdb") if r % 2 == 0 else ("chdb", "duckdb"):
                cmd = [sys.executable, __file__, "--child", backend, "--data", str(Path(tmp) / backend)]
                cmd += ["--source", str(source), "--rounds", str(args.rounds)]
                done = subprocess.run(cmd, check=True, capture_output=True, text=True)
                results[backend].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"{args.events:,} events, {args.rounds} rounds per case (medians), chdb / DuckDB:")
    print(f"{'case':<22}{'duckdb s':>10}{'chdb s':>10}{'wall ×':>8}{'cpu ×':>8}{'vs hand ×':>11}")
    for name in ["ingest", *CASES, "explain"]:
        runs = [(d[name], c[name]) for d, c in zip(results["duckdb"], results["chdb"]) if name in d and name in c]
        duck_w, duck_c = median([d[0] for d, _ in runs]), median([d[1] for d, _ in runs])
        ch_w, ch_c = median([c[0] for _, c in runs]), median([c[1] for _, c in runs])
        hands = [c[f"hand: {name}"] for c in results["chdb"] if f"hand: {name}" in c]
        vs_hand = f"{ch_w / median([h[0] for h in hands]):.2f}" if hands else "-"
        print(f"{name:<22}{duck_w:>10.3f}{ch_w:>10.3f}{ch_w / duck_w:>8.2f}{ch_c / duck_c:>8.2f}{vs_hand:>11}")


if __name__ == "__main__":
    main()
