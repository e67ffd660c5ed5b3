"""Appending staged tables to a dataset's head segment, in large transactions."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from rootsift.store import pending
from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.driver import translate
from rootsift.store.segment import SAMPLE_TABLE, Segment, sample_sql
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from rootsift.store.attach import DatasetState
    from rootsift.store.duckdb import DuckDBBackend


ROW_COLUMN = "__rootsift_row__"
"""The inserted rows' order (from 0) in the relation ``write_checked`` verifies."""


@dataclass
class _Pending:
    table: str
    new_fields: list[FieldInfo]
    rows: int
    span: tuple[datetime | None, datetime | None]


@dataclass(frozen=True)
class Verified:
    """What a check accepted: the rows written and their time span."""

    rows: int
    span: tuple[datetime | None, datetime | None]


class SegmentWriter:
    """Appends staged temp tables to a dataset's head segment.

    ``append`` only queues a staged table; ``commit`` moves every queued table into the
    head segment in one transaction and returns once it is durable. Staging happens
    outside that transaction, so a reader's failed attempt (a block DuckDB cannot parse
    on the fast path) never aborts it. DuckDB writes large transactions straight to the
    segment file, so committing every few hundred thousand rows rather than every block
    halves the write cost.
    """

    def __init__(self, backend: DuckDBBackend, state: DatasetState, cur: duckdb.DuckDBPyConnection) -> None:
        self.backend = backend
        self.dataset = state.name
        self.cur = cur
        self._queue: list[_Pending] = []
        self.error: duckdb.Error | None = None
        """What made the last ``write_checked`` fail, when DuckDB raised."""
        self.targets: list[Segment] | None = None
        """Pending segments (``store/pending.py``) that take every write instead of
        the head while one input is read: its rows, committed in bounded transactions and
        published together when it ends (``publish``), dropped if it fails (``abandon``)."""

    def begin_pending(self) -> None:
        """Write into pending segments from now on, until ``publish`` or ``abandon``."""
        self.targets = []

    def publish(self) -> None:
        """Make the pending segments part of the dataset (nothing of them was visible before)."""
        targets, self.targets = self.targets or [], None
        if targets:
            pending.publish(self.backend, self.state, targets)

    def abandon(self) -> None:
        """Drop the pending segments: the input failed, and none of its rows were ever visible."""
        targets, self.targets = self.targets or [], None
        for seg in targets:
            pending.discard(self.backend, seg)

    def _segment(self) -> Segment:
        """Where the next transaction writes: the head, or the pending segment of the input
        being read (a new one when it is full)."""
        if self.targets is None:
            return self.backend.head(self.state)
        if not self.targets or self.targets[-1].rows >= self.backend.segment_rows:
            self.targets.append(pending.open_pending(self.backend, self.state))
        return self.targets[-1]

    @property
    def state(self) -> DatasetState:
        """The dataset as this process has it attached now: a stream ingest releases the
        store between its commits (``DuckDBBackend.release``), and the next use attaches it again."""
        return self.backend.state(self.dataset)

    @property
    def pending(self) -> int:
        """Rows appended and not yet committed."""
        return sum(p.rows for p in self._queue)

    def append(
        self, stage: str, new_fields: list[FieldInfo], rows: int, span: tuple[datetime | None, datetime | None]
    ) -> None:
        """Queue the temp table ``stage`` (on the writer's cursor); it is durable after commit()."""
        self._queue.append(_Pending(stage, new_fields, rows, span))

    def segment_full(self) -> bool:
        """True when the head (or pending) segment would be full with what is queued."""
        segs = self.state.segments if self.targets is None else self.targets
        head_rows = segs[-1].rows if segs and segs[-1].rows < self.backend.segment_rows else 0
        return head_rows + self.pending >= self.backend.segment_rows

    def commit(self) -> int:
        """Write every queued table in one transaction; return the rows made durable."""
        if not self._queue:
            return 0
        rows = self.pending
        with self.state.write_lock:
            seg = self._segment()
            try:
                self.cur.execute("BEGIN TRANSACTION")
                for item in self._queue:
                    self._insert(seg, item)
                self.cur.execute("COMMIT")
            except duckdb.Error as exc:
                with contextlib.suppress(duckdb.Error):
                    self.cur.execute("ROLLBACK")
                self.discard()
                raise translate(exc, f"writing to dataset {self.state.name!r}") from exc
            lo = min((p.span[0] for p in self._queue if p.span[0]), default=None)
            hi = max((p.span[1] for p in self._queue if p.span[1]), default=None)
            with self.backend._lock:
                for item in self._queue:
                    for info in item.new_fields:
                        self.state.fields.setdefault(info.name, info)
                seg.widen(rows, lo, hi)
                seg.columns = self.backend.columns_of(seg)
        self.discard()
        return rows

    def write_checked(
        self,
        select_sql: str,
        columns: dict[str, str],
        new_fields: list[FieldInfo],
        verify: Callable[[str], Verified | None],
    ) -> Verified | None:
        """Insert the rows of ``select_sql`` straight into the head segment, in a transaction
        committed only if ``verify`` accepts them; None (and nothing written) otherwise.

        ``verify`` gets a relation holding just the inserted rows: rows are appended and
        never deleted in place (retention rewrites whole files), so committed rows have
        rowids below the count taken at the start and the new ones do not. Its column
        ``ROW_COLUMN`` numbers them from 0 in the order they were inserted. Queued tables
        must be committed first (the caller counts what each commit made durable). A
        DuckDB error rolls back and returns None, kept in ``error`` for the caller.
        """
        assert not self._queue, "commit() the queued tables before write_checked()"
        self.error = None
        cur = self.cur
        with self.state.write_lock:
            seg = self._segment()
            try:
                cur.execute("BEGIN TRANSACTION")
                row = cur.execute(f"SELECT count(*) FROM {seg.alias}.events").fetchone()
                before = int(row[0]) if row else 0
                self._add_columns(seg, columns)
                cur.execute(f"INSERT INTO {seg.alias}.events BY NAME {select_sql}")
                new_rows = f"FROM {seg.alias}.events WHERE rowid >= {before}"
                # Rows written in a transaction have rowids of their own, contiguous in insert order.
                verified = verify(f"(SELECT rowid - (SELECT min(rowid) {new_rows}) AS {ROW_COLUMN}, * {new_rows})")
                if verified is None:
                    cur.execute("ROLLBACK")
                    return None
                self._register(seg, columns, new_fields)
                cur.execute(
                    f"INSERT INTO {seg.alias}.{SAMPLE_TABLE} BY NAME "
                    f"SELECT * FROM {seg.alias}.events WHERE rowid >= {before} AND {sample_sql(seg.id)}"
                )
                cur.execute("COMMIT")
            except duckdb.Error as exc:
                self.error = exc
                with contextlib.suppress(duckdb.Error):
                    cur.execute("ROLLBACK")
                return None
            with self.backend._lock:
                for info in new_fields:
                    self.state.fields.setdefault(info.name, info)
                seg.widen(verified.rows, *verified.span)
                seg.columns = self.backend.columns_of(seg)
        return verified

    def discard(self) -> None:
        """Drop the queued tables without writing them."""
        for item in self._queue:
            with contextlib.suppress(duckdb.Error):
                self.cur.execute(f"DROP TABLE IF EXISTS {ident(item.table)}")
        self._queue = []

    def _insert(self, seg: Segment, item: _Pending) -> None:
        stage_cols = {r[0]: r[1] for r in self.cur.execute(f"DESCRIBE {ident(item.table)}").fetchall()}
        self._add_columns(seg, stage_cols)
        self._register(seg, stage_cols, item.new_fields)
        row = self.cur.execute(f"SELECT count(*) FROM {seg.alias}.events").fetchone()
        before = int(row[0]) if row else 0
        self.cur.execute(f"INSERT INTO {seg.alias}.events BY NAME SELECT * FROM {ident(item.table)}")
        self.cur.execute(
            f"INSERT INTO {seg.alias}.{SAMPLE_TABLE} BY NAME "
            f"SELECT * FROM {seg.alias}.events WHERE rowid >= {before} AND {sample_sql(seg.id)}"
        )

    def _add_columns(self, seg: Segment, columns: dict[str, str]) -> None:
        have = {r[0]: r[1] for r in self.cur.execute(f"DESCRIBE {seg.alias}.events").fetchall()}
        missing = {c: t for c, t in columns.items() if c not in have}
        if not missing:
            return
        row = self.cur.execute(f"SELECT count(*) FROM {seg.alias}.events").fetchone()
        for table in ("events", SAMPLE_TABLE):  # the sample keeps the same columns
            if row is not None and row[0] == 0:  # an empty segment: one CREATE is cheaper than many ALTERs
                cols = ", ".join(f"{ident(c)} {t}" for c, t in {**have, **missing}.items())
                self.cur.execute(f"DROP TABLE {seg.alias}.{table}")
                self.cur.execute(f"CREATE TABLE {seg.alias}.{table} ({cols})")
                continue
            for col, ctype in missing.items():
                self.cur.execute(f"ALTER TABLE {seg.alias}.{table} ADD COLUMN {ident(col)} {ctype}")

    def _register(self, seg: Segment, columns: dict[str, str], new_fields: list[FieldInfo]) -> None:
        """Record each field's path and type in the segment's ``_fields`` (same transaction)."""
        known = {r[0] for r in self.cur.execute(f"SELECT name FROM {seg.alias}._fields").fetchall()}
        by_name = {f.name: f for f in new_fields}
        for col, ctype in columns.items():
            if col == TIME_COLUMN or col.endswith(RAW_SUFFIX) or col in known:
                continue
            info = self.state.fields.get(col) or by_name.get(col) or FieldInfo(col, ctype, [col])
            self.cur.execute(f"INSERT INTO {seg.alias}._fields VALUES (?, ?, ?)", [info.name, info.path, info.type])
