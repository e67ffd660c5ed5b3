"""What every reader shares: the staged result, the time field, and the exact conversion.

A reader turns a block of input into a DuckDB temp table (``Staged``) whose columns
have the dataset's stored types; ``Stager._stage_relation`` does that for any relation
with a line-number column, converting each value to its field's type and keeping the
values that do not fit in ``FIELD#raw`` (ADR 0002).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from rootsift.ingest import convert
from rootsift.ingest.keys import KeyFitter
from rootsift.ingest.rejects import Reject
from rootsift.ingest.scratch import write_file
from rootsift.ingest.timefield import TimeSpec, detect_format, pick_field
from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, path_expr

LINE_KEY = "__rootsift_line__"
"""A column holding each row's input line number, injected by the exact paths."""


@dataclass
class Staged:
    """A block turned into the temp table ``table`` (for SegmentWriter.append), or already
    written and committed (``committed``, the JSON fast path; ``table`` is then empty)."""

    table: str
    rows: int
    span: tuple[datetime | None, datetime | None]
    new_fields: list[FieldInfo]
    rejects: list[Reject] = field(default_factory=list)
    exact: bool = False
    committed: bool = False  # already written and durable (the JSON fast path)


class Stager:
    """Stages blocks for one dataset; keeps the time spec and the field catalog across blocks."""

    def __init__(
        self,
        cur: duckdb.DuckDBPyConnection,
        fields: dict[str, FieldInfo],
        tmp_dir: str,
        time_field: str | None,
        time_format: str | None,
    ) -> None:
        self.cur = cur
        self.fields = {k: v for k, v in fields.items() if k != TIME_COLUMN}
        self.tmp_dir = tmp_dir
        self.time_field = time_field
        self.time_format = time_format
        self.time: TimeSpec | None = None
        self.keys = KeyFitter(tuple(f.path) for f in self.fields.values() if f.path)
        # the time field becomes the time column: never moved past the field limit into _overflow
        # (a key detected as the time under another name than "timestamp" still can be)
        self.keys.admit((time_field or TIME_COLUMN,))
        # empty keys and keys past the field limit, for the readers that see each object
        self._n = 0

    def _stage_relation(self, source: str, detected: convert.Node, path: str) -> Staged:
        """Stage every row of ``source`` (which has a ``LINE_KEY`` column), converting to catalog types."""
        time = self._time_spec(detected, path)
        src_node = detected.children.pop(time.field, None)
        src_time = src_node if src_node is not None and src_node.type is not None else convert.Node(type="JSON")
        time_expr = path_expr("src", [time.field]) if src_node is not None else "CAST(NULL AS JSON)"
        line_node = detected.children.pop(LINE_KEY)
        assert line_node.type is not None
        items = [
            f"{time.sql(time_expr, src_time.type or 'JSON')} AS {ident(TIME_COLUMN)}",
            f"src.{ident(LINE_KEY)} AS {ident(LINE_KEY)}",
            f"{convert.as_text(time_expr, src_time.type or 'JSON')} AS __time_text__",
        ]
        new: list[FieldInfo] = []
        leaves = detected.leaves()
        for (p, t), name in zip(leaves, self._names(leaves)):
            known = self.fields.get(name)
            if known is None:
                known = FieldInfo(name, "VARCHAR" if t == "JSON" else convert.storage_type(t), p)
                new.append(known)
            items += convert.convert(path_expr("src", p), t, known.type, known.name)
        table = self._table()
        self.cur.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {', '.join(items)} FROM {source} src")
        rejects = [
            Reject(
                int(line),
                f"no time field {time.field!r}"
                if text is None
                else f"cannot read {text!r} in field {time.field!r} as a time ({time.format})",
                "",
            )
            for line, text in self.cur.execute(
                f"SELECT {ident(LINE_KEY)}, __time_text__ FROM {table} WHERE {ident(TIME_COLUMN)} IS NULL"
            ).fetchall()
        ]
        self.cur.execute(f"DELETE FROM {table} WHERE {ident(TIME_COLUMN)} IS NULL")
        self.cur.execute(f"ALTER TABLE {table} DROP COLUMN {ident(LINE_KEY)}")
        self.cur.execute(f"ALTER TABLE {table} DROP COLUMN __time_text__")
        cols = [r[0] for r in self.cur.execute(f"DESCRIBE {table}").fetchall()]
        present = self.cur.execute(
            f"SELECT count(*), min({ident(TIME_COLUMN)}), max({ident(TIME_COLUMN)}), "
            + ", ".join(f"count({ident(c)})" for c in cols)
            + f" FROM {table}"
        ).fetchone()
        assert present is not None
        for col, n in zip(cols, present[3:]):
            if n == 0 and col != TIME_COLUMN and (col.endswith(RAW_SUFFIX) or col not in self.fields):
                self.cur.execute(f"ALTER TABLE {table} DROP COLUMN {ident(col)}")
                new = [f for f in new if f.name != col]
        return self._done(Staged(table, present[0], (present[1], present[2]), new, rejects))

    # -- helpers -------------------------------------------------------------------

    def stage(self, block: bytes | None, first_line: int, stats: Any = None) -> Staged:
        """Stage one block of whole lines; lines that cannot be events come back as rejects."""
        raise NotImplementedError

    def _time_spec(self, detected: convert.Node, path: str) -> TimeSpec:
        if self.time is None:
            name = pick_field(list(detected.children), self.time_field)
            fmt = detect_format(self.cur, self._sample(path, name), self.time_format)
            self.time = TimeSpec(name, fmt, detected=self.time_format in (None, "epoch"))
        return self.time

    def _sample(self, path: str, name: str) -> list[str]:
        """Values of the time field from the start of the staged file, as text."""
        raise NotImplementedError

    def _describe(self, source: str) -> str:
        cols = self.cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()
        return "STRUCT(" + ", ".join(f"{ident(c[0])} {c[1]}" for c in cols) + ")"

    def _names(self, leaves: list[tuple[list[str], str]]) -> list[str]:
        by_path = {tuple(f.path): n for n, f in self.fields.items()}
        taken = {n: f.path for n, f in self.fields.items()}
        names = []
        for p, _ in leaves:
            name = by_path.get(tuple(p)) or convert.display_name(p, taken)
            taken[name] = p
            names.append(name)
        return names

    def _done(self, staged: Staged) -> Staged:
        for info in staged.new_fields:
            self.fields.setdefault(info.name, info)
            if info.path:
                self.keys.admit(tuple(info.path))
        return staged

    def warnings(self) -> list[str]:
        """What the summary should say about keys that were renamed or moved."""
        return self.keys.warnings()

    def _table(self) -> str:
        self._n += 1
        return f"stage_{self._n}"

    def _write(self, data: bytes) -> str:
        return write_file(data, self.tmp_dir)

    def _empty(self) -> Staged:
        table = self._table()
        self.cur.execute(f"CREATE OR REPLACE TEMP TABLE {table} ({ident(TIME_COLUMN)} TIMESTAMP)")
        return Staged(table, 0, (None, None), [])

    def _union(self, a: Staged, b: Staged) -> Staged:
        table = self._table()
        self.cur.execute(
            f"CREATE TEMP TABLE {table} AS SELECT * FROM {a.table} UNION ALL BY NAME SELECT * FROM {b.table}"
        )
        self.cur.execute(f"DROP TABLE {a.table}")
        self.cur.execute(f"DROP TABLE {b.table}")
        lo = min((x for x in (a.span[0], b.span[0]) if x), default=None)
        hi = max((x for x in (a.span[1], b.span[1]) if x), default=None)
        names = {f.name for f in a.new_fields}
        return Staged(
            table,
            a.rows + b.rows,
            (lo, hi),
            a.new_fields + [f for f in b.new_fields if f.name not in names],
            a.rejects + b.rejects,
            True,
        )
