"""Shared bits of the benchmark: paths, making ``rootsift`` importable, small helpers."""

from __future__ import annotations

import math
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
SRC = ROOT / "src"
DATASET = "bench"


def use_source_tree() -> None:
    """Import ``rootsift`` from this checkout's ``src/`` (it need not be installed)."""
    if str(SRC) not in sys.path:
        sys.path.insert(0, str(SRC))


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB.

    Linux's ``VmHWM`` belongs to the process's own address space. ``ru_maxrss`` is not
    used where VmHWM exists: across fork/exec it inherits the parent's peak, so a child
    of a big parent reports the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn``; return (seconds, its result)."""
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def wilson(k: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson interval of a rate of k in n."""
    z = 1.96
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def median(values: list[float]) -> float:
    """Median of a non-empty list."""
    return float(statistics.median(values))


def dir_bytes(directory: Path) -> int:
    """Bytes of every file below ``directory``."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def kept_store(data: Path, dataset: str, events: int, sources: Callable[[], list[Path]]) -> Path:
    """``data`` holding ``dataset`` with ``events`` events, kept between runs: when it holds
    anything else, the dataset is ingested afresh from ``sources()`` (one ingest per path)."""
    use_source_tree()
    from rootsift import Rootsift

    if data.exists():
        with Rootsift(data, read_only=True) as rs:
            if [(d.name, d.events) for d in rs.datasets()] == [(dataset, events)]:
                return data
    paths = sources()
    with Rootsift(data) as rs:
        if dataset in {d.name for d in rs.datasets()}:
            rs.backend.drop_dataset(dataset)
        for i, path in enumerate(paths, 1):
            started = time.perf_counter()
            summary = rs.ingest(path, dataset)
            print(f"ingest {i}/{len(paths)}: {summary.events:,} events in {time.perf_counter() - started:.1f} s")
    return data
