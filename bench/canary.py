"""canary's calibration: how often a whole watch raises a false alarm on A/A traffic
(target ≤ alpha), and how soon it stops on a regression, per boundary.

    .venv/bin/python bench/canary.py                       # 10 looks, 60 A/A trials, 30 per regression
    .venv/bin/python bench/canary.py --looks 20 --trials 40 --tolerance 0

Each trial writes a 30-minute stream (``--rate`` requests a second for each of v1 and
v2, log-normal latencies, median 20 ms, σ 0.6), ingests it, and replays the watch
(``canary --replay``: look k sees the first k intervals) with ``--metrics p50,p99`` and
compare's default tolerances (``--tolerance 0``: any significant change counts, as for a
plain test), under each way of spending alpha over the looks:

- ``every look at alpha``: the naive gate, what a dashboard alert on a running test does;
- ``bonferroni``: alpha / looks each;
- ``pocock`` (canary's default) and ``obrien-fleming``: group-sequential boundaries.

Scenarios: ``A/A`` (the false alarm rate over the whole watch), ``tail +25 %`` (v2's
requests above the p95 take 25 % longer from the start: p99 +25 %), and ``tail +25 %
from mid-watch`` (the same, only in the second half of the stream: how long after it
starts is it caught). Prints, per scenario and boundary, the share of watches that
stopped with a regression (95 % Wilson interval) and the median look at which they did.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

from common import BENCH, use_source_tree, wilson

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.analysis.canary import levels, schedule, watch  # noqa: E402

START = datetime(2024, 3, 1, tzinfo=UTC)
MINUTES = 30
SCENARIOS = ("A/A", "tail +25 %", "tail +25 % from mid-watch")
METRICS = ("p50(duration_ms)", "p99(duration_ms)")
BOUNDARIES = ("every look at alpha", "bonferroni", "pocock", "obrien-fleming")


def write(path: Path, rng: np.random.Generator, rate: int, scenario: str, looks: int) -> Path:
    n = MINUTES * 60 * rate
    t = np.sort(rng.uniform(0, MINUTES * 60, 2 * n))
    version = rng.permutation(np.repeat(np.array(["v1", "v2"]), n))
    d = rng.lognormal(math.log(20), 0.6, 2 * n)
    if scenario != "A/A":
        line = math.exp(math.log(20) + 0.6 * 1.6449)  # the p95
        onset = 0.0 if scenario == "tail +25 %" else (looks // 2) * MINUTES * 60 / looks
        d = np.where((version == "v2") & (d > line) & (t >= onset), d * 1.25, d)
    start = START.timestamp()
    rows = (
        orjson.dumps({"timestamp": start + float(t[i]), "version": str(version[i]), "duration_ms": float(d[i])})
        for i in range(2 * n)
    )
    path.write_bytes(b"\n".join(rows) + b"\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--looks", type=int, default=10)
    parser.add_argument("--trials", type=int, default=60, help="A/A trials (half as many per regression)")
    parser.add_argument("--rate", type=int, default=5, help="requests a second, per version")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--tolerance", type=float, default=None, help="for both metrics (default: compare's, 5 %%)")
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    rng = np.random.default_rng(11)
    every = timedelta(minutes=MINUTES / args.looks)
    for b in BOUNDARIES[2:]:
        print(f"{b}: levels {[float(f'{x:.3g}') for x in levels(args.looks, args.alpha, b)]}")
    print(f"bonferroni: {args.alpha / args.looks:.3g} each; {args.looks} looks, {every} apart", flush=True)
    print(f"tolerance: {'compare defaults' if args.tolerance is None else args.tolerance}", flush=True)
    results = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, Rootsift(Path(tmp) / "data") as rs:
        for scenario in SCENARIOS:
            trials = args.trials if scenario == "A/A" else max(10, args.trials // 2)
            stops: dict[str, list[int]] = {b: [] for b in BOUNDARIES}
            for t in range(trials):
                name = f"t{SCENARIOS.index(scenario)}_{t}"
                rs.ingest(write(Path(tmp) / "e.jsonl", rng, args.rate, scenario, args.looks), name)

                def run(level: float, upto: datetime | None, name: str = name) -> object:
                    return rs.compare(
                        name,
                        a='version = "v1"',
                        b='version = "v2"',
                        a_from=START,
                        b_from=START,
                        a_to=upto,
                        b_to=upto,
                        metrics=",".join(METRICS),
                        tolerance=None if args.tolerance is None else dict.fromkeys(METRICS, args.tolerance),
                        alpha=level,
                    )

                for boundary in BOUNDARIES:
                    if boundary == "every look at alpha":
                        looks = (
                            (k, run(args.alpha, upto).verdict == "regression")  # type: ignore[attr-defined]
                            for k, upto in enumerate(schedule(START, every, every * args.looks), 1)
                        )
                        stop = next((k for k, bad in looks if bad), None)
                    else:
                        seen = list(
                            watch(
                                run,  # type: ignore[arg-type]
                                start=START,
                                every=every,
                                total=every * args.looks,
                                alpha=args.alpha,
                                boundary=boundary,
                                replay=True,
                            )
                        )
                        stop = seen[-1].look if seen[-1].regressed else None
                    if stop is not None:
                        stops[boundary].append(stop)
                rs.backend.drop_dataset(name)
            for boundary in BOUNDARIES:
                k = len(stops[boundary])
                lo, hi = wilson(k, trials)
                median = statistics.median(stops[boundary]) if stops[boundary] else None
                results.append(
                    {
                        "scenario": scenario,
                        "boundary": boundary,
                        "trials": trials,
                        "stopped": k / trials,
                        "stopped_ci95": [round(lo, 3), round(hi, 3)],
                        "median_stop_look": median,
                    }
                )
                print(
                    f"{scenario:<24} {boundary:<20} stopped {k / trials:6.1%} [{lo:.1%}, {hi:.1%}]"
                    f"   median look {median if median is not None else '-'}   ({trials} trials)",
                    flush=True,
                )
    print(f"{time.perf_counter() - started:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "canary-calibration.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
