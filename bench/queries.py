"""Queries: ``Rootsift.query`` end to end vs hand-written DuckDB SQL over the same segment files.

Three cases (heatmap, p99 over time, breakdown with a filter). Each runs through
rootsift (spec → SQL → rows / heatmap grid), through hand-written SQL over the segment
files attached read-only in a separate DuckDB instance, and, for context, through the
same hand-written SQL over the plain table of the baseline ingest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from common import DATASET, median, timed, use_source_tree

use_source_tree()
from rootsift.api import Rootsift  # noqa: E402
from rootsift.query.engine import QueryOutput  # noqa: E402
from rootsift.query.spec import Calculation, QuerySpec  # noqa: E402
from rootsift.store.base import QueryResult  # noqa: E402

Rows = list[tuple[Any, ...]]


@dataclass
class Case:
    """A query as a rootsift spec and as hand-written SQL over a relation ``{rel}``."""

    name: str
    spec: Callable[[], QuerySpec]
    sql: str
    canon: Callable[[QueryOutput], Rows]  # rootsift's answer in the hand-written SQL's row shape
    time_key: bool = True  # the SQL's first column is a time bucket named ``time``

    def plain_sql(self) -> str:
        """The SQL for the plain table, whose TIMESTAMPTZ output keys are cast back to TIMESTAMP.

        Only the (few) output rows are cast; fetching TIMESTAMPTZ values into Python would
        need pytz, which the environment does not have.
        """
        sql = self.sql.format(rel="events")
        return f"SELECT * REPLACE (CAST(time AS TIMESTAMP) AS time) FROM ({sql})" if self.time_key else sql


def _heat_rows(out: QueryOutput) -> Rows:
    grid = out.heatmap
    assert grid is not None
    cells = []
    for edge, counts in zip(grid.bucket_edges, grid.counts):
        bucket = round(math.log2(edge) * 4)
        cells += [(t, bucket, c) for t, c in zip(grid.times, counts) if c]
    return cells


CASES = [
    Case(
        "heatmap",
        lambda: QuerySpec(DATASET, calculations=[Calculation.parse("heatmap(duration_ms)")], granularity="10m"),
        "SELECT time_bucket(INTERVAL '10 minutes', timestamp) AS time, "
        "CAST(floor(log2(duration_ms) * 4) AS BIGINT) AS bucket, count(*) AS count "
        "FROM {rel} WHERE duration_ms > 0 GROUP BY ALL",
        _heat_rows,
    ),
    Case(
        "p99 per minute",
        lambda: QuerySpec(DATASET, calculations=[Calculation.parse("p99(duration_ms)")], granularity="1m"),
        "SELECT time_bucket(INTERVAL '1 minute', timestamp) AS time, quantile_disc(duration_ms, 0.99) AS p99 "
        "FROM {rel} GROUP BY ALL ORDER BY time",
        lambda out: [tuple(r) for r in out.rows],
    ),
    Case(
        "breakdown",
        lambda: QuerySpec(
            DATASET,
            where="status >= 500",
            breakdowns=["endpoint"],
            calculations=[Calculation.parse("count"), Calculation.parse("p99(duration_ms)")],
        ),
        "SELECT endpoint, count(*) AS count, quantile_disc(duration_ms, 0.99) AS p99 "
        "FROM {rel} WHERE status >= 500 GROUP BY endpoint ORDER BY count DESC",
        lambda out: [tuple(r) for r in out.rows],
        time_key=False,
    ),
]


def _norm(rows: Rows) -> list[tuple[Any, ...]]:
    """Rows comparable across stores: floats for numbers, sorted."""

    def value(v: Any) -> Any:
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    return sorted((tuple(value(v) for v in r) for r in rows), key=repr)


def segment_connection(data_dir: Path) -> duckdb.DuckDBPyConnection:
    """A separate DuckDB instance with rootsift's segment files attached read-only as view ``events``."""
    files = sorted((data_dir / DATASET / "segments").glob("seg-*.duckdb"))
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone = 'UTC'")
    for i, path in enumerate(files):
        con.execute(f"ATTACH '{path}' AS s{i} (READ_ONLY)")
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM s{i}.events" for i in range(len(files)))
    con.execute(f"CREATE TEMP VIEW events AS {union}")
    return con


def plain_connection(db_file: Path) -> duckdb.DuckDBPyConnection:
    """The baseline ingest's database, read-only, its table ``t`` visible as ``events``."""
    con = duckdb.connect(str(db_file), read_only=True)
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET enable_progress_bar = false")
    con.execute("CREATE TEMP VIEW events AS SELECT * FROM t")
    return con


def python_side_seconds(rs: Rootsift, case: Case, repeats: int) -> float:
    """Median seconds of ``rs.query`` with DuckDB's part stubbed out: spec, SQL generation, shaping."""
    backend = rs.backend
    backend.execute_sql = lambda sql, params: QueryResult([], [])  # type: ignore[method-assign]
    try:
        return median([timed(lambda: rs.query(case.spec()))[0] for _ in range(repeats)])
    finally:
        del backend.execute_sql  # back to the class's method


def _runners(
    case: Case, rs: Rootsift, seg: duckdb.DuckDBPyConnection, plain: duckdb.DuckDBPyConnection
) -> dict[str, Callable[[], Any]]:
    """The three ways to answer ``case``, as no-argument callables."""
    seg_sql, plain_sql = case.sql.format(rel="events"), case.plain_sql()
    return {
        "rootsift": lambda: rs.query(case.spec()),
        "handwritten": lambda: seg.execute(seg_sql).fetchall(),
        "plain_table": lambda: plain.execute(plain_sql).fetchall(),
    }


def bench_queries(data_dir: Path, baseline_db: Path, repeats: int, log: Any = print) -> dict[str, Any]:
    """Median warm seconds per case for rootsift, hand-written on segments and on the plain table."""
    rs = Rootsift(data_dir, read_only=True)
    seg, plain = segment_connection(data_dir), plain_connection(baseline_db)
    out: dict[str, Any] = {}
    try:
        for case in CASES:
            runners = _runners(case, rs, seg, plain)
            answers = {name: run() for name, run in runners.items()}  # warm-up, kept for the check
            times: dict[str, list[float]] = {name: [] for name in runners}
            names = list(runners)
            for i in range(repeats):
                for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate who goes first
                    times[name].append(timed(runners[name])[0])
            mine = _norm(case.canon(answers["rootsift"]))
            res: dict[str, Any] = {name: median(ts) for name, ts in times.items()}
            res |= {
                "runs": times,
                "ratio": res["rootsift"] / res["handwritten"],
                "plain_ratio": res["rootsift"] / res["plain_table"],
                "result_rows": len(mine),
                "same_as_handwritten": mine == _norm(answers["handwritten"]),
                "same_as_plain_table": mine == _norm(answers["plain_table"]),
                "rootsift_python_side": python_side_seconds(rs, case, repeats),
            }
            out[case.name] = res
            log(
                f"  query {case.name:15s} rootsift {res['rootsift'] * 1e3:7.1f} ms (python side "
                f"{res['rootsift_python_side'] * 1e3:.1f})  hand-written {res['handwritten'] * 1e3:7.1f} ms  "
                f"plain table {res['plain_table'] * 1e3:7.1f} ms  "
                f"same result: {res['same_as_handwritten']}/{res['same_as_plain_table']}"
            )
    finally:
        rs.close()
        seg.close()
        plain.close()
    return out
