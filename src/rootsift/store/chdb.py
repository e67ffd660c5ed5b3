"""The embedded ClickHouse backend (chdb): the ClickHouse backend (store/clickhouse.py) on
chdb's in-process engine, in ``DATA/clickhouse`` (database ``rootsift``).

What differs from a server is the connection and what the store's only user may do:

- **Connection**: chdb's own session (``SessionConnection``), not clickhouse-connect's
  chdb client, which runs the same engine: importing clickhouse-connect costs every
  command about 0.1 s of CPU (its HTTP stack), and chdb's ``send_insert`` streams an
  insert where clickhouse-connect's chdb transport writes it to a temporary file first
  (docs/clickhouse.md, "One backend, two connections", has the measurements). The SQL,
  the parameters and the Arrow results are the same; ``--backend clickhouse
  --clickhouse-url chdb:///DIR`` runs the same store through clickhouse-connect (what the
  server tests use).
- **Sole user**: chdb opens one data directory per process, so this process is the
  store's only user: catalog answers are kept until it changes something, and opening
  the store for writing clears what a crashed run left (pending tables, tables dropped
  without ``SYNC``: chdb_retention.purge_dropped). On a server another process may be
  using either.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rootsift.errors import StoreError, UsageError
from rootsift.store.clickhouse import DATABASE, ClickHouseBackend, Connection
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    import pyarrow as pa


class SessionConnection:
    """SQL on chdb's session: parameters bound by chdb (``{name:Type}``), results as Arrow."""

    def __init__(self, path: Path) -> None:
        try:
            from chdb.session import Session
        except ImportError:
            raise UsageError("--backend chdb needs the chdb package: pip install 'rootsift[clickhouse]'") from None
        try:
            self.session = Session(str(path))
        except Exception as exc:  # chdb raises RuntimeError for every failure
            raise StoreError(
                f"opening the chdb store {path}: {_first_line(exc)} (chdb opens one store per process)"
            ) from exc

    def select(self, sql: str, params: dict[str, Any]) -> pa.Table:
        return self.session.query(sql, "ArrowTable", params=_escaped(params))

    def command(self, sql: str, params: dict[str, Any]) -> None:
        self.session.query(sql, "Null", params=_escaped(params))

    def insert_arrow(self, table: str, columns: list[str], stream: Iterator[bytes], settings: dict[str, Any]) -> None:
        names = ", ".join(ident(c) for c in columns)
        with_settings = ", ".join(f"{k} = {v}" for k, v in settings.items())
        sql = (
            f"INSERT INTO {table} ({names}) SETTINGS {with_settings}" if settings else f"INSERT INTO {table} ({names})"
        )
        with self.session.send_insert(sql, "ArrowStream") as ins:
            for chunk in stream:
                ins.append(chunk)
            ins.finish()

    def recover(self) -> None:
        self.session.query("SELECT 1", "TabSeparated")  # takes what a failed query left (ClickHouseBackend.recover)

    def close(self) -> None:
        self.session.close()


def _escaped(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as ClickHouse reads a query parameter's text (its escaped format, as
    clickhouse-connect sends them): a backslash, tab or newline in a string is escaped,
    else ``a\\b`` would bind as ``a`` and a backspace, and a tab fail to parse; None is
    ``\\N`` (NULL), which chdb would bind as the text ``NULL``."""
    return {k: "\\N" if v is None else _escape(v) if isinstance(v, str) else v for k, v in params.items()}


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\0": "\\0"})


def _escape(text: str) -> str:
    return text.translate(_ESCAPES)


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n")[0]


class ChdbBackend(ClickHouseBackend):
    """Datasets as MergeTree tables of an embedded ClickHouse under ``DATA/clickhouse``."""

    sole_user = True

    def __init__(self, data_dir: Path, *, read_only: bool = False) -> None:
        from rootsift.store.clickhouse_driver import ClickHouseURL

        data_dir = Path(data_dir)
        if data_dir.exists() and not data_dir.is_dir():
            raise UsageError(f"{data_dir} is a file, not a data directory (see --data, $ROOTSIFT_DATA)")
        (data_dir / "clickhouse").mkdir(parents=True, exist_ok=True)
        super().__init__(data_dir, ClickHouseURL.chdb(data_dir / "clickhouse"), read_only=read_only)
        assert self.database == DATABASE

    def connect(self) -> Connection:
        return SessionConnection(Path(self.url.path))

    def translate(self, exc: BaseException, what: str) -> StoreError:
        return StoreError(f"{what}: {_first_line(exc)}")

    def open_store(self) -> None:
        super().open_store()
        if not self.read_only:
            for name in self.tables(pending=True):  # inputs a crashed ingest left half-read
                self.run(f"DROP TABLE IF EXISTS {self.table_sql(name)} SYNC")
            from rootsift.store.chdb_retention import purge_dropped

            purge_dropped(self)
