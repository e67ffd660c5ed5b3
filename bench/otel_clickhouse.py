"""rootsift reading the OpenTelemetry exporter's ``otel_traces`` (chdb, through the read
mode's view) against hand-written ClickHouse SQL over the exporter's own columns.

The table is made with the exporter's DDL (tests/golden/otel_exporter_v0.161.0) and filled
by ClickHouse itself (``INSERT … SELECT FROM numbers(N)``): four services, six routes, a
few span and resource attributes. Both contenders run in this one process (chdb opens one
store per process) on the same table, alternating which goes first each round; the
ratios are rootsift / hand-written, wall and CPU (``process_time``: every thread), medians.

    python bench/otel_clickhouse.py --spans 1000000 --rounds 5
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import median, use_source_tree

DDL = Path(__file__).resolve().parent.parent / "tests" / "golden" / "otel_exporter_v0.161.0" / "traces_table.sql"
SPAN = "span (count, first, last)"
CASES: dict[str, dict[str, Any]] = {
    SPAN: {"calculations": ["count"]},
    "count, p99 by service": {"calculations": ["count", "p99(duration_ms)"], "breakdowns": ["service.name"]},
    "errors by route": {
        "calculations": ["count", "avg(duration_ms)"],
        "breakdowns": ["http.route"],
        "where": "status.code = 'Error'",
    },
    "p50 per minute, one service": {
        "calculations": ["p50(duration_ms)"],
        "granularity": "1m",
        "where": "service.name = 'cart'",
    },
}
HAND = {
    SPAN: "SELECT count(), min(Timestamp), max(Timestamp) FROM otel.otel_traces",
    "count, p99 by service": "SELECT ServiceName, count(), quantileExactWeighted(0.99)(Duration / 1e6, 1) "
    "FROM otel.otel_traces GROUP BY ServiceName ORDER BY count() DESC",
    "errors by route": "SELECT SpanAttributes['http.route'] AS r, count(), avg(Duration / 1e6) FROM otel.otel_traces "
    "WHERE StatusCode = 'Error' GROUP BY r ORDER BY count() DESC",
    "p50 per minute, one service": "SELECT toStartOfMinute(Timestamp) AS t, quantileExactWeighted(0.5)(Duration / 1e6, 1) "
    "FROM otel.otel_traces WHERE ServiceName = 'cart' GROUP BY t ORDER BY t",
}
FILL = """INSERT INTO otel.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, SpanName, SpanKind, ServiceName,
ResourceAttributes, SpanAttributes, Duration, StatusCode)
SELECT toDateTime64('2024-06-01 00:00:00', 9) + toIntervalMillisecond(number * 3) AS ts,
    hex(intDiv(number, 4)), hex(number), if(number % 4 = 0, '', hex(number - number % 4)),
    concat('GET ', route), 'Server', service,
    map('service.name', service, 'host.name', concat('node-', toString(number % 20))),
    map('http.route', route, 'http.response.status_code', if(err, '500', '200'), 'user.tier',
        if(number % 3 = 0, 'paid', 'free')),
    toUInt64(exp(3.9 + 0.5 * randNormal(0, 1)) * 1e6), if(err, 'Error', 'Unset')
FROM (SELECT number, ['frontend', 'cart', 'checkout', 'ads'][number % 4 + 1] AS service,
    ['/', '/cart', '/checkout', '/product', '/ads', '/login'][intDiv(number, 4) % 6 + 1] AS route,
    rand(number) % 100 < 3 AS err FROM numbers({n}))"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    use_source_tree()
    from rootsift.api import Rootsift
    from rootsift.query.spec import Calculation, QuerySpec

    ddl = DDL.read_text().replace("%q.%q %s", '"otel"."otel_traces"', 1).replace("ENGINE = %s", "ENGINE = MergeTree()")
    ddl = ddl.replace("\n%s\n", "\n", 1)
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        with Rootsift(data, engine="chdb") as rs:
            rs.backend.run("CREATE DATABASE otel")
            rs.backend.run(ddl)
            rs.backend.run(FILL.format(n=args.spans))
            rs.backend.run("OPTIMIZE TABLE otel.otel_traces FINAL")
        w, c = time.perf_counter(), time.process_time()
        rs = Rootsift(data, engine="chdb")  # the open makes the views (the keys' scan included)
        print(f"open with the views made: {time.perf_counter() - w:.3f} s wall, {time.process_time() - c:.3f} s CPU")
        now = datetime(2024, 6, 30, tzinfo=UTC)
        print(f"{'case':30} {'rootsift s':>10} {'hand s':>8} {'wall ratio':>10} {'CPU ratio':>9}")
        with rs:
            for case, kw in CASES.items():
                spec = QuerySpec(
                    "otel_traces", **{**kw, "calculations": [Calculation.parse(c) for c in kw["calculations"]]}
                )
                times: dict[str, list[tuple[float, float]]] = {"rootsift": [], "hand": []}
                runs = {
                    "rootsift": lambda spec=spec: rs.query(spec, now),
                    "hand": lambda sql=HAND[case]: rs.backend.run(sql),
                }
                if case == SPAN:  # what every command asks first (memoised within a process)
                    runs["rootsift"] = lambda: (rs.backend.changed(), rs.backend.span("otel_traces"))
                for k in range(args.rounds + 1):
                    for who in ("rootsift", "hand") if k % 2 else ("hand", "rootsift"):
                        w, c = time.perf_counter(), time.process_time()
                        runs[who]()
                        if k:  # the first round warms both
                            times[who].append((time.perf_counter() - w, time.process_time() - c))
                ours = [median([t[i] for t in times["rootsift"]]) for i in (0, 1)]
                hand = [median([t[i] for t in times["hand"]]) for i in (0, 1)]
                print(f"{case:30} {ours[0]:10.3f} {hand[0]:8.3f} {ours[0] / hand[0]:10.2f} {ours[1] / hand[1]:9.2f}")
            w, c = time.perf_counter(), time.process_time()
            found = rs.explain("otel_traces", select="duration_ms > 150").as_dict()["findings"]
            print(
                f"explain (exact): {time.perf_counter() - w:.2f} s wall, {time.process_time() - c:.2f} s CPU, "
                f"{len(found)} findings"
            )


if __name__ == "__main__":
    main()
