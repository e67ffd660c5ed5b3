"""Appending staged tables to a dataset's head segment, in large transactions."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.driver import translate
from rootsift.store.segment import Segment
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from rootsift.store.duckdb import DatasetState, DuckDBBackend


@dataclass
class _Pending:
    table: str
    new_fields: list[FieldInfo]
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
        self.state = state
        self.cur = cur
        self._queue: list[_Pending] = []

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
        """True when the head segment would be full with what is queued."""
        segs = self.state.segments
        head_rows = segs[-1].rows if segs and segs[-1].rows < self.backend.segment_rows else 0
        return head_rows + self.pending >= self.backend.segment_rows

    def commit(self) -> int:
        """Write every queued table in one transaction; return the rows made durable."""
        if not self._queue:
            return 0
        rows = self.pending
        with self.state.write_lock:
            seg = self.backend.head(self.state)
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
        self.discard()
        return rows

    def discard(self) -> None:
        """Drop the queued tables without writing them."""
        for item in self._queue:
            with contextlib.suppress(duckdb.Error):
                self.cur.execute(f"DROP TABLE IF EXISTS {ident(item.table)}")
        self._queue = []

    def _insert(self, seg: Segment, item: _Pending) -> None:
        stage_cols = {r[0]: r[1] for r in self.cur.execute(f"DESCRIBE {ident(item.table)}").fetchall()}
        have = {r[0] for r in self.cur.execute(f"DESCRIBE {seg.alias}.events").fetchall()}
        for col, ctype in stage_cols.items():
            if col not in have:
                self.cur.execute(f"ALTER TABLE {seg.alias}.events ADD COLUMN {ident(col)} {ctype}")
        known = {r[0] for r in self.cur.execute(f"SELECT name FROM {seg.alias}._fields").fetchall()}
        by_name = {f.name: f for f in item.new_fields}
        for col in stage_cols:
            if col == TIME_COLUMN or col.endswith(RAW_SUFFIX) or col in known:
                continue
            info = self.state.fields.get(col) or by_name.get(col) or FieldInfo(col, stage_cols[col], [col])
            self.cur.execute(f"INSERT INTO {seg.alias}._fields VALUES (?, ?, ?)", [info.name, info.path, info.type])
        self.cur.execute(f"INSERT INTO {seg.alias}.events BY NAME SELECT * FROM {ident(item.table)}")
