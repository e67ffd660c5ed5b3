"""Retention on the ClickHouse backends (a server, chdb): counting and deleting a dataset's events before a
cutoff (``rootsift retention``), as ``store/retention.py`` does for DuckDB's segments.

A dataset's table has one partition a UTC day (``chdb.PARTITION_KEY``). A day wholly
before the cutoff is dropped (``DROP PARTITION``: its parts leave the disk before the
statement returns); the one day the cutoff cuts is rewritten alone, its kept rows copied
into a scratch table that replaces the partition in one step (``REPLACE PARTITION``);
later days are not touched. A table written before partitions existed is one partition
(``all``), rewritten the same way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from rootsift.errors import StoreError
from rootsift.store.base import TIME_COLUMN
from rootsift.store.clickhouse import rows_of
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    from rootsift.store.clickhouse import ClickHouseBackend

CUTOFF = "{c:DateTime64(6, 'UTC')}"
"""The cutoff as a bound parameter (``_param``)."""
RETAIN = "#retain"
"""The scratch table of a partition being rewritten: ``<dataset>#retain`` (never a dataset)."""
NO_PARTITION = "rootsift-none"
"""A partition ID no table has (IDs are digits, or ``all``): dropping it only clears the
table's replaced parts from disk (``drop_before``)."""


@dataclass(frozen=True)
class Partition:
    """One partition of a dataset's table: its ID, rows, rows before the cutoff, bytes on disk."""

    id: str
    rows: int
    before: int
    bytes: int


def _param(cutoff: datetime) -> dict[str, str]:
    return {"c": cutoff.strftime("%Y-%m-%d %H:%M:%S.%f")}


def partitions(backend: ClickHouseBackend, dataset: str, cutoff: datetime) -> list[Partition]:
    """The dataset's partitions that hold rows, oldest first, with their rows before ``cutoff``."""
    counted = rows_of(
        backend.run(
            f"SELECT _partition_id, count(), countIf({ident(TIME_COLUMN)} < {CUTOFF}) "
            f"FROM {backend.table_sql(dataset)} GROUP BY _partition_id ORDER BY min({ident(TIME_COLUMN)})",
            _param(cutoff),
        )
    ).rows
    sizes = dict(
        rows_of(
            backend.run(
                "SELECT partition_id, sum(bytes_on_disk) FROM system.parts "
                "WHERE database = {db:String} AND table = {t:String} AND active GROUP BY partition_id",
                {"db": backend.database, "t": dataset},
            )
        ).rows
    )
    return [Partition(str(p), int(n), int(b), int(sizes.get(p, 0))) for p, n, b in counted]


def count_before(backend: ClickHouseBackend, dataset: str, cutoff: datetime) -> tuple[int, int]:
    """What ``drop_before`` would delete, deleting nothing: (rows, bytes; the day the cutoff
    cuts in proportion to its rows)."""
    backend.writable(dataset)
    parts = [p for p in partitions(backend, backend.state(dataset), cutoff) if p.before]
    freed = sum(p.bytes if p.before == p.rows else round(p.bytes * p.before / p.rows) for p in parts)
    return sum(p.before for p in parts), freed


def drop_before(backend: ClickHouseBackend, dataset: str, cutoff: datetime) -> int:
    """Delete the events before ``cutoff``; the disk is given back before this returns.

    Whole days go by ``DROP PARTITION``. The day the cutoff cuts is rewritten by ``REPLACE
    PARTITION`` from a scratch table of its kept rows: readers see the old day or the new
    one, never half. The replaced parts would wait for ClickHouse's background cleanup,
    which an embedded process that exits does not reach (ADR 0022); a ``DROP PARTITION``
    clears a table's replaced parts from disk at once (``StorageMergeTree::dropPartsImpl``),
    so one of a partition no table has ends the rewrite. ``tests/test_chdb_partitions.py``
    checks the disk, so a ClickHouse that stops doing this fails a test rather than
    silently keeping the bytes."""
    backend.writable(dataset)
    parts = [p for p in partitions(backend, backend.state(dataset), cutoff) if p.before]
    table, scratch = backend.table_sql(dataset), backend.table_sql(f"{dataset}{RETAIN}")
    with backend._lock:  # the backend's own writes, as its methods take it
        for part in parts:
            pid = literal(part.id)
            if part.before == part.rows:
                backend.run(f"ALTER TABLE {table} DROP PARTITION ID {pid}")
                continue
            backend.run(f"DROP TABLE IF EXISTS {scratch} SYNC")
            backend.run(f"CREATE TABLE {scratch} AS {table}")
            backend.run(
                f"INSERT INTO {scratch} SELECT * FROM {table} "
                f"WHERE _partition_id = {pid} AND {ident(TIME_COLUMN)} >= {CUTOFF}",
                _param(cutoff),
            )
            backend.run(f"ALTER TABLE {table} REPLACE PARTITION ID {pid} FROM {scratch}")
            backend.run(f"DROP TABLE {scratch} SYNC")
            backend.run(f"ALTER TABLE {table} DROP PARTITION ID {literal(NO_PARTITION)}")
    return sum(p.before for p in parts)


def purge_dropped(backend: ClickHouseBackend) -> None:
    """Give back the disk of tables dropped without ``SYNC`` (as rootsift dropped the
    pending table of every input read in several blocks until 2026-11): ClickHouse
    deletes a dropped table's data 8 minutes later, which a command that exits never
    reaches, so their rows stayed on disk for good. Each is restored (``UNDROP``) and
    dropped again with ``SYNC``; one whose name was taken again since cannot be restored
    and is left as it is. Run when a store opens for writing."""
    sql = "SELECT table, uuid FROM system.dropped_tables WHERE database = {db:String}"
    for row in backend.run(sql, {"db": backend.database}).to_pylist():
        table = backend.table_sql(row["table"])
        with contextlib.suppress(StoreError):
            backend.run(f"UNDROP TABLE {table} UUID {literal(str(row['uuid']))}")
            backend.run(f"DROP TABLE {table} SYNC")
