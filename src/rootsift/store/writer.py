"""Appending staged tables to a dataset's head segment, in large transactions."""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.driver import translate
from rootsift.store.segment import Segment
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from rootsift.store.duckdb import DatasetState, DuckDBBackend


class SegmentWriter:
    """Appends staged temp tables to a dataset's head segment.

    Rows are added inside an open transaction and become durable at ``commit()``;
    DuckDB writes large transactions straight to the segment file, so committing every
    few hundred thousand rows rather than every block halves the write cost.
    """

    def __init__(self, backend: DuckDBBackend, state: DatasetState, cur: duckdb.DuckDBPyConnection) -> None:
        self.backend = backend
        self.state = state
        self.cur = cur
        self.pending = 0
        self._seg: Segment | None = None
        self._fields: list[FieldInfo] = []
        self._span: tuple[datetime | None, datetime | None] = (None, None)

    def append(
        self, stage: str, new_fields: list[FieldInfo], rows: int, span: tuple[datetime | None, datetime | None]
    ) -> None:
        """Insert the temp table ``stage`` (on the writer's cursor); durable after commit()."""
        if self._seg is None:
            self.state.write_lock.acquire()
            self._seg = self.backend.head(self.state)
            try:
                self.cur.execute("BEGIN TRANSACTION")
            except duckdb.Error:
                self.state.write_lock.release()
                self._seg = None
                raise
        seg = self._seg
        try:
            stage_cols = {r[0]: r[1] for r in self.cur.execute(f"DESCRIBE {ident(stage)}").fetchall()}
            have = {r[0] for r in self.cur.execute(f"DESCRIBE {seg.alias}.events").fetchall()}
            for col, ctype in stage_cols.items():
                if col not in have:
                    self.cur.execute(f"ALTER TABLE {seg.alias}.events ADD COLUMN {ident(col)} {ctype}")
            known = {r[0] for r in self.cur.execute(f"SELECT name FROM {seg.alias}._fields").fetchall()}
            by_name = {f.name: f for f in new_fields}
            for col in stage_cols:
                if col == TIME_COLUMN or col.endswith(RAW_SUFFIX) or col in known:
                    continue
                info = self.state.fields.get(col) or by_name.get(col) or FieldInfo(col, stage_cols[col], [col])
                self.cur.execute(f"INSERT INTO {seg.alias}._fields VALUES (?, ?, ?)", [info.name, info.path, info.type])
            self.cur.execute(f"INSERT INTO {seg.alias}.events BY NAME SELECT * FROM {ident(stage)}")
        except duckdb.Error as exc:
            self.rollback()
            raise translate(exc, f"writing to dataset {self.state.name!r}") from exc
        self.pending += rows
        self._fields += new_fields
        lo, hi = span
        self._span = (
            min(filter(None, (self._span[0], lo)), default=None),
            max(filter(None, (self._span[1], hi)), default=None),
        )

    def commit(self) -> int:
        """Commit what was appended; return the number of rows made durable."""
        if self._seg is None:
            return 0
        seg, rows = self._seg, self.pending
        try:
            self.cur.execute("COMMIT")
        except duckdb.Error as exc:
            self.rollback()
            raise translate(exc, f"committing to dataset {self.state.name!r}") from exc
        with self.backend._lock:
            for info in self._fields:
                self.state.fields.setdefault(info.name, info)
            seg.widen(rows, *self._span)
        self._reset()
        return rows

    def rollback(self) -> None:
        """Abandon what was appended since the last commit."""
        if self._seg is None:
            return
        with contextlib.suppress(duckdb.Error):
            self.cur.execute("ROLLBACK")
        self._reset()

    def segment_full(self) -> bool:
        """True when the open transaction's segment has reached its size."""
        return self._seg is not None and self._seg.rows + self.pending >= self.backend.segment_rows

    def _reset(self) -> None:
        self._seg = None
        self.pending = 0
        self._fields = []
        self._span = (None, None)
        self.state.write_lock.release()
