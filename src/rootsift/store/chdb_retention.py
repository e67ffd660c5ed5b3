"""Retention on the chdb backend: counting and deleting a dataset's events before a
cutoff (``rootsift retention``), as ``store/retention.py`` does for DuckDB's segments."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rootsift.store.base import TIME_COLUMN
from rootsift.store.chdb import rows_of
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from rootsift.store.chdb import ChdbBackend

CUTOFF = "{c:DateTime64(6, 'UTC')}"
"""The cutoff as a bound parameter (``_param``)."""


def _param(cutoff: datetime) -> dict[str, str]:
    return {"c": cutoff.strftime("%Y-%m-%d %H:%M:%S.%f")}


def _count(backend: ChdbBackend, dataset: str, cutoff: datetime) -> tuple[int, int]:
    """(events, events before ``cutoff``) of the dataset."""
    sql = f"SELECT count(), countIf({ident(TIME_COLUMN)} < {CUTOFF}) FROM {backend.table_sql(dataset)}"
    total, before = rows_of(backend.run(sql, _param(cutoff))).rows[0]
    return int(total), int(before)


def count_before(backend: ChdbBackend, dataset: str, cutoff: datetime) -> tuple[int, int]:
    """What ``drop_before`` would delete, deleting nothing: (rows, bytes in proportion)."""
    backend.writable(dataset)
    total, before = _count(backend, dataset, cutoff)
    size = backend.dataset_bytes(dataset)
    return before, round(size * before / total) if total else 0


def drop_before(backend: ChdbBackend, dataset: str, cutoff: datetime) -> int:
    """Delete the events before ``cutoff`` and give their disk back at once: the kept
    rows are copied into a new table that takes the dataset's place, and the old one is
    dropped (``SYNC``). A mutation (``ALTER TABLE DELETE``) would leave the replaced
    parts on disk until ClickHouse's background cleanup, which an embedded process
    that exits does not wait for (measured: still there 20 s later)."""
    backend.writable(dataset)
    total, before = _count(backend, dataset, cutoff)
    if not before:
        return 0
    table, kept = backend.table_sql(dataset), backend.table_sql(f"{dataset}#retain")
    with backend._lock:  # the backend's own writes, as its methods take it
        backend.run(f"DROP TABLE IF EXISTS {kept} SYNC")
        backend.run(f"CREATE TABLE {kept} AS {table}")
        if before < total:
            backend.run(
                f"INSERT INTO {kept} SELECT * FROM {table} WHERE {ident(TIME_COLUMN)} >= {CUTOFF}", _param(cutoff)
            )
        backend.run(f"EXCHANGE TABLES {table} AND {kept}")
        backend.run(f"DROP TABLE {kept} SYNC")
    return before
