"""What the ingest runner drives on a ClickHouse backend (a mixin of ``ClickHouseBackend``):
DuckDB as the parser (``cursor``), the writer that moves checked blocks into ClickHouse
(chdb_writer.py), the pending table of an input read in several blocks, and the Arrow
insert (chdb_arrow.py)."""

from __future__ import annotations

import contextlib
import threading
import uuid
from typing import TYPE_CHECKING, Any, cast

import duckdb

if TYPE_CHECKING:
    import pyarrow as pa

    from rootsift.store.base import FieldInfo
    from rootsift.store.chdb_writer import ArrowWriter
    from rootsift.store.clickhouse import ClickHouseBackend


class IngestTarget:
    """The ingest side of ``ClickHouseBackend`` (see the module's docstring)."""

    if TYPE_CHECKING:  # what it uses of ClickHouseBackend
        _lock: threading.RLock
        _parser: duckdb.DuckDBPyConnection | None
        database: str

        def run(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table: ...

        def state(self, name: str, create: bool = False) -> str: ...

        def table_sql(self, name: str) -> str: ...

        def changed(self) -> None: ...

    def _backend(self) -> ClickHouseBackend:
        return cast("ClickHouseBackend", self)

    # -- ingest -------------------------------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection to parse and check input with (DuckDB is the parser here, not the store)."""
        with self._lock:
            if self._parser is None:
                from rootsift.store.duckdb import WRITER_MEMORY_LIMIT

                self._parser = duckdb.connect(":memory:", config={"memory_limit": WRITER_MEMORY_LIMIT})
                self._parser.execute("SET GLOBAL TimeZone = 'UTC'")
            return self._parser.cursor()

    def raised_memory_limit(self, limit: str) -> contextlib.AbstractContextManager[None]:
        from rootsift.store.files import raised_memory_limit

        self.cursor().close()
        assert self._parser is not None
        return raised_memory_limit(self._parser, self._lock, limit)

    def writer(self, dataset: str, cur: duckdb.DuckDBPyConnection) -> ArrowWriter:
        from rootsift.store.chdb_writer import ArrowWriter

        return ArrowWriter(self._backend(), self.state(dataset, create=True), cur)

    def release(self, dataset: str) -> None:
        """Nothing to release: chdb keeps its directory for the process's life."""

    def release_all(self) -> None:
        """Nothing to release (see ``release``)."""

    def create_pending(self, dataset: str) -> str:
        """A new empty table shaped like the dataset's, for one input being read."""
        from rootsift.store.clickhouse import PENDING

        name = f"{dataset}{PENDING}{uuid.uuid4().hex[:12]}"
        self.run(f"CREATE TABLE {self.table_sql(name)} AS {self.table_sql(dataset)}")
        return name

    def publish_pending(self, dataset: str, pending: str) -> None:
        """Move a pending table's rows into the dataset, then drop it (chdb_writer.publish)."""
        from rootsift.store.chdb_writer import publish

        with self._lock:
            publish(self._backend(), dataset, pending)
            self.drop_pending(pending)

    def drop_pending(self, pending: str) -> None:
        self.run(f"DROP TABLE IF EXISTS {self.table_sql(pending)} SYNC")

    def columns_of(self, table: str) -> dict[str, str]:
        rows = self.run(
            "SELECT name, type FROM system.columns WHERE database = {db:String} AND table = {t:String}",
            {"db": self.database, "t": table},
        )
        return dict(zip(rows.column("name").to_pylist(), rows.column("type").to_pylist()))

    def append_arrow(
        self, dataset: str, batches: pa.RecordBatchReader, new_fields: list[FieldInfo], table: str | None = None
    ) -> int:
        """Insert Arrow record batches into the dataset (or its pending ``table``) in one
        INSERT, adding a Nullable column for each field it has not seen; return the rows."""
        from rootsift.store.chdb_arrow import append_arrow

        with self._lock:
            try:
                return append_arrow(self._backend(), dataset, batches, new_fields, table)
            finally:
                self.changed()
