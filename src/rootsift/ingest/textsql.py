"""Blocks of log lines that DuckDB parses itself: formats with a ``SqlPlan`` (access logs).

The reader thread only cuts the input into blocks of whole lines and writes each to a
file (``RawLines``); ``TextLinesReader`` reads the file with ``read_csv`` as one text
column, splits the lines with the plan's regex and converts the values: one statement
per block (``_one_pass``) without line numbers, so DuckDB runs it on every thread: a
checked insert into the store of the lines the SQL reads, while the texts of the others
reach ``odd_line``; those are parsed by the format's Python parser (staged as JSON lines,
committed once after the input's last block) and numbered in the block only when one is
rejected (``textodd``), so every line gives the event or the reject it gave before, with
its line number. Before a plan's first block, its front tells which new fields to add
(``textprobe``). Blocks whose fields have other types in the catalog go through a numbered
temp table (``_two_passes``). A block DuckDB cannot read as text (invalid UTF-8, a stray
control byte, ``\\r`` line ends) is parsed in Python whole. Slow logs: ``textslow``.
See docs/adr/0016-text-formats-in-one-duckdb-pass.md.
"""

from __future__ import annotations

import io
import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb
from duckdb.func import SPECIAL

from rootsift.ingest import convert
from rootsift.ingest.formats.access_common import Compiled
from rootsift.ingest.formats.access_sql import NO_BACKSLASH, PRINTABLE, SqlPlan
from rootsift.ingest.formats.base import TIME_KEY, numbered_lines
from rootsift.ingest.jsonl import BlockStats
from rootsift.ingest.staging import LINE_KEY, Staged
from rootsift.ingest.textlines import LINES, numbered, odd_lines
from rootsift.ingest.textodd import LineCount, in_text_order, renumbered
from rootsift.ingest.textprobe import Front, read_front
from rootsift.ingest.textslow import SlowLines, stage_slow
from rootsift.ingest.textstage import TextStager
from rootsift.ingest.timefield import TimeSpec
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal
from rootsift.store.writer import Verified

_ODD_LINES = itertools.count()
"""The numbers of the cursors' ``odd_line`` functions (``_odd_line``)."""


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
    front: bool = False
    """Not a block but the front of the plan's first block, probed while the block is cut (``prepare``)."""
    lines_total: LineCount | None = None
    """The block's number of lines, told by the reader thread once it has handed the block on."""
    last: bool = True
    """The input's last block, or a stream's (each committed at once). Before it, the rows of
    the odd lines wait (``DEFER_ROWS``): the input's blocks go into pending segments, visible
    together when it ends, so committing them later hides nothing."""


DEFER_ROWS = 1 << 17
"""Most rows of odd lines kept back for one commit at the end of the input (``RawLines.last``).
Committed between two blocks, the few rows of a block's odd lines were a small transaction
before a big one, which made the segment's checkpoint rewrite its row groups (0.4-0.8 s for
1M lines); this many rows are a big transaction themselves (DuckDB's row group is 122,880)."""


class TextLinesReader(TextStager):
    """The JSON-lines reader, which also stages ``RawLines`` blocks (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._odd: list[str | None] | None = None
        """Where ``odd_line`` puts the text of each odd line of the statement running now."""
        self._odd_name: str | None = None
        self._settled: set[str] = set()
        """The plans (by regex) whose new fields were decided by a first block."""
        self._types: dict[str, list[tuple[str, str]]] = {}
        self._fronts: dict[str, tuple[bool, Front]] = {}
        """The front of a plan's first block probed before it (``_prepare``), with its ``clean``."""

    def stage(self, block: bytes | None, first_line: int, stats: Any = None) -> Staged:
        if isinstance(stats, SlowLines):
            assert stats.path is not None
            try:
                return stage_slow(self, stats)
            finally:
                os.unlink(stats.path)
        if not isinstance(stats, RawLines):
            return super().stage(block, first_line, stats)
        assert stats.path is not None
        try:
            if stats.front:
                self._prepare(stats, stats.path)
                return Staged("", 0, (None, None), [], committed=True)
            return self._stage_raw(stats, stats.path)
        finally:
            os.unlink(stats.path)

    def _prepare(self, raw: RawLines, path: str) -> None:
        """Probe the front of a plan's first block (``path``) before the block comes: its DuckDB
        part, which ``_front`` then takes when the block's ``clean`` is the front's."""
        plan = raw.plan
        assert plan is not None
        if plan.regex in self._settled:
            return
        try:
            self._plan_types(plan, raw, path)
            self._fronts[plan.regex] = (raw.clean, self._read_front(raw, plan, path))
        except duckdb.InvalidInputException:
            pass  # not text as DuckDB reads it: the block's own statement finds out

    def _stage_raw(self, raw: RawLines, path: str) -> Staged:
        staged = self._parsed(raw, path)
        if raw.last or sum(d.rows for d in self._deferred) >= DEFER_ROWS:
            self._flush()
        return staged

    def _parsed(self, raw: RawLines, path: str) -> Staged:
        plan = raw.plan
        assert plan is not None
        if raw.whole_in_python:
            return self._in_python(raw, self._all_lines(raw, path))
        odd: list[tuple[int, str]] = []
        texts: list[str | None] = []
        staged = self._one_pass(raw, plan, path, texts)
        if staged is None:
            texts = []
            try:
                staged = self._two_passes(raw, plan, path, odd)
            except duckdb.InvalidInputException:
                # not text as DuckDB reads it (invalid UTF-8, a \x01, a line over its limit);
                # any other error is a bug to show, not to hide behind the slower path
                return self._in_python(raw, self._all_lines(raw, path))
        if texts:
            return self._with_rest(staged, self._odd_rest(raw, path, texts, staged.rows))
        if not odd:
            return staged
        return self._with_rest(staged, self._in_python(raw, sorted(odd)))

    def _odd_rest(self, raw: RawLines, path: str, texts: list[str | None], inserted: int) -> Staged:
        """The Python parser's rows and rejects for the block's odd lines, one per text in
        ``texts``: parsed in text order, numbered in the block only for their rejects
        (``textodd``), or all of them when the statement's ``inserted`` rows and the texts do
        not add up to the block's lines."""
        counted = raw.lines_total.lines() if raw.lines_total is not None else None
        order = in_text_order(texts)
        if counted == inserted + len(texts):
            rest = self._in_python(raw, list(enumerate(order, 1)))
            if not rest.rejects:
                return rest
            rejects = renumbered(rest.rejects, order, lambda wanted: self._found(raw, path, wanted))
            if rejects is not None:
                rest.rejects = rejects
                return rest
            self.cur.execute(f"DROP TABLE IF EXISTS {rest.table}")
        return self._in_python(raw, self._found(raw, path, set(order)))

    def _found(self, raw: RawLines, path: str, texts: set[str]) -> list[tuple[int, str]]:
        """The lines of the block whose text is one of ``texts`` ("": an empty line), numbered,
        in file order."""
        found = odd_lines(path, raw.first_line, set(texts))
        missing = texts - {""} - {line for _, line in found}
        if missing:
            # not found as DuckDB read it (never seen): numbered by DuckDB instead, in order
            found += self._numbered(raw, path, missing)
        return sorted(found)

    def _split(self, raw: RawLines, plan: SqlPlan, path: str, number: bool = True) -> str:
        """SQL: every line of the block (``n``, numbered in the log, when ``number``; ``line``),
        the plan's columns by field name and ``ok``, true where they are the Python parser's event."""
        split = (
            f"SELECT line, regexp_extract(line, {literal(plan.regex)}, {plan.names!r}) AS m "
            f"FROM {LINES.format(path=literal(path))}"
        )
        if plan.derived:
            split = f"SELECT *, {', '.join(plan.derived)} FROM ({split})"
        columns = ", ".join(f"{sql} AS {ident(name)}" for name, sql in plan.columns)
        ok = f"({plan.ok}) AND {NO_BACKSLASH if raw.clean else PRINTABLE}"
        select = f"SELECT line, {columns}, {ok} AS ok FROM ({split})"
        return numbered(select, raw.first_line) if number else select

    def _one_pass(self, raw: RawLines, plan: SqlPlan, path: str, odd: list[str | None]) -> Staged | None:
        """The block in one statement: split, convert and insert into the store (checked,
        committed) the lines the SQL reads, while ``odd_line`` hands the text of each of the
        others to ``odd`` (not in order: ``_odd_rest`` numbers them).

        Only the fields the catalog has are inserted, with its types, and in the plan's first
        block the new ones that have a value at its front (``_front``, ``textprobe``):
        a line with a value for a field not inserted is left to Python too, which adds the
        field. None when that does not hold (blocks whose fields have other types in the
        catalog go through ``_two_passes``)."""
        if self.writer is None or (self.time_field, self.time_format) != (TIME_KEY, "rfc3339"):
            return None
        leaves = [([name], t) for name, t in self._plan_types(plan, raw, path) if name != TIME_KEY]
        names = self._names(leaves)
        if any(n in self.fields and self.fields[n].type != t for (_, t), n in zip(leaves, names)):
            return None
        known = set(self.fields)
        valued: set[str] = set()
        extra: list[FieldInfo] = []
        if plan.regex not in self._settled:
            try:
                valued, extra = self._front(raw, plan, path)  # leaves the plan's own fields as they were
            except duckdb.InvalidInputException:
                return None  # not text as DuckDB reads it: see _stage_raw
        added = [FieldInfo(n, t, p) for (p, t), n in zip(leaves, names) if n not in known and p[0] in valued]
        new = [p[0] for (p, _), n in zip(leaves, names) if n not in self.fields and p[0] not in valued]
        kept = [(p[0], t, n) for (p, t), n in zip(leaves, names) if n in self.fields or p[0] in valued]
        keep = " AND ".join(["ok", *(f"{ident(name)} IS NULL" for name in new)])
        ts = ident(TIME_COLUMN)
        select = f"SELECT CAST({ident(TIME_KEY)} AS TIMESTAMP) AS {ts}" + "".join(
            [f", CAST({ident(p)} AS {t}) AS {ident(n)}" for p, t, n in kept]
            + [f", CAST(NULL AS {info.type}) AS {ident(info.name)}" for info in extra]  # the odd lines' fields
        )
        source = f"(SELECT *, coalesce({keep}, false) AS keep FROM ({self._split(raw, plan, path, number=False)}))"

        def verify(rel: str) -> Verified | None:
            row = self.cur.execute(f"SELECT count(*), min({ts}), max({ts}) FROM {rel} AS r").fetchone()
            return Verified(int(row[0]), (row[1], row[2])) if row else None

        if self.time is None:
            self.time = TimeSpec(TIME_KEY, "rfc3339")
        self._odd = odd
        try:
            verified = self.writer.write_checked(
                f"{select} FROM {source} WHERE keep OR {self._odd_line()}(line, keep)",
                {TIME_COLUMN: "TIMESTAMP", **{n: t for _, t, n in kept}, **{f.name: f.type for f in extra}},
                added + extra,
                verify,
            )
        finally:
            self._odd = None
        if verified is None:
            for info in extra:  # not stored: the block is read another way
                del self.fields[info.name]
            return None
        self._settled.add(plan.regex)
        return self._done(Staged("", verified.rows, verified.span, added + extra, committed=True))

    def _front(self, raw: RawLines, plan: SqlPlan, path: str) -> tuple[set[str], list[FieldInfo]]:
        """The plan's fields with a value at the front of its first block, and the fields only
        the Python parser gives, to the odd lines there (``textprobe``; in the catalog from now
        on, with the types it gave them)."""
        known = set(self.fields)
        clean, front = self._fronts.pop(plan.regex, (raw.clean, None))
        if front is None or clean != raw.clean:
            front = self._read_front(raw, plan, path)
        if front.odd:
            rest = self._in_python(raw, [(raw.first_line, text) for text in front.odd])
            self.cur.execute(f"DROP TABLE IF EXISTS {rest.table}")  # its lines are parsed again with the block
        columns = {name for name, _ in plan.columns}
        extra = []
        for name in [name for name in self.fields if name not in known]:
            if name in columns:
                del self.fields[name]  # the statement decides the plan's own fields, with its types
            else:
                extra.append(self.fields[name])
        return front.valued, extra

    def _read_front(self, raw: RawLines, plan: SqlPlan, path: str) -> Front:
        columns = [name for name, _ in plan.columns]
        return read_front(
            self.cur, path, self.tmp_dir, columns, lambda probe: self._split(raw, plan, probe, number=False)
        )

    def _numbered(self, raw: RawLines, path: str, texts: set[str]) -> list[tuple[int, str]]:
        """The lines of the block whose text (as DuckDB reads it) is one of ``texts``, numbered
        in one ordered read of the block (one thread, but only for lines ``odd_lines`` missed)."""
        lines = numbered(f"SELECT line FROM {LINES.format(path=literal(path))}", raw.first_line)
        return [
            (int(n), str(line))
            for n, line in self.cur.execute(
                f"SELECT n, line FROM ({lines}) WHERE list_contains(?, line) ORDER BY n", [sorted(texts)]
            ).fetchall()
        ]

    def _odd_line(self) -> str:
        """The name of this cursor's ``odd_line(line, keep)``: false, and the line's text kept
        for Python when ``keep`` is false. It runs only where ``keep`` is false (``keep OR ...``),
        on any of DuckDB's threads, in any order: the lines are numbered afterwards when needed
        (``_odd_rest``), and that it ran once per line is checked there."""
        if self._odd_name is None:
            # numbered, not named by id(self): the cursor outlives its readers, and a later
            # reader can be given the id of one collected, whose function is still there
            self._odd_name = f"rootsift_odd_line_{next(_ODD_LINES)}"

            def odd_line(line: str | None, keep: bool) -> bool:
                if not keep and self._odd is not None:
                    self._odd.append(line)  # list.append is atomic: DuckDB's threads may call it
                return False

            # called for NULL too (an empty line): every line the statement does not insert is counted
            self.cur.create_function(
                self._odd_name, odd_line, ["VARCHAR", "BOOLEAN"], "BOOLEAN", null_handling=SPECIAL, side_effects=True
            )
        return self._odd_name

    def _plan_types(self, plan: SqlPlan, raw: RawLines, path: str) -> list[tuple[str, str]]:
        """Each column of ``plan`` with its storage type (asked of DuckDB once per plan)."""
        types = self._types.get(plan.regex)
        if types is None:
            described = self.cur.execute(f"DESCRIBE {self._split(raw, plan, path)}").fetchall()
            kind = {r[0]: r[1] for r in described}
            types = self._types[plan.regex] = [(name, convert.storage_type(kind[name])) for name, _ in plan.columns]
        return types

    def _two_passes(self, raw: RawLines, plan: SqlPlan, path: str, odd: list[tuple[int, str]]) -> Staged:
        """The block split and converted into a temp table, then inserted into the store from it
        (which fields have values is known before they are added); the odd lines go to ``odd``."""
        table = self._table()
        self.cur.execute(
            f"CREATE TEMP TABLE {table} AS SELECT n, ok, CASE WHEN ok IS NOT TRUE THEN line END AS line, "
            f"{', '.join(ident(name) for name, _ in plan.columns)} FROM ({self._split(raw, plan, path)})"
        )
        try:
            odd += self.cur.execute(
                f"SELECT n, line FROM {table} WHERE ok IS NOT TRUE AND line IS NOT NULL ORDER BY n"
            ).fetchall()
            staged = self._written(table, [name for name, _ in plan.columns])
            if staged is None:
                fields = ", ".join(ident(name) for name, _ in plan.columns)
                source = f"(SELECT n AS {LINE_KEY}, {fields} FROM {table} WHERE ok)"
                staged = self._stage_relation(source, convert.parse_type(self._describe(source)), path)
            self._settled.add(plan.regex)
            return staged
        finally:
            self.cur.execute(f"DROP TABLE IF EXISTS {table}")

    def _all_lines(self, raw: RawLines, path: str) -> list[tuple[int, str]]:
        with open(path, "rb") as fh:
            return [(n + raw.first_line - 1, line) for n, line in numbered_lines(io.BytesIO(fh.read()))]

    def _in_python(self, raw: RawLines, lines: list[tuple[int, str]]) -> Staged:
        """Parse ``lines`` with the format's Python parser and stage its events as JSON lines."""
        assert raw.compiled is not None and raw.file_time is not None
        return self.staged_items(raw.compiled.parse(lines, raw.file_time), raw.tag, raw.fmt)
