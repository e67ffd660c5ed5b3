"""compare's A/A calibration: how often two cohorts drawn alike are called a change at
the stated level (target: that level or below, within Monte Carlo error). Two parts:
quantiles of events per cohort size, and per-host metrics (``max(field)`` per host and
the like) per number of hosts and shape of the hosts' levels.

    .venv/bin/python bench/compare_calibration.py                   # quantiles: 100, 1k, 10k per cohort, 300 trials
    .venv/bin/python bench/compare_calibration.py --sizes 100,1000 --trials 100
    .venv/bin/python bench/compare_calibration.py --part hosts      # hosts: 2,000 trials per cell (~2 min quiet)
    .venv/bin/python bench/compare_calibration.py --part all

**Quantiles.**
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

**Hosts**: one value per host, A's hosts against B's (3 against
5, 5 against 5, 10 against 10), drawn from host-level shapes that hold the null (equal
means of the logarithms, or equal means where a value can be negative): log-normal,
log-normal with a spread 30 times wider in one cohort than in the other (either way
round; the memleak scenario's shape), normal levels, heavy-tailed levels (log-t with 2
degrees of freedom, Pareto with tail index 1.5), and levels about zero (the linear
scale). Each trial runs compare's own test of units (``compare_units``) at 5 % and at
1.25 % (four metrics at 5 %); ``--e2e-trials`` more trials per cell go through
``Rootsift.compare(per="host")`` on stored snapshots, to show the whole path agrees.
It also prints the power of the same test against an 8-fold peak, for a few spreads of
A's hosts: what a handful of hosts can show.
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from common import BENCH, use_source_tree, wilson

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.analysis import stats  # noqa: E402
from rootsift.analysis.compare.quantile import TAIL_EVENTS  # noqa: E402
from rootsift.analysis.compare.units import compare_units  # noqa: E402

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
    parser.add_argument("--part", choices=("quantiles", "hosts", "all"), default="quantiles")
    parser.add_argument("--host-trials", type=int, default=2000, help="trials per cell of the hosts part")
    parser.add_argument("--e2e-trials", type=int, default=100, help="of them, through Rootsift.compare")
    args = parser.parse_args()
    if args.part in ("all", "hosts"):
        hosts_part(args.host_trials, args.e2e_trials, args.out)
    if args.part in ("all", "quantiles"):
        quantiles_part(args)


def quantiles_part(args: argparse.Namespace) -> None:
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


HOST_SIZES = ((3, 5), (5, 5), (10, 10))
LEVELS = (0.05, 0.0125)
SHAPES = (
    "lognormal",
    "lognormal, A 3x wider",
    "lognormal, A 30x wider",
    "lognormal, B 3x wider",
    "lognormal, B 30x wider",
    "normal",
    "log-t(2)",
    "pareto(1.5)",
    "about zero",
)
"""The hosts' levels under the null: each cohort's hosts drawn from its own shape."""


def levels(shape: str, rng: np.random.Generator, n: int, cohort: str) -> Any:
    """``n`` hosts' values of one cohort, under the null for the scale compare uses on them."""
    if shape == "lognormal":
        return rng.lognormal(math.log(2e9), 0.5, n)
    if shape.startswith("lognormal,"):  # the same geometric mean, spreads 3:1 or 30:1
        which, factor = shape.split(", ")[1].split("x")[0].split()
        wide = which.lower() == cohort
        return rng.lognormal(math.log(2e9), 0.6 if wide else 0.6 / float(factor), n)
    if shape == "normal":
        return rng.normal(100.0, 20.0, n)
    if shape == "log-t(2)":
        return np.exp(math.log(2e9) + 0.5 * np.clip(rng.standard_t(2, n), -100, 100))  # finite doubles
    if shape == "pareto(1.5)":
        return 1e9 * (1 + rng.pareto(1.5, n))
    return rng.normal(0.0, 1e6, n)  # slopes about zero: either sign, so the linear scale


def welch_p(a: dict[Any, float], b: dict[Any, float]) -> float:
    """The p-value of the test compare used before (Welch's t, Satterthwaite's degrees of
    freedom), on the same scale: the baseline of the table."""
    xa, xb = np.array(list(a.values())), np.array(list(b.values()))
    if (xa > 0).all() and (xb > 0).all():
        xa, xb = np.log(xa), np.log(xb)
    se, df = stats.welch(float(xa.var(ddof=1)), xa.size, float(xb.var(ddof=1)), xb.size)
    return stats.t_interval(float(xb.mean() - xa.mean()), se, df, 0.05)[0]


def host_rates(shape: str, n_a: int, n_b: int, trials: int, seed: int) -> list[int]:
    """Rejections at each of ``LEVELS`` over ``trials`` A/A draws of ``shape``: compare's
    test, then Welch's on the same draws."""
    rng = np.random.default_rng(seed)
    hits = [0 for _ in range(2 * len(LEVELS))]
    for _ in range(trials):
        a = dict(enumerate(levels(shape, rng, n_a, "a")))
        b = {f"b{i}": v for i, v in enumerate(levels(shape, rng, n_b, "b"))}
        ps = (compare_units(a, b, 0.05)["p_value"], welch_p(a, b))
        hits = [h + (p < level) for h, (p, level) in zip(hits, [(p, x) for p in ps for x in LEVELS], strict=True)]
    return hits


def host_rates_e2e(rs: Rootsift, shape: str, n_a: int, n_b: int, trials: int, seed: int, tmp: Path) -> int:
    """Rejections at 5 % of ``max(value)`` per host through ``Rootsift.compare``: each host
    has three snapshots whose maximum is its level."""
    rng = np.random.default_rng(seed)
    path, name = tmp / "hosts.jsonl", f"hosts_{seed}"
    with path.open("wb") as out:
        for t in range(trials):
            for cohort, n in (("a", n_a), ("b", n_b)):
                for h, level in enumerate(levels(shape, rng, n, cohort)):
                    for k, shrink in enumerate((0.9, 1.0, 0.95)):
                        row = {
                            "timestamp": START.timestamp() + t * WINDOW + 60 * k,
                            "cohort": cohort,
                            "host": f"{cohort}{h}",
                            "value": float(level) * shrink if level > 0 else float(level) / shrink,
                        }
                        out.write(orjson.dumps(row) + b"\n")
    rs.ingest(path, name)
    hits = 0
    for t in range(trials):
        lo, hi = START + timedelta(seconds=t * WINDOW), START + timedelta(seconds=(t + 1) * WINDOW)
        got = rs.compare(
            name,
            a='cohort = "a"',
            b='cohort = "b"',
            a_from=lo,
            a_to=hi,
            b_from=lo,
            b_to=hi,
            metrics="max(value)",
            per="host",
            tolerance={"max(value)": 0.0},
            alpha=0.05,
        ).metrics[0]
        assert got["unit"] == "host" and (got["n_a"], got["n_b"]) == (n_a, n_b)
        hits += got["verdict"] in ("regression", "improvement")
    rs.backend.drop_dataset(name)
    return hits


def hosts_part(trials: int, e2e: int, out: Path) -> None:
    """The A/A table of compare's test of units, then its power against an 8-fold peak."""
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    shown = " / ".join(f"{x:.2%}" for x in LEVELS)
    print(f"A/A per host: rejection rate at {shown} (95 % Wilson interval), {trials} trials per cell")
    print(f"{'':<24} {'hosts':<7} {'Behrens-Fisher (compare)':<52} Welch (before), same draws")
    with tempfile.TemporaryDirectory() as tmp, Rootsift(Path(tmp) / "data") as rs:
        for i, shape in enumerate(SHAPES):
            for j, (n_a, n_b) in enumerate(HOST_SIZES):
                seed = 20261125 + 100 * i + j
                hits = host_rates(shape, n_a, n_b, trials, seed)
                row: dict[str, Any] = {"shape": shape, "n_a": n_a, "n_b": n_b, "trials": trials}
                cells = []
                for name, k, level in zip(("bf", "bf", "welch", "welch"), hits, LEVELS * 2, strict=True):
                    lo, hi = wilson(k, trials)
                    row[f"{name}_at_{level}"] = [k / trials, round(lo, 4), round(hi, 4)]
                    cells.append(f"{k / trials:6.2%} [{lo:.2%}, {hi:.2%}]" if name == "bf" else f"{k / trials:6.2%}")
                if e2e:
                    k = host_rates_e2e(rs, shape, n_a, n_b, e2e, seed + 7, Path(tmp))
                    row["e2e_at_0.05"] = [k / e2e, e2e]
                    cells.append(f"through compare {k / e2e:5.1%} of {e2e}")
                rows.append(row)
                print(f"{shape:<24} {n_a:>2} v {n_b:<2} " + "  ".join(cells), flush=True)
        print("power against B's peak 1/8 of A's (log-normal hosts, B's alike), at 1.25 %:")
        for n_a, n_b in ((3, 5), (4, 4), (4, 5), (5, 5)):
            for sigma in (0.2, 0.4, 0.6):
                power = _power(n_a, n_b, sigma, max(trials // 5, 100))
                rows.append({"power": True, "n_a": n_a, "n_b": n_b, "sigma_a": sigma, "at_0.0125": power})
                print(f"  {n_a} v {n_b}, A's log-spread {sigma}: {power:6.1%}", flush=True)
    print(f"{time.perf_counter() - started:.0f} s")
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare-host-calibration.json").write_text(json.dumps(rows, indent=1) + "\n")


def _power(n_a: int, n_b: int, sigma_a: float, trials: int) -> float:
    """How often an 8-fold lower geometric mean in B (B's hosts alike, spread 0.02) is
    significant at 1.25 % when A's hosts spread ``sigma_a`` on the log scale."""
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(trials):
        a = dict(enumerate(rng.lognormal(math.log(8e9), sigma_a, n_a)))
        b = {f"b{i}": float(v) for i, v in enumerate(rng.lognormal(math.log(1e9), 0.02, n_b))}
        hits += compare_units(a, b, 0.0125)["p_value"] < 0.0125
    return hits / trials


if __name__ == "__main__":
    main()
