"""Peak memory of one file's ingest, plain and gzip, against DuckDB reading the same file.

    .venv/bin/python bench/ingest_memory.py                          # 1M events, plain and .gz
    .venv/bin/python bench/ingest_memory.py --sizes 1000000,10000000 --out /tmp/bench

Each ingest runs in a fresh process (bench/ingest_worker.py), so its peak RSS (VmHWM) is
its own; the baseline is DuckDB's ``CREATE TABLE t AS SELECT * FROM read_json(file)`` into
a fresh database file in the same run. The target is rootsift under 1 GiB at any size
(docs/adr/0010-bounded-ingest-transactions.md). Inputs are bench/gen.py's wide events,
generated once per size and cached in ``--out`` (the .gz beside the plain file).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

from common import BENCH, DATASET, use_source_tree
from gen import cached_jsonl

GIB = 1024.0


def cached_gzip(plain: Path) -> Path:
    """``plain`` gzip'd beside it (level 1), made once."""
    out = plain.with_name(plain.name + ".gz")
    if not out.exists():
        tmp = out.with_name(out.name + ".partial")
        with open(plain, "rb") as src, gzip.open(tmp, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 16 << 20)
        tmp.replace(out)
    return out


def run_worker(kind: str, source: Path, target: Path) -> dict[str, float]:
    """One ingest in a fresh process; its JSON line (seconds, rows, peak_rss_mib)."""
    if target.is_dir():
        shutil.rmtree(target)
    target.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, str(BENCH / "ingest_worker.py"), kind, str(source), str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{kind} ingest of {source} failed:\n{proc.stderr}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000000", help="comma-separated event counts")
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    parser.add_argument("--kinds", default="plain,gzip", help="plain, gzip or both")
    args = parser.parse_args()
    use_source_tree()
    rows = []
    print(f"{'input':<22} {'rootsift MiB':>12} {'DuckDB MiB':>11} {'ratio':>6} {'rootsift s':>10} {'DuckDB s':>9}")
    for n in (int(s) for s in args.sizes.split(",")):
        plain = cached_jsonl(args.out, n)
        for kind in args.kinds.split(","):
            source = plain if kind == "plain" else cached_gzip(plain)
            work = args.out / f"memory-{n}-{kind}"
            work.mkdir(parents=True, exist_ok=True)
            base = run_worker("baseline", source, work / "baseline.duckdb")
            ours = run_worker("rootsift", source, work / "rootsift-data")
            if ours["rows"] != base["rows"]:
                raise SystemExit(f"row counts differ on {source}: rootsift {ours['rows']}, DuckDB {base['rows']}")
            ratio = ours["peak_rss_mib"] / base["peak_rss_mib"]
            label = f"{n:,} {kind}"
            print(
                f"{label:<22} {ours['peak_rss_mib']:>12.0f} {base['peak_rss_mib']:>11.0f} {ratio:>6.2f} "
                f"{ours['seconds']:>10.1f} {base['seconds']:>9.1f}"
                + ("" if ours["peak_rss_mib"] < GIB else "   over 1 GiB")
            )
            rows.append({"events": n, "input": kind, "rootsift": ours, "baseline": base, "rss_ratio": ratio})
            shutil.rmtree(work)
    (args.out / "ingest_memory.json").write_text(json.dumps({"dataset": DATASET, "runs": rows}, indent=2))


if __name__ == "__main__":
    main()
