"""File ingest: DuckDB's ``read_json`` into a table vs rootsift's ingest, each in a fresh process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from common import BENCH, dir_bytes, median, timed

KINDS = ("baseline", "rootsift")


@dataclass
class IngestRun:
    """One ingest subprocess: in-process seconds, rows, peak RSS, whole-process wall time."""

    kind: str
    seconds: float
    rows: int
    peak_rss_mib: float
    process_seconds: float
    bytes_on_disk: int
    cpu_seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def warm_page_cache(path: Path) -> None:
    """Read the input once so that neither contender pays for a cold page cache."""
    with open(path, "rb") as fh:
        while fh.read(16 << 20):
            pass


def target_for(kind: str, work: Path) -> Path:
    """Where ``kind`` writes: a DuckDB file for the baseline, a data directory for rootsift."""
    return work / ("baseline.duckdb" if kind == "baseline" else "rootsift-data")


def clear(target: Path) -> None:
    """Remove a previous run's output (file, WAL or directory)."""
    if target.is_dir():
        shutil.rmtree(target)
    for path in (target, target.with_name(target.name + ".wal")):
        path.unlink(missing_ok=True)


def run_one(kind: str, source: Path, work: Path) -> IngestRun:
    """Ingest ``source`` with ``kind`` into a fresh target under ``work``, in a new Python process."""
    target = target_for(kind, work)
    clear(target)
    cmd = [sys.executable, str(BENCH / "ingest_worker.py"), kind, str(source), str(target)]
    wall, proc = timed(lambda: subprocess.run(cmd, capture_output=True, text=True, check=False))
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} ingest failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    size = dir_bytes(target) if target.is_dir() else target.stat().st_size
    return IngestRun(kind, out["seconds"], out["rows"], out["peak_rss_mib"], wall, size, out.get("cpu_seconds", 0.0))


def bench_ingest(source: Path, work: Path, runs: int, log: Any = print) -> dict[str, Any]:
    """``runs`` rounds of both ingests, alternating which goes first; medians per contender.

    The outputs of the last round stay in ``work`` for the query benchmark.
    """
    work.mkdir(parents=True, exist_ok=True)
    warm_page_cache(source)
    results: dict[str, list[IngestRun]] = {k: [] for k in KINDS}
    for i in range(runs):
        order = KINDS if i % 2 == 0 else KINDS[::-1]
        for kind in order:
            run = run_one(kind, source, work)
            log(
                f"  ingest round {i + 1}/{runs} {kind:8s} {run.seconds:7.2f} s  {run.rows:>10,} rows  "
                f"peak RSS {run.peak_rss_mib:7.0f} MiB"
            )
            results[kind].append(run)
    rows = {k: {r.rows for r in v} for k, v in results.items()}
    if rows["baseline"] != rows["rootsift"]:
        raise RuntimeError(f"row counts differ between baseline and rootsift: {rows}")
    summary: dict[str, Any] = {"runs": {k: [asdict(r) for r in v] for k, v in results.items()}}
    for kind, items in results.items():
        summary[kind] = {
            "seconds": median([r.seconds for r in items]),
            "rows_per_s": median([r.rate for r in items]),
            "peak_rss_mib": max(r.peak_rss_mib for r in items),
            "process_seconds": median([r.process_seconds for r in items]),
            "bytes_on_disk": items[-1].bytes_on_disk,
        }
    summary["rate_ratio"] = summary["rootsift"]["rows_per_s"] / summary["baseline"]["rows_per_s"]
    summary["round_ratios"] = [r.rate / b.rate for r, b in zip(results["rootsift"], results["baseline"])]
    summary["baseline_db"] = str(target_for("baseline", work))
    summary["rootsift_data"] = str(target_for("rootsift", work))
    return summary
