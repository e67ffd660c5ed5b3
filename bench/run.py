"""rootsift foundation benchmark: file ingest and queries against plain DuckDB, same machine, same run.

    python bench/run.py                          # N = 1M
    python bench/run.py --sizes 1000000,10000000 --out bench/out

Prints a markdown table and writes ``<out>/results.json``. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import duckdb
import psutil

from common import ROOT
from gen import cached_jsonl
from ingest import bench_ingest
from queries import bench_queries
from report import markdown, rows_for


def default_runs(n: int) -> int:
    """Ingest rounds per size: three (median) up to 2M rows, one above (a 10M round takes minutes)."""
    return 3 if n <= 2_000_000 else 1


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        except OSError:
            return ""

    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "git_head": git("rev-parse", "HEAD"),
        "src_uncommitted": git("status", "--porcelain", "--", "src").splitlines(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def bench_size(n: int, out: Path, seed: int, runs: int, repeats: int) -> dict[str, Any]:
    """Generate (or reuse) the input for ``n`` events, then run the ingest and query benchmarks."""
    started = time.perf_counter()
    source = cached_jsonl(out, n, seed)
    print(
        f"N={n:,}: input {source} ({source.stat().st_size / 2**20:,.0f} MiB, "
        f"ready in {time.perf_counter() - started:.1f} s)",
        flush=True,
    )
    work = out / f"work-{n}"
    ingest = bench_ingest(source, work, runs, log=lambda m: print(m, flush=True))
    queries = bench_queries(
        Path(ingest["rootsift_data"]), Path(ingest["baseline_db"]), repeats, log=lambda m: print(m, flush=True)
    )
    return {
        "n": n,
        "input": str(source),
        "input_bytes": source.stat().st_size,
        "ingest": ingest,
        "queries": queries,
        "seconds": time.perf_counter() - started,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="comma-separated event counts (default 1000000)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out", help="inputs, stores and results.json")
    parser.add_argument("--seed", type=int, default=7, help="generator seed")
    parser.add_argument("--runs", type=int, default=None, help="ingest rounds per size (default 3 up to 2M, else 1)")
    parser.add_argument("--repeats", type=int, default=5, help="warm timed runs per query and contender")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(), "sizes": []}
    for n in sizes:
        results["sizes"].append(bench_size(n, out, args.seed, args.runs or default_runs(n), args.repeats))
        (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    table = markdown([row for r in results["sizes"] for row in rows_for(r["n"], r)])
    results["table"] = table
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print()
    print(table)
    print(f"\nresults: {out / 'results.json'}")


if __name__ == "__main__":
    main()
