"""The ClickHouse backend: one MergeTree table per dataset, on a ClickHouse server
(clickhouse-connect, ``--backend clickhouse --clickhouse-url``) or embedded (chdb,
``--backend chdb``: store/chdb.py changes only the connection and what a sole user may do).

Layout (docs/clickhouse.md, ADR 0022)::

    <database>.<dataset>             one MergeTree table a dataset (database ``rootsift`` by default;
                                     a read-only view per OpenTelemetry exporter table: chdb_otel.py)
    DATA/<dataset>/rejects/*.jsonl   rejected input lines, on this machine, as with DuckDB

A dataset's table is ``PARTITION BY toDate("timestamp") ORDER BY ("timestamp", "#sample")
SAMPLE BY "#sample"``: retention drops whole days, time-range scans read only the granules of the range, and ``"#sample"`` (a hash of the row's ordinal,
independent of its content: ADR 0008) is the sampling key that ``sample_relation`` reads
as ``SAMPLE 1/64``. Fields are explicit ``Nullable`` columns, added with ``ALTER TABLE ADD
COLUMN`` as they appear; a column's comment holds its JSON path, the table's comment the
dataset's settings. What differs between a server and chdb is data: the connection
(``Connection``: clickhouse-connect's client for both, chdb's inserting through a handle
of its engine) and ``sole_user``.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from rootsift.errors import DatasetNotFoundError, StoreError, UsageError
from rootsift.store.base import (
    TIME_COLUMN,
    Backend,
    DatasetInfo,
    FieldInfo,
    QueryResult,
    check_dataset_name,
)
from rootsift.store.chdb_retention import RetentionTarget
from rootsift.store.clickhouse_ingest import IngestTarget
from rootsift.store.dialects import DIALECTS, number_placeholders, render
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from rootsift.store.clickhouse_driver import ClickHouseURL

DATABASE = "rootsift"
"""The database of rootsift's tables unless the URL names another (chdb: always this one)."""
SAMPLE_KEY = "#sample"
SAMPLE_EVERY = 64
PENDING = "#pending-"
"""Tables named ``<dataset>#pending-<id>`` hold an input being read (chdb_writer)."""
FORMAT_VERSION = 1
PARTITION_KEY = f"toDate({ident(TIME_COLUMN)})"
"""One partition a UTC day: retention drops whole days and rewrites at most the day its
cutoff cuts (chdb_retention.py; why a day: ADR 0022's amendment). A store written before
partitions has one partition (``all``), which the same code handles."""
INSERT_SETTINGS = {"max_partitions_per_insert_block": 0}
"""An input may span more than ClickHouse's default 100 days in one block: a part a day."""
CATALOG_SECONDS = 2.0
"""How long a server's catalog answers (tables, fields, spans) are reused: other processes
may change them (chdb's, whose only user is this process, are kept until it changes them)."""
COLUMN_TYPES = DIALECTS["clickhouse"].storage_types
_READS = re.compile(r"^\s*(SELECT|WITH|SHOW|EXPLAIN|DESCRIBE|EXISTS)\b", re.IGNORECASE)


class Connection(Protocol):
    """What the backend runs SQL on: clickhouse-connect's client (clickhouse_driver.py; chdb's
    variant in chdb.py). Errors are the driver's; the backend translates them."""

    def select(self, sql: str, params: dict[str, Any]) -> pa.Table: ...

    def command(self, sql: str, params: dict[str, Any]) -> None: ...

    def insert_arrow(
        self, table: str, columns: list[str], stream: Iterator[bytes], settings: dict[str, Any]
    ) -> None: ...

    def recover(self) -> None:
        """Make the connection usable after a failed statement (chdb: see ``run``)."""

    def close(self) -> None: ...


class ClickHouseBackend(IngestTarget, RetentionTarget, Backend):
    """Datasets as MergeTree tables of a ClickHouse server (``url``: clickhouse_driver.py)."""

    dialect = "clickhouse"
    segment_rows = 1 << 62  # what the ingest runner reads of a backend: MergeTree has no segments
    sole_user = False
    """True where this process is the store's only user (chdb): catalog answers are kept
    until it changes something, and what a crashed run of it left is cleared on open."""

    def __init__(self, data_dir: Path, url: str | ClickHouseURL, *, read_only: bool = False) -> None:
        from rootsift.store.clickhouse_driver import parse_url

        self.url = parse_url(url) if isinstance(url, str) else url
        self.database = self.url.database
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise UsageError(f"{self.data_dir} is a file, not a data directory (see --data, $ROOTSIFT_DATA)")
        self._lock = threading.RLock()
        self._parser: duckdb.DuckDBPyConnection | None = None
        self._known: dict[tuple[str, str], Any] = {}
        """Catalog answers (tables, fields, settings, spans), dropped by any statement that
        is not a SELECT, and on a server after ``CATALOG_SECONDS``."""
        self._known_at = 0.0
        self.expired: dict[str, int] = {}
        """Rows written per dataset that its standing retention deletes on arrival (chdb_arrow)."""
        self.connection = self.connect()
        try:
            self.open_store()
        except BaseException:
            self.connection.close()  # chdb holds one store per process: give it back
            raise

    def connect(self) -> Connection:
        """The connection to run SQL on (a server's: clickhouse-connect's client)."""
        from rootsift.store.clickhouse_driver import ClientConnection

        return ClientConnection(self.url)

    def translate(self, exc: BaseException, what: str) -> StoreError:
        """A driver error as rootsift's (clickhouse_driver.translate)."""
        from rootsift.store.clickhouse_driver import translate

        return translate(exc, what, self.url)

    def open_store(self) -> None:
        """Create rootsift's database if missing, and expose the OpenTelemetry exporter's tables."""
        present = self.run("SELECT count() FROM system.databases WHERE name = {db:String}", {"db": self.database})
        if not present.column(0)[0].as_py():
            self.run(f"CREATE DATABASE IF NOT EXISTS {ident(self.database)}")
        from rootsift.store.chdb_otel import refresh_views

        refresh_views(self)  # the OpenTelemetry exporter's tables as read-only datasets

    # -- running SQL --------------------------------------------------------------
    def run(self, sql: str, params: dict[str, Any] | None = None) -> pa.Table:
        """Run ClickHouse SQL with named parameters (``{name:Type}``); the result as an Arrow
        table (empty for a statement that returns no rows)."""
        reads = _READS.match(sql) is not None
        with self._lock:
            if not reads:
                self.changed()
            try:
                if reads:
                    return self.connection.select(sql, params or {})
                self.connection.command(sql, params or {})
            except Exception as exc:  # every driver error: translated, the cause kept
                self.recover()
                raise self.translate(exc, "query failed") from exc
        import pyarrow as pa

        return pa.table({})

    def recover(self) -> None:
        """After a failed statement: chdb (26.9, through clickhouse-connect or its own session)
        keeps the output a query wrote before it failed and puts it in front of the next
        query's, whose Arrow result then does not parse ("Invalid flatbuffers message");
        one throwaway query takes it (tests/test_backend_chdb.py)."""
        with contextlib.suppress(Exception):
            self.connection.recover()

    def changed(self) -> None:
        """Forget the catalog answers: a statement changed tables, columns or rows."""
        with self._lock:
            self._known.clear()

    def _memo(self, key: tuple[str, str], compute: Any) -> Any:
        with self._lock:
            if not self.sole_user and time.monotonic() - self._known_at > CATALOG_SECONDS:
                self._known.clear()
                self._known_at = time.monotonic()
            if key not in self._known:
                self._known[key] = compute()
            return self._known[key]

    def execute(self, query: exp.Expr, params: list[Any]) -> QueryResult:
        """Render ``query`` for ClickHouse with its positional parameters bound by name."""
        named_query, named = number_placeholders(query, params)
        return rows_of(self.run(render(named_query, self.dialect), named))

    def execute_sql(self, sql: str, params: list[Any]) -> QueryResult:
        """Run SQL text written for DuckDB (what the analyses still write, until they build
        sqlglot expressions): parsed as DuckDB's dialect and rendered as ClickHouse's. A
        statement that does not translate is a StoreError naming the failure."""
        import sqlglot

        from rootsift.store.dialects import DuckDB

        try:
            query = sqlglot.parse_one(sql, dialect=DuckDB)
        except sqlglot.errors.ParseError as exc:
            raise StoreError(f"query failed: cannot read DuckDB SQL to render it for ClickHouse: {exc}") from exc
        return self.execute(query, params)

    def relation_text(
        self, dataset: str, start: datetime | None, end: datetime | None, table: str = "events"
    ) -> str | None:
        """``relation`` as SQL text (for ``execute_sql``); None for the sample (``table``
        ``events_sample``), which text cannot name: such a caller runs exact."""
        from rootsift.store.dialects import DuckDB

        return self.relation(dataset, start, end).sql(dialect=DuckDB) if table == "events" else None

    def close(self) -> None:
        with self._lock:
            if self._parser is not None:
                self._parser.close()
                self._parser = None
            self.connection.close()

    # -- datasets -----------------------------------------------------------------
    def table_sql(self, name: str) -> str:
        return f"{ident(self.database)}.{ident(name)}"

    def tables(self, pending: bool = False) -> list[str]:
        """The datasets' tables (or the pending tables of inputs being read), by name."""

        from rootsift.store.clickhouse_catalog import table_rows
        from rootsift.store.clickhouse_cluster import fronted

        hidden = fronted(self) if not pending else set()  # a cluster's local tables: not datasets
        return [
            n for n in table_rows(self) if (PENDING in n) == pending and n not in hidden and not n.endswith("#retain")
        ]

    def dataset_dir(self, name: str) -> Path:
        return self.data_dir / check_dataset_name(name)

    def exists(self, name: str) -> bool:
        return check_dataset_name(name) in self.tables()

    def state(self, name: str, create: bool = False) -> str:
        """Check that ``name`` exists (creating its table with ``create``; a view of the
        OpenTelemetry exporter's tables is refused then); return it."""
        if self.exists(name):
            if create:
                self.writable(name)
            return name
        if not create or self.read_only:
            known = ", ".join(self.tables()) or "none yet"
            raise DatasetNotFoundError(f"no dataset named {name!r} in {self.data_dir} (datasets: {known})")
        settings = json.dumps({"format_version": FORMAT_VERSION, "samplerate_field": "samplerate"})
        self.run(
            f"CREATE TABLE IF NOT EXISTS {self.table_sql(name)} "
            f"({ident(TIME_COLUMN)} DateTime64(6, 'UTC'), {ident(SAMPLE_KEY)} UInt32) "
            f"ENGINE = MergeTree PARTITION BY {PARTITION_KEY} "
            f"ORDER BY ({ident(TIME_COLUMN)}, {ident(SAMPLE_KEY)}) SAMPLE BY {ident(SAMPLE_KEY)} "
            f"COMMENT {literal(settings)}"
        )
        return name

    def settings(self, dataset: str) -> dict[str, Any]:
        """The dataset's settings (samplerate and count field), kept as its table's comment."""

        from rootsift.store.clickhouse_catalog import table_rows

        def read() -> dict[str, Any]:
            row = table_rows(self).get(self.state(dataset))
            return json.loads(row.comment) if row is not None and row.comment else {}

        return dict(self._memo(("settings", dataset), read))

    def source(self, dataset: str) -> tuple[str, str] | None:
        """(database, table) of the exporter table a read-only OTel dataset reads, else None."""
        from rootsift.store.chdb_otel import source_of

        return source_of(self.settings(dataset))

    def writable(self, dataset: str) -> None:
        """Refuse to change a dataset that is a view of the OpenTelemetry exporter's tables."""
        from rootsift.store.chdb_otel import refuse_writes

        refuse_writes(dataset, self.source(dataset))

    # -- the catalog (store/clickhouse_catalog.py) ----------------------------------
    def datasets(self) -> list[DatasetInfo]:
        from rootsift.store import clickhouse_catalog

        return clickhouse_catalog.datasets(self)

    def local_bytes(self, dataset: str) -> int:
        """What the dataset's files in the data directory take (its rejects)."""
        return super().dataset_bytes(dataset)

    def dataset_bytes(self, dataset: str) -> int:
        from rootsift.store import clickhouse_catalog

        return clickhouse_catalog.parts(self, self.state(dataset))[1] + self.local_bytes(dataset)

    def span(self, dataset: str) -> tuple[datetime | None, datetime | None]:
        from rootsift.store import clickhouse_catalog

        span: tuple[datetime | None, datetime | None] = self._memo(
            ("span", dataset), lambda: clickhouse_catalog.span(self, dataset)
        )
        return span

    def time_source(self, dataset: str) -> tuple[str, str]:
        """(the table, its time column) that the dataset's count and time span read."""
        from rootsift.store.chdb_otel import time_source

        return time_source(self.settings(dataset)) or (self.table_sql(dataset), ident(TIME_COLUMN))

    def fields(self, dataset: str) -> dict[str, FieldInfo]:
        from rootsift.store import clickhouse_catalog

        return dict(self._memo(("fields", dataset), lambda: clickhouse_catalog.fields(self, dataset)))

    def weight_field(self, dataset: str) -> str | None:
        return self._number_field(dataset, self.settings(dataset).get("samplerate_field") or "samplerate")

    def count_field(self, dataset: str) -> str | None:
        from rootsift.store.duckdb import COUNT_FIELD

        return self._number_field(dataset, self.settings(dataset).get("count_field") or COUNT_FIELD)

    def _number_field(self, dataset: str, name: str) -> str | None:
        info = self.fields(dataset).get(name)
        return name if info is not None and info.type in ("DOUBLE", "BIGINT") else None

    def set_count_field(self, dataset: str, name: str) -> None:
        settings = {**self.settings(self.state(dataset, create=True)), "count_field": name}
        self.run(f"ALTER TABLE {self.table_sql(dataset)} MODIFY COMMENT {literal(json.dumps(settings))}")

    # -- reading ------------------------------------------------------------------
    def relation(self, dataset: str, start: datetime | None, end: datetime | None) -> exp.Expr:
        """The dataset's table: its primary key (time first) prunes what a range does not need."""
        from sqlglot import exp

        self.state(dataset)
        return exp.Table(this=exp.to_identifier(dataset, quoted=True), db=exp.to_identifier(self.database))

    def row_order(self, dataset: str) -> list[str]:
        """The table's sort key: ClickHouse reads parts (and a cluster's shards) in parallel,
        so an unordered LIMIT takes whichever rows come first, another set each run; by the
        key it reads in order, the first granules only (no sort). An exporter's view: its time."""
        return [TIME_COLUMN] if self.source(dataset) is not None else [TIME_COLUMN, SAMPLE_KEY]

    def sample_relation(self, dataset: str, start: datetime | None, end: datetime | None) -> exp.Expr | None:
        """The table read through its sampling key: about one event in ``SAMPLE_EVERY``."""
        from sqlglot import exp

        table = self.relation(dataset, start, end)
        if self.source(dataset) is not None:
            return None  # the exporter's tables have no sampling key: callers run exact
        table.set("sample", exp.TableSample(size=exp.Literal.number(1 / SAMPLE_EVERY)))
        return table

    def drop_dataset(self, dataset: str) -> None:
        self.writable(dataset)
        self.run(f"DROP TABLE IF EXISTS {self.table_sql(self.state(dataset))} SYNC")
        shutil.rmtree(self.dataset_dir(dataset), ignore_errors=True)


def rows_of(table: pa.Table) -> QueryResult:
    """Rows of an Arrow result as Python values; times as naive UTC datetimes (as DuckDB gives them)."""
    import pyarrow as pa

    columns = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type) and col.type.tz is not None:
            col = col.cast(pa.timestamp(col.type.unit))
        columns.append(col.to_pylist())
    return QueryResult(list(table.column_names), list(zip(*columns)) if columns else [])
