"""The backend interface every store implements: DuckDB (embedded), ClickHouse (a server,
through clickhouse-connect) and chdb (embedded ClickHouse).

A backend holds datasets of wide events. Queries reach it as sqlglot expressions built
by ``rootsift.query.compile`` against the relation the backend names for a dataset, with
positional parameters (``exp.Placeholder``); the backend renders them in its dialect
(``rootsift.store.dialects``), so a backend differs from another by data (dialect,
relation shape), not by a second query compiler. ``open_backend`` is the one place
that picks and opens one.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rootsift.errors import UsageError

if TYPE_CHECKING:
    from sqlglot import exp

    from rootsift.query.plan import PlanCache

DATASET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
TIME_COLUMN = "timestamp"
RAW_SUFFIX = "#raw"
"""A column ``f#raw`` keeps, as text, values of ``f`` that did not fit ``f``'s type."""
OVERFLOW_FIELD = "_overflow"
"""The JSON text field holding keys past the field limit (``rootsift.ingest.keys``)."""

STORAGE_TYPES = ("DOUBLE", "VARCHAR", "TIMESTAMP", "BIGINT", "BOOLEAN")
BACKENDS = ("duckdb", "chdb", "clickhouse")
"""The backends ``--backend`` (``$ROOTSIFT_BACKEND``) names; ``clickhouse`` takes a URL
(``--clickhouse-url``, ``$ROOTSIFT_CLICKHOUSE_URL``: store/clickhouse_driver.py)."""


def check_dataset_name(name: str) -> str:
    """Return ``name`` if it is a valid dataset name, else raise UsageError."""
    if not DATASET_NAME.match(name) or name in {".", ".."}:
        raise UsageError(
            f"invalid dataset name {name!r}: use letters, digits, '_', '.', '-' "
            "(starting with a letter or digit, at most 128 characters)"
        )
    return name


@dataclass
class FieldInfo:
    """One field of a dataset: its storage type, JSON path and conflict count."""

    name: str
    type: str
    path: list[str] = field(default_factory=list)
    conflicts: int = 0


@dataclass
class DatasetInfo:
    """What ``rootsift datasets`` shows of one dataset."""

    name: str
    events: int
    stored_rows: int
    first: datetime | None
    last: datetime | None
    bytes_on_disk: int
    segments: int

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``rootsift datasets --json`` and the server's ``/api/datasets``."""
        stamp = "%Y-%m-%d %H:%M:%S"
        return {
            "name": self.name,
            "events": self.events,
            "stored_rows": self.stored_rows,
            "first": self.first.strftime(stamp) if self.first else None,
            "last": self.last.strftime(stamp) if self.last else None,
            "bytes_on_disk": self.bytes_on_disk,
            "segments": self.segments,
        }


@dataclass(frozen=True)
class StandingRetention:
    """A dataset's standing retention: the store deletes old events by itself (a ClickHouse
    server's TTL). ``ttl`` is the server's expression; ``keep_seconds`` what rootsift set
    (None for a TTL in another form than a span of the events' time)."""

    ttl: str
    keep_seconds: int | None

    def as_dict(self) -> dict[str, Any]:
        from rootsift.timeutil import format_duration

        keep = self.keep_seconds
        return {
            "ttl": self.ttl,
            "keep_seconds": keep,
            "keep": None if keep is None else format_duration(timedelta(seconds=keep)),
        }


NO_STANDING = (
    "a standing retention needs a ClickHouse server (--backend clickhouse), whose engine runs between "
    "commands; DuckDB and chdb delete only while a command runs: run `rootsift retention DATASET --keep …` "
    "from a timer instead (docs/collect.md)"
)


@dataclass
class QueryResult:
    """Column names and rows of one executed query."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


class Backend(ABC):
    """A store of datasets. Implementations translate driver errors into StoreError."""

    dialect: str = "duckdb"
    text_dialect: str = "duckdb"
    """The dialect of the SQL *text* ``execute_sql`` takes: DuckDB's on every backend (the
    ClickHouse backends translate it), for the modules that still write text."""

    @abstractmethod
    def datasets(self) -> list[DatasetInfo]:
        """Every dataset with its size and time span."""

    @abstractmethod
    def fields(self, dataset: str) -> dict[str, FieldInfo]:
        """The dataset's fields by name, the time column included."""

    @abstractmethod
    def relation(self, dataset: str, start: datetime | None, end: datetime | None) -> exp.Expr:
        """A table expression holding the dataset's events that may fall in [start, end)."""

    @abstractmethod
    def execute(self, query: exp.Expr, params: list[Any]) -> QueryResult:
        """Run a query rendered in this backend's dialect with bound parameters."""

    @abstractmethod
    def execute_sql(self, sql: str, params: list[Any]) -> QueryResult:
        """Run SQL text written in ``text_dialect`` with bound parameters."""

    def render(self, query: exp.Expr) -> str:
        """``query`` as the SQL text ``execute_sql`` runs."""
        from rootsift.store.dialects import render

        return render(query, self.text_dialect)

    def plan_cache(self) -> PlanCache | None:
        """Where compiled queries are kept between processes (``rootsift.query.plan``), or
        None: every query is compiled. A backend that keeps plans also gives ``relation_text``."""
        return None

    def relation_text(
        self, dataset: str, start: datetime | None, end: datetime | None, table: str = "events"
    ) -> str | None:
        """``relation`` as ``text_dialect`` SQL text, built without sqlglot; None if this
        backend builds it only as a tree."""
        return None

    @abstractmethod
    def span(self, dataset: str) -> tuple[datetime | None, datetime | None]:
        """The first and last event time of ``dataset`` (None, None when it is empty)."""

    @abstractmethod
    def weight_field(self, dataset: str) -> str | None:
        """The sample-rate field of ``dataset`` when its events carry one, else None."""

    @abstractmethod
    def dataset_dir(self, name: str) -> Path:
        """The dataset's folder on this machine (its rejects; for DuckDB its segments too)."""

    def dataset_bytes(self, dataset: str) -> int:
        """The bytes the dataset takes on disk."""
        directory = self.dataset_dir(dataset)
        return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) if directory.exists() else 0

    @abstractmethod
    def count_before(self, dataset: str, cutoff: datetime) -> tuple[int, int]:
        """What ``drop_before(dataset, cutoff)`` would delete, deleting nothing (rows, bytes)."""

    @abstractmethod
    def drop_before(self, dataset: str, cutoff: datetime) -> int:
        """Delete events older than ``cutoff``, giving the disk space back; return rows deleted."""

    def row_order(self, dataset: str) -> list[str]:
        """The columns that give the dataset's rows one order, for "the first N rows" of a
        query (``Frame.first``): [] where an unordered LIMIT already returns the first rows
        in storage order, as DuckDB does (it keeps insertion order)."""
        return []

    runs_between_commands: bool = False
    """True where the store's engine keeps running between rootsift's commands (a ClickHouse
    server), so that it can enforce a standing retention itself."""

    def standing_retention(self, dataset: str) -> StandingRetention | None:
        """The dataset's standing retention, or None (every backend without one)."""
        return None

    def set_standing_retention(self, dataset: str, keep: timedelta | None) -> None:
        """Have the store delete events older than ``keep`` by itself from now on (None:
        stop). Only a backend that ``runs_between_commands`` can."""
        raise UsageError(f"--standing: {NO_STANDING}")

    def expired_on_arrival(self, dataset: str) -> int:
        """How many events written to ``dataset`` since the last call its standing retention
        deletes as they arrive (older than its keep); 0 without one."""
        return 0

    def ingest_arrow(self, dataset: str, table: Any) -> int | None:
        """Write a ``pyarrow.Table`` of events (top-level keys and a ``timestamp`` column) into
        ``dataset`` in one durable transaction, as the JSON-lines ingest would store the same
        events; the rows written, or None (nothing written) when the caller must ingest them
        as JSON lines instead (store/arrow_ingest.py says when). This backend: always None."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Release files and connections."""


def open_backend(
    kind: str | None,
    data_dir: Path,
    *,
    read_only: bool = False,
    clickhouse_url: str | None = None,
    **options: Any,
) -> Backend:
    """Open the store at ``data_dir`` with backend ``kind`` (``duckdb``, the default, ``chdb``
    or ``clickhouse``, a server at ``clickhouse_url``); a name not in ``BACKENDS`` is a
    usage error naming ``--backend``. ``options`` go to DuckDB."""
    kind = (kind or "duckdb").strip().lower()
    if kind != "clickhouse" and clickhouse_url:
        raise UsageError(f"--clickhouse-url is for --backend clickhouse, not {kind} (also $ROOTSIFT_CLICKHOUSE_URL)")
    if kind == "duckdb":
        from rootsift.store.duckdb import DuckDBBackend

        return DuckDBBackend(data_dir, read_only=read_only, **options)
    if kind not in BACKENDS:
        raise UsageError(f"--backend {kind!r} is not one of {', '.join(BACKENDS)} (also $ROOTSIFT_BACKEND)")
    if options:
        raise UsageError(f"the {kind} backend takes no option {', '.join(sorted(options))}")
    if kind == "chdb":
        from rootsift.store.chdb import ChdbBackend

        return ChdbBackend(data_dir, read_only=read_only)
    if not clickhouse_url:
        raise UsageError(
            "--backend clickhouse needs --clickhouse-url (or $ROOTSIFT_CLICKHOUSE_URL), e.g. "
            "http://user:password@host:8123/rootsift"
        )
    from rootsift.store.clickhouse import ClickHouseBackend

    return ClickHouseBackend(data_dir, clickhouse_url, read_only=read_only)
