"""One ingest in a fresh process; prints a JSON line with seconds, rows and peak RSS.

    python bench/ingest_worker.py baseline FILE DB_FILE     # DuckDB CREATE TABLE AS read_json
    python bench/ingest_worker.py rootsift FILE DATA_DIR    # Rootsift(DATA_DIR).ingest(FILE)

The clock runs from opening the store to closing it (so DuckDB's final checkpoint is
included for both), not over interpreter start-up and imports; ``cpu_seconds`` is the
CPU time of every thread of the process over the same span.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import duckdb

from common import DATASET, peak_rss_mib, timed, use_source_tree


def ingest_baseline(source: Path, db_file: Path) -> int:
    """DuckDB's own JSON reader into a table ``t`` of a fresh database file; return the row count."""
    con = duckdb.connect(str(db_file))
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute("CREATE TABLE t AS SELECT * FROM read_json(?)", [str(source)])
        row = con.execute("SELECT count(*) FROM t").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def ingest_rootsift(source: Path, data_dir: Path) -> int:
    """rootsift's ingest into a fresh data directory; return the number of events stored."""
    use_source_tree()
    from rootsift.api import Rootsift

    rs = Rootsift(data_dir)
    try:
        return rs.ingest(source, dataset=DATASET).events
    finally:
        rs.close()


def main(argv: list[str]) -> None:
    kind, source, target = argv[0], Path(argv[1]), Path(argv[2])
    if kind == "rootsift":
        use_source_tree()
        import rootsift.api  # noqa: F401 - import outside the clock, like duckdb above
    runner = {"baseline": ingest_baseline, "rootsift": ingest_rootsift}[kind]
    cpu = time.process_time()
    seconds, rows = timed(lambda: runner(source, target))
    cpu = time.process_time() - cpu  # every thread of the process, DuckDB's included
    print(
        json.dumps({"kind": kind, "seconds": seconds, "cpu_seconds": cpu, "rows": rows, "peak_rss_mib": peak_rss_mib()})
    )


if __name__ == "__main__":
    main(sys.argv[1:])
