"""The scenario cases over fresh seeds: how often the first printed finding is the truth.

    .venv/bin/python bench/first_finding.py                           # every case, seeds 101-120
    .venv/bin/python bench/first_finding.py --seeds 101-130 --cases gateway-investigate,gateway-slow-box
    .venv/bin/python bench/first_finding.py --json

Every case of ``tests/test_cases.py`` whose command exists is run as the test runs it
(the same command line, through the CLI with ``--json``) on seeds the tests never use,
and the case's own check (``rootsift.scenarios.checks``, the one the test applies) is
applied to the raw result. A check reads the findings in the order they are printed:
what it asks to be first must be first. Per case: the hit rate with its 95 % Wilson
interval, and the seeds that failed with the check's complaint. Where the truth names
what the very first printed finding must point at (``checks.FIRST``: the gateway's
upstream or zone, the stampede's statement, the stall's first completer), that rate
is printed too (``first``): stricter than a check that reads further down.

Each (scenario, seed) is generated and ingested once into
``bench/out/first_finding/SCENARIO-SEED`` (``--store``) and kept between runs (the cases
of one scenario share one ingest); ``--fresh`` makes them again. Measured on the shared
2-core machine under load: every runnable case over 20 seeds took 918 s with the stores
made on the way (cascade ~3 s a seed to make, gateway ~10 s, the others in between), and
the six cascade and gateway cases 190-310 s with the stores kept.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from common import BENCH, ROOT, use_source_tree, wilson

use_source_tree()

from click.testing import CliRunner  # noqa: E402

from rootsift import Rootsift, scenarios  # noqa: E402
from rootsift.cli import main  # noqa: E402
from rootsift.scenarios.base import TRUTH_DIR, TRUTH_FILE, Manifest  # noqa: E402
from rootsift.scenarios.checks import FIRST  # noqa: E402

OUT = BENCH / "out" / "first_finding"


def load_cases() -> list[Any]:
    """The case list of tests/test_cases.py (the single list of cases)."""
    spec = importlib.util.spec_from_file_location("test_cases", ROOT / "tests" / "test_cases.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["test_cases"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return list(module.CASES)


def seeds_of(text: str) -> list[int]:
    """``101-120``, ``101,105,110-112``: the seeds."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def made(scenario: str, seed: int, fresh: bool, store: Path) -> tuple[Path, Manifest, dict[str, Any]]:
    """The scenario's seed generated and ingested, kept under ``store``: (data, manifest, truth)."""
    root = store / f"{scenario}-{seed}"
    done = root / "done"
    if fresh or not done.exists():
        shutil.rmtree(root, ignore_errors=True)
        scenarios.generate(scenario, root / "out", seed)
        with Rootsift(root / "data") as rs:
            for summary in scenarios.ingest(rs, root / "out"):
                if summary.rejects:
                    raise SystemExit(f"{scenario} seed {seed}: {summary.rejects} rejects: {summary.first_rejects}")
        done.write_text("ok\n")
    truth = json.loads((root / "out" / TRUTH_DIR / TRUTH_FILE).read_text())
    return root / "data", Manifest.read(root / "out"), truth


def run_case(case: Any, data: Path, manifest: Manifest, truth: dict[str, Any]) -> tuple[str | None, str | None]:
    """(None when the case's check holds, else why not; the same for the first printed
    finding's check, ``FIRST``, when the case has one: else None)."""
    run = CliRunner().invoke(main, [*case.argv(manifest, truth), "--data", str(data), "--json"])
    if run.exit_code not in (0, 1):
        why = f"exit {run.exit_code}: {run.output.strip().splitlines()[-1:] or ''}"
        return why, why
    result = json.loads(run.stdout)
    first = FIRST.get(case.name)
    return _why(case.check, result, truth), _why(first, result, truth) if first is not None else None


def _why(check: Any, result: dict[str, Any], truth: dict[str, Any]) -> str | None:
    try:
        check(result, truth)
    except (AssertionError, KeyError, IndexError, ValueError, TypeError) as exc:
        where = exc.__traceback__
        while where is not None and where.tb_next is not None:
            where = where.tb_next
        line = where.tb_lineno if where is not None else 0
        return f"{type(exc).__name__} at checks line {line}" + (f": {exc}" if str(exc) else "")
    return None


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="101-120", help="seeds, e.g. 101-120 or 101,103,110-115")
    parser.add_argument("--cases", default="", help="case names, comma-separated (default: every runnable case)")
    parser.add_argument("--fresh", action="store_true", help="generate and ingest every seed again")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--store", type=Path, default=OUT, help=f"where generated stores are kept (default {OUT})")
    args = parser.parse_args()
    seeds = seeds_of(args.seeds)
    if any(s <= 10 for s in seeds):
        print("note: seeds 1-10 are the tests' own; fresh seeds are above 10", file=sys.stderr)
    every = [c for c in load_cases() if c.command in main.commands]
    wanted = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = sorted(set(wanted) - {c.name for c in every})
    if unknown:
        raise SystemExit(
            f"--cases: no runnable case {', '.join(unknown)} (runnable: {', '.join(c.name for c in every)})"
        )
    cases = [c for c in every if not wanted or c.name in wanted]
    failed: dict[str, dict[int, str]] = {c.name: {} for c in cases}
    missed: dict[str, dict[int, str]] = {c.name: {} for c in cases if c.name in FIRST}
    started = time.perf_counter()
    for scenario in dict.fromkeys(c.scenario for c in cases):
        for seed in seeds:
            data, manifest, truth = made(scenario, seed, args.fresh, args.store)
            for case in (c for c in cases if c.scenario == scenario):
                why, first = run_case(case, data, manifest, truth)
                if why is not None:
                    failed[case.name][seed] = why
                if first is not None:
                    missed[case.name][seed] = first
            if not args.json:
                print(f"  {scenario} seed {seed} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    report = []
    for case in cases:
        hits = len(seeds) - len(failed[case.name])
        low, high = wilson(hits, len(seeds))
        report.append(
            {
                "case": case.name,
                "command": case.command,
                "hits": hits,
                "seeds": len(seeds),
                "rate": round(hits / len(seeds), 4),
                "wilson_95": [round(low, 4), round(high, 4)],
                "failed": {str(s): why for s, why in failed[case.name].items()},
            }
        )
        if case.name in missed:
            firsts = len(seeds) - len(missed[case.name])
            low, high = wilson(firsts, len(seeds))
            report[-1]["first"] = {
                "hits": firsts,
                "rate": round(firsts / len(seeds), 4),
                "wilson_95": [round(low, 4), round(high, 4)],
                "failed": {str(s): why for s, why in missed[case.name].items()},
            }
    seconds = round(time.perf_counter() - started, 1)
    if args.json:
        print(json.dumps({"seeds": args.seeds, "seconds": seconds, "cases": report}, indent=1))
        return
    print(f"first finding per case, seeds {args.seeds} ({len(seeds)} each), {seconds} s")
    for r in report:
        low, high = r["wilson_95"]
        print(f"{r['case']:28} check  {r['hits']:3}/{r['seeds']:<3} {r['rate']:6.1%}  95 % [{low:.0%}, {high:.0%}]")
        for seed, why in r["failed"].items():
            print(f"{'':35}seed {seed}: {why[:150]}")
        if "first" in r:
            f = r["first"]
            low, high = f["wilson_95"]
            print(f"{'':28} first  {f['hits']:3}/{r['seeds']:<3} {f['rate']:6.1%}  95 % [{low:.0%}, {high:.0%}]")
            for seed, why in f["failed"].items():
                print(f"{'':35}seed {seed}: {why[:150]}")


if __name__ == "__main__":
    main_()
