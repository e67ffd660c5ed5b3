"""rootsift explain on a public multi-dimensional root-cause benchmark (../shared/rca_dev).

    .venv/bin/python bench/rca.py                       # every case of S and L
    .venv/bin/python bench/rca.py --limit 5             # the first 5 cases of each
    .venv/bin/python bench/rca.py --half dev            # the first half of each (development)
    .venv/bin/python bench/rca.py --half test           # the second half (out of sample)

Each case is one anomalous time point of a total metric summed over leaves (every
combination of the attributes ``a``…``e``): per leaf, the observed value (``real``) and
the forecast (``predict``). It is given to rootsift as a user would: one dataset per
case whose rows are the leaves twice, ``side = "real"`` and ``side = "predict"``, with
the value as the count field (a leaf with real = 52.5 stands for 52.5 observed events).
The side whose total is larger is the selection and the other the baseline: a root
cause is where the observed and the expected disagree, so its leaves are
over-represented on the larger side (the total fell: the forecast holds events the
observation lacks; it rose: the other way round). ``explain`` then answers with its
``cause_set`` (else its first dimension or combination finding), each element a set of
attribute=value pairs.

Scored exactly as the benchmark's README says: an element matches only with the same
pairs; per case TP, FP (distinct predicted elements not true), FN; F1 micro-averaged over
the cases of a dataset; exact top-1 = the predicted set equals the true set. Labels are
read only by the scorer, after the analysis; case_metadata.csv is never read. The
reference methods' scores on the same cases (from the benchmark's reference_per_case.csv,
measured on the same files; over all cases they are the README's table) are printed next
to rootsift's, with the mean seconds per case (writing the events, ingest and explain, in
process).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import ROOT, use_source_tree

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.analysis.explain import Explanation  # noqa: E402

DATA = ROOT.parent / "shared" / "rca_dev"
METHODS = {"riskloc": "RiskLoc", "autoroot": "AutoRoot", "r_adtributor": "R-Adtributor", "adtributor": "Adtributor"}
Element = frozenset[tuple[str, str]]


def cases(data: Path) -> dict[str, list[str]]:
    """Case paths per dataset, in generation order (the order of labels.jsonl; only the
    path is taken from it here)."""
    out: dict[str, list[str]] = {"S": [], "L": []}
    for line in (data / "labels.jsonl").read_text().splitlines():
        path = json.loads(line)["case"]
        out[path.split("/")[0]].append(path)
    return out


def to_events(case: Path, out: Path) -> tuple[list[str], float, float]:
    """Write the case as CSV events (each leaf twice, the value as ``event_count``):
    (attributes, total real, total predict)."""
    with gzip.open(case, "rt") as src, out.open("w") as dst:
        header = src.readline().strip().split(",")
        attrs = header[:-2]
        dst.write("timestamp," + ",".join(attrs) + ",side,event_count\n")
        real = predict = 0.0
        for line in src:
            parts = line.rstrip("\n").split(",")
            keys = ",".join(parts[:-2])
            r, p = float(parts[-2]), float(parts[-1])
            real += r
            predict += p
            dst.write(f"2024-01-01T00:00:00Z,{keys},real,{parts[-2]}\n")
            dst.write(f"2024-01-01T00:00:00Z,{keys},predict,{parts[-1]}\n")
    return attrs, real, predict


def answer(result: Explanation, attrs: list[str]) -> list[Element]:
    """rootsift's top-1 root-cause set: the cause set, else the first value finding."""
    found = result.as_dict()
    chosen: list[list[dict[str, Any]]] = []
    if found.get("cause_set"):
        chosen = [c.get("conditions") or [{"field": c["field"], "value": c["value"]}] for c in found["cause_set"]]
    else:
        for f in found["findings"]:
            if f["kind"] == "combination":
                chosen = [f["conditions"]]
            elif f["kind"] == "dimension" and f["value"] is not None:
                chosen = [[{"field": f["field"], "value": f["value"]}]]
            if chosen:
                break
    return [frozenset((c["field"], str(c["value"])) for c in conds) for conds in chosen]


def run_case(rs: Rootsift, case: Path, work: Path, name: str) -> tuple[list[Element], float]:
    start = time.perf_counter()
    attrs, real, predict = to_events(case, work / f"{name}.csv")
    rs.ingest(work / f"{name}.csv", name, format="csv")
    larger, smaller = ("real", "predict") if real > predict else ("predict", "real")
    result = rs.explain(name, select=f'side = "{larger}"', baseline=f'side = "{smaller}"')
    return answer(result, attrs), time.perf_counter() - start


def score(predicted: list[Element], truth: list[Element]) -> tuple[int, int, int]:
    got = set(predicted)
    tp = sum(1 for t in set(truth) if t in got)
    return tp, len(got) - tp, len(set(truth)) - tp


def labels(data: Path) -> dict[str, list[Element]]:
    out = {}
    for line in (data / "labels.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[row["case"]] = [frozenset((k, str(v)) for k, v in rc.items()) for rc in row["root_causes"]]
    return out


def published(data: Path, paths: list[str]) -> dict[str, tuple[float, float]]:
    """The reference methods' (micro F1, exact top-1) on the same cases, from the
    benchmark's ``reference_per_case.csv`` (their per-case TP/FP/FN, measured on these files)."""
    want = set(paths)
    sums: dict[str, list[int]] = {}
    lines = (data / "reference_per_case.csv").read_text().splitlines()
    head = lines[0].split(",")
    for line in lines[1:]:
        row = dict(zip(head, line.split(",")))
        if row["case"] in want and row["algorithm"] in METHODS:
            tp, fp, fn, ex = sums.setdefault(row["algorithm"], [0, 0, 0, 0])
            sums[row["algorithm"]] = [
                tp + int(row["TP"]),
                fp + int(row["FP"]),
                fn + int(row["FN"]),
                ex + int(row["exact"]),
            ]
    return {
        METHODS[a]: (2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0, ex / len(want))
        for a, (tp, fp, fn, ex) in sums.items()
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--limit", type=int, default=None, help="only the first N cases of each dataset (after --half)")
    ap.add_argument("--half", choices=["all", "dev", "test"], default="all")
    ap.add_argument("--datasets", default="S,L")
    ap.add_argument("--show", action="store_true", help="print each case's answer and truth")
    args = ap.parse_args()
    if not (args.data / "labels.jsonl").exists():
        sys.exit(f"no benchmark at {args.data} (labels.jsonl missing)")
    todo = cases(args.data)
    truth: dict[str, list[Element]] | None = None
    for ds in args.datasets.split(","):
        paths = todo[ds]
        half = len(paths) // 2
        paths = {"all": paths, "dev": paths[:half], "test": paths[half:]}[args.half]
        paths = paths[: args.limit] if args.limit else paths
        answers: dict[str, list[Element]] = {}
        times = []
        with tempfile.TemporaryDirectory() as tmp, Rootsift(Path(tmp) / "data") as rs:
            for i, path in enumerate(paths):
                answers[path], seconds = run_case(rs, args.data / path, Path(tmp), f"case{i}")
                times.append(seconds)
                (Path(tmp) / f"case{i}.csv").unlink()
        truth = truth or labels(args.data)  # the scorer's, after every analysis of the dataset
        tp = fp = fn = exact = 0
        per_case = []
        for path in paths:
            t, f, n = score(answers[path], truth[path])
            tp, fp, fn, exact = tp + t, fp + f, fn + n, exact + (f == 0 and n == 0)
            per_case.append(2 * t / (2 * t + f + n) if t + f + n else 1.0)
            if args.show:
                show = lambda els: "; ".join("&".join(f"{k}={v}" for k, v in sorted(e)) for e in els)  # noqa: E731
                mark = "=" if f == 0 and n == 0 else " "
                print(f"{mark} {path}: got {show(answers[path])} | truth {show(truth[path])}")
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 1.0
        n = len(paths)
        print(
            f"{ds} ({args.half}, {n} cases): rootsift F1 {f1:.3f}  exact {exact / n:.3f} ({exact}/{n})  "
            f"mean F1 per case {statistics.fmean(per_case):.3f}  TP/FP/FN {tp}/{fp}/{fn}  "
            f"{statistics.fmean(times):.2f} s/case"
        )
        for method, (pf1, pex) in published(args.data, paths).items():
            print(f"    {method:<12} F1 {pf1:.3f}  exact {pex:.3f}   (reference run, the same {n} cases)")


if __name__ == "__main__":
    main()
