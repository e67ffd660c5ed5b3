"""compare's A/A calibration per quantile and cohort size: how often a quantile of two
cohorts drawn alike is called a change at 5 % (target: 5 % or below, within Monte Carlo
error).

    .venv/bin/python bench/compare_calibration.py                   # 100, 1k, 10k per cohort, 300 trials
    .venv/bin/python bench/compare_calibration.py --sizes 100,1000 --trials 100

Each trial draws cohorts A and B of ``n`` log-normal latencies each (median 20 ms, σ 0.6,
``--sigma``) into its own time window of one dataset, and runs compare in-process on
``p50,p90,p99,p99.9`` with tolerance 0 (any significant change counts) and alpha 0.2 over
the four metrics, so that each quantile is tested at 5 % (Bonferroni). Per size and
quantile it prints:

- ``gated``: compare's rejection rate as it ships (regression or improvement), with its
  95 % Wilson interval; a quantile with fewer than ``TAIL_EVENTS`` events beyond it in a
  cohort is "not enough data", never a rejection (``not tested`` says how often);
- ``ungated``: the same test without that rule (its p-value below 5 %), the behaviour
  before it, measured on the same trials.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson

from common import BENCH, use_source_tree, wilson

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.analysis.compare.quantile import TAIL_EVENTS  # noqa: E402

QUANTILES = ("p50", "p90", "p99", "p99.9")
START = datetime(2024, 3, 1, tzinfo=UTC)
WINDOW = 100_000.0
"""Seconds of one trial's time window: each trial is read by its range alone."""


def write(path: Path, rng: np.random.Generator, n: int, trials: int, sigma: float) -> Path:
    """``trials`` windows, each with ``n`` events of cohort a and ``n`` of b, drawn alike."""
    with path.open("wb") as out:
        for t in range(trials):
            values = rng.lognormal(math.log(20), sigma, 2 * n)
            offsets = np.sort(rng.uniform(0, WINDOW * 0.9, 2 * n))
            cohort = rng.permutation(np.repeat(np.array(["a", "b"]), n))
            out.write(
                b"".join(
                    orjson.dumps(
                        {
                            "timestamp": START.timestamp() + t * WINDOW + float(s),
                            "cohort": str(c),
                            "duration_ms": float(v),
                        }
                    )
                    + b"\n"
                    for s, c, v in zip(offsets, cohort, values, strict=True)
                )
            )
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--sigma", type=float, default=0.6)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    rng = np.random.default_rng(20261124)
    metrics = ",".join(f"{q}(duration_ms)" for q in QUANTILES)
    zero = {f"{q}(duration_ms)": 0.0 for q in QUANTILES}
    rows = []
    started = time.perf_counter()
    print(f"A/A at 5 % per quantile, {args.trials} trials per size, tail rule {TAIL_EVENTS} events")
    with tempfile.TemporaryDirectory() as tmp, Rootsift(Path(tmp) / "data") as rs:
        for n in (int(s) for s in args.sizes.split(",")):
            name = f"n{n}"
            rs.ingest(write(Path(tmp) / "e.jsonl", rng, n, args.trials, args.sigma), name)
            gated = dict.fromkeys(QUANTILES, 0)
            ungated = dict.fromkeys(QUANTILES, 0)
            untested = dict.fromkeys(QUANTILES, 0)
            for t in range(args.trials):
                lo, hi = START + timedelta(seconds=t * WINDOW), START + timedelta(seconds=(t + 1) * WINDOW)
                result = rs.compare(
                    name,
                    a='cohort = "a"',
                    b='cohort = "b"',
                    a_from=lo,
                    a_to=hi,
                    b_from=lo,
                    b_to=hi,
                    metrics=metrics,
                    tolerance=zero,
                    alpha=0.2,  # 0.05 per quantile after Bonferroni over the four
                )
                for q, m in zip(QUANTILES, result.metrics, strict=True):
                    gated[q] += m["verdict"] in ("regression", "improvement")
                    ungated[q] += m["p_value"] < 0.05
                    untested[q] += not m["enough_events"]
            for q in QUANTILES:
                g_lo, g_hi = wilson(gated[q], args.trials)
                u_lo, u_hi = wilson(ungated[q], args.trials)
                row = {
                    "n": n,
                    "quantile": q,
                    "trials": args.trials,
                    "gated": gated[q] / args.trials,
                    "gated_ci95": [round(g_lo, 4), round(g_hi, 4)],
                    "ungated": ungated[q] / args.trials,
                    "ungated_ci95": [round(u_lo, 4), round(u_hi, 4)],
                    "not_tested": untested[q] / args.trials,
                }
                rows.append(row)
                print(
                    f"n={n:>6,} {q:<6} gated {row['gated']:6.1%} [{g_lo:.1%}, {g_hi:.1%}]   "
                    f"ungated {row['ungated']:6.1%} [{u_lo:.1%}, {u_hi:.1%}]   not tested {row['not_tested']:.0%}",
                    flush=True,
                )
            rs.backend.drop_dataset(name)
    print(f"{time.perf_counter() - started:.0f} s")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare-quantile-calibration.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
