"""compare's calibration: how often it calls a regression on A/A splits (target ≤ 5 %), and
how often it detects injected changes, against a plain Mann–Whitney test at the same level.

    .venv/bin/python bench/compare.py                      # sizes 1k, 10k, 100k per cohort
    .venv/bin/python bench/compare.py --sizes 1000,10000 --trials 40

Each trial draws cohorts A and B of log-normal latencies (median 20 ms, σ 0.6), writes
them as JSON lines, ingests them, and runs ``compare --metrics p50,p99`` (tolerance 0, so
any significant change counts, the way a plain test counts it):

- ``A/A``: B drawn like A;
- ``p99 +10 %``: B's events above A's p95 made 10 % longer (the tail only);
- ``p50 +5 %``: every B event 5 % longer;
- ``variance ×1.5``: B's log-σ times √1.5, same median.

A rootsift "detection" is an overall regression verdict. Mann–Whitney (two-sided, at
the same alpha) is the plain test Kayenta builds on. Prints a table of rates per size and
scenario, with a 95 % Wilson interval for rootsift's rate.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson
from scipy import stats as sps

from common import BENCH, use_source_tree, wilson

use_source_tree()

from rootsift import Rootsift  # noqa: E402

SCENARIOS = ("A/A", "p99 +10 %", "p50 +5 %", "variance x1.5")


def draw(rng: np.random.Generator, n: int, scenario: str) -> tuple[np.ndarray, np.ndarray]:
    a = rng.lognormal(math.log(20), 0.6, n)
    if scenario == "variance x1.5":
        return a, rng.lognormal(math.log(20), 0.6 * math.sqrt(1.5), n)
    b = rng.lognormal(math.log(20), 0.6, n)
    if scenario == "p99 +10 %":
        b = np.where(b > np.quantile(a, 0.95), b * 1.10, b)
    elif scenario == "p50 +5 %":
        b = b * 1.05
    return a, b


def write(path: Path, a: np.ndarray, b: np.ndarray) -> Path:
    rows = [{"timestamp": 1_700_000_000 + i * 0.001, "cohort": "a", "duration_ms": float(x)} for i, x in enumerate(a)]
    rows += [{"timestamp": 1_700_000_000 + i * 0.001, "cohort": "b", "duration_ms": float(x)} for i, x in enumerate(b)]
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(7)
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, Rootsift(Path(tmp) / "data") as rs:
        for n in sizes:
            trials = max(10, args.trials if n <= 10_000 else args.trials // 2)
            for scenario in SCENARIOS:
                ours = plain = 0
                for t in range(trials):
                    a, b = draw(rng, n, scenario)
                    name = f"t{n}_{SCENARIOS.index(scenario)}_{t}"
                    rs.ingest(write(Path(tmp) / "e.jsonl", a, b), name)
                    result = rs.compare(
                        name,
                        a='cohort = "a"',
                        b='cohort = "b"',
                        metrics="p50(duration_ms),p99(duration_ms)",
                        tolerance={"p50(duration_ms)": 0.0, "p99(duration_ms)": 0.0},
                        alpha=args.alpha,
                    )
                    ours += result.verdict == "regression"
                    plain += float(sps.mannwhitneyu(b, a, alternative="two-sided").pvalue) < args.alpha
                    rs.backend.drop_dataset(name)
                lo, hi = wilson(ours, trials)
                results.append(
                    {
                        "n": n,
                        "scenario": scenario,
                        "trials": trials,
                        "rootsift": ours / trials,
                        "rootsift_ci95": [round(lo, 3), round(hi, 3)],
                        "mann_whitney": plain / trials,
                    }
                )
                print(
                    f"n={n:>7,} {scenario:<14} rootsift {ours / trials:6.1%} [{lo:.1%}, {hi:.1%}]   "
                    f"Mann-Whitney {plain / trials:6.1%}   ({trials} trials)",
                    flush=True,
                )
    print(f"{time.perf_counter() - started:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare-calibration.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
