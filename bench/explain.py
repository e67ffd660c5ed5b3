"""explain against the naive form: one DuckDB GROUP BY per column, on the same store.

    .venv/bin/python bench/explain.py                       # 10M events (input cached in bench/out)
    .venv/bin/python bench/explain.py --n 1000000 --runs 5
    .venv/bin/python bench/explain.py --copies 10           # 100M: the 10M file ingested ten times

The naive form asks the same questions one column at a time, as the tools that rank
attributes by a difference of shares do: for every field explain looks at (ids
included), counts per value (for every measure, per log-spaced bin) in the selection
and the baseline, a ``SELECT col, count(*) FILTER (WHERE sel), count(*) FILTER (WHERE
NOT sel) ... GROUP BY col`` — and no statistics. explain does all of that in one pass, then
the statistics, the combinations pass and the field pilot. Both run on the same DuckDB
connection; medians of ``--runs`` after one warm-up run each. Prints the ratio.

``explain --sampled`` (the baseline from the store's 1-in-64 sample, the selection
exact) runs too, and is checked against the exact result: the largest difference in a
baseline share among the exact run's dimension findings, and whether the top findings
are the same.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from common import BENCH, kept_store, median, use_source_tree
from gen import cached_jsonl

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.analysis.counts import bin_sql  # noqa: E402
from rootsift.analysis.explain import Explanation  # noqa: E402
from rootsift.analysis.fields import plan_fields  # noqa: E402
from rootsift.analysis.frame import SEL, Frame  # noqa: E402
from rootsift.store.sqltext import ident  # noqa: E402

DATASET = "events"
SELECT = "duration_ms > 1000"


def store(out: Path, n: int, copies: int) -> Path:
    """A data directory holding the n-event file ingested ``copies`` times (made once, kept)."""
    return kept_store(out / f"explain-{n}x{copies}", DATASET, n * copies, lambda: [cached_jsonl(out, n)] * copies)


def naive(rs: Rootsift) -> tuple[float, int]:
    """Seconds for one GROUP BY per column explain looks at; the number of queries."""
    frame = Frame(rs.backend, DATASET, None, None, select=SELECT)
    plan = plan_fields(frame)
    ids = [f for f, why in plan.skipped.items() if "unique id" in why]  # grouped by the naive form all the same
    columns = sorted({*plan.dimensions, *plan.measures, *plan.heavy, *ids})
    source, params = frame.sql([(ident(f), f, []) for f in columns])
    queries = [f"SELECT {ident(d)} AS v" for d in [*plan.dimensions, *plan.heavy, *ids]]
    queries += [f"SELECT {bin_sql(ident(m))} AS v" for m in plan.measures]
    started = time.perf_counter()
    for head in queries:
        sql = f"{head}, count(*) FILTER (WHERE {SEL}), count(*) FILTER (WHERE NOT {SEL}) FROM ({source}) GROUP BY ALL"
        rs.backend.execute_sql(sql, params)
    return time.perf_counter() - started, len(queries)


def agreement(exact: Explanation, sampled: Explanation, top: int = 5) -> dict[str, Any]:
    """How far the sampled result is from the exact one."""
    key = lambda f: (f.kind, f.field, repr(f.value), repr(f.conditions))  # noqa: E731
    fast = {key(f): f for f in sampled.findings}
    diffs = [
        abs((fast[key(f)].baseline_fraction or 0) - (f.baseline_fraction or 0))
        for f in exact.findings
        if f.kind == "dimension" and key(f) in fast
    ]
    return {
        "max_baseline_share_diff": round(max(diffs), 5) if diffs else None,
        "dimension_findings_compared": len(diffs),
        "top": top,
        "same_top": [key(f) for f in exact.findings[:top]] == [key(f) for f in sampled.findings[:top]],
        "findings": {"exact": len(exact.findings), "sampled": len(sampled.findings)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    data = store(args.out, args.n, args.copies)
    with Rootsift(data) as rs:  # a store kept from before samples were stored gets them (once)
        rs.datasets()
    with Rootsift(data, read_only=True) as rs:
        rows = rs.datasets()[0].events
        rs.explain(DATASET, select=SELECT)  # warm-up: the first query in a process is slower
        naive(rs)
        rs.explain(DATASET, select=SELECT, sampled=True)
        ours, theirs, sampled = [], [], []
        result = fast = None
        for _ in range(args.runs):
            started = time.perf_counter()
            result = rs.explain(DATASET, select=SELECT)
            ours.append(time.perf_counter() - started)
            seconds, queries = naive(rs)
            theirs.append(seconds)
            started = time.perf_counter()
            fast = rs.explain(DATASET, select=SELECT, sampled=True)
            sampled.append(time.perf_counter() - started)
    assert result is not None and fast is not None
    accuracy = agreement(result, fast)
    fields = [f for f, info in result.fields.items() if info["role"] != "skipped"]
    report = {
        "events": rows,
        "selection": result.selection["events"],
        "fields_compared": len(fields),
        "naive_queries": queries,
        "explain_s": round(median(ours), 3),
        "naive_s": round(median(theirs), 3),
        "ratio_explain_over_naive": round(median(ours) / median(theirs), 3),
        "findings": len(result.findings),
        "tests": result.method.get("tests"),
        "sampled_s": round(median(sampled), 3),
        "sampled": fast.method.get("sampling"),
        "sampled_vs_exact": accuracy,
        "runs": {"explain": ours, "naive": theirs, "sampled": sampled},
    }
    print(f"{rows:,} events, {len(fields)} fields compared, selection {result.selection['events']:,} ({SELECT})")
    print(f"explain        {report['explain_s']:8.3f} s   (one pass + statistics + combinations + pilot)")
    print(f"naive GROUP BY {report['naive_s']:8.3f} s   ({queries} queries, counts only)")
    print(f"ratio          {report['ratio_explain_over_naive']:8.3f}   (explain / naive; below 1 is faster)")
    print(
        f"sampled        {report['sampled_s']:8.3f} s   (ratio to exact {median(sampled) / median(ours):.3f}; "
        f"{fast.method.get('sampling', {}).get('statement', 'no sample')})"
    )
    print(
        f"sampled vs exact: largest baseline-share difference {accuracy['max_baseline_share_diff']}, "
        f"top {accuracy['top']} the same: {accuracy['same_top']}"
    )
    (args.out / f"explain-{args.n}x{args.copies}.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
