"""Wide schemas: many distinct keys, a few per line, against DuckDB's ``read_json``.

    python bench/ingest_wide.py                              # 1k, 2k, 5k, 10k keys, 100k lines
    python bench/ingest_wide.py --keys 1000,5000 --lines 50000

Each line has a time, a counter and 3 keys drawn from ``K`` distinct ones (half numbers,
half strings). Each contender runs in a fresh process (bench/ingest_worker.py); prints
seconds, events/s, peak RSS and the ratio of rates (rootsift / DuckDB). rootsift keeps
the dataset's field limit (``ROOTSIFT_MAX_FIELDS``, 250) as columns and the rest in
``_overflow``; DuckDB's reader infers a MAP for objects this wide.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from common import BENCH
from ingest import run_one, warm_page_cache


def wide_file(directory: Path, keys: int, lines: int, seed: int = 1) -> Path:
    """``lines`` JSON lines with 3 of ``keys`` distinct keys each, made once."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"wide-{keys}-{lines}.jsonl"
    if path.exists():
        return path
    rng = random.Random(seed)
    tmp = path.with_name("partial-" + path.name)
    with open(tmp, "w") as fh:
        for i in range(lines):
            row: dict[str, object] = {"timestamp": f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"}
            row["n"] = i
            for k in rng.sample(range(keys), 3):
                row[f"key_{k}"] = rng.randint(0, 100) if k % 2 else f"v{k}"
            fh.write(json.dumps(row) + "\n")
    tmp.replace(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", default="1000,2000,5000,10000")
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    print(f"| distinct keys ({args.lines:,} lines) | rootsift s | peak RSS MiB | DuckDB s | peak RSS MiB | ratio |")
    print("|---:|---:|---:|---:|---:|---:|")
    for keys in (int(k) for k in args.keys.split(",")):
        source = wide_file(args.out, keys, args.lines)
        warm_page_cache(source)
        work = args.out / f"work-wide-{keys}"
        work.mkdir(parents=True, exist_ok=True)
        ours, duck = run_one("rootsift", source, work), run_one("baseline", source, work)
        if ours.rows != duck.rows:
            raise RuntimeError(f"{keys} keys: rootsift stored {ours.rows} rows, DuckDB {duck.rows}")
        print(
            f"| {keys:,} | {ours.seconds:.1f} | {ours.peak_rss_mib:.0f} | {duck.seconds:.1f} "
            f"| {duck.peak_rss_mib:.0f} | {ours.rate / duck.rate:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
