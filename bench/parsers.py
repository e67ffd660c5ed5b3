"""Log-format parser benchmark: lines/s per parser on generated inputs, against a plain
line-count read of the same file, measured in the same run.

    python bench/parsers.py                      # 1M lines per format
    python bench/parsers.py --n 200000 --formats nginx,mysql-slow

Three timings per format, each the median of ``--runs``:
- ``count``: read the file in 4 MiB chunks and count newlines (the floor: I/O + one pass);
- ``parse``: the parser alone on one core: decode, parse, serialise each event with orjson
  (what the ingest's reader thread does);
- ``ingest``: ``Rootsift.ingest`` into a fresh store (parsing beside DuckDB's insert).
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

import orjson

from common import BENCH, use_source_tree
from gen_logs import GENERATORS, cached

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.ingest import formats  # noqa: E402
from rootsift.ingest.formats.base import FormatOptions, numbered_lines  # noqa: E402
from rootsift.ingest.rejects import Reject  # noqa: E402


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(4 << 20):
            n += chunk.count(b"\n")
    return n


def parse_only(path: Path, fmt: str, options: dict[str, str]) -> tuple[int, int]:
    parser = formats.get(fmt)(FormatOptions(**options, source=str(path)))  # type: ignore[arg-type]
    dumps = orjson.dumps
    events = rejects = 0
    with open(path, "rb") as fh:
        for item in parser.parse(numbered_lines(fh)):
            if isinstance(item, Reject):
                rejects += 1
            else:
                dumps(item[1])
                events += 1
    return events, rejects


def ingest(path: Path, fmt: str, options: dict[str, str], work: Path) -> int:
    shutil.rmtree(work, ignore_errors=True)
    with Rootsift(work) as rs:
        return rs.ingest(path, "bench", format=fmt, **options).events  # type: ignore[arg-type]


def timed(fn: object, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="lines per format (slow logs: entries)")
    ap.add_argument("--formats", default=",".join(GENERATORS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=BENCH / "out")
    args = ap.parse_args()
    rows = []
    for fmt in args.formats.split(","):
        if fmt not in formats.all_formats():
            print(f"skip {fmt}: not a registered format", file=sys.stderr)
            continue
        options = GENERATORS[fmt][1]
        path = cached(args.out, fmt, args.n)
        lines = count_lines(path)
        work = args.out / f"work-{fmt}"
        t_count, _ = timed(functools.partial(count_lines, path), args.runs)
        t_parse, parsed = timed(functools.partial(parse_only, path, fmt, options), args.runs)
        t_ingest, stored = timed(functools.partial(ingest, path, fmt, options, work), args.runs)
        events, rejects = parsed  # type: ignore[misc]
        row = {
            "format": fmt,
            "lines": lines,
            "events": events,
            "rejects": rejects,
            "stored": stored,
            "count_s": round(t_count, 3),
            "parse_s": round(t_parse, 3),
            "ingest_s": round(t_ingest, 3),
            "parse_lines_per_s": round(lines / t_parse),
            "parse_events_per_s": round(events / t_parse),
            "ingest_lines_per_s": round(lines / t_ingest),
            "parse_vs_count": round(t_parse / t_count, 1),
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    print("| format | lines | events | parse lines/s | parse events/s | ingest lines/s | parse ÷ line count |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['format']} | {r['lines']:,} | {r['events']:,} | {r['parse_lines_per_s']:,} | "
            f"{r['parse_events_per_s']:,} | {r['ingest_lines_per_s']:,} | {r['parse_vs_count']}× |"
        )
    (args.out / "parsers.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
