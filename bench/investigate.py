"""investigate end to end on 10M events with a planted incident, against the first query an
engineer would run by hand (a heatmap of the measure over the same range).

    .venv/bin/python bench/investigate.py                  # 10M (input cached in bench/out)
    .venv/bin/python bench/investigate.py --n 1000000 --runs 5

The incident: for 20 minutes of the 6-hour span, requests to host-007 take 30 times
longer. The store is made once (bench/out/investigate-<n>) from the cached input of
``gen.py`` with that change applied by DuckDB. Medians of ``--runs`` after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import duckdb

from common import BENCH, kept_store, median, use_source_tree
from gen import cached_jsonl

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.query.spec import Calculation, QuerySpec  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    data = store(args.out, args.n)
    heat = QuerySpec(DATASET, calculations=[Calculation.parse("heatmap(duration_ms)")])
    with Rootsift(data) as rs:  # a store kept from before samples were stored gets them (once)
        rs.datasets()
    with Rootsift(data, read_only=True) as rs:
        rs.investigate(DATASET)
        rs.query(heat)
        ours, theirs = [], []
        result = None
        for _ in range(args.runs):
            started = time.perf_counter()
            result = rs.investigate(DATASET)
            ours.append(time.perf_counter() - started)
            started = time.perf_counter()
            rs.query(heat)
            theirs.append(time.perf_counter() - started)
    assert result is not None
    anomaly = result.anomaly.as_dict() if result.anomaly else None
    top = next((f.describe() for f in result.findings if f.kind in ("dimension", "combination")), None)
    report = {
        "events": args.n,
        "investigate_s": round(median(ours), 3),
        "heatmap_s": round(median(theirs), 3),
        "ratio_investigate_over_heatmap": round(median(ours) / median(theirs), 2),
        "method": result.method,
        "anomaly": anomaly,
        "top_finding": top,
        "runs": {"investigate": ours, "heatmap": theirs},
    }
    print(
        f"{args.n:,} events; found {anomaly and anomaly['kind']} {anomaly and anomaly['from']} … {anomaly and anomaly['to']}"
    )
    print(f"top finding: {top}")
    print(
        f"time resolution {result.method.get('resolution')}, shift buckets {result.method.get('shift_bucket_seconds')} s"
    )
    print(f"investigate    {report['investigate_s']:8.3f} s   (region scan, onset explain, timeouts)")
    print(f"heatmap query  {report['heatmap_s']:8.3f} s   (the first query by hand)")
    print(f"ratio          {report['ratio_investigate_over_heatmap']:8.2f}")
    (args.out / f"investigate-{args.n}.json").write_text(json.dumps(report, indent=1, default=str) + "\n")


if __name__ == "__main__":
    main()
