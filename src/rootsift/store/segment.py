"""One segment: a DuckDB database file holding a slice of a dataset's events.

A dataset is a directory of segments. Writes go to the newest (head) segment until it
holds ``segment_rows`` rows; retention deletes whole segments or rewrites the one that
straddles the cutoff, so the data directory shrinks (see docs/storage.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident

SAMPLE_TABLE = "events_sample"
SAMPLE_EVERY = 64
"""Each segment keeps about one event in ``SAMPLE_EVERY`` in ``SAMPLE_TABLE`` (same
columns), chosen when it is written: explain's sampled mode reads from there
(docs/storage.md)."""


def sample_sql(seg_id: int) -> str:
    """Whether a row of segment ``seg_id``'s ``events`` is in its sample: a hash of its row
    number and the segment's id, so the choice is independent of the row's content (and of
    every other row), yet the same each time the same input is ingested."""
    return f"hash(rowid, {int(seg_id)}) % {SAMPLE_EVERY} = 0"


@dataclass
class Segment:
    """A segment file attached to the shared connection under ``alias``."""

    id: int
    path: Path
    alias: str
    rows: int = 0
    min_ts: datetime | None = None
    max_ts: datetime | None = None
    columns: set[str] = field(default_factory=set)
    has_sample: bool = False
    """The file holds ``SAMPLE_TABLE``, a uniform sample of its events."""

    def overlaps(self, start: datetime | None, end: datetime | None) -> bool:
        """True when the segment may hold events in [start, end)."""
        if self.rows == 0 or self.min_ts is None or self.max_ts is None:
            return False
        if start is not None and self.max_ts < start:
            return False
        return not (end is not None and self.min_ts >= end)

    def widen(self, rows: int, lo: datetime | None, hi: datetime | None) -> None:
        """Account for ``rows`` appended events spanning [lo, hi]."""
        self.rows += rows
        if lo is not None:
            self.min_ts = lo if self.min_ts is None else min(self.min_ts, lo)
        if hi is not None:
            self.max_ts = hi if self.max_ts is None else max(self.max_ts, hi)

    @property
    def pending(self) -> bool:
        """Still being written by one input's ingest: not part of the dataset yet."""
        return not self.path.name.endswith(".duckdb")

    def files(self) -> list[Path]:
        """The segment's database file and its write-ahead log, where present."""
        return [p for p in (self.path, self.path.with_name(self.path.name + ".wal")) if p.exists()]

    def bytes_on_disk(self) -> int:
        """Size of the segment's files in bytes."""
        return sum(p.stat().st_size for p in self.files())


def segment_file(directory: Path, seg_id: int) -> Path:
    """The file name of segment ``seg_id`` in ``directory``."""
    return directory / f"seg-{seg_id:06d}.duckdb"


def segment_id(path: Path) -> int | None:
    """The id in a segment file name, or None if the name is not a segment's."""
    stem = path.name.removesuffix(".duckdb")
    if not path.name.endswith(".duckdb") or not stem.startswith("seg-"):
        return None
    digits = stem[4:]
    return int(digits) if digits.isdigit() else None


def fsync_dir(directory: Path) -> None:
    """Make a rename (or link) in ``directory`` durable."""
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def relation_sql(segs: list[Segment], fields: list[FieldInfo], table: str = "events") -> str | None:
    """Segments' ``table`` (events or the sample) read as one relation, in DuckDB SQL: one
    segment's table, or the UNION ALL BY NAME of several, fields a segment lacks read as
    NULL. None when a segment has no sample; no segments: no rows, the time column only."""
    if not segs:
        return f"(SELECT CAST(NULL AS TIMESTAMP) AS {ident(TIME_COLUMN)} WHERE false)"
    if table != "events" and not all(s.has_sample for s in segs):
        return None
    # Fields added after a segment was written are absent from it: they read as NULL.
    present = set().union(*(s.columns for s in segs))
    missing = [f for f in fields if f.name.lower() not in present]
    if len(segs) == 1 and not missing:
        return f"{ident(segs[0].alias)}.{ident(table)}"
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM {s.alias}.{table}" for s in segs)
    if missing:
        nulls = ", ".join(f"CAST(NULL AS {f.type}) AS {ident(f.name)}" for f in missing)
        union = f"SELECT *, {nulls} FROM ({union})"
    return f"({union})"
