"""Reading the OpenTelemetry collector's ClickHouse exporter tables (store/chdb_otel.py) on chdb and
on the server backend (over HTTP to the run's ClickHouse server: helpers/backends.py).

The fixture creates ``otel.otel_traces`` and ``otel.otel_logs`` with the exporter's own
DDL (tests/golden/otel_exporter_v0.161.0, rendered as the exporter renders it) and fills
them with plain SQL INSERTs; rootsift must then read them as datasets, with answers equal
to hand-written ClickHouse SQL over the exporter's columns, and copy nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.backends import CLICKHOUSE_ENGINES, needs_chdb, opened
from helpers.store import iso, write_jsonl
from rootsift import Calculation, QuerySpec, Rootsift
from rootsift.errors import UsageError
from rootsift.store.sqltext import literal

pytestmark = needs_chdb

DDL = Path(__file__).parent / "golden" / "otel_exporter_v0.161.0"
T0 = datetime(2024, 6, 1)
SPANS = 3000
LOGS = 1200
SERVICES = ("frontend", "cart", "checkout")
ROUTES = ("/", "/cart", "/checkout", "/product/{id}")
METRICS = ("gauge", "sum", "histogram")
POINTS = 600


def exporter_ddl() -> list[str]:
    """The exporter's CREATE TABLEs with its defaults: database ``otel``, no cluster, no TTL."""
    traces = (DDL / "traces_table.sql").read_text()
    traces = traces.replace("%q.%q %s", '"otel"."otel_traces"', 1).replace("ENGINE = %s", "ENGINE = MergeTree()")
    traces = traces.replace("\n%s\n", "\n", 1)
    logs = (DDL / "logs_table.sql").read_text()
    logs = logs.replace("{{ident .Database}}.{{ident .TableName}} {{.ClusterString}}", '"otel"."otel_logs"')
    logs = logs.replace("{{.Engine}}", "MergeTree()").replace("{{.TTL}}", "")
    head, rest = logs.split("{{- if .HasFullTextSearch}}", 1)
    logs = head + rest.split("{{- else}}", 1)[1].replace("{{- end}}", "", 1)
    assert "%" not in traces and "{{" not in logs
    metrics = []
    for kind in METRICS:
        text = (DDL / f"metrics_{kind}_table.sql").read_text().replace('"%s"."%s" %s', f'"otel"."otel_metrics_{kind}"')
        metrics.append(text.replace("ENGINE = %s\n    %s", "ENGINE = MergeTree()"))
        assert "%" not in metrics[-1]
    return ["CREATE DATABASE IF NOT EXISTS otel", traces, logs, *metrics]


def _map(items: dict[str, str]) -> str:
    return "map(" + ", ".join(f"{literal(k)}, {literal(v)}" for k, v in items.items()) + ")" if items else "map()"


def _stamp(t: datetime) -> str:
    return literal(t.strftime("%Y-%m-%d %H:%M:%S.%f") + "123")


def _events(k: int, status: int) -> list[str]:
    """Events.Timestamp, .Name, .Attributes: a failed span logs an exception (after a
    retry event every third time); the others none."""
    if status < 500:
        return ["[]", "[]", "[]"]
    kind = "TimeoutError" if k % 2 else "ConnectionResetError"
    events = [("retry", {"attempt": "1"})] if k % 3 == 0 else []
    events.append(("exception", {"exception.type": kind, "exception.message": f"span {k} failed"}))
    stamps = ", ".join(_stamp(T0 + timedelta(seconds=k * 1.2)) for _ in events)
    names = ", ".join(literal(name) for name, _ in events)
    return [f"[{stamps}]", f"[{names}]", "[" + ", ".join(_map(attrs) for _, attrs in events) + "]"]


def spans() -> list[str]:
    """Rows of otel_traces: the checkout service's /checkout route turns slow after the
    first half (what explain must find); the other spans are lognormal around 50 ms."""
    rng = np.random.default_rng(20)
    rows = []
    for k in range(SPANS):
        service, route = str(rng.choice(SERVICES)), str(rng.choice(ROUTES))
        slow = service == "checkout" and route == "/checkout" and k > SPANS // 2
        duration_ns = int(rng.lognormal(9.0 if slow else 3.9, 0.4) * 1e6)
        status = int(rng.choice([200, 500], p=[0.95, 0.05]))
        attrs = {"http.route": route, "http.response.status_code": str(status)}
        if k % 4 == 0:
            attrs["user.tier"] = str(rng.choice(["free", "paid"]))
        if service == "frontend":  # the last service in the exporter's sort order
            attrs["browser.name"] = "firefox"
        resource = {"service.name": service, "host.name": f"node-{k % 5}", "service.version": "1.2.0"}
        values = [
            _stamp(T0 + timedelta(seconds=k * 1.2)),
            literal(f"{k // 4:032x}"),
            literal(f"{k:016x}"),
            literal("" if k % 4 == 0 else f"{k - k % 4:016x}"),
            "''",
            literal(f"GET {route}"),
            literal("Server"),
            literal(service),
            _map(resource),
            literal("io.opentelemetry.http"),
            literal("1.0"),
            _map(attrs),
            str(duration_ns),
            literal("Error" if status >= 500 else "Unset"),
            "''",
            *_events(k, status),
        ]
        rows.append("(" + ", ".join(values) + ")")
    return rows


def logs() -> list[str]:
    rng = np.random.default_rng(21)
    rows = []
    for k in range(LOGS):
        service = str(rng.choice(SERVICES))
        severity = str(rng.choice(["INFO", "WARN", "ERROR"], p=[0.7, 0.2, 0.1]))
        number = {"INFO": 9, "WARN": 13, "ERROR": 17}[severity]
        values = [
            _stamp(T0 + timedelta(seconds=k * 3)),
            literal(f"{k:032x}"),
            literal(f"{k:016x}"),
            "1",
            literal(severity),
            str(number),
            literal(service),
            literal(f"request {k} done"),
            _map({"service.name": service, "k8s.pod.name": f"{service}-{k % 3}"}),
            _map({"code.function": str(rng.choice(["handle", "render"]))}),
        ]
        rows.append("(" + ", ".join(values) + ")")
    return rows


def metric_points(kind: str) -> list[str]:
    """Rows of otel_metrics_<kind>: two metrics a service, a point every 6 s."""
    rng = np.random.default_rng(22)
    rows = []
    for k in range(POINTS):
        service = SERVICES[k % 3]
        name = f"{kind}.{'a' if k % 2 else 'b'}"
        head = [
            _map({"service.name": service, "host.name": f"node-{k % 5}"}),
            literal(name),
            literal("ms"),
            _map({"state": str(rng.choice(["idle", "busy"]))}),
            literal((T0 + timedelta(seconds=6 * k)).strftime("%Y-%m-%d %H:%M:%S")),
            literal(service),
        ]
        if kind == "histogram":
            count = int(rng.integers(1, 100))
            tail = [str(count), str(count * 12.5), "[1, 2]", "[10.0]", "0.5", "99.0"]
        else:
            tail = [str(round(float(rng.normal(50, 10)), 3))] + (["true"] if kind == "sum" else [])
        rows.append("(" + ", ".join(head + tail) + ")")
    return rows


METRIC_COLUMNS = {
    "gauge": "Value",
    "sum": "Value, IsMonotonic",
    "histogram": "Count, Sum, BucketCounts, ExplicitBounds, Min, Max",
}


@pytest.fixture(scope="module", params=CLICKHOUSE_ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """Each test runs on chdb and on the server backend (over HTTP: helpers/backends.py)."""
    return str(request.param)


def _drop_shared(path: Path, engine: str, *databases: str) -> None:
    """The exporter's databases are the server's, not one store's: every store opened on
    the run's server while they exist reads their tables. Dropped before and after."""
    if engine == "clickhouse":
        with opened(path, engine) as rs:
            for name in databases:
                rs.backend.run(f"DROP DATABASE IF EXISTS {name} SYNC")


@pytest.fixture(scope="module")
def otel_store(engine: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The exporter's tables, made and filled through the backend under test."""
    path = tmp_path_factory.mktemp(f"otel-{engine}") / "data"
    _drop_shared(path, engine, "otel")
    yield _filled(path, engine)
    _drop_shared(path, engine, "otel")


def _filled(path: Path, engine: str) -> Path:
    with opened(path, engine) as rs:
        for statement in exporter_ddl():
            rs.backend.run(statement)
        columns = (
            "Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, SpanKind, ServiceName, "
            "ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, StatusCode, StatusMessage, "
            "Events.Timestamp, Events.Name, Events.Attributes"
        )
        rs.backend.run(f"INSERT INTO otel.otel_traces ({columns}) VALUES " + ", ".join(spans()))
        columns = (
            "Timestamp, TraceId, SpanId, TraceFlags, SeverityText, SeverityNumber, ServiceName, Body, "
            "ResourceAttributes, LogAttributes"
        )
        rs.backend.run(f"INSERT INTO otel.otel_logs ({columns}) VALUES " + ", ".join(logs()))
        for kind in METRICS:
            columns = "ResourceAttributes, MetricName, MetricUnit, Attributes, TimeUnix, ServiceName, "
            rs.backend.run(
                f"INSERT INTO otel.otel_metrics_{kind} ({columns}{METRIC_COLUMNS[kind]}) VALUES "
                + ", ".join(metric_points(kind))
            )
    return path


def _sql(rs: Rootsift, sql: str) -> list[dict[str, Any]]:
    return list(rs.backend.run(sql).to_pylist())


def test_the_exporter_tables_are_datasets_with_their_map_keys_as_fields(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        infos = {d.name: d for d in rs.datasets()}
        assert infos["otel_traces"].events == SPANS and infos["otel_logs"].events == LOGS
        assert infos["otel_traces"].first == T0 and infos["otel_traces"].bytes_on_disk > 0
        fields = {f.name: f.type for f in rs.backend.fields("otel_traces").values()}
        assert fields["duration_ms"] == "DOUBLE" and fields["timestamp"] == "TIMESTAMP"
        assert fields["http.response.status_code"] == "BIGINT"
        assert fields["http.route"] == fields["user.tier"] == fields["host.name"] == "VARCHAR"
        assert {"service.name", "name", "status.code", "trace.trace_id", "trace.parent_id"} <= fields.keys()
        assert "SpanAttributes" not in fields and "Duration" not in fields
        assert {"severity_text", "body", "code.function", "k8s.pod.name"} <= rs.backend.fields("otel_logs").keys()


def _query(
    rs: Rootsift, dataset: str, calculations: list[str], by: str, where: str | None = None
) -> list[dict[str, Any]]:
    spec = QuerySpec(dataset, calculations=[Calculation.parse(c) for c in calculations], breakdowns=[by], where=where)
    result = rs.query(spec, datetime(2024, 6, 2, tzinfo=UTC)).as_dict()
    return sorted((dict(zip(result["columns"], row)) for row in result["rows"]), key=json.dumps)


def test_query_count_and_p99_equal_hand_written_clickhouse_sql(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        got = _query(rs, "otel_traces", ["count", "p99(duration_ms)"], "service.name", "http.route != '/'")
        expected = _sql(
            rs,
            "SELECT ServiceName AS s, count() AS n, quantileExactWeighted(0.99)(Duration / 1e6, 1) AS p99 "
            "FROM otel.otel_traces WHERE SpanAttributes['http.route'] != '/' GROUP BY s ORDER BY s",
        )
        assert len(got) == len(SERVICES) == len(expected)
        for row, want in zip(sorted(got, key=lambda r: r["service.name"]), expected):
            assert row["service.name"] == want["s"] and row["count"] == want["n"]
            assert row["p99(duration_ms)"] == pytest.approx(want["p99"], rel=1e-12)
        got_logs = _query(rs, "otel_logs", ["count"], "severity_text", "k8s.pod.name starts-with 'cart'")
        want_logs = _sql(
            rs,
            "SELECT SeverityText AS s, count() AS n FROM otel.otel_logs "
            "WHERE startsWith(ResourceAttributes['k8s.pod.name'], 'cart') GROUP BY s",
        )
        assert {r["severity_text"]: r["count"] for r in got_logs} == {r["s"]: r["n"] for r in want_logs}


def test_explain_finds_the_planted_slow_route_without_copying(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        found = rs.explain("otel_traces", select="duration_ms > 1000").as_dict()["findings"]
        conditions = {(c["field"], c["value"]) for c in found[0]["conditions"]}
        assert ("http.route", "/checkout") in conditions, found[0]
        copied = _sql(rs, f"SELECT count() AS n FROM system.parts WHERE database = '{rs.backend.database}' AND active")
        assert copied == [{"n": 0}]


def test_a_time_range_reads_only_the_exporter_parts_it_needs(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        plan = _sql(
            rs,
            f"EXPLAIN indexes = 1 SELECT count() FROM {rs.backend.database}.otel_traces "
            "WHERE timestamp >= toDateTime64('2024-06-02 00:00:00', 6, 'UTC')",
        )
        parts = [line for row in plan for line in row.values() if "Parts:" in line]
        assert parts and all(line.strip().startswith(("Parts: 0", "Parts: 0/")) for line in parts), parts
        spans = _query(rs, "otel_traces", ["count"], "service.name", "timestamp >= '2024-06-01T00:30:00Z'")
        assert sum(r["count"] for r in spans) == SPANS - 1500


def test_writing_into_an_exporter_dataset_is_refused_by_name(engine: str, otel_store: Path, tmp_path: Path) -> None:
    events = write_jsonl(tmp_path / "e.jsonl", [{"timestamp": iso(T0), "duration_ms": 1.0}])
    with opened(otel_store, engine) as rs:
        with pytest.raises(UsageError, match=r"'otel_traces' is a read-only view of otel\.otel_traces"):
            rs.ingest(events, dataset="otel_traces")
        with pytest.raises(UsageError, match="read-only view"):
            rs.retention("otel_logs", keep=timedelta(days=1))
        assert _sql(rs, "SELECT count() AS n FROM otel.otel_traces") == [{"n": SPANS}]
        rs.ingest(events, dataset="mine")  # another name is a dataset of rootsift's own
        assert {d.name for d in rs.datasets()} == {"mine", "otel_logs", "otel_traces"} | {
            f"otel_metrics_{kind}" for kind in METRICS
        }


def test_a_new_attribute_key_becomes_a_field_on_the_next_open(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        assert "peer.service" not in rs.backend.fields("otel_traces")
        row = spans()[0].replace("map('http.route'", "map('peer.service', 'db', 'http.route'", 1)
        assert "peer.service" in row
        rs.backend.run(
            "INSERT INTO otel.otel_traces (Timestamp, TraceId, SpanId, ParentSpanId, TraceState, SpanName, "
            "SpanKind, ServiceName, ResourceAttributes, ScopeName, ScopeVersion, SpanAttributes, Duration, "
            f"StatusCode, StatusMessage, Events.Timestamp, Events.Name, Events.Attributes) VALUES {row}"
        )
    try:
        with opened(otel_store, engine) as rs:
            assert rs.backend.fields("otel_traces")["peer.service"].type == "VARCHAR"
            assert _query(rs, "otel_traces", ["count"], "peer.service", "exists peer.service") == [
                {"peer.service": "db", "count": 1}
            ]
    finally:
        with opened(otel_store, engine) as rs:
            rs.backend.run("DELETE FROM otel.otel_traces WHERE SpanAttributes['peer.service'] = 'db'")


def test_the_otel_database_is_a_setting_and_views_follow_the_tables(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data"
    _drop_shared(path, engine, "observability")
    try:
        _the_otel_database_setting(path, engine, monkeypatch)
    finally:
        _drop_shared(path, engine, "observability")


def _the_otel_database_setting(path: Path, engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with opened(path, engine) as rs:
        own = rs.backend.database  # the store's database: rootsift's tables and views
        rs.backend.run("CREATE DATABASE observability")
        rs.backend.run(exporter_ddl()[1].replace('"otel"."otel_traces"', '"observability"."spans"'))
        rs.backend.run(
            "CREATE TABLE observability.other (Timestamp DateTime64(9)) ENGINE = MergeTree ORDER BY Timestamp"
        )
    monkeypatch.setenv("ROOTSIFT_OTEL_DATABASE", "observability")
    with opened(path, engine) as rs:  # found by its columns, whatever its name
        assert [d.name for d in rs.datasets()] == ["spans"]
        assert rs.backend.fields("spans")["duration_ms"].type == "DOUBLE"
        rs.backend.run("DROP TABLE observability.spans")
    with opened(path, engine) as rs:  # its table gone, the view goes too
        assert rs.datasets() == []
    monkeypatch.setenv("ROOTSIFT_OTEL_DATABASE", own)
    with pytest.raises(UsageError, match=f"ROOTSIFT_OTEL_DATABASE cannot be '{own}'"):
        opened(path, engine)
    monkeypatch.setenv("ROOTSIFT_OTEL_DATABASE", "observability")  # (the run's server has `otel` too)
    with opened(path, engine) as rs:  # the store opens again once the setting is fixed
        assert rs.datasets() == []


def test_metric_tables_read_as_points_equal_to_hand_written_sql(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        for kind in ("gauge", "sum"):
            got = _query(
                rs, f"otel_metrics_{kind}", ["count", "avg(value)", "max(value)"], "metric.name", "state = 'busy'"
            )
            want = _sql(
                rs,
                f"SELECT MetricName AS m, count() AS n, avg(Value) AS a, max(Value) AS x FROM otel.otel_metrics_{kind} "
                "WHERE Attributes['state'] = 'busy' GROUP BY m ORDER BY m",
            )
            assert [(r["metric.name"], r["count"], r["max(value)"]) for r in got] == [
                (w["m"], w["n"], w["x"]) for w in want
            ]
            assert [r["avg(value)"] for r in got] == pytest.approx([w["a"] for w in want], rel=1e-9)
            types = _sql(rs, f'SELECT DISTINCT "metric.type" AS t FROM {rs.backend.database}.otel_metrics_{kind}')
            assert types == [{"t": kind}]  # a sum table is told from a gauge table by IsMonotonic
        got = _query(rs, "otel_metrics_histogram", ["sum(count)", "max(max)"], "service.name")
        want = _sql(
            rs,
            "SELECT ServiceName AS s, sum(Count) AS c, max(Max) AS x FROM otel.otel_metrics_histogram GROUP BY s ORDER BY s",
        )
        assert [(r["service.name"], r["sum(count)"], r["max(max)"]) for r in got] == [
            (w["s"], w["c"], w["x"]) for w in want
        ]
        assert rs.backend.fields("otel_metrics_histogram")["host.name"].type == "VARCHAR"


def test_keys_past_the_top_are_not_fields_and_sampled_runs_exact(
    engine: str, otel_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rootsift.store.chdb_otel as chdb_otel

    monkeypatch.setattr(chdb_otel, "TOP_KEYS", 1)  # the most frequent key of each map only
    with opened(otel_store, engine) as rs:
        fields = rs.backend.fields("otel_traces")
        # each map's most frequent key, ties by name: all spans have both http.* keys, and
        # host.name, service.name (a fixed field already) and service.version
        assert "http.response.status_code" in fields and "host.name" in fields
        assert "http.route" not in fields and "user.tier" not in fields and "service.version" not in fields
        with pytest.raises(UsageError, match="unknown field 'user.tier'"):
            _query(rs, "otel_traces", ["count"], "service.name", "user.tier = 'paid'")
        exact = rs.explain("otel_traces", select="duration_ms > 1000").as_dict()["findings"]
        sampled = rs.explain("otel_traces", select="duration_ms > 1000", sampled=True).as_dict()["findings"]
        assert sampled == exact  # no sampling key in the exporter's tables: the exact answer
    monkeypatch.undo()
    with opened(otel_store, engine) as rs:  # the next open with the default rebuilds the views
        assert "user.tier" in rs.backend.fields("otel_traces")


def test_investigate_finds_when_and_where_spans_turned_slow(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        found = rs.investigate("otel_traces", start=T0, end=T0 + timedelta(hours=1)).as_dict()
    anomaly = found["anomaly"]
    onset = datetime.strptime(anomaly["from"], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert anomaly["kind"] == "latency" and abs(onset - (T0 + timedelta(seconds=SPANS // 2 * 1.2))) < timedelta(
        minutes=1
    )
    conditions = {(c["field"], c["value"]) for c in found["findings"][0]["conditions"]}
    assert conditions == {("http.route", "/checkout"), ("service.name", "checkout")}


def test_exception_events_become_fields_as_serve_gives_them(engine: str, otel_store: Path) -> None:
    with opened(otel_store, engine) as rs:
        got = _query(rs, "otel_traces", ["count", "max(span.num_events)"], "exception.type", "exists exception.type")
        want = _sql(
            rs,
            "SELECT e['exception.type'] AS t, count() AS n, max(length(Events.Name)) AS x FROM otel.otel_traces "
            "ARRAY JOIN Events.Attributes AS e, Events.Name AS name WHERE name = 'exception' GROUP BY t ORDER BY t",
        )
        assert len(want) == 2 and [w["x"] for w in want] == [2, 2]  # after a retry event, sometimes
        assert sorted((r["exception.type"], r["count"], r["max(span.num_events)"]) for r in got) == [
            (w["t"], w["n"], w["x"]) for w in want
        ]
        failed = _query(rs, "otel_traces", ["count"], "status.code", "not exists exception.type")
        assert [r["status.code"] for r in failed] == ["Unset"]


def test_the_keys_are_counted_over_rows_spread_through_the_table(
    engine: str, otel_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exporter sorts by ServiceName: the first rows are all 'cart'; a key only
    'frontend' spans carry is found from a sample of a tenth of the rows all the same."""
    import rootsift.store.chdb_otel as chdb_otel

    monkeypatch.setattr(chdb_otel, "KEY_SAMPLE_ROWS", SPANS // 10)
    with opened(otel_store, engine) as rs:
        first = _sql(
            rs, f"SELECT DISTINCT ServiceName AS s FROM (SELECT ServiceName FROM otel.otel_traces LIMIT {SPANS // 10})"
        )
        assert first == [{"s": "cart"}]  # what reading the first rows would have seen
        assert rs.backend.fields("otel_traces")["browser.name"].type == "VARCHAR"
    monkeypatch.undo()
