"""A dataset's segment files attached to the embedded store's one DuckDB instance, and
detached again (``DuckDBBackend.release``): each segment under its own alias, its
tables made when the store is writable, its columns, rows, time span and field catalog
read as it is attached (docs/storage.md)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import duckdb

from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.driver import translate
from rootsift.store.segment import SAMPLE_TABLE, Segment, sample_sql
from rootsift.store.sqltext import ident, literal

LOCK_WAIT = 10.0
"""Seconds to wait for a segment file another process holds (DuckDB lets one process write
a file, or several read it) before giving up; ``ROOTSIFT_LOCK_WAIT`` overrides."""


class DatasetState:
    """The segments and field catalog of one dataset, as loaded by this process."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.directory = directory
        self.segments: list[Segment] = []
        self.fields: dict[str, FieldInfo] = {}
        self.settings: dict[str, Any] = {}
        self.write_lock = threading.Lock()

    @property
    def segment_dir(self) -> Path:
        return self.directory / "segments"


def attach_segment(
    con: duckdb.DuckDBPyConnection, path: Path, seg_id: int, alias: str, state: DatasetState, read_only: bool
) -> Segment:
    """The segment file ``path`` attached as ``alias`` (its tables made when writable, a
    sample table for a segment written before samples were kept), its fields added to
    ``state``'s catalog."""
    mode = " (READ_ONLY)" if read_only else ""
    try:
        attach_file(con, f"ATTACH {literal(str(path))} AS {alias}{mode}")
        if not read_only:
            con.execute(f"CREATE TABLE IF NOT EXISTS {alias}.events ({ident(TIME_COLUMN)} TIMESTAMP)")
            con.execute(f"CREATE TABLE IF NOT EXISTS {alias}._fields (name VARCHAR, path VARCHAR[], type VARCHAR)")
            # a segment written before samples were kept gets one now, once
            con.execute(
                f"CREATE TABLE IF NOT EXISTS {alias}.{SAMPLE_TABLE} AS "
                f"SELECT * FROM {alias}.events WHERE {sample_sql(seg_id)}"
            )
        seg = Segment(seg_id, path, alias)
        seg.columns = columns_of(con, alias)
        seg.has_sample = bool(
            con.execute(
                "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = ?",
                [alias, SAMPLE_TABLE],
            ).fetchone()[0]  # type: ignore[index]
        )
        rows, lo, hi = con.execute(
            f"SELECT count(*), min({ident(TIME_COLUMN)}), max({ident(TIME_COLUMN)}) FROM {alias}.events"
        ).fetchone() or (0, None, None)
        seg.widen(rows, lo, hi)
        for name, fpath, ftype in con.execute(f"SELECT name, path, type FROM {alias}._fields").fetchall():
            state.fields.setdefault(name, FieldInfo(name, ftype, list(fpath)))
    except duckdb.Error as exc:
        raise translate(exc, f"attaching segment {path}") from exc
    return seg


def attach_file(con: duckdb.DuckDBPyConnection, statement: str) -> None:
    """Run an ATTACH, waiting while another process holds the file: an ingest that meets a
    reader between its looks (``canary``), or a query that meets an ingest, goes on when
    the other is done. Every process attaches in segment order, so two never wait on each
    other."""
    wait = float(os.environ.get("ROOTSIFT_LOCK_WAIT", LOCK_WAIT))
    deadline = time.monotonic() + wait
    pause = 0.05
    while True:
        try:
            con.execute(statement)
            return
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(1.0, pause * 2)


def columns_of(con: duckdb.DuckDBPyConnection, alias: str) -> set[str]:
    """The column names of the segment attached as ``alias``, lower-cased (DuckDB compares
    names without case)."""
    return {r[0].lower() for r in con.execute(f"DESCRIBE {alias}.events").fetchall()}


def detach(con: duckdb.DuckDBPyConnection, segments: list[Segment], doing: str) -> None:
    """Detach each of ``segments``, releasing DuckDB's lock on its file (``doing``: what the
    caller is at, for the error)."""
    for seg in segments:
        try:
            con.execute(f"DETACH {seg.alias}")
        except duckdb.Error as exc:
            raise translate(exc, f"{doing} segment {seg.path}") from exc
