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

``explain --sampled`` runs too (the store's 1-in-64 sample; the selection from it as well
when it holds 1,000 selected events), checked against the exact result: findings the
exact run lacks, exact findings with an effect larger than twice the stated error that it
missed, and the largest share difference among the findings both have.
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

import rootsift.analysis.explain as explain_module  # noqa: E402
from rootsift import Rootsift  # noqa: E402
from rootsift.analysis import sql as q  # noqa: E402
from rootsift.analysis.counts import bin_key  # noqa: E402
from rootsift.analysis.explain import Explanation  # noqa: E402
from rootsift.analysis.fields import plan_fields  # noqa: E402
from rootsift.analysis.findings import Finding  # noqa: E402
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
    query, params = frame.sql([(q.col(f), f, []) for f in columns])
    source = query.sql(dialect=rs.backend.dialect)
    queries = [f"SELECT {ident(d)} AS v" for d in [*plan.dimensions, *plan.heavy, *ids]]
    queries += [f"SELECT {bin_key(q.col(m)).sql(dialect=rs.backend.dialect)} AS v" for m in plan.measures]
    started = time.perf_counter()
    for head in queries:
        sql = f"{head}, count(*) FILTER (WHERE {ident(SEL)}), count(*) FILTER (WHERE NOT {ident(SEL)}) FROM ({source}) GROUP BY ALL"
        rs.backend.execute_sql(sql, params)
    return time.perf_counter() - started, len(queries)


def agreement(exact: Explanation, sampled: Explanation) -> dict[str, Any]:
    """How the sampled result compares with the exact one: findings the exact run does not
    have (should be none), exact findings whose effect is larger than the sampled run can
    resolve (twice its stated share error) that it missed (should be none), and the largest
    share difference among the findings both have."""

    def key(f: Finding) -> str:
        return repr((f.kind, f.field, f.value, f.conditions))

    sampling = sampled.method.get("sampling", {})
    resolvable = 2 * max(sampling.get("share_error_95", 0.0), sampling.get("selection_share_error_95", 0.0))
    ours = {key(f): f for f in sampled.findings}
    theirs = {key(f) for f in exact.findings}
    large = [f for f in exact.findings if f.kind == "measure" or abs(f.effect) > resolvable]
    common = [(f, ours[key(f)]) for f in exact.findings if key(f) in ours and f.kind != "measure"]
    diffs = [
        max(
            abs((a.selection_fraction or 0) - (b.selection_fraction or 0)),
            abs((a.baseline_fraction or 0) - (b.baseline_fraction or 0)),
        )
        for a, b in common
    ]
    return {
        "findings": {"exact": len(exact.findings), "sampled": len(sampled.findings)},
        "not_in_exact": [k for k in ours if k not in theirs],
        "resolvable_effect": round(resolvable, 4),
        "resolvable_in_exact": len(large),
        "resolvable_missed": [key(f) for f in large if key(f) not in ours],
        "max_share_diff_in_common": round(max(diffs), 5) if diffs else None,
    }


CAUSE_SECONDS: list[float] = []


def _timed_causes(*args: Any, **kwargs: Any) -> Any:
    """explain's cause-set step, timed (its share of each exact explain run is reported)."""
    started = time.perf_counter()
    try:
        return FIND_CAUSES(*args, **kwargs)
    finally:
        CAUSE_SECONDS.append(time.perf_counter() - started)


FIND_CAUSES = explain_module.find_causes
explain_module.find_causes = _timed_causes  # type: ignore[assignment]


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
        causes = []
        for _ in range(args.runs):
            started = time.perf_counter()
            result = rs.explain(DATASET, select=SELECT)
            ours.append(time.perf_counter() - started)
            causes.append(CAUSE_SECONDS[-1])
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
        "cause_set_s": round(median(causes), 3),
        "ratio_cause_set_over_explain": round(median(causes) / median(ours), 3),
        "findings": len(result.findings),
        "tests": result.method.get("tests"),
        "sampled_s": round(median(sampled), 3),
        "sampled": fast.method.get("sampling"),
        "sampled_vs_exact": accuracy,
        "runs": {"explain": ours, "naive": theirs, "sampled": sampled},
    }
    print(f"{rows:,} events, {len(fields)} fields compared, selection {result.selection['events']:,} ({SELECT})")
    print(f"explain        {report['explain_s']:8.3f} s   (one pass + statistics + combinations + pilot)")
    print(
        f"  of which cause set {report['cause_set_s']:8.3f} s   "
        f"({report['ratio_cause_set_over_explain']:.3f} of explain; {len(result.cause_set)} causes)"
    )
    print(f"naive GROUP BY {report['naive_s']:8.3f} s   ({queries} queries, counts only)")
    print(f"ratio          {report['ratio_explain_over_naive']:8.3f}   (explain / naive; below 1 is faster)")
    print(
        f"sampled        {report['sampled_s']:8.3f} s   (ratio to exact {median(sampled) / median(ours):.3f}; "
        f"{fast.method.get('sampling', {}).get('statement', 'no sample')})"
    )
    print(
        f"sampled vs exact: {len(accuracy['not_in_exact'])} findings the exact run lacks; "
        f"{len(accuracy['resolvable_missed'])} of {accuracy['resolvable_in_exact']} exact findings with an effect "
        f"above {accuracy['resolvable_effect']} (twice the stated error) missed; largest share difference in "
        f"common {accuracy['max_share_diff_in_common']}"
    )
    (args.out / f"explain-{args.n}x{args.copies}.json").write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
