"""What a ClickHouse store knows of its datasets, read from the server's system tables:
each dataset's rows, events (weighted by its sample rate field), time span, active parts
and bytes on disk, and its fields from its table's columns (a column's comment holds its
JSON path). ``ClickHouseBackend`` keeps the answers until a statement changes something
(``_memo``). A read-only OpenTelemetry dataset counts and spans the exporter's table
(``ClickHouseBackend.time_source``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, DatasetInfo, FieldInfo
from rootsift.store.dialects import DIALECTS
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from rootsift.store.clickhouse import ClickHouseBackend

_STORAGE = {v.removeprefix("Nullable(").removesuffix(")"): k for k, v in DIALECTS["clickhouse"].storage_types.items()}
"""A column's ClickHouse type (without ``Nullable``) → the field type rootsift reports."""


@dataclass(frozen=True)
class TableRow:
    """One table of rootsift's database as ``system.tables`` has it."""

    engine_full: str
    comment: str


def table_rows(backend: ClickHouseBackend) -> dict[str, TableRow]:
    """Every table of rootsift's database by name, in name order: one read of
    ``system.tables`` kept with the catalog answers, for the dataset list, their settings
    (the comment), a cluster's ``Distributed`` tables and a table's TTL (``engine_full``)."""

    def read() -> dict[str, TableRow]:
        rows = backend.run(
            "SELECT name, engine_full, comment FROM system.tables WHERE database = {db:String} ORDER BY name",
            {"db": backend.database},
        ).to_pylist()
        return {r["name"]: TableRow(r["engine_full"] or "", r["comment"] or "") for r in rows}

    found: dict[str, TableRow] = backend._memo(("table_rows", ""), read)
    return found


def datasets(backend: ClickHouseBackend) -> list[DatasetInfo]:
    """Every dataset with its events, stored rows, time span, parts and bytes on disk."""
    from rootsift.store.clickhouse import rows_of

    out = []
    for name in backend.tables():
        weight = backend.weight_field(name)
        events = f"sum(if({ident(weight)} >= 1, {ident(weight)}, 1))" if weight else "count()"
        table, t = backend.time_source(name) if not weight else (backend.table_sql(name), ident(TIME_COLUMN))
        rows, total, first, last = rows_of(
            backend.run(f"SELECT count(), {events}, {_utc(f'min({t})')}, {_utc(f'max({t})')} FROM {table}")
        ).rows[0]
        count, size = parts(backend, name)
        out.append(
            DatasetInfo(
                name=name,
                events=int(total or 0),
                stored_rows=int(rows),
                first=first if rows else None,
                last=last if rows else None,
                bytes_on_disk=size + backend.local_bytes(name),
                segments=count,
            )
        )
    return out


def parts(backend: ClickHouseBackend, dataset: str) -> tuple[int, int]:
    """(active parts, their bytes on disk) of the dataset's table."""
    from rootsift.store import clickhouse_cluster
    from rootsift.store.clickhouse import rows_of

    dist = clickhouse_cluster.of(backend, dataset)
    if dist is not None:
        return clickhouse_cluster.parts(backend, dist)
    row = rows_of(
        backend.run(
            "SELECT count(), sum(bytes_on_disk) FROM system.parts "
            "WHERE database = {db:String} AND table = {t:String} AND active",
            dict(zip(("db", "t"), backend.source(dataset) or (backend.database, dataset))),
        )
    ).rows[0]
    return int(row[0]), int(row[1] or 0)


def span(backend: ClickHouseBackend, dataset: str) -> tuple[datetime | None, datetime | None]:
    """The first and last event time of the dataset (None, None when it has none)."""
    from rootsift.store.clickhouse import rows_of

    table, t = backend.time_source(backend.state(dataset))
    sql = f"SELECT count(), {_utc(f'min({t})')}, {_utc(f'max({t})')} FROM {table}"
    rows, lo, hi = rows_of(backend.run(sql)).rows[0]
    return (lo, hi) if rows else (None, None)


def fields(backend: ClickHouseBackend, dataset: str) -> dict[str, FieldInfo]:
    """The dataset's fields from its table's columns, the time first; the sampling key and
    the raw-text columns of typed fields are not fields."""
    from rootsift.store.clickhouse import SAMPLE_KEY, rows_of

    rows = rows_of(
        backend.run(
            "SELECT name, type, comment FROM system.columns WHERE database = {db:String} AND table = {t:String} "
            "ORDER BY position",
            {"db": backend.database, "t": backend.state(dataset)},
        )
    ).rows
    out = {TIME_COLUMN: FieldInfo(TIME_COLUMN, "TIMESTAMP", [TIME_COLUMN])}
    for name, ctype, comment in rows:
        if name in (TIME_COLUMN, SAMPLE_KEY) or name.endswith(RAW_SUFFIX):
            continue
        inner = ctype.removeprefix("Nullable(").removesuffix(")")
        out[name] = FieldInfo(name, _STORAGE.get(inner, "VARCHAR"), json.loads(comment) if comment else [name])
    return out


def _utc(expr: str) -> str:
    return f"CAST({expr} AS DateTime64(6, 'UTC'))"
