"""The server's store stage alone: what a stored span costs DuckDB by the size of a move,
and with one DuckDB worker thread or its default (bench/README.md, "serve").

    .venv/bin/python bench/serve_stages.py                 # 470k spans, 3 rounds
    .venv/bin/python bench/serve_stages.py --spans 940000 --rounds 5

The spans of ``bench/serve.py`` are logged and converted as the server does (8 MiB log
files, ``convert.convert_files`` on each) before the clock starts. Then, alternating, medians of CPU
seconds (user + system, every thread):

- DuckDB alone: the table inserted into one database file in moves of each size, the
  file detached (checkpointed) and attached again after each, as the server releases
  the store's files after each move;
- ``Backend.ingest_arrow``, a release after each move: in moves of 47k (what the server
  moved before) and of 235k, with ``INGEST_THREADS`` (what the server does) and, for
  235k, DuckDB's default threads.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from common import use_source_tree


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def converted(spans: int, work: Path) -> Any:
    """The spans as the server's ingest gets them: logged in 8 MiB files, each converted on
    its own (one Arrow file, one chunk of the table, per conversion)."""
    import pyarrow as pa
    import pyarrow.ipc

    from rootsift.server.applier import BATCH_BYTES
    from rootsift.server.convert import ARROW, convert_files
    from rootsift.server.wal import OTLP_TRACES, encode
    from serve import make_requests

    out = work / "out"
    out.mkdir()
    logs: list[bytearray] = [bytearray()]
    for body in make_requests(spans, 1000):
        if len(logs[-1]) >= BATCH_BYTES:
            logs.append(bytearray())
        logs[-1] += encode("traces", body, OTLP_TRACES)
    tables = []
    for i, data in enumerate(logs, 1):
        log = work / f"{i:08d}.log"
        log.write_bytes(data)
        path = convert_files([log], out)[ARROW + "traces"].path
        tables.append(pa.ipc.open_file(pa.memory_map(str(path))).read_all())
    return pa.concat_tables(tables)


def duckdb_alone(table: Any, move: int, work: Path) -> float:
    import duckdb

    path = work / f"alone-{time.monotonic_ns()}.duckdb"
    con = duckdb.connect(":memory:")
    con.execute(f"ATTACH '{path}' AS s")
    con.register("b", table.slice(0, 0))
    con.execute("CREATE TABLE s.e AS SELECT * FROM b")
    con.execute("CHECKPOINT s")
    start = cpu()
    for lo in range(0, table.num_rows, move):
        con.register("b", table.slice(lo, move))
        con.execute("INSERT INTO s.e SELECT * FROM b")
        con.execute("DETACH s")
        con.execute(f"ATTACH '{path}' AS s")
    spent = cpu() - start
    con.close()
    return spent


def through_the_store(table: Any, threads: int | None, work: Path, move: int = 235_000) -> float:
    from rootsift import Rootsift
    from rootsift.store import arrow_ingest

    rs = Rootsift(work / f"store-{time.monotonic_ns()}")
    row = rs.backend._con.execute("SELECT current_setting('threads')").fetchone()  # DuckDB's default
    arrow_ingest.INGEST_THREADS = threads or (int(row[0]) if row else 2)
    rs.backend.ingest_arrow("traces", table.slice(0, 1000))
    rs.backend.release("traces")
    start = cpu()
    for lo in range(0, table.num_rows, move):
        rs.backend.ingest_arrow("traces", table.slice(lo, move))
        rs.backend.release("traces")
    spent = cpu() - start
    rs.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=470_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--moves", default="23500,47000,94000,122880,140000,235000,470000")
    args = parser.parse_args()
    moves = [int(m) for m in args.moves.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        table = converted(args.spans, work)
        alone: dict[int, list[float]] = {m: [] for m in moves}
        store: dict[str, list[float]] = {"default": [], "one": [], "small": []}
        for r in range(args.rounds):
            for m in moves if r % 2 == 0 else moves[::-1]:
                alone[m].append(duckdb_alone(table, m, work))
            for name in ("default", "one", "small") if r % 2 == 0 else ("small", "one", "default"):
                move = 47_000 if name == "small" else 235_000
                store[name].append(through_the_store(table, None if name == "default" else 1, work, move))
    n = table.num_rows
    print(f"{n:,} spans, {args.rounds} rounds, medians of CPU seconds")
    for m in moves:
        spent = statistics.median(alone[m])
        print(f"  DuckDB alone, moves of {m:>7,}: {spent:6.3f} s  {spent / n * 1e6:5.2f} µs a span")
    for name, label in (
        ("small", "moves of  47,000, one thread (an 8 MiB log file a move: the server before)"),
        ("default", "moves of 235,000, DuckDB's default threads"),
        ("one", "moves of 235,000, one thread (the server)"),
    ):
        spent = statistics.median(store[name])
        print(f"  ingest_arrow, {label}: {spent:6.3f} s  {spent / n * 1e6:5.2f} µs a span")


if __name__ == "__main__":
    use_source_tree()
    main()
