"""Shared bits of the benchmark: paths, making ``rootsift`` importable, small helpers."""

from __future__ import annotations

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
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``fn``; return (seconds, its result)."""
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def median(values: list[float]) -> float:
    """Median of a non-empty list."""
    return float(statistics.median(values))


def dir_bytes(directory: Path) -> int:
    """Bytes of every file below ``directory``."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
