"""The embedded ClickHouse backend (chdb): the ClickHouse backend (store/clickhouse.py) on
chdb's in-process engine in ``DATA/clickhouse`` (database ``rootsift``), through the same
clickhouse-connect client a server gets (a ``chdb://`` URL).

What differs from a server, and why (docs/clickhouse.md, "One backend, two connections"):

- **Inserts** stream through a chdb handle of the same engine (``send_insert``, Arrow IPC):
  clickhouse-connect's chdb transport writes an insert to a temporary file and reads it
  back (``INSERT … FROM INFILE``): 0–4 % more ingest CPU measured, and every block written
  to disk once more. Every other statement goes through clickhouse-connect.
- **No timeout**: nothing is configured for an embedded store, so nothing bounds a query.
- **Sole user**: chdb opens one data directory per process, so this process is the
  store's only user: catalog answers are kept until it changes something, and opening
  the store for writing clears what a crashed run left (pending tables, tables dropped
  without ``SYNC``: chdb_retention.purge_dropped). On a server another process may be
  using either.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rootsift.errors import StoreError, UsageError
from rootsift.store.clickhouse import DATABASE, ClickHouseBackend, Connection
from rootsift.store.clickhouse_driver import ClickHouseURL, ClientConnection
from rootsift.store.sqltext import ident


class ChdbConnection(ClientConnection):
    """clickhouse-connect's chdb client, and a handle of the same engine for inserts."""

    def __init__(self, url: ClickHouseURL) -> None:
        try:
            import chdb
        except ImportError:
            raise UsageError("--backend chdb needs the chdb package: pip install 'rootsift[clickhouse]'") from None
        try:
            super().__init__(url)
        except StoreError as exc:
            raise StoreError(f"{exc} (chdb opens one store per process)") from exc.__cause__
        try:  # the path as clickhouse-connect opened it: chdb compares engine paths literally
            self.handle = chdb.connect(os.path.realpath(url.path))
        except Exception as exc:
            self.client.close()
            raise StoreError(f"opening the chdb store {url.path}: {exc} (chdb opens one store per process)") from exc

    def insert_arrow(self, table: str, columns: list[str], stream: Iterator[bytes], settings: dict[str, Any]) -> None:
        names = ", ".join(ident(c) for c in columns)
        clause = " SETTINGS " + ", ".join(f"{k} = {v}" for k, v in settings.items()) if settings else ""
        with self.handle.send_insert(f"INSERT INTO {table} ({names}){clause}", "ArrowStream") as ins:
            for chunk in stream:
                ins.append(chunk)
            ins.finish()

    def close(self) -> None:
        self.handle.close()
        super().close()


class ChdbBackend(ClickHouseBackend):
    """Datasets as MergeTree tables of an embedded ClickHouse under ``DATA/clickhouse``."""

    sole_user = True
    runs_between_commands = False  # its engine lives as long as the command

    def __init__(self, data_dir: Path, *, read_only: bool = False) -> None:
        data_dir = Path(data_dir)
        if data_dir.exists() and not data_dir.is_dir():
            raise UsageError(f"{data_dir} is a file, not a data directory (see --data, $ROOTSIFT_DATA)")
        (data_dir / "clickhouse").mkdir(parents=True, exist_ok=True)
        super().__init__(data_dir, ClickHouseURL.embedded(data_dir / "clickhouse"), read_only=read_only)
        assert self.database == DATABASE

    def connect(self) -> Connection:
        return ChdbConnection(self.url)

    def open_store(self) -> None:
        super().open_store()
        if not self.read_only:
            for name in self.tables(pending=True):  # inputs a crashed ingest left half-read
                self.run(f"DROP TABLE IF EXISTS {self.table_sql(name)} SYNC")
            from rootsift.store.chdb_retention import purge_dropped

            purge_dropped(self)
