"""Whole-process CPU (user + system, every thread) of rootsift commands run from two source
trees on one backend, rounds alternating which tree goes first; medians and the ratio.
What it is for: "is this change slower for a command, start-up included?" on a machine
whose wall times are noisy.

    git archive main src | tar -x -C /tmp/main
    .venv/bin/python bench/commands_cpu.py --src /tmp/main/src --backend chdb
    .venv/bin/python bench/commands_cpu.py --src /tmp/main/src --backend chdb --commands ingest,explain \\
        --events 1000000 --rounds 4

``--src`` is the other tree (the baseline); this checkout's ``src/`` is the second. Each
tree ingests the same generated file (bench/gen.py) into its own store once; ``ingest``
rounds ingest it again into a fresh store. ``queries`` is not a command: a child process
of each tree opens its store and times ``rs.query`` on bench/backends.py's cases
(``--repeats`` each, CPU per query), start-up excluded.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import SRC
from gen import cached_jsonl

COMMANDS = {
    "datasets": ["datasets"],
    "query": ["query", "api", "-c", "count", "-c", "p99(duration_ms)", "-b", "service"],
    "explain": ["explain", "api", "--select", "duration_ms > 500", "--json"],
    "ingest": ["ingest", "{source}", "--dataset", "api"],
}


def query_cpu(tree: Path, data: Path, backend: str, repeats: int) -> dict[str, float]:
    """CPU seconds per ``rs.query`` of each bench/backends.py case, in a child importing ``tree``."""
    import json

    script = (
        "import json, sys, time\n"
        f"sys.path[:0] = [{str(tree)!r}, {str(Path(__file__).parent)!r}]\n"
        "from rootsift.api import Rootsift\n"
        "from rootsift.query.spec import Calculation, QuerySpec\n"
        "from backends import CASES\n"
        "out = {}\n"
        f"with Rootsift({str(data)!r}, engine={backend!r}, read_only=True) as rs:\n"
        "    for name, kw in CASES.items():\n"
        "        spec = QuerySpec('api', **{**kw, 'calculations': [Calculation.parse(x) for x in kw['calculations']]})\n"
        "        rs.query(spec)\n"
        "        t = time.process_time()\n"
        f"        for _ in range({repeats}):\n"
        "            rs.query(spec)\n"
        f"        out[name] = (time.process_time() - t) / {repeats}\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def cpu_of(tree: Path, argv: list[str]) -> float:
    """CPU seconds of one ``python -m rootsift`` run importing rootsift from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(tree), ROOTSIFT_PLAN_CACHE="0")  # queries compiled (ADR 0027)
    subprocess.run([sys.executable, "-m", "rootsift", *argv], check=True, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", type=Path, required=True, help="the baseline tree's src/")
    parser.add_argument("--backend", default="chdb")
    parser.add_argument("--commands", default="datasets,query,explain,ingest")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=10, help="rs.query calls per case and round (queries)")
    args = parser.parse_args()
    source = cached_jsonl(Path(tempfile.gettempdir()) / "rootsift-bench", args.events)
    trees = {"baseline": args.src.resolve(), "this": SRC}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {name: Path(tmp) / name for name in trees}
        for name, tree in trees.items():
            argv = [a.format(source=source) for a in COMMANDS["ingest"]]
            cpu_of(tree, [*argv, "--data", str(stores[name]), "--backend", args.backend])
        print(f"{args.events:,} events, {args.rounds} rounds, --backend {args.backend}; CPU seconds, medians")
        for command in args.commands.split(","):
            if command == "queries":
                per: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
                for r in range(args.rounds):
                    for name in list(trees)[:: 1 if r % 2 == 0 else -1]:
                        per[name].append(query_cpu(trees[name], stores[name], args.backend, args.repeats))
                for case in per["this"][0]:
                    base = statistics.median(x[case] for x in per["baseline"])
                    this = statistics.median(x[case] for x in per["this"])
                    print(
                        f"{case:<18} baseline {base * 1e3:7.1f} ms  this {this * 1e3:7.1f} ms  this/baseline {this / base:.3f}"
                    )
                continue
            cpu: dict[str, list[float]] = {name: [] for name in trees}
            for r in range(args.rounds):
                for name in list(trees)[:: 1 if r % 2 == 0 else -1]:
                    data = stores[name]
                    if command == "ingest":
                        data = Path(tmp) / f"{name}-ingest"
                        shutil.rmtree(data, ignore_errors=True)
                    argv = [a.format(source=source) for a in COMMANDS[command]]
                    cpu[name].append(cpu_of(trees[name], [*argv, "--data", str(data), "--backend", args.backend]))
            base, this = statistics.median(cpu["baseline"]), statistics.median(cpu["this"])
            pairs = ", ".join(f"{t / b:.2f}" for b, t in zip(cpu["baseline"], cpu["this"]))
            print(
                f"{command:<10} baseline {base:7.2f}  this {this:7.2f}  this/baseline {this / base:.3f}  (per round {pairs})"
            )


if __name__ == "__main__":
    main()
