"""The backend interface every store implements (DuckDB now, ClickHouse later).

A backend holds datasets of wide events. Queries reach it as sqlglot expressions built
by ``rootsift.query.compile`` against the relation the backend names for a dataset, so
a backend differs from another by data (dialect name, relation shape), not by code.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rootsift.errors import UsageError

if TYPE_CHECKING:
    from sqlglot import exp

DATASET_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
TIME_COLUMN = "timestamp"
RAW_SUFFIX = "#raw"
"""A column ``f#raw`` keeps, as text, values of ``f`` that did not fit ``f``'s type."""

STORAGE_TYPES = ("DOUBLE", "VARCHAR", "TIMESTAMP", "BIGINT", "BOOLEAN")


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


@dataclass
class QueryResult:
    """Column names and rows of one executed query."""

    columns: list[str]
    rows: list[tuple[Any, ...]]


class Backend(ABC):
    """A store of datasets. Implementations translate driver errors into StoreError."""

    dialect: str = "duckdb"

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
    def drop_before(self, dataset: str, cutoff: datetime) -> int:
        """Delete events older than ``cutoff``, giving the disk space back; return rows deleted."""

    @abstractmethod
    def close(self) -> None:
        """Release files and connections."""
