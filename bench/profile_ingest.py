"""Where rootsift's ingest spends its time: cProfile plus a per-SQL-statement breakdown.

    python bench/profile_ingest.py [--n 1000000] [--out bench/out] [--top 8] [--block-mib 32]
    python bench/profile_ingest.py --input bench/out/events-1000000-gzip.jsonl.gz   # any input

cProfile cannot see into DuckDB (its calls are charged to the calling Python function),
so the ingest's cursors are wrapped to time every ``execute`` by statement shape too, in
wall and CPU seconds (the CPU of every thread of the process over the statement: the
byte counts run beside DuckDB's insert and are charged to it). The JSON byte counts
alone are timed last, as the thread beside the insert runs them. Last, DuckDB's own
profile of the fast path's insert (its SELECT run again into a scratch table, as
``EXPLAIN ANALYZE`` would): seconds per operator, summed over DuckDB's threads.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import re
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from common import DATASET, ROOT, use_source_tree
from gen import cached_jsonl

use_source_tree()
from rootsift.api import Rootsift  # noqa: E402
from rootsift.ingest.blockstats import BlockStats  # noqa: E402
from rootsift.store.duckdb import DuckDBBackend  # noqa: E402

SQL_TIME: dict[str, list[float]] = defaultdict(list)
SQL_CPU: dict[str, list[float]] = defaultdict(list)
INSERTS: list[str] = []
"""The fast path's inserts (``INSERT INTO … BY NAME SELECT … FROM read_json(…)``), as run."""


def shape(sql: str) -> str:
    """A statement's shape: its first words, with numbers, quoted paths and column lists elided."""
    text = re.sub(r"'[^']*'", "'…'", " ".join(sql.split()))
    text = re.sub(r"\d+", "N", text)
    return text[:90]


class TimedCursor:
    """A DuckDB connection wrapper that records the seconds spent in each ``execute``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def execute(self, sql: str, params: Any = None) -> TimedCursor:
        if sql.startswith("INSERT INTO") and "read_json(" in sql:
            INSERTS.append(sql)
        started, cpu = time.perf_counter(), time.process_time()
        self._inner.execute(sql, params) if params is not None else self._inner.execute(sql)
        SQL_TIME[shape(sql)].append(time.perf_counter() - started)
        SQL_CPU[shape(sql)].append(time.process_time() - cpu)
        return self

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def ingest(source: Path, data: Path, block: int | None, prof: cProfile.Profile | None = None) -> tuple[float, float]:
    """Ingest ``source`` into a fresh ``data`` directory (under ``prof`` when given); return
    wall and CPU seconds, from opening the store to closing it."""
    shutil.rmtree(data, ignore_errors=True)
    started, cpu = time.perf_counter(), time.process_time()
    rs = Rootsift(data)
    if prof is not None:
        prof.enable()
    summary = rs.ingest(source, dataset=DATASET, block_bytes=block)
    if prof is not None:
        prof.disable()
    rs.close()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(
        f"ingested {summary.events:,} events in {seconds:.2f} s, {cpu:.2f} CPU s ({summary.blocks} blocks, "
        f"{summary.exact_blocks} on the exact path)"
    )
    return seconds, cpu


def operators(insert_sql: str) -> list[tuple[str, float, int]]:
    """DuckDB's profile of an ingest insert's SELECT, run again into a table of a scratch
    in-memory database: (operator, seconds summed over threads, rows) in plan order."""
    import duckdb

    select = insert_sql.split(" BY NAME ", 1)[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.json"
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET enable_profiling = 'json'")
        con.execute(f"SET profiling_output = '{out}'")
        con.execute(f"CREATE TABLE scratch AS {select}")
        con.close()
        tree = json.loads(out.read_text())

    found: list[tuple[str, float, int]] = []

    def walk(node: dict[str, Any], depth: int) -> None:
        found.append(
            ("  " * depth + str(node.get("name")), float(node.get("timing", 0)), int(node.get("intermediate_rows", 0)))
        )
        for child in node.get("children", []):
            walk(child, depth + 1)

    for node in tree["operator"]:
        walk(node, 0)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--block-mib", type=int, default=None, help="ingest block size (default: rootsift's)")
    parser.add_argument("--input", type=Path, default=None, help="a JSON-lines file (default: the generated events)")
    args = parser.parse_args()
    source = args.input or cached_jsonl(args.out, args.n)
    data = args.out / f"profile-{args.n}"
    block = args.block_mib << 20 if args.block_mib else None

    prof = cProfile.Profile()
    ingest(source, data, block, prof)
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
    print("   ncalls" + text.getvalue().split("   ncalls", 1)[-1].rstrip())

    plain_cursor = DuckDBBackend.cursor
    DuckDBBackend.cursor = lambda self: TimedCursor(plain_cursor(self))  # type: ignore[method-assign,assignment,return-value]
    total, cpu = ingest(source, data, block)
    DuckDBBackend.cursor = plain_cursor  # type: ignore[method-assign]
    print(f"SQL statements by total seconds (share of {total:.2f} s wall, {cpu:.2f} s CPU):")
    for sql, secs in sorted(SQL_TIME.items(), key=lambda kv: -sum(kv[1]))[: args.top]:
        used = sum(SQL_CPU[sql])
        print(
            f"  {sum(secs):7.2f} s {sum(secs) / total:6.1%}  CPU {used:6.2f} s {used / cpu:6.1%} {len(secs):4d}x  {sql}"
        )
    started = time.process_time()
    BlockStats.of_file(str(source))
    print(
        f"the byte counts alone (BlockStats.of_file, as beside a whole-file insert): {time.process_time() - started:.2f} CPU s"
    )
    shutil.rmtree(data, ignore_errors=True)
    if INSERTS:
        print("DuckDB's operators in the last fast-path insert (seconds summed over threads):")
        for name, seconds, rows in operators(INSERTS[-1]):
            print(f"  {seconds:7.2f} s {rows:12,d} rows  {name}")


if __name__ == "__main__":
    main()
