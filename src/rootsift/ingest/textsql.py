"""Blocks of log lines that DuckDB parses itself: formats with a ``SqlPlan`` (access logs).

The reader thread only cuts the input into blocks of whole lines and writes each to a
file (``RawLines``); ``TextLinesReader`` reads the file with ``read_csv`` as one text
column, numbers the lines, splits them with the plan's regex, and stages the typed
columns through ``Stager._stage_relation`` (the catalog's types, new fields and
``#raw``, as for any input). The lines the plan does not read (``SqlPlan.ok``) are parsed
by the format's Python parser and staged as JSON lines, so every line gives the event or
the reject it gave before, with its line number. A block DuckDB cannot read as text
(invalid UTF-8, a stray control byte, ``\\r`` line ends) is parsed in Python whole.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from rootsift.ingest import convert
from rootsift.ingest.formats.access_common import Compiled
from rootsift.ingest.formats.access_sql import NO_BACKSLASH, PRINTABLE, SqlPlan
from rootsift.ingest.formats.base import TIME_KEY, numbered_lines
from rootsift.ingest.jsonl import BlockStats, JsonLinesReader
from rootsift.ingest.rejects import Reject
from rootsift.ingest.staging import LINE_KEY, Staged
from rootsift.ingest.timefield import TimeSpec
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal
from rootsift.store.writer import Verified

_LINES = (
    "SELECT line, row_number() OVER () AS n FROM read_csv({path}, sep=chr(1), quote='', escape='', "
    "header=false, auto_detect=false, columns={{'line': 'VARCHAR'}})"
)
"""The file's lines in order, numbered from 1 (an empty line is a NULL line)."""


@dataclass
class RawLines(BlockStats):
    """A block of log lines in the file ``path``, to be parsed by DuckDB with ``plan``."""

    first_line: int = 1
    plan: SqlPlan | None = None
    compiled: Compiled | None = None
    """The Python parser of the same template, for the lines the plan does not read."""
    file_time: Callable[[], datetime] | None = None
    tag: str | None = None
    """The file's name for its rejects (directory input), or None."""
    fmt: str = ""
    clean: bool = False
    """The block is ASCII without the control bytes on which RE2 and Python's ``re`` differ."""
    whole_in_python: bool = False
    """Set when the block cannot be read as text by DuckDB the way Python reads it (``\\r``)."""


class TextLinesReader(JsonLinesReader):
    """The JSON-lines reader, which also stages ``RawLines`` blocks (see the module)."""

    def stage(self, block: bytes | None, first_line: int, stats: Any = None) -> Staged:
        if not isinstance(stats, RawLines):
            return super().stage(block, first_line, stats)
        assert stats.path is not None
        try:
            return self._stage_raw(stats, stats.path)
        finally:
            os.unlink(stats.path)

    def _stage_raw(self, raw: RawLines, path: str) -> Staged:
        plan = raw.plan
        assert plan is not None
        if raw.whole_in_python:
            return self._in_python(raw, self._all_lines(raw, path))
        table = self._table()
        try:
            # One pass: split, convert, and keep the text of only the lines left to Python.
            split = (
                f"SELECT n, line, regexp_extract(line, {literal(plan.regex)}, {plan.names!r}) AS m "
                f"FROM ({_LINES.format(path=literal(path))})"
            )
            if plan.derived:
                split = f"SELECT *, {', '.join(plan.derived)} FROM ({split})"
            columns = ", ".join(f"{sql} AS {ident(name)}" for name, sql in plan.columns)
            self.cur.execute(
                f"CREATE TEMP TABLE {table} AS SELECT n + {raw.first_line - 1} AS n, ok, "
                f"CASE WHEN ok IS NOT TRUE THEN line END AS line, {columns} "
                f"FROM (SELECT *, ({plan.ok}) AND {NO_BACKSLASH if raw.clean else PRINTABLE} AS ok FROM ({split}))"
            )
        except duckdb.InvalidInputException:
            # not text as DuckDB reads it (invalid UTF-8, a \x01, a line over its limit);
            # any other error is a bug to show, not to hide behind the slower path
            return self._in_python(raw, self._all_lines(raw, path))
        try:
            odd = self.cur.execute(
                f"SELECT n, line FROM {table} WHERE ok IS NOT TRUE AND line IS NOT NULL ORDER BY n"
            ).fetchall()
            staged = self._written(table, plan)
            if staged is None:
                fields = ", ".join(ident(name) for name, _ in plan.columns)
                source = f"(SELECT n AS {LINE_KEY}, {fields} FROM {table} WHERE ok)"
                staged = self._stage_relation(source, convert.parse_type(self._describe(source)), path)
        finally:
            self.cur.execute(f"DROP TABLE IF EXISTS {table}")
        if not odd:
            return staged
        rest = self._in_python(raw, [(int(n), str(line)) for n, line in odd])
        if staged.committed:
            # the rest is queued on the writer (committed before the next block is written)
            staged.rejects = sorted(staged.rejects + rest.rejects, key=lambda r: r.line)
            staged.new_fields += rest.new_fields
            if rest.rows and self.writer is not None:
                self.writer.append(rest.table, rest.new_fields, rest.rows, rest.span)
            else:
                self.cur.execute(f"DROP TABLE IF EXISTS {rest.table}")
            return staged
        try:
            return self._absorbed(staged, rest)
        finally:
            self.cur.execute(f"DROP TABLE IF EXISTS {rest.table}")

    def _written(self, table: str, plan: SqlPlan) -> Staged | None:
        """The lines DuckDB read, inserted into the store in one checked statement (committed),
        when every column has its catalog type already or is new; None otherwise (or when
        there is no writer), and ``_stage_relation`` converts them instead."""
        if self.writer is None or (self.time_field, self.time_format) != (TIME_KEY, "rfc3339"):
            return None
        types = {r[0]: r[1] for r in self.cur.execute(f"DESCRIBE {table}").fetchall()}
        leaves = [([name], convert.storage_type(types[name])) for name, _ in plan.columns if name != TIME_KEY]
        names = self._names(leaves)
        if any(n in self.fields and self.fields[n].type != t for (_, t), n in zip(leaves, names)):
            return None
        counts = self.cur.execute(
            "SELECT " + ", ".join([f"count({ident(p[0])})" for p, _ in leaves] or ["0"]) + f" FROM {table} WHERE ok"
        ).fetchone()
        kept = [(p, t, n) for ((p, t), n), c in zip(zip(leaves, names), counts or ()) if c or n in self.fields]
        ts = ident(TIME_COLUMN)
        select = f"SELECT CAST({ident(TIME_KEY)} AS TIMESTAMP) AS {ts}" + "".join(
            f", CAST({ident(p[0])} AS {t}) AS {ident(n)}" for p, t, n in kept
        )
        new = [FieldInfo(n, t, p) for p, t, n in kept if n not in self.fields]

        def verify(rel: str) -> Verified | None:
            row = self.cur.execute(f"SELECT count(*), min({ts}), max({ts}) FROM {rel} AS r").fetchone()
            return Verified(int(row[0]), (row[1], row[2])) if row else None

        if self.time is None:
            self.time = TimeSpec(TIME_KEY, "rfc3339")
        verified = self.writer.write_checked(
            f"{select} FROM {table} WHERE ok", {TIME_COLUMN: "TIMESTAMP", **{n: t for _, t, n in kept}}, new, verify
        )
        if verified is None:
            return None
        return self._done(Staged("", verified.rows, verified.span, new, committed=True))

    def _absorbed(self, staged: Staged, rest: Staged) -> Staged:
        """``staged`` with the (few) rows of ``rest`` added: its columns first, then its rows by name."""
        staged.rejects = sorted(staged.rejects + rest.rejects, key=lambda r: r.line)
        if not rest.rows:
            return staged
        have = {name for name, *_ in self.cur.execute(f"DESCRIBE {staged.table}").fetchall()}
        for name, kind, *_ in self.cur.execute(f"DESCRIBE {rest.table}").fetchall():
            if name not in have:
                self.cur.execute(f"ALTER TABLE {staged.table} ADD COLUMN {ident(name)} {kind}")
        self.cur.execute(f"INSERT INTO {staged.table} BY NAME SELECT * FROM {rest.table}")
        known = {f.name for f in staged.new_fields}
        staged.new_fields += [f for f in rest.new_fields if f.name not in known]
        staged.rows += rest.rows
        lo = min((t for t in (staged.span[0], rest.span[0]) if t is not None), default=None)
        hi = max((t for t in (staged.span[1], rest.span[1]) if t is not None), default=None)
        staged.span = (lo, hi)
        return staged

    def _all_lines(self, raw: RawLines, path: str) -> list[tuple[int, str]]:
        with open(path, "rb") as fh:
            return [(n + raw.first_line - 1, line) for n, line in numbered_lines(io.BytesIO(fh.read()))]

    def _in_python(self, raw: RawLines, lines: list[tuple[int, str]]) -> Staged:
        """Parse ``lines`` with the format's Python parser and stage its events as JSON lines."""
        from rootsift.ingest.textrun import dumped, named  # textrun imports this module

        assert raw.compiled is not None and raw.file_time is not None
        rejects: list[Reject] = []
        out: list[bytes] = []
        for item in raw.compiled.parse(lines, raw.file_time):
            if isinstance(item, Reject):
                rejects.append(Reject(item.line, named(item.reason, raw.tag), item.text))
                continue
            number, event = item
            data = dumped(event, raw.fmt)
            if isinstance(data, str):
                rejects.append(Reject(number, named(data, raw.tag), ""))
                continue
            inner = data[1:].rstrip(b"\n")
            sep = b"" if inner.startswith(b"}") else b","
            out.append(b'{"' + LINE_KEY.encode() + b'":' + str(number).encode() + sep + inner)
        staged = self._exact_lines(out, rejects)
        staged.rejects = sorted(rejects + staged.rejects, key=lambda r: r.line)
        return staged
