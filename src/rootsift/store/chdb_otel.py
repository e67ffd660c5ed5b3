"""Read mode for the OpenTelemetry collector's ClickHouse exporter tables (a ClickHouse
server or chdb: the same SQL on either).

A table the exporter wrote (``otel_traces``, ``otel_logs``, by default in database
``otel``; ``$ROOTSIFT_OTEL_DATABASE`` names another) becomes a read-only dataset of the
same name: a ClickHouse ``VIEW`` in rootsift's database whose SELECT maps the exporter's
columns to the field names rootsift's own OTLP ingest gives (server/otlp.py), so a span
reads the same whether ``serve`` stored it or the exporter did. No row is copied: every
query reads the exporter's table through the view. A table is recognised by its columns
(``Timestamp``, ``ServiceName`` and ``SpanAttributes`` or ``LogAttributes``), so renamed
tables (the exporter's ``traces_table_name``) are found too.

The Map columns (``SpanAttributes``/``LogAttributes``, ``ResourceAttributes``) become
fields by their keys: the ``TOP_KEYS`` most frequent keys of each, counted over about
``KEY_SAMPLE_ROWS`` rows spread through the table, each typed ``BIGINT`` or ``DOUBLE`` when every value
seen parses as one, else text; a key in both maps is read from the item's own map. The
other keys are not fields (``fields`` of the view does not list them). The views are
rebuilt when a store is opened and the keys changed.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rootsift.errors import UsageError
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    from rootsift.store.clickhouse import ClickHouseBackend

DEFAULT_DATABASE = "otel"
"""The exporter's default database; ``$ROOTSIFT_OTEL_DATABASE`` names another."""
TOP_KEYS = 64
KEY_SAMPLE_ROWS = 100_000
SAMPLE_RUNS = 100
"""The key sample is read as runs of ``KEY_SAMPLE_ROWS / SAMPLE_RUNS`` consecutive rows
(about 100 granules at most, whatever the table's size)."""
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Kind:
    """One of the exporter's table shapes: the columns that tell it, its fixed fields."""

    name: str
    time: str
    item_map: str
    signature: frozenset[str]
    """Columns a table of this shape has (besides its time and maps); KINDS is ordered
    so that a shape whose signature holds another's comes first."""
    columns: tuple[tuple[str, str], ...]
    """(field, ClickHouse expression over the exporter's columns), in the view's order."""


TRACES = Kind(
    "traces",
    "Timestamp",
    "SpanAttributes",
    frozenset({"ServiceName", "SpanName", "Duration"}),
    (
        ("name", "SpanName"),
        ("span.kind", "SpanKind"),
        ("service.name", "ServiceName"),
        ("trace.trace_id", "TraceId"),
        ("trace.span_id", "SpanId"),
        ("trace.parent_id", "nullIf(ParentSpanId, '')"),
        ("status.code", "StatusCode"),
        ("status.message", "nullIf(StatusMessage, '')"),
        ("duration_ms", "Duration / 1e6"),
        ("otel.scope.name", "nullIf(ScopeName, '')"),
        ("otel.scope.version", "nullIf(ScopeVersion, '')"),
        ("span.num_events", 'toInt64(length("Events.Name"))'),
        ("span.num_links", 'toInt64(length("Links.TraceId"))'),
        # from the first "exception" event, as serve's OTLP ingest takes them (index 0: an empty map)
        (
            "exception.type",
            """nullIf("Events.Attributes"[indexOf("Events.Name", 'exception')]['exception.type'], '')""",
        ),
        (
            "exception.message",
            """nullIf("Events.Attributes"[indexOf("Events.Name", 'exception')]['exception.message'], '')""",
        ),
    ),
)
LOGS = Kind(
    "logs",
    "Timestamp",
    "LogAttributes",
    frozenset({"ServiceName", "Body", "SeverityText"}),
    (
        ("severity_text", "SeverityText"),
        ("severity_number", "toInt64(SeverityNumber)"),
        ("service.name", "ServiceName"),
        ("body", "Body"),
        ("trace.trace_id", "nullIf(TraceId, '')"),
        ("trace.span_id", "nullIf(SpanId, '')"),
        ("otel.scope.name", "nullIf(ScopeName, '')"),
    ),
)
_METRIC = (
    ("metric.name", "MetricName"),
    ("metric.unit", "nullIf(MetricUnit, '')"),
    ("service.name", "ServiceName"),
    ("otel.scope.name", "nullIf(ScopeName, '')"),
)
METRIC_SIGNATURE = frozenset({"ServiceName", "MetricName", "MetricUnit"})
SUM = Kind(
    "sum",
    "TimeUnix",
    "Attributes",
    METRIC_SIGNATURE | {"Value", "IsMonotonic"},
    (*_METRIC, ("metric.type", "'sum'"), ("value", "Value")),
)
GAUGE = Kind(
    "gauge",
    "TimeUnix",
    "Attributes",
    METRIC_SIGNATURE | {"Value"},
    (*_METRIC, ("metric.type", "'gauge'"), ("value", "Value")),
)
HISTOGRAM = Kind(
    "histogram",
    "TimeUnix",
    "Attributes",
    METRIC_SIGNATURE | {"Count", "Sum", "Min", "Max", "BucketCounts", "ExplicitBounds"},
    (
        *_METRIC,
        ("metric.type", "'histogram'"),
        ("count", "toInt64(Count)"),
        ("sum", "Sum"),
        ("min", "Min"),
        ("max", "Max"),
    ),
)
KINDS = (TRACES, LOGS, SUM, GAUGE, HISTOGRAM)
RESOURCE_MAP = "ResourceAttributes"


def otel_database() -> str:
    return os.environ.get("ROOTSIFT_OTEL_DATABASE", "").strip() or DEFAULT_DATABASE


def source_of(settings: dict[str, Any]) -> tuple[str, str] | None:
    """(database, table) of the exporter table a dataset's settings name, else None."""
    otel = settings.get("otel")
    return (otel["database"], otel["table"]) if isinstance(otel, dict) else None


def refuse_writes(dataset: str, source: tuple[str, str] | None) -> None:
    """A usage error when ``dataset`` reads an exporter table (``source``): nothing writes there."""
    if source is not None:
        raise UsageError(
            f"dataset {dataset!r} is a read-only view of {source[0]}.{source[1]} (the OpenTelemetry "
            "collector's ClickHouse exporter table): rootsift does not write or delete there; "
            "ingest into another dataset name, and set the exporter's TTL for retention"
        )


def time_source(settings: dict[str, Any]) -> tuple[str, str] | None:
    """(the exporter table, its time column as rootsift's type) that a dataset's count and
    span read directly: ClickHouse answers them from the parts' min/max indexes there,
    where through the view's CAST it scans every row. None for rootsift's own tables."""
    otel = settings.get("otel")
    kind = next((k for k in KINDS if isinstance(otel, dict) and k.name == otel.get("kind")), None)
    if kind is None or not isinstance(otel, dict):
        return None
    return f"{ident(otel['database'])}.{ident(otel['table'])}", ident(kind.time)


def exporter_tables(backend: ClickHouseBackend, database: str) -> dict[str, Kind]:
    """The exporter's tables in ``database`` by name, each with its kind."""
    rows = backend.run(
        "SELECT table, groupArray(name) AS names FROM system.columns WHERE database = {db:String} GROUP BY table",
        {"db": database},
    ).to_pylist()
    found = {}
    for row in rows:
        names = set(row["names"])
        for kind in KINDS:
            if {kind.time, RESOURCE_MAP, kind.item_map, *kind.signature} <= names:
                found[row["table"]] = kind
                break
    return found


def _keys(backend: ClickHouseBackend, source: str, map_column: str, rows: int) -> list[tuple[str, str]]:
    """The most frequent keys of a Map column, each with its storage type, counted over
    about ``KEY_SAMPLE_ROWS`` of its ``rows``: runs of rows spread evenly through each
    part (the exporter's tables are sorted by service, so the first rows would be one
    service's); PREWHERE on the row offset reads only the granules that hold a run."""
    every, run = max(1, rows // KEY_SAMPLE_ROWS), max(1, KEY_SAMPLE_ROWS // SAMPLE_RUNS)
    found = backend.run(
        f"SELECT k, count() AS n, countIf(toInt64OrNull(v) IS NULL) AS not_int, "
        f"countIf(toFloat64OrNull(v) IS NULL) AS not_num "
        f"FROM (SELECT {ident(map_column)} AS m FROM {source} "
        f"PREWHERE intDiv(_part_offset, {run}) % {every} = 0 LIMIT {KEY_SAMPLE_ROWS}) "
        f"ARRAY JOIN mapKeys(m) AS k, mapValues(m) AS v GROUP BY k ORDER BY n DESC, k LIMIT {TOP_KEYS}"
    ).to_pylist()
    return [(r["k"], "BIGINT" if not r["not_int"] else "DOUBLE" if not r["not_num"] else "VARCHAR") for r in found]


def _map_field(map_column: str, key: str, storage: str) -> str:
    value = f"{ident(map_column)}[{literal(key)}]"
    if storage == "BIGINT":
        return f"toInt64OrNull({value})"
    if storage == "DOUBLE":
        return f"toFloat64OrNull({value})"
    return f"if(mapContains({ident(map_column)}, {literal(key)}), {value}, NULL)"


def view_sql(backend: ClickHouseBackend, view: str, database: str, table: str, kind: Kind) -> tuple[str, str]:
    """(the view's SELECT, its comment: the dataset's settings naming the source)."""
    source = f"{ident(database)}.{ident(table)}"
    # CAST keeps the time range prunable by the exporter's partition and primary keys
    # (toDate(Timestamp), ... Timestamp); toDateTime64() would read every part.
    columns = [("timestamp", f"CAST({ident(kind.time)} AS DateTime64(6, 'UTC'))"), *kind.columns]
    taken = {name for name, _ in columns}
    rows = int(backend.run(f"SELECT count() AS n FROM {source}").column("n")[0].as_py())
    item_keys = _keys(backend, source, kind.item_map, rows)
    resource_keys = _keys(backend, source, RESOURCE_MAP, rows)
    item_names = {k for k, _ in item_keys}
    for key, storage in item_keys:
        if key not in taken:
            columns.append((key, _map_field(kind.item_map, key, storage)))
            taken.add(key)
    for key, storage in resource_keys:
        if key not in taken and key not in item_names:
            columns.append((key, _map_field(RESOURCE_MAP, key, storage)))
            taken.add(key)
    select = "SELECT " + ", ".join(f"{expr} AS {ident(name)}" for name, expr in columns) + f" FROM {source}"
    settings = {
        "format_version": FORMAT_VERSION,
        "otel": {"database": database, "table": table, "kind": kind.name},
        "read_only": True,
        "view": hashlib.sha256(select.encode()).hexdigest()[:16],
    }
    return select, json.dumps(settings, sort_keys=True)


def refresh_views(backend: ClickHouseBackend) -> list[str]:
    """Create or update a view for each exporter table of the OTel database, and drop the
    views of tables gone (or of another database); return the views' names. A rootsift
    dataset that already has a table's name keeps it (no view)."""
    database = otel_database()
    if database == backend.database:
        raise UsageError(f"$ROOTSIFT_OTEL_DATABASE cannot be {database!r}: that is rootsift's own database")
    present = backend.run(
        "SELECT name, comment FROM system.tables WHERE database = {db:String}",
        {"db": backend.database},
    ).to_pylist()
    current = {r["name"]: r for r in present}
    found = exporter_tables(backend, database)
    for name, row in current.items():  # a view whose table is gone, or of another database
        source = source_of(_json(row["comment"]))
        if source is not None and (source[0] != database or name not in found):
            backend.run(f"DROP VIEW IF EXISTS {backend.table_sql(name)}")
    made = []
    for table, kind in sorted(found.items()):
        old = current.get(table)
        if old is not None and source_of(_json(old["comment"])) is None:
            continue  # a dataset of rootsift's own holds the name
        select, comment = view_sql(backend, table, database, table, kind)
        if old is None or old["comment"] != comment:
            backend.run(f"CREATE OR REPLACE VIEW {backend.table_sql(table)} AS {select} COMMENT {literal(comment)}")
        made.append(table)
    return made


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
