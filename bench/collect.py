"""``collect procfs``: the cost of one sample against ingesting the same events as a file.

    .venv/bin/python bench/collect.py              # 7 rounds
    .venv/bin/python bench/collect.py --rounds 15

Baseline: ``Rootsift.ingest`` of one sample of this machine's /proc (default files),
written once as JSON lines, into a dataset that already holds samples (the collector's
steady state). Contenders, in the same rounds and in alternating order: one sample of
``collect_procfs`` with the default files, and without vmstat (whose ~180 counters pass
the 250-field limit, so every sample goes through the ``_overflow`` path). Prints the
median wall and CPU (user+sys of this process) time per sample and each one's ratio to
the baseline's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from common import use_source_tree

use_source_tree()

from rootsift.api import Rootsift  # noqa: E402
from rootsift.ingest.collect import DEFAULT_FILES, CollectSummary, Sampler, proc_files  # noqa: E402
from rootsift.ingest.formats.base import FormatOptions  # noqa: E402
from rootsift.ingest.rejects import RejectLog  # noqa: E402


def one_sample(path: Path) -> None:
    """This machine's /proc, sampled once with the collector's own sampler, as JSON lines."""
    files = proc_files(Path("/proc"), DEFAULT_FILES)
    summary = CollectSummary("bench", "bench", "/proc", files, 1.0)
    sampler = Sampler(
        Path("/proc"), files, FormatOptions(host="bench"), summary, RejectLog(path.with_suffix(".rej")), print
    )
    path.write_bytes(b"".join(sampler.sample(datetime.now(UTC))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sample = Path(tmp) / "sample.jsonl"
        one_sample(sample)
        rs = Rootsift(Path(tmp) / "data")
        no_vmstat = [f for f in DEFAULT_FILES if f != "vmstat"]
        contenders: dict[str, Callable[[], object]] = {
            "ingest of one sample as JSON lines (baseline)": lambda: rs.ingest(sample, "ingested", format="jsonl"),
            "collect procfs, one sample (default files)": lambda: rs.collect_procfs("collected", every=1, count=1),
            "collect procfs, one sample without vmstat": lambda: rs.collect_procfs(
                "narrow", every=1, count=1, files=no_vmstat
            ),
        }
        for run in contenders.values():
            run()  # each dataset starts with a sample: the steady state
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
        for r in range(args.rounds):
            order = list(contenders) if r % 2 == 0 else list(reversed(contenders))
            for name in order:
                wall, cpu = time.perf_counter(), time.process_time()
                contenders[name]()
                times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        rs.close()
    base = next(iter(times))
    base_wall = statistics.median(w for w, _ in times[base])
    base_cpu = statistics.median(c for _, c in times[base])
    print(f"{'per sample':<48} {'wall s':>8} {'ratio':>6} {'cpu s':>8} {'ratio':>6}")
    for name, pairs in times.items():
        wall = statistics.median(w for w, _ in pairs)
        cpu = statistics.median(c for _, c in pairs)
        print(f"{name:<48} {wall:8.3f} {wall / base_wall:6.2f} {cpu:8.3f} {cpu / base_cpu:6.2f}")


if __name__ == "__main__":
    main()
