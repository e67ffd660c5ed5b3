"""``changes`` on a per-minute p50 per host, against the same query without the analysis
(target at 10M events: ``changes`` ≤ 2 s).

    .venv/bin/python bench/changes.py                      # 10M (input cached in bench/out)
    .venv/bin/python bench/changes.py --n 1000000 --runs 5
    .venv/bin/python bench/changes.py --processes --before /tmp/old/src   # whole processes, another tree too

The store is investigate's (bench/investigate.py): 6 hours of events, host-007 30 times
slower for 20 minutes. Contenders alternate, a warm-up first; the medians of wall and of
CPU time (user + sys of this process) of each, and their ratios, are printed, then the
CPU of one more run by phase (the series through the query model; the detector).

``--processes`` times whole processes instead (``rootsift changes`` and ``rootsift query``
with the same series, start-up and imports included, as bench/investigate.py does), and
``--before SRC`` adds ``changes`` run from another source tree.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from common import BENCH, SRC, median, use_source_tree
from investigate import DATASET, START_S, store, timed_process

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.query.spec import Calculation, QuerySpec  # noqa: E402


def timed(fn):  # type: ignore[no-untyped-def]
    cpu, wall = os.times(), time.perf_counter()
    out = fn()
    end = os.times()
    return time.perf_counter() - wall, (end.user - cpu.user) + (end.system - cpu.system), out


def phases(rs: Rootsift) -> dict[str, float]:
    """CPU seconds of one ``changes`` run's phases: the series through the query model, and
    the change-point detector over every host (analysis/changes/detect.py)."""
    from rootsift.analysis.changes import detect as det
    from rootsift.analysis.changes import series as ser

    def cpu() -> float:
        t = os.times()
        return t.user + t.system

    c0 = cpu()
    made = ser.build(rs.backend, DATASET, ser.parse_measure("p50(duration_ms)"), by="host", granularity="1m")
    c1 = cpu()
    det.detect_many([s.values for s in made.series])
    return {"series (query model)": c1 - c0, f"detect x{len(made.series)}": cpu() - c1}


def processes(data: Path, runs: int, before: Path | None) -> None:
    """Medians of wall and CPU time of whole ``rootsift changes`` and ``rootsift query``
    processes on the same series (alternated, a warm-up first)."""
    common = ["--by", "host", "-g", "1m", "--data", str(data), "--json"]
    contenders = {
        "changes": (["changes", DATASET, "--measure", "p50(duration_ms)", *common], SRC),
        "query": (
            [
                "query",
                DATASET,
                "-c",
                "p50(duration_ms)",
                "-b",
                "host",
                "-g",
                "1m",
                "--limit",
                "1000000",
                "--data",
                str(data),
                "--json",
            ],
            SRC,
        ),
    }
    if before is not None:
        contenders["changes (before)"] = (contenders["changes"][0], before.resolve())
    names = list(contenders)
    for name in names:
        timed_process(*contenders[name])
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in names}
    for run in range(runs):
        for name in names[run % len(names) :] + names[: run % len(names)]:
            wall, cpu, _ = timed_process(*contenders[name])
            times[name].append((wall, cpu))
    q_wall, q_cpu = (median([t[i] for t in times["query"]]) for i in (0, 1))
    print(f"{'whole process':18} {'wall s':>8} {'/query':>7} {'cpu s':>8} {'/query':>7}")
    for name in names:
        w, c = median([t[0] for t in times[name]]), median([t[1] for t in times[name]])
        print(f"{name:18} {w:8.3f} {w / q_wall:7.2f} {c:8.3f} {c / q_cpu:7.2f}")
    print(
        "runs (wall, cpu): " + "; ".join(f"{k}: {[(round(w, 2), round(c, 2)) for w, c in v]}" for k, v in times.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    parser.add_argument("--processes", action="store_true", help="time whole processes (start-up included)")
    parser.add_argument(
        "--before", type=Path, help="with --processes: a source tree (its src/) to run changes from too"
    )
    args = parser.parse_args()
    data = store(args.out, args.n)
    if args.processes:
        with Rootsift(data) as rs:  # samples stored once, outside the timing
            rs.datasets()
        processes(data, args.runs, args.before)
        return
    spec = QuerySpec(
        DATASET,
        breakdowns=["host"],
        calculations=[Calculation.parse("p50(duration_ms)")],
        granularity="1m",
        limit=10**7,
    )
    with Rootsift(data) as rs:
        rs.datasets()
    with Rootsift(data, read_only=True) as rs:

        def ours():  # type: ignore[no-untyped-def]
            return rs.changes(DATASET, measure="p50(duration_ms)", by="host", granularity="1m")

        def theirs():  # type: ignore[no-untyped-def]
            return rs.query(spec)

        ours(), theirs()
        times: dict[str, list[tuple[float, float]]] = {"changes": [], "query": []}
        result = None
        for i in range(args.runs):
            order = [("changes", ours), ("query", theirs)]
            for name, fn in order if i % 2 == 0 else order[::-1]:
                wall, cpu, out = timed(fn)
                times[name].append((wall, cpu))
                result = out if name == "changes" else result
        split = phases(rs)
    assert result is not None
    found = [f for f in result.findings() if f["kind"] == "changepoint"]
    hit = [f for f in found if f.get("value") == "host-007"]
    print(
        f"{args.n:,} events; {len(found)} change points; host-007's: {[f['time'] for f in hit]} (planted at epoch {START_S})"
    )
    for name in ("changes", "query"):
        w, c = median([t[0] for t in times[name]]), median([t[1] for t in times[name]])
        print(f"{name:8s} wall {w:7.3f} s   cpu {c:7.3f} s")
    print("one more run, CPU by phase: " + ", ".join(f"{k} {v:.3f} s" for k, v in split.items()))
    wr = median([t[0] for t in times["changes"]]) / median([t[0] for t in times["query"]])
    cr = median([t[1] for t in times["changes"]]) / median([t[1] for t in times["query"]])
    print(f"ratio    wall {wr:7.2f}     cpu {cr:7.2f}   (changes / the same query)")


if __name__ == "__main__":
    main()
