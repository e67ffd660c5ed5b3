"""JSON ingest on the inputs people have, against DuckDB's ``read_json`` on the same file.

    python bench/ingest_json.py                       # 1M events, every input, one round
    python bench/ingest_json.py -n 200000 --runs 3 --inputs escaped,gzip

Four inputs derived from the generated wide events (bench/gen.py), cached in ``--out``:

- ``plain``: the events as generated (25 fields, one nested object);
- ``escaped``: one line in ten gains a text value with non-ASCII characters written as
  ``\\uXXXX`` escapes, as Python's ``json.dumps`` and most loggers write them;
- ``nested``: the same events with objects three levels deep (``http.request.method``);
- ``gzip``: ``plain`` compressed with gzip (level 6), read from the ``.gz`` by both.

Each contender runs in a fresh process (bench/ingest_worker.py): DuckDB's
``CREATE TABLE t AS SELECT * FROM read_json(file)`` and ``Rootsift(dir).ingest(file)``.
Prints events/s of both and the ratio (rootsift / DuckDB; target ≥ 0.7), and the CPU
ratio (DuckDB's CPU seconds / rootsift's, every thread): on a busy machine wall times
swing with the neighbours, CPU time much less.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb

from common import BENCH, median
from gen import cached_jsonl
from ingest import run_one, warm_page_cache

INPUTS = ("plain", "escaped", "nested", "gzip")
ESCAPED_TEXT = "café ☃ naïve Grüße 🚀"


def escaped(plain: Path, out: Path) -> None:
    """Every tenth line of ``plain`` with a ``note`` whose non-ASCII text is ``\\u`` escaped."""
    note = json.dumps(ESCAPED_TEXT)  # ensure_ascii: "caf\u00e9 \u2603 ..."
    with open(plain, "rb") as src, open(out, "wb") as dst:
        for i, line in enumerate(src):
            if i % 10 == 0:
                line = line.rstrip()[:-1] + b',"note":' + note.encode() + b"}\n"
            dst.write(line)


def nested(plain: Path, out: Path) -> None:
    """The events of ``plain`` with their fields grouped three levels deep."""
    con = duckdb.connect()
    src = f"read_json('{plain}')"
    con.execute(
        "COPY (SELECT timestamp, duration_ms, "
        "{'request': {'method': method, 'endpoint': endpoint, 'user_agent': user_agent, 'bytes': bytes_received}, "
        "'response': {'status': status, 'bytes': bytes_sent, 'cache': cache}} AS http, "
        "{'service': {'name': service, 'version': version, 'build': build}, "
        "'host': {'name': host, 'region': region, 'az': az}, 'k8s': k8s} AS resource, "
        "{'db_ms': db_time_ms, 'pool_wait_ms': pool_wait_ms, 'retries': retries} AS timing, "
        f"user_id, trace_id, tier, upstream, feature_flag FROM {src}) TO '{out}' (FORMAT json)"
    )
    con.close()


def gzipped(plain: Path, out: Path) -> None:
    with open(plain, "rb") as src, gzip.open(out, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 16 << 20)


def cached_input(kind: str, directory: Path, n: int) -> Path:
    """The input file for ``kind`` at ``n`` events, made once (under a temporary name)."""
    plain = cached_jsonl(directory, n)
    if kind == "plain":
        return plain
    path = directory / f"events-{n}-{kind}.jsonl{'.gz' if kind == 'gzip' else ''}"
    if not path.exists():
        tmp = path.with_name("partial-" + path.name)
        {"escaped": escaped, "nested": nested, "gzip": gzipped}[kind](plain, tmp)
        tmp.replace(path)
    return path


def bench(kind: str, source: Path, work: Path, runs: int) -> dict[str, Any]:
    """``runs`` rounds of both contenders on ``source``, alternating who goes first."""
    work.mkdir(parents=True, exist_ok=True)
    warm_page_cache(source)
    rates: dict[str, list[float]] = {"baseline": [], "rootsift": []}
    cpu: dict[str, list[float]] = {"baseline": [], "rootsift": []}
    rows: dict[str, set[int]] = {"baseline": set(), "rootsift": set()}
    for i in range(runs):
        for who in ("baseline", "rootsift") if i % 2 == 0 else ("rootsift", "baseline"):
            run = run_one(who, source, work)
            rates[who].append(run.rate)
            cpu[who].append(run.cpu_seconds)
            rows[who].add(run.rows)
    if rows["baseline"] != rows["rootsift"]:
        raise RuntimeError(f"{kind}: row counts differ: {rows}")
    duck, ours = median(rates["baseline"]), median(rates["rootsift"])
    return {
        "input": kind,
        "rows": rows["rootsift"].pop(),
        "duckdb_eps": duck,
        "rootsift_eps": ours,
        "ratio": ours / duck,
        "cpu_ratio": median(cpu["baseline"]) / median(cpu["rootsift"]),
        "round_ratios": [r / d for r, d in zip(rates["rootsift"], rates["baseline"])],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--inputs", default=",".join(INPUTS))
    parser.add_argument("--out", type=Path, default=BENCH / "out")
    args = parser.parse_args()
    results = []
    print(f"| input (n={args.n:,}) | rootsift events/s | DuckDB read_json events/s | ratio | CPU ratio |")
    print("|---|---:|---:|---:|---:|")
    for kind in args.inputs.split(","):
        source = cached_input(kind, args.out, args.n)
        res = bench(kind, source, args.out / f"work-json-{kind}", args.runs)
        results.append(res)
        print(
            f"| {kind} | {res['rootsift_eps']:,.0f} | {res['duckdb_eps']:,.0f} | {res['ratio']:.2f} "
            f"| {res['cpu_ratio']:.2f} |",
            flush=True,
        )
    (args.out / "ingest_json.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
