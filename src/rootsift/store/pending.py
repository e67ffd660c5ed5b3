"""Pending segments: one input's rows, committed in bounded transactions into segment files
no reader attaches (``seg-NNNNNN.duckdb.pending``), made part of the dataset whole when the
input ends (``publish``) or deleted when it fails (``discard``); a crash's leftovers are
removed by the next writer (``clear_stale``). See docs/adr/0010-bounded-ingest-transactions.md.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import duckdb

from rootsift.store.driver import translate
from rootsift.store.segment import Segment, fsync_dir, segment_file, segment_id
from rootsift.store.sqltext import literal

if TYPE_CHECKING:
    from rootsift.store.attach import DatasetState
    from rootsift.store.duckdb import DuckDBBackend

PENDING = ".pending"
"""Suffix of a segment file still being written by one input's ingest: readers never attach it."""


def open_pending(backend: DuckDBBackend, state: DatasetState) -> Segment:
    """A new segment file for one input, under a name no reader attaches
    (``seg-NNNNNN.duckdb.pending``): the ingest commits into it in bounded transactions,
    and ``publish`` makes it part of the dataset when the input is complete. A crash
    leaves only a pending file, removed when the store is next opened for writing
    (docs/adr/0010-bounded-ingest-transactions.md)."""
    with backend._lock:
        seg_id = next_id(state)
        path = segment_file(state.segment_dir, seg_id).with_name(segment_file(state.segment_dir, seg_id).name + PENDING)
        seg = backend._attach(path, seg_id, state)
        backend._con.execute(f"CHECKPOINT {seg.alias}")  # the file exists whole before rows arrive
        return seg


def publish(backend: DuckDBBackend, state: DatasetState, segs: list[Segment]) -> None:
    """Make pending segments part of the dataset, each whole, by one link each, in order.

    Each file is checkpointed (its WAL folded in) and detached first, so the name a
    reader attaches only ever points at a complete file. An input of more than
    ``segment_rows`` rows has several: a crash between their links (microseconds) would
    leave the first ones visible (docs/adr/0010-bounded-ingest-transactions.md).
    The checkpoint does not vacuum (``unvacuumed``).
    """
    with state.write_lock, backend._lock:  # the order every writer takes them in
        try:
            for seg in segs:
                with unvacuumed(backend._con):
                    backend._con.execute(f"CHECKPOINT {seg.alias}")
                backend._con.execute(f"DETACH {seg.alias}")
        except duckdb.Error as exc:
            raise translate(exc, f"finishing segment {segs[0].path}") from exc
        for seg in segs:
            seg_id = max(seg.id, next_id(state, pending=False))
            while True:  # another process may have taken the id meanwhile: link() never replaces
                final = segment_file(state.segment_dir, seg_id)
                try:
                    os.link(seg.path, final)
                    break
                except FileExistsError:
                    seg_id += 1
            fsync_dir(state.segment_dir)
            for path in seg.files():
                path.unlink()
            state.segments.append(backend._attach(final, seg_id, state))
        state.segments.sort(key=lambda s: s.id)


@contextlib.contextmanager
def unvacuumed(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """DuckDB's checkpoints inside schedule no vacuum task (``max_vacuum_tasks = 0``; a setting
    of the whole database, set back after).

    A pending segment's rows were committed in a few big transactions, each inserted by
    every thread, and each thread's last row group is partial: the checkpoint's vacuum
    merged partial row groups that fit in fewer, decompressing and rewriting them, and left
    the old blocks as free space (1M access-log rows in three transactions: 0.28 CPU s and
    0.4-0.8 s of wall time, a 29 MiB file, against 0.003 CPU s and 22 MiB without; in two of
    500k rows the same). A new segment has no deleted rows, the other thing a vacuum is for;
    it only keeps a few partial row groups."""
    row = con.execute("SELECT current_setting('max_vacuum_tasks')").fetchone()
    con.execute("SET max_vacuum_tasks = 0")
    try:
        yield
    finally:
        con.execute(f"SET max_vacuum_tasks = {int(row[0]) if row else 100}")


def discard(backend: DuckDBBackend, seg: Segment) -> None:
    """Drop a pending segment whose input failed: nothing of it was ever visible."""
    with backend._lock:
        with contextlib.suppress(duckdb.Error):
            backend._con.execute(f"DETACH {seg.alias}")
        for path in seg.files():
            path.unlink(missing_ok=True)


def next_id(state: DatasetState, pending: bool = True) -> int:
    """One more than the highest segment id on disk (and in memory), pending ones included."""
    names = state.segment_dir.glob("seg-*") if pending else state.segment_dir.glob("seg-*.duckdb")
    ids = [segment_id(p.with_name(p.name.removesuffix(PENDING))) for p in names]
    known = [i for i in ids if i is not None] + [s.id for s in state.segments]
    return max(known, default=0) + 1


def clear_stale(backend: DuckDBBackend, state: DatasetState) -> None:
    """Remove the pending segments of ingests that crashed; one another process is still
    writing is locked, and stays."""
    for path in sorted(state.segment_dir.glob(f"seg-*.duckdb{PENDING}")):
        backend._aliases += 1
        alias = f"stale_{backend._aliases}"
        try:
            backend._con.execute(f"ATTACH {literal(str(path))} AS {alias}")
            backend._con.execute(f"DETACH {alias}")
        except duckdb.Error:
            continue  # held by a running ingest (or unreadable: left for a person to look at)
        for stale in (path, path.with_name(path.name + ".wal")):
            stale.unlink(missing_ok=True)
