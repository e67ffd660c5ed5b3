"""Retention: deleting a dataset's events older than a cutoff and giving the disk back.
Segments wholly before the cutoff are detached and deleted; the one the cutoff cuts
through is rewritten into a fresh file holding only the rows at or after it
(docs/storage.md). Functions of the backend, as ``pending`` is."""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from typing import TYPE_CHECKING

import duckdb

from rootsift.store.base import TIME_COLUMN
from rootsift.store.driver import translate
from rootsift.store.segment import SAMPLE_TABLE, Segment, fsync_dir
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    from rootsift.store.attach import DatasetState
    from rootsift.store.duckdb import DuckDBBackend


def _before(seg: Segment, cutoff: datetime) -> bool:
    """Whether the segment holds any row before ``cutoff``."""
    return seg.rows > 0 and seg.min_ts is not None and seg.min_ts < cutoff


def drop_before(backend: DuckDBBackend, state: DatasetState, cutoff: datetime) -> int:
    """Delete the rows before ``cutoff``; returns how many."""
    dropped = 0
    with state.write_lock:
        for seg in [s for s in state.segments if _before(s, cutoff)]:
            if seg.max_ts is not None and seg.max_ts < cutoff:
                dropped += seg.rows
                _remove(backend, state, seg)
            else:
                dropped += _rewrite(backend, state, seg, cutoff)
    return dropped


def count_before(backend: DuckDBBackend, state: DatasetState, cutoff: datetime) -> tuple[int, int]:
    """What ``drop_before`` would delete, deleting nothing: the rows, and the bytes it would
    free (exact for whole segments; for a segment that straddles the cutoff, its size in
    proportion to the rows deleted)."""
    rows = freed = 0
    for seg in [s for s in state.segments if _before(s, cutoff)]:
        old = seg.rows
        if seg.max_ts is None or seg.max_ts >= cutoff:
            sql = f"SELECT count(*) FROM {seg.alias}.events WHERE {ident(TIME_COLUMN)} < ?"
            old = int(backend.execute_sql(sql, [cutoff]).rows[0][0])
        rows += old
        freed += seg.bytes_on_disk() * old // seg.rows
    return rows, freed


def _remove(backend: DuckDBBackend, state: DatasetState, seg: Segment) -> None:
    with backend._lock:
        backend._con.execute(f"DETACH {seg.alias}")
        for path in seg.files():
            path.unlink()
        state.segments.remove(seg)


def _rewrite(backend: DuckDBBackend, state: DatasetState, seg: Segment, cutoff: datetime) -> int:
    """Copy the rows at or after ``cutoff`` into a fresh file that replaces the segment."""
    con = backend._con
    tmp = seg.path.with_name(seg.path.name + ".rewrite")
    for stale in (tmp, tmp.with_name(tmp.name + ".wal")):
        stale.unlink(missing_ok=True)
    with backend._lock:
        try:
            con.execute(f"ATTACH {literal(str(tmp))} AS rewrite_tmp")
            con.execute(
                f"CREATE TABLE rewrite_tmp.events AS SELECT * FROM {seg.alias}.events "
                f"WHERE {ident(TIME_COLUMN)} >= ? ORDER BY {ident(TIME_COLUMN)}",
                [cutoff],
            )
            con.execute(f"CREATE TABLE rewrite_tmp._fields AS SELECT * FROM {seg.alias}._fields")
            if seg.has_sample:
                con.execute(
                    f"CREATE TABLE rewrite_tmp.{SAMPLE_TABLE} AS SELECT * FROM {seg.alias}.{SAMPLE_TABLE} "
                    f"WHERE {ident(TIME_COLUMN)} >= ?",
                    [cutoff],
                )
            kept = con.execute("SELECT count(*) FROM rewrite_tmp.events").fetchone()
            con.execute("DETACH rewrite_tmp")
            con.execute(f"DETACH {seg.alias}")
        except duckdb.Error as exc:
            # Leave the segment as it was: drop the half-written copy.
            with contextlib.suppress(duckdb.Error):
                con.execute("DETACH DATABASE IF EXISTS rewrite_tmp")
            for stale in (tmp, tmp.with_name(tmp.name + ".wal")):
                stale.unlink(missing_ok=True)
            raise translate(exc, f"rewriting segment {seg.path}") from exc
        os.replace(tmp, seg.path)
        fsync_dir(seg.path.parent)
        seg.path.with_name(seg.path.name + ".wal").unlink(missing_ok=True)
        state.segments.remove(seg)
        fresh = backend._attach(seg.path, seg.id, state)
        state.segments.append(fresh)
        state.segments.sort(key=lambda s: s.id)
    return seg.rows - (kept[0] if kept else 0)
