"""Datasets that are ``Distributed`` tables of a ClickHouse cluster (docs/clickhouse.md,
"Deploying on a cluster"): each shard holds a local MergeTree table of rootsift's shape,
and the dataset is the ``Distributed`` table in front of them, created by the cluster's
operator. rootsift's SQL is the same on it (each shard computes partial aggregates, the
node rootsift talks to merges them); what differs is here:

- the local tables a ``Distributed`` table of the database fronts are not datasets of their
  own (``fronted``), and a dataset's parts and bytes are its shards' (``parts``);
- inserts wait until every shard has its rows (``distributed_foreground_insert``): what
  rootsift acknowledges is stored, not queued on this node for later;
- a new field is a column of every shard's local table and of every node's ``Distributed``
  table: ``ALTER … ON CLUSTER`` (which needs the cluster's Keeper); a server that refuses
  it fails the block with words saying what to do;
- an input read in several blocks becomes visible block by block (a pending table's parts
  cannot be attached across shards), and retention, which drops the days of local tables,
  is refused with the statements to run instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rootsift.errors import StoreError, UsageError
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    from rootsift.store.clickhouse import ClickHouseBackend

FOREGROUND = {"distributed_foreground_insert": 1}
"""An insert into a ``Distributed`` table returns once its rows are on their shards."""
_ENGINE = re.compile(r"^Distributed\(\s*'((?:[^'\\]|\\.)*)'\s*,\s*'((?:[^'\\]|\\.)*)'\s*,\s*'((?:[^'\\]|\\.)*)'")


@dataclass(frozen=True)
class Distributed:
    """A ``Distributed`` table's cluster and the local table it reads on every shard."""

    cluster: str
    database: str
    table: str

    @property
    def local_sql(self) -> str:
        return f"{ident(self.database)}.{ident(self.table)}"

    @property
    def local_name(self) -> str:
        """The local table as a person writes it (in messages)."""
        return f"{self.database}.{self.table}"


def of_engine(engine_full: str) -> Distributed | None:
    """The cluster and local table of a ``Distributed(...)`` engine clause, else None."""
    found = _ENGINE.match(engine_full or "")
    return Distributed(*(re.sub(r"\\(.)", r"\1", g) for g in found.groups())) if found else None


def tables(backend: ClickHouseBackend) -> dict[str, Distributed]:
    """The database's ``Distributed`` tables by name (from the catalog's one read of its tables)."""
    from rootsift.store.clickhouse_catalog import table_rows

    return {name: d for name, row in table_rows(backend).items() if (d := of_engine(row.engine_full)) is not None}


def of(backend: ClickHouseBackend, dataset: str) -> Distributed | None:
    """The dataset's ``Distributed`` table, or None for a plain MergeTree dataset."""
    return tables(backend).get(dataset)


def fronted(backend: ClickHouseBackend) -> set[str]:
    """The database's tables that a ``Distributed`` table of it fronts (the shards' local
    tables, here as on every node): not datasets of their own."""
    return {d.table for d in tables(backend).values() if d.database == backend.database}


def parts(backend: ClickHouseBackend, dist: Distributed) -> tuple[int, int]:
    """(active parts, bytes on disk) of the local table on every shard and replica."""
    from rootsift.store.clickhouse import rows_of

    row = rows_of(
        backend.run(
            f"SELECT count(), sum(bytes_on_disk) FROM clusterAllReplicas({literal(dist.cluster)}, system.parts) "
            "WHERE database = {db:String} AND table = {t:String} AND active",
            {"db": dist.database, "t": dist.table},
        )
    ).rows[0]
    return int(row[0]), int(row[1] or 0)


def add_column(backend: ClickHouseBackend, dataset: str, dist: Distributed, column_sql: str, name: str) -> None:
    """Add a column to every shard's local table, then to every node's ``Distributed`` table."""
    on = f"ON CLUSTER {ident(dist.cluster)}"
    try:
        backend.run(f"ALTER TABLE {dist.local_sql} {on} ADD COLUMN IF NOT EXISTS {column_sql}")
        backend.run(f"ALTER TABLE {backend.table_sql(dataset)} {on} ADD COLUMN IF NOT EXISTS {column_sql}")
    except StoreError as exc:
        raise StoreError(
            f"dataset {dataset!r} is a Distributed table over cluster {dist.cluster!r}: its new field {name!r} "
            f"needs `ALTER TABLE … ON CLUSTER {dist.cluster} ADD COLUMN` on {dist.local_name} and on {dataset}, "
            f"which the server refused ({exc}); add the column on every shard and node (docs/clickhouse.md, "
            "'Deploying on a cluster'), then ingest again"
        ) from exc


def refuse_retention(dataset: str, dist: Distributed) -> None:
    """Retention drops the days of the shards' local tables: the cluster's operator's DDL."""
    raise UsageError(
        f"dataset {dataset!r} is a Distributed table over cluster {dist.cluster!r}: its days are in the shards' "
        f"{dist.local_name}; run `ALTER TABLE {dist.local_name} ON CLUSTER {dist.cluster} DROP PARTITION ID '…'` "
        "per day, or set a TTL there (docs/clickhouse.md, 'Deploying on a cluster')"
    )
