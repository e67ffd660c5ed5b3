"""The one exception tree of rootsift.

::

    RootsiftError                 every error rootsift raises on purpose
    ├── UsageError                the user asked for something malformed (exit code 2)
    │   ├── FilterSyntaxError     a filter expression does not parse (has ``position``)
    │   ├── TimeFormatError       a time argument is not RFC 3339, epoch or relative
    │   ├── UnknownFieldError     a field is not in the dataset (has ``suggestions``)
    │   ├── DatasetNotFoundError  no dataset of that name
    │   └── QuerySpecError        a query spec is inconsistent (bad calculation, order key…)
    ├── InputFormatError          an input file cannot be read at all (not one bad line: those
    │   │                         are counted rejects, see ``rootsift.ingest.rejects``)
    │   └── UnknownFormatError    the input is in no format rootsift reads (also a UsageError: exit 2)
    └── StoreError                the store failed; driver errors are translated into it
        ├── StoreLockedError      another process holds the store (past ROOTSIFT_LOCK_WAIT)
        └── StoreUnavailableError a ClickHouse server cannot be reached (refused, unknown
                                  host, silent past --clickhouse-url's timeouts)

Driver exceptions (``duckdb.Error``, clickhouse-connect's and chdb's) never escape the
store: they are re-raised as ``StoreError`` with ``raise ... from exc`` so the cause stays
visible (``store/driver.py``, ``store/clickhouse_driver.py``).
"""

from __future__ import annotations


class RootsiftError(Exception):
    """Base of every error rootsift raises on purpose."""

    exit_code = 1


class UsageError(RootsiftError):
    """The request is malformed: a flag, an expression, a name. Exit code 2."""

    exit_code = 2


class FilterSyntaxError(UsageError):
    """A filter expression does not parse; ``position`` is the 0-based offset of the problem."""

    def __init__(self, message: str, text: str = "", position: int | None = None) -> None:
        self.text = text
        self.position = position
        if text and position is not None:
            caret = " " * position + "^"
            message = f"{message}\n  {text}\n  {caret}"
        super().__init__(message)


class TimeFormatError(UsageError):
    """A time or duration argument cannot be understood."""


class UnknownFieldError(UsageError):
    """A field named in a query does not exist in the dataset."""

    def __init__(self, field: str, suggestions: list[str] | None = None) -> None:
        self.field = field
        self.suggestions = suggestions or []
        hint = f" (did you mean {', '.join(repr(s) for s in self.suggestions)}?)" if self.suggestions else ""
        super().__init__(f"unknown field {field!r}{hint}")


class DatasetNotFoundError(UsageError):
    """No dataset of that name exists in the data directory."""


class QuerySpecError(UsageError):
    """A query spec is inconsistent: an unknown calculation, a bad order key, a bad limit."""


class InputFormatError(RootsiftError):
    """An input cannot be read at all (unknown format, unreadable compression, missing file)."""


class UnknownFormatError(UsageError, InputFormatError):
    """The input is in no format rootsift reads (binary data, a pprof profile...): the message
    says what it looks like. A usage error (exit code 2): name the format, or convert it."""


class StoreError(RootsiftError):
    """The store failed. Driver errors are translated into this with ``raise ... from``."""


class StoreLockedError(StoreError):
    """Another process holds the dataset's store open for writing."""


class StoreUnavailableError(StoreError):
    """A ClickHouse server cannot be reached: the message names the URL (never its password)."""
