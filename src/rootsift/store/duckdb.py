"""The embedded backend: DuckDB, one database file per segment, one shared connection.

Layout (docs/storage.md)::

    DATA/<dataset>/dataset.json          format version and settings
    DATA/<dataset>/segments/seg-NNNNNN.duckdb   tables ``events`` and ``_fields``
    DATA/<dataset>/rejects/*.jsonl       rejected input lines, with line number and reason

All segments are ATTACHed to one in-memory DuckDB instance; queries see a dataset as
the UNION ALL BY NAME of the segments whose time span overlaps the query's range.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from rootsift.errors import DatasetNotFoundError
from rootsift.store import pending, retention
from rootsift.store.attach import DatasetState, attach_segment, columns_of, detach
from rootsift.store.base import (
    TIME_COLUMN,
    Backend,
    DatasetInfo,
    FieldInfo,
    QueryResult,
    check_dataset_name,
)
from rootsift.store.driver import translate
from rootsift.store.files import raised_memory_limit, write_json_atomic
from rootsift.store.segment import SAMPLE_TABLE, Segment, relation_sql, segment_file, segment_id
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from sqlglot import exp

    from rootsift.query.plan import PlanCache
    from rootsift.store.writer import SegmentWriter

FORMAT_VERSION = 1
DEFAULT_SEGMENT_ROWS = 8_000_000
WRITER_MEMORY_LIMIT = "512MB"
"""DuckDB's memory limit for a store opened for writing. DuckDB's own default (80 % of
RAM) lets an ingest keep written pages cached until the process holds gigabytes; past
this limit DuckDB evicts or spills to disk. It must be set when the database opens: a
later SET bounds far less (measured). Read-only stores keep DuckDB's default.
``$ROOTSIFT_MEMORY_LIMIT`` overrides both."""


class DuckDBBackend(Backend):
    """Datasets in DuckDB segment files under ``data_dir``; safe to share across threads."""

    dialect = "duckdb"

    def __init__(
        self,
        data_dir: Path,
        *,
        read_only: bool = False,
        segment_rows: int = DEFAULT_SEGMENT_ROWS,
        memory_limit: str | None = None,
        threads: int | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.read_only = read_only
        self.segment_rows = segment_rows
        config: dict[str, Any] = {}
        memory_limit = (
            memory_limit or os.environ.get("ROOTSIFT_MEMORY_LIMIT") or (None if read_only else WRITER_MEMORY_LIMIT)
        )
        if memory_limit:
            config["memory_limit"] = memory_limit
        if threads:
            config["threads"] = threads
        try:
            self._con = duckdb.connect(":memory:", config=config)
            # GLOBAL: every cursor (ingest, queries) must read and write times in UTC.
            self._con.execute("SET GLOBAL TimeZone = 'UTC'")
        except duckdb.Error as exc:
            raise translate(exc, "opening DuckDB") from exc
        self._lock = threading.RLock()
        self._local = threading.local()
        self._readers: list[duckdb.DuckDBPyConnection] = []
        self._states: dict[str, DatasetState] = {}
        self._aliases = 0

    # -- connections -------------------------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new connection to the shared instance: one per thread or per ingest."""
        return self._con.cursor()

    def raised_memory_limit(self, limit: str) -> contextlib.AbstractContextManager[None]:
        """Run a block with DuckDB's memory limit raised to ``limit`` (never lowered: a limit
        lowered after opening bounds far less than one given at open), restoring it after."""
        return raised_memory_limit(self._con, self._lock, limit)

    def close(self) -> None:
        with self._lock:
            for cur in self._readers:
                cur.close()
            self._readers.clear()
            self._con.close()
            self._states.clear()

    # -- datasets ----------------------------------------------------------------
    def dataset_dir(self, name: str) -> Path:
        return self.data_dir / check_dataset_name(name)

    def exists(self, name: str) -> bool:
        return (self.dataset_dir(name) / "dataset.json").exists()

    def state(self, name: str, create: bool = False) -> DatasetState:
        """Load (attaching its segments) or create the dataset ``name``."""
        with self._lock:
            if name in self._states:
                return self._states[name]
            directory = self.dataset_dir(name)
            meta = directory / "dataset.json"
            if not meta.exists():
                if not create or self.read_only:
                    known = ", ".join(sorted(self._names())) or "none yet"
                    raise DatasetNotFoundError(f"no dataset named {name!r} in {self.data_dir} (datasets: {known})")
                (directory / "segments").mkdir(parents=True, exist_ok=True)
                write_json_atomic(meta, {"format_version": FORMAT_VERSION, "samplerate_field": "samplerate"})
            state = DatasetState(name, directory)
            state.settings = json.loads(meta.read_text())
            if not self.read_only:
                pending.clear_stale(self, state)
            for path in sorted(state.segment_dir.glob("seg-*.duckdb")):
                seg_id = segment_id(path)
                if seg_id is not None:
                    state.segments.append(self._attach(path, seg_id, state))
            self._states[name] = state
            return state

    def _names(self) -> list[str]:
        if not self.data_dir.exists():
            return []
        return [p.name for p in self.data_dir.iterdir() if (p / "dataset.json").exists()]

    def _attach(self, path: Path, seg_id: int, state: DatasetState) -> Segment:
        """Attach the segment file ``path`` under a new alias (``attach.attach_segment``)."""
        self._aliases += 1
        return attach_segment(self._con, path, seg_id, f"seg_{self._aliases}", state, self.read_only)

    def columns_of(self, seg: Segment) -> set[str]:
        """The segment's column names, lower-cased (DuckDB compares names without case)."""
        return columns_of(self._con, seg.alias)

    def datasets(self) -> list[DatasetInfo]:
        infos = []
        for name in sorted(self._names()):
            state = self.state(name)
            rows = sum(s.rows for s in state.segments)
            events = rows
            weight = self.weight_field(name)
            if weight and rows:
                rel = self.relation_text(name, None, None)
                events = int(self.execute_sql(f"SELECT sum({weight_sql(weight)}) FROM {rel}", []).rows[0][0] or 0)
            first, last = self.span(name)
            infos.append(
                DatasetInfo(
                    name=name,
                    events=events,
                    stored_rows=rows,
                    first=first,
                    last=last,
                    bytes_on_disk=sum(p.stat().st_size for p in state.directory.rglob("*") if p.is_file()),
                    segments=len(state.segments),
                )
            )
        return infos

    def span(self, dataset: str) -> tuple[datetime | None, datetime | None]:
        """The first and last event time of ``dataset`` (None, None when it is empty)."""
        state = self.state(dataset)
        with self._lock:
            spans = [s for s in state.segments if s.rows]
            return (
                min((s.min_ts for s in spans if s.min_ts), default=None),
                max((s.max_ts for s in spans if s.max_ts), default=None),
            )

    def fields(self, dataset: str) -> dict[str, FieldInfo]:
        state = self.state(dataset)
        with self._lock:
            out = {TIME_COLUMN: FieldInfo(TIME_COLUMN, "TIMESTAMP", [TIME_COLUMN])}
            out.update({k: v for k, v in state.fields.items()})
            return out

    def weight_field(self, dataset: str) -> str | None:
        """The sample-rate field of ``dataset`` when its events carry one, else None."""
        state = self.state(dataset)
        name = state.settings.get("samplerate_field") or "samplerate"
        info = state.fields.get(name)
        return name if info is not None and info.type in ("DOUBLE", "BIGINT") else None

    def count_field(self, dataset: str) -> str | None:
        """The count field of ``dataset`` (a row standing for that many identical events)
        when its events carry one: the ``count_field`` setting, else the conventional
        ``COUNT_FIELD``; None when absent or not a number."""
        state = self.state(dataset)
        name = state.settings.get("count_field") or COUNT_FIELD
        info = state.fields.get(name)
        return name if info is not None and info.type in ("DOUBLE", "BIGINT") else None

    def set_count_field(self, dataset: str, name: str) -> None:
        """Record ``name`` as the count field of ``dataset`` (created if new) in its settings."""
        state = self.state(dataset, create=True)
        with self._lock:
            state.settings["count_field"] = name
            write_json_atomic(state.directory / "dataset.json", state.settings)

    # -- reading -----------------------------------------------------------------
    def relation(self, dataset: str, start: datetime | None, end: datetime | None) -> exp.Expr:
        """The dataset's events in the segments that may hold [start, end), as one relation."""
        rel = self._relation(dataset, start, end, "events")
        assert rel is not None
        return rel

    def sample_relation(self, dataset: str, start: datetime | None, end: datetime | None) -> exp.Expr | None:
        """The stored uniform sample of the dataset's events (one in ``SAMPLE_EVERY``) over
        the same segments; None when a segment has none (opened read-only before it was made)."""
        return self._relation(dataset, start, end, SAMPLE_TABLE)

    def _relation(self, dataset: str, start: datetime | None, end: datetime | None, table: str) -> exp.Expr | None:
        import sqlglot  # not at module level: `datasets`, `retention`, `schema` start without it
        from sqlglot import exp

        text = self.relation_text(dataset, start, end, table)
        if text is None:
            return None
        if text.startswith("("):
            return sqlglot.parse_one(text, dialect="duckdb")
        return exp.to_table(text, dialect="duckdb")

    def relation_text(
        self, dataset: str, start: datetime | None, end: datetime | None, table: str = "events"
    ) -> str | None:
        """The relation of ``relation`` (``table``: events or the sample) as DuckDB SQL
        text: a segment's table, or a parenthesised query over several. None when a
        segment has no sample. Built without sqlglot, for commands that only read."""
        state = self.state(dataset)
        with self._lock:
            segs = [s for s in state.segments if s.overlaps(start, end)] or state.segments[:1]
        return relation_sql(segs, list(state.fields.values()), table)

    def execute(self, query: exp.Expr, params: list[Any]) -> QueryResult:
        return self.execute_sql(self.render(query), params)

    def plan_cache(self) -> PlanCache | None:
        """Plans in the user's cache folder (``rootsift.query.plan.cache_dir``), for this store."""
        from rootsift.query.plan import PlanCache, cache_dir

        return PlanCache.at(cache_dir(), str(self.data_dir.resolve()))

    def execute_sql(self, sql: str, params: list[Any]) -> QueryResult:
        """Run SQL text (already rendered for DuckDB) with bound parameters."""
        cur = self._reader()
        try:
            cur.execute(sql, params)
            columns = [d[0] for d in cur.description or []]
            return QueryResult(columns, cur.fetchall())
        except duckdb.Error as exc:
            raise translate(exc, "query failed") from exc

    def _reader(self) -> duckdb.DuckDBPyConnection:
        """This thread's query connection, kept open: a fresh one costs ~0.5 ms per query."""
        cur: duckdb.DuckDBPyConnection | None = getattr(self._local, "cur", None)
        if cur is None:
            cur = self._local.cur = self.cursor()
            with self._lock:
                self._readers.append(cur)
        return cur

    # -- writing -----------------------------------------------------------------
    def head(self, state: DatasetState) -> Segment:
        """The segment that takes new rows, opening a new one when the last is full."""
        with self._lock:
            if state.segments and state.segments[-1].rows < self.segment_rows:
                return state.segments[-1]
            seg_id = pending.next_id(state)  # past pending segments too: their names are taken
            seg = self._attach(segment_file(state.segment_dir, seg_id), seg_id, state)
            state.segments.append(seg)
            return seg

    def writer(self, dataset: str, cur: duckdb.DuckDBPyConnection) -> SegmentWriter:
        """A writer that appends staged tables to ``dataset`` in transactions of many rows."""
        from rootsift.store.writer import SegmentWriter

        return SegmentWriter(self, self.state(dataset, create=True), cur)

    def ingest_arrow(self, dataset: str, table: Any) -> int | None:
        from rootsift.store.arrow_ingest import ingest_arrow

        return ingest_arrow(self, dataset, table)

    def release_all(self) -> None:
        """``release`` every dataset this process has open (the server after each read)."""
        with self._lock:
            names = list(self._states)
        for name in names:
            self.release(name)

    def release(self, dataset: str) -> None:
        """Detach the dataset's segment files, releasing DuckDB's file locks so that other
        processes can read or write them; the next use attaches them again (waiting, as any
        open does, while another process holds them). A stream ingest calls this after each
        commit, so it does not hold the store for its whole life (docs/storage.md)."""
        with self._lock:
            state = self._states.get(dataset)
        if state is None:
            return
        with state.write_lock, self._lock:  # the order every writer takes them in
            if self._states.get(dataset) is state:
                del self._states[dataset]
                detach(self._con, state.segments, "releasing")

    def drop_before(self, dataset: str, cutoff: datetime) -> int:
        return retention.drop_before(self, self.state(dataset), cutoff)

    def count_before(self, dataset: str, cutoff: datetime) -> tuple[int, int]:
        """What ``drop_before(dataset, cutoff)`` would delete, deleting nothing (rows, bytes)."""
        return retention.count_before(self, self.state(dataset), cutoff)

    def drop_dataset(self, dataset: str) -> None:
        """Delete a dataset and its files."""
        state = self.state(dataset)
        with self._lock:
            detach(self._con, list(state.segments), "dropping")
            shutil.rmtree(state.directory)
            self._states.pop(dataset, None)


COUNT_FIELD = "event_count"
"""The conventional count field: a row with ``event_count = n`` stands for n identical events."""


def weight_sql(field: str) -> str:
    """SQL for an event's weight: its sample rate when it is a number >= 1, else 1."""
    col = ident(field)
    return f"(CASE WHEN {col} >= 1 THEN {col} ELSE 1 END)"
