"""The command line's start-up time against ``python -c 'import duckdb'``, measured in the
same run (target: every command ≤ 2× the baseline).

    .venv/bin/python bench/startup.py                  # 9 rounds
    .venv/bin/python bench/startup.py --runs 15
    .venv/bin/python bench/startup.py --analyses          # investigate, explain and changes too
    git archive 8fc6715 src | tar -x -C /tmp/before && .venv/bin/python bench/startup.py --src src --src /tmp/before/src

Each round runs every command once in a fresh process, in turn (so a noisy moment hits
them all alike); the table gives each one's median wall time and its ratio to the
median of ``import duckdb``. ``datasets``, ``query``, ``schema`` and ``retention`` read a small store (1,000 events)
written once in a temporary folder; ``query`` runs with ``--from -100000d`` (a
relative start, another time on every run) after one untimed round, so it runs the plan
kept for it, and ``query, compiled`` is the same query compiled every time (ADR 0027).
``--src`` (repeatable) measures other source trees,
e.g. an older commit's, in the same rounds against the same baseline. ``--analyses`` adds
``investigate``, ``explain`` and ``changes`` on the same store: their start-up is mostly
imports (numpy, scipy.special), the store's 1,000 events cost little.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SRC, use_source_tree

DATASET = "api"


BASELINE = "python -c 'import duckdb' (baseline)"


def analyses(data: Path) -> dict[str, list[str]]:
    """The analysis commands timed with ``--analyses``, by name."""
    rootsift = [sys.executable, "-m", "rootsift"]
    return {
        "rootsift investigate": [*rootsift, "investigate", DATASET, "--data", str(data), "--json"],
        "rootsift explain": [
            *rootsift,
            "explain",
            DATASET,
            "--select",
            "duration_ms > 90",
            "--data",
            str(data),
            "--json",
        ],
        "rootsift changes": [
            *rootsift,
            "changes",
            DATASET,
            "--measure",
            "p50(duration_ms)",
            "--data",
            str(data),
            "--json",
        ],
    }


COMPILED = "rootsift query, compiled"
"""The query again with ``ROOTSIFT_PLAN_CACHE=0``: compiled through sqlglot every time,
as any query is the first time it runs (ADR 0027)."""


def commands(data: Path) -> dict[str, list[str]]:
    """The rootsift commands timed, by name."""
    rootsift = [sys.executable, "-m", "rootsift"]
    query = [*rootsift, "query", DATASET, "-c", "count", "-c", "p99(duration_ms)", "--from", "-100000d"]
    return {
        "rootsift --help": [*rootsift, "--help"],
        "rootsift datasets": [*rootsift, "datasets", "--data", str(data)],
        "rootsift query": [*query, "--data", str(data)],
        COMPILED: [*query, "--data", str(data)],
        "rootsift schema": [*rootsift, "schema", DATASET, "--data", str(data)],
        "rootsift retention --dry-run": [
            *rootsift,
            *("retention", DATASET, "--keep", "99999d", "--dry-run", "--data", str(data)),
        ],
    }


def small_store(data: Path, src: Path) -> None:
    lines = "".join(
        json.dumps({"timestamp": 1_700_000_000 + i, "duration_ms": 5 + i % 97, "status": 200 + 300 * (i % 50 == 0)})
        + "\n"
        for i in range(1000)
    )
    events = data.parent / "events.jsonl"
    events.write_text(lines)
    code = "import sys; from rootsift import Rootsift; Rootsift(sys.argv[1]).ingest(sys.argv[2], dataset=sys.argv[3])"
    env = {**os.environ, "PYTHONPATH": str(src)}
    subprocess.run([sys.executable, "-c", code, str(data), str(events), DATASET], check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="Rounds (each command once per round).")
    parser.add_argument(
        "--src", type=Path, action="append", help="A source tree whose rootsift to time (repeatable; default src/)."
    )
    parser.add_argument("--analyses", action="store_true", help="Time investigate, explain and changes too.")
    args = parser.parse_args()
    trees = [p.resolve() for p in args.src or [SRC]]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        small_store(data, trees[0])
        todo = {
            ("", "python -c pass (context)"): ([sys.executable, "-c", "pass"], os.environ),
            ("", BASELINE): ([sys.executable, "-c", "import duckdb"], os.environ),
        }
        for tree in trees:
            # kept plans in this run's folder: the first round keeps them, not the user's cache
            env = {**os.environ, "PYTHONPATH": str(tree), "ROOTSIFT_CACHE_DIR": str(Path(tmp) / "cache")}
            timed = commands(data) | (analyses(data) if args.analyses else {})
            todo.update({(str(tree), name): (argv, env) for name, argv in timed.items()})
            todo[(str(tree), COMPILED)] = (todo[(str(tree), COMPILED)][0], {**env, "ROOTSIFT_PLAN_CACHE": "0"})
        for argv, env in todo.values():  # untimed: the page cache warm, the query's plan kept
            run_once(argv, env)
        times: dict[tuple[str, str], list[float]] = {key: [] for key in todo}
        cpu: dict[tuple[str, str], list[float]] = {key: [] for key in todo}
        for _ in range(args.runs):
            for key, (argv, env) in todo.items():
                wall, used = run_once(argv, env)
                times[key].append(wall)
                cpu[key].append(used)
    medians = {key: statistics.median(ts) for key, ts in times.items()}
    cpu_medians = {key: statistics.median(ts) for key, ts in cpu.items()}
    base, cpu_base = medians[("", BASELINE)], cpu_medians[("", BASELINE)]
    print(f"start-up, median of {args.runs} rounds (CPU: the process's user + system time)")
    print(f"{'source tree':28} {'command':38} {'wall s':>7} {'× duckdb':>9} {'CPU s':>7} {'× duckdb':>9}")
    for (tree, name), m in medians.items():
        c = cpu_medians[(tree, name)]
        print(f"{tree[-28:]:28} {name:38} {m:7.3f} {m / base:9.2f} {c:7.3f} {c / cpu_base:9.2f}")


def run_once(argv: list[str], env: dict[str, str] | os._Environ[str]) -> tuple[float, float]:
    """One run's wall time and the child's CPU time (user + system, from wait4: a loaded
    machine stretches wall time far more than CPU time)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, argv)
    return wall, usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    use_source_tree()
    main()
