"""Retention on the ClickHouse backends (a server, chdb): counting and deleting a dataset's events before a
cutoff (``rootsift retention``), as ``store/retention.py`` does for DuckDB's segments.

A dataset's table has one partition a UTC day (``chdb.PARTITION_KEY``). A day wholly
before the cutoff is dropped (``DROP PARTITION``: its parts leave the disk before the
statement returns); the one day the cutoff cuts is rewritten alone, its kept rows copied
into a scratch table that replaces the partition in one step (``REPLACE PARTITION``);
later days are not touched. A table written before partitions existed is one partition
(``all``), rewritten the same way.

On a server, ``retention --standing`` also leaves the deleting to ClickHouse: the table's
``TTL`` (``set_standing``), applied by the server's background merges between commands.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

from rootsift.errors import StoreError
from rootsift.store.base import TIME_COLUMN, StandingRetention
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


class RetentionTarget:
    """The retention side of ``ClickHouseBackend`` (a mixin, as ``IngestTarget`` is its
    ingest side): the Backend methods, over this module's functions."""

    runs_between_commands = True

    def _backend(self) -> ClickHouseBackend:
        return cast("ClickHouseBackend", self)

    def count_before(self, dataset: str, cutoff: datetime) -> tuple[int, int]:
        """What ``drop_before(dataset, cutoff)`` would delete, deleting nothing (rows, bytes)."""
        self._local_days(dataset)
        return count_before(self._backend(), dataset, cutoff)

    def drop_before(self, dataset: str, cutoff: datetime) -> int:
        self._local_days(dataset)
        return drop_before(self._backend(), dataset, cutoff)

    def standing_retention(self, dataset: str) -> StandingRetention | None:
        return standing(self._backend(), dataset)

    def set_standing_retention(self, dataset: str, keep: timedelta | None) -> None:
        if not self.runs_between_commands:
            super().set_standing_retention(dataset, keep)  # type: ignore[misc]  # Backend's: refused
        self._local_days(dataset)
        set_standing(self._backend(), dataset, keep)

    def expired_on_arrival(self, dataset: str) -> int:
        return self._backend().expired.pop(dataset, 0)

    def _local_days(self, dataset: str) -> None:
        """Refuse retention on a cluster's ``Distributed`` dataset (clickhouse_cluster.py)."""
        from rootsift.store import clickhouse_cluster

        backend = self._backend()
        dist = clickhouse_cluster.of(backend, backend.state(dataset))
        if dist is not None:
            clickhouse_cluster.refuse_retention(dataset, dist)


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
    from rootsift.store.clickhouse import rows_of

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


TTL_SETTINGS = "ttl_only_drop_parts = 1, materialize_ttl_recalculate_only = 1"
"""The table settings of a standing retention: expired rows leave only as whole parts (a
day's part once its newest event is past the keep: nothing is rewritten), and a changed
TTL is applied to the parts already there by recomputing their TTL bounds from the time
column, not by rewriting them."""
_TTL = re.compile(r"\bTTL (.+?)(?: SETTINGS |$)")
_KEEP = re.compile(rf"^toDateTime\(`?{TIME_COLUMN}`?\) \+ toInterval(Second|Minute|Hour|Day|Week)\((\d+)\)$")
"""A TTL that keeps a span of the events' time (as rootsift writes it, or by hand in days)."""
_SECONDS = {"Second": 1, "Minute": 60, "Hour": 3600, "Day": 86400, "Week": 604800}


def standing(backend: ClickHouseBackend, dataset: str) -> StandingRetention | None:
    """The table's TTL as the server reports it (``system.tables.engine_full``), or None;
    a cluster's dataset: its local table's, on this node."""
    from rootsift.store import clickhouse_cluster
    from rootsift.store.clickhouse_catalog import table_rows

    dist = clickhouse_cluster.of(backend, backend.state(dataset))
    if dist is None or dist.database == backend.database:
        row = table_rows(backend).get(dist.table if dist is not None else dataset)
        engine = row.engine_full if row is not None else ""
    else:  # the local tables live in another database
        rows = backend.run(
            "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = {t:String}",
            {"db": dist.database, "t": dist.table},
        ).column("engine_full")
        engine = (rows[0].as_py() or "") if len(rows) else ""
    found = _TTL.search(engine)
    if found is None:
        return None
    keep = _KEEP.match(found.group(1))
    return StandingRetention(found.group(1), _SECONDS[keep.group(1)] * int(keep.group(2)) if keep else None)


def set_standing(backend: ClickHouseBackend, dataset: str, keep: timedelta | None) -> None:
    """Set the table's TTL to delete events older than ``keep`` (None: remove it).

    ``MODIFY TTL`` recomputes the TTL bounds of the parts already there (``mutations_sync``:
    before this returns), so a day already past the keep goes in the next merge, not
    never (a part without TTL bounds is not known to be expired:
    tests/test_standing_retention.py)."""
    backend.writable(dataset)
    table = backend.table_sql(backend.state(dataset))
    with backend._lock:
        if keep is None:
            if standing(backend, dataset) is not None:
                backend.run(f"ALTER TABLE {table} REMOVE TTL")
            return
        seconds = max(0, round(keep.total_seconds()))
        backend.run(f"ALTER TABLE {table} MODIFY SETTING {TTL_SETTINGS}")
        backend.run(
            f"ALTER TABLE {table} MODIFY TTL toDateTime({ident(TIME_COLUMN)}) + INTERVAL {seconds} SECOND DELETE "
            "SETTINGS mutations_sync = 1"
        )
