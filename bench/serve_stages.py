"""The server's store stage alone: what a stored span costs DuckDB by the size of a move,
and with one DuckDB worker thread or its default (bench/README.md, "serve").

    .venv/bin/python bench/serve_stages.py                 # 470k spans, 3 rounds
    .venv/bin/python bench/serve_stages.py --spans 940000 --rounds 5

The spans of ``bench/serve.py`` are logged and converted as the server does
(``convert.convert_files``) before the clock starts. Then, alternating, medians of CPU
seconds (user + system, every thread):

- DuckDB alone: the table inserted into one database file in moves of each size, the
  file detached (checkpointed) and attached again after each, as the server releases
  the store's files after each move;
- ``Backend.ingest_arrow`` in moves of 235k, a release after each, with DuckDB's
  default threads and with ``INGEST_THREADS`` (what the server does).
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
    import pyarrow as pa
    import pyarrow.ipc

    from rootsift.server.convert import ARROW, convert_files
    from rootsift.server.wal import OTLP_TRACES, encode
    from serve import make_requests

    log, out = work / "00000001.log", work / "out"
    out.mkdir()
    log.write_bytes(b"".join(encode("traces", body, OTLP_TRACES) for body in make_requests(spans, 1000)))
    path = convert_files([log], out)[ARROW + "traces"].path
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


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


def through_the_store(table: Any, threads: int | None, work: Path) -> float:
    from rootsift import Rootsift
    from rootsift.store import arrow_ingest

    rs = Rootsift(work / f"store-{time.monotonic_ns()}")
    row = rs.backend._con.execute("SELECT current_setting('threads')").fetchone()  # DuckDB's default
    arrow_ingest.INGEST_THREADS = threads or (int(row[0]) if row else 2)
    rs.backend.ingest_arrow("traces", table.slice(0, 1000))
    rs.backend.release("traces")
    start = cpu()
    for lo in range(0, table.num_rows, 235_000):
        rs.backend.ingest_arrow("traces", table.slice(lo, 235_000))
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
        store: dict[str, list[float]] = {"default": [], "one": []}
        for r in range(args.rounds):
            for m in moves if r % 2 == 0 else moves[::-1]:
                alone[m].append(duckdb_alone(table, m, work))
            for name in ("default", "one") if r % 2 == 0 else ("one", "default"):
                store[name].append(through_the_store(table, None if name == "default" else 1, work))
    n = table.num_rows
    print(f"{n:,} spans, {args.rounds} rounds, medians of CPU seconds")
    for m in moves:
        spent = statistics.median(alone[m])
        print(f"  DuckDB alone, moves of {m:>7,}: {spent:6.3f} s  {spent / n * 1e6:5.2f} µs a span")
    for name, label in (("default", "DuckDB's default threads"), ("one", "one thread (the server)")):
        spent = statistics.median(store[name])
        print(f"  ingest_arrow, moves of 235,000, {label}: {spent:6.3f} s  {spent / n * 1e6:5.2f} µs a span")


if __name__ == "__main__":
    use_source_tree()
    main()
