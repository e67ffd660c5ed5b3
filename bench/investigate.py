"""investigate end to end on 10M events with a planted incident, as a whole process
(``rootsift investigate``: start-up, region scan, onset explanation, saturation, timeouts),
against the first query an engineer would run by hand, also as a whole process: a
time × duration heatmap of the same range (``rootsift query -c 'heatmap(duration_ms)'``).

    .venv/bin/python bench/investigate.py                  # 10M (input cached in bench/out)
    .venv/bin/python bench/investigate.py --n 1000000 --runs 5
    .venv/bin/python bench/investigate.py --before /tmp/old/src   # another checkout's code too

The incident: for 20 minutes of the 6-hour span, requests to host-007 take 30 times
longer. The store is made once (bench/out/investigate-<n>) from the cached input of
``gen.py`` with that change applied by DuckDB. Each contender runs once as a warm-up, then
``--runs`` times, the order rotated every run (the machine is shared and noisy); medians
of wall time and of CPU time (user + sys of the child process), each as a ratio to the
heatmap's in the same run. ``--before SRC`` runs investigate from another source tree as
a third contender (before/after in one run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb

from common import BENCH, SRC, kept_store, median, use_source_tree
from gen import cached_jsonl

use_source_tree()

from rootsift import Rootsift  # noqa: E402

DATASET = "events"
START_S = 1_790_000_000 + 3 * 3600  # the incident: 20 min from the middle of the 6 h span
END_S = START_S + 20 * 60


def planted(out: Path, n: int) -> Path:
    path = out / f"incident-{n}.jsonl"
    if not path.exists():
        source = cached_jsonl(out, n)
        tmp = path.with_name(path.name + ".partial")
        con = duckdb.connect()
        con.execute(
            f"COPY (SELECT * REPLACE (CASE WHEN host = 'host-007' AND epoch(CAST(timestamp AS TIMESTAMP)) "
            f"BETWEEN {START_S} AND {END_S} THEN duration_ms * 30 ELSE duration_ms END AS duration_ms) "
            f"FROM read_json('{source}', format='newline_delimited', timestampformat='%Y-%m-%dT%H:%M:%S.%fZ')) "
            f"TO '{tmp}' (FORMAT json)"
        )
        tmp.replace(path)
    return path


def store(out: Path, n: int) -> Path:
    return kept_store(out / f"investigate-{n}", DATASET, n, lambda: [planted(out, n)])


def timed_process(argv: list[str], src: Path) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the child, its stdout) of ``python -m rootsift ARGV``
    with ``src`` first on the path. A ``query`` is compiled every time, as the first query
    an engineer runs by hand is (no kept plan, ADR 0027)."""
    env = {**os.environ, "PYTHONPATH": str(src), "ROOTSIFT_PLAN_CACHE": "0"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "rootsift", *argv], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if run.returncode not in (0, 1):
        raise SystemExit(f"rootsift {' '.join(argv)} failed: {run.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, run.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    parser.add_argument("--before", type=Path, help="a source tree (its src/) to run investigate from as well")
    args = parser.parse_args()
    data = store(args.out, args.n)
    with Rootsift(data) as rs:  # a store kept from before samples were stored gets them (once)
        rs.datasets()
    common = ["--data", str(data), "--json"]
    contenders = {
        "investigate": (["investigate", DATASET, *common], SRC),
        "heatmap": (["query", DATASET, "-c", "heatmap(duration_ms)", *common], SRC),
    }
    if args.before is not None:
        contenders["investigate (before)"] = (["investigate", DATASET, *common], args.before.resolve())
    walls: dict[str, list[float]] = {k: [] for k in contenders}
    cpus: dict[str, list[float]] = {k: [] for k in contenders}
    outputs: dict[str, str] = {}
    names = list(contenders)
    for name in names:  # warm-up: the store's files in the page cache
        outputs[name] = timed_process(*contenders[name])[2]
    for run in range(args.runs):
        for name in names[run % len(names) :] + names[: run % len(names)]:
            wall, cpu, outputs[name] = timed_process(*contenders[name])
            walls[name].append(wall)
            cpus[name].append(cpu)
    result = json.loads(outputs["investigate"])
    anomaly = result.get("anomaly")
    top = next((f for f in result["findings"] if f["kind"] in ("dimension", "combination")), None)
    heat_wall, heat_cpu = median(walls["heatmap"]), median(cpus["heatmap"])
    report: dict[str, Any] = {
        "events": args.n,
        "method": result.get("method"),
        "anomaly": anomaly,
        "top_finding": top and {k: top.get(k) for k in ("field", "value", "conditions")},
        "runs": {"wall": walls, "cpu": cpus},
    }
    print(
        f"{args.n:,} events; found {anomaly and anomaly['kind']} {anomaly and anomaly['from']} … {anomaly and anomaly['to']}"
    )
    print(f"top finding: {report['top_finding']}")
    print(f"{'whole process':24} {'wall s':>8} {'/heatmap':>9} {'cpu s':>8} {'/heatmap':>9}")
    for name in names:
        wall, cpu = median(walls[name]), median(cpus[name])
        report[name] = {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}
        report[name] |= {"wall_ratio": round(wall / heat_wall, 2), "cpu_ratio": round(cpu / heat_cpu, 2)}
        print(f"{name:24} {wall:8.3f} {wall / heat_wall:9.2f} {cpu:8.3f} {cpu / heat_cpu:9.2f}")
    if args.before is not None:
        now, then = report["investigate"], report["investigate (before)"]
        print(f"after / before: wall {now['wall_s'] / then['wall_s']:.2f}, cpu {now['cpu_s'] / then['cpu_s']:.2f}")
    (args.out / f"investigate-{args.n}.json").write_text(json.dumps(report, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
