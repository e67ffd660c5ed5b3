"""Blocks of a MySQL slow log, each read by DuckDB (``formats/mysql_slow_sql``) or the parser.

The reader thread cuts the log into blocks of whole entries (``entry_blocks``: before a
``# Time:`` line that follows a statement line, where the parser would finish the entry
before it anyway) and writes each to a file (``SlowLines``). ``stage_slow`` reads a block
in one query over its lines into a table of entries; when every entry is in the common
shape, their fingerprints are computed once per statement shape (``MySQLCache``'s key,
as the parser does) and the events are inserted into the store. Any other block is parsed
by the Python parser, which carries what later entries inherit from block to block
(``SlowLogBlocks``), so each entry gives the event or reject it gives in a whole-file parse,
with its line number.

Off by default (``textrun.SQL_SLOW_LOG``): on two cores it measured no faster than the
parser, whose thread overlaps DuckDB's insert (docs/adr/0016-text-formats-in-one-duckdb-pass.md).
Assumption: DuckDB keeps a file's line order through a projection (as ``textlines.numbered``).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import duckdb
import orjson

from rootsift.ingest import convert
from rootsift.ingest.formats.base import TIME_KEY, numbered_lines
from rootsift.ingest.formats.mysql_slow import SlowLogBlocks
from rootsift.ingest.formats.mysql_slow_sql import CHECK, FIELDS, KEY, entries, lines
from rootsift.ingest.jsonl import BlockStats
from rootsift.ingest.staging import LINE_KEY, Staged, write_file
from rootsift.ingest.textlines import LINES
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    from rootsift.ingest.textsql import TextLinesReader

_CACHE_LIMIT = 2_000
"""``MySQLCache``'s ``max_len``: longer statements are fingerprinted one by one."""
_VISIBLE = re.compile(rb"[!-~]")
_SHAPE = (
    f"CASE WHEN length(statement) > {_CACHE_LIMIT} OR contains(statement, '/*!') "
    r"OR regexp_matches(left(statement, 30), '^[ \t\n\r\x0b\x0c]*(?i:call|administrator command)') "
    f"THEN 'statement:' || statement ELSE 'shape:' || {KEY} END"
)
"""SQL: what one fingerprint is computed for: ``MySQLCache``'s key (the statement with every
digit made 0) where it caches, else the statement itself (a superset of those it does not
cache: long ones, ``/*!``, ``CALL`` and admin commands)."""


@dataclass
class SlowLines(BlockStats):
    """A block of a slow log's lines in the file ``path``, and how it joins its neighbours."""

    first_line: int = 1
    state: SlowLogBlocks | None = None
    tag: str | None = None
    """The file's name for its rejects (directory input), or None."""
    fmt: str = ""
    line_count: int = 0
    """The number of lines in the block (of ``\\n``: the block ends with one)."""
    starts_entry: bool = True
    """The block starts where an entry starts (or at the input's start)."""
    ends_entry: bool = True
    """The block ends where an entry ends (or at the input's end)."""
    last: bool = False
    """The input's last block."""
    whole_in_python: bool = False
    """The block holds ``\\r``: DuckDB's reader would split lines where Python does not."""


def entry_blocks(blocks: Iterator[tuple[bytes, int]], most: int) -> Iterator[tuple[bytes, int, bool, bool, bool]]:
    """Blocks of whole lines re-cut into blocks of whole entries: (bytes, first line number,
    starts at an entry, ends at one, is the last). A block that finds no place to cut by
    ``4 * most`` bytes is cut at a line's end (the parser continues its entry in the next
    block). The last block may be empty."""
    pending, first, starts = b"", 1, True
    for block, number in blocks:
        if not pending:
            first = number
        data = pending + block if pending else block
        cut = _entry_start(data, len(pending))
        if cut <= 0:
            if len(data) < 4 * most:
                pending = data
                continue
            yield data, first, starts, False, False
            pending, starts = b"", False
            continue
        yield data[:cut], first, starts, True, False
        first += data.count(b"\n", 0, cut)
        pending, starts = data[cut:], True
    yield pending, first, starts, True, True


def _entry_start(data: bytes, searched: int) -> int:
    """The offset of the last ``# Time:`` line of ``data`` whose line before holds a visible
    character and does not start with ``#`` (the parser finishes the entry there), past
    ``searched`` bytes already looked at; 0 when there is none."""
    end = len(data)
    while (at := data.rfind(b"\n# Time:", max(searched - 8, 0), end)) >= 0:
        before = data[data.rfind(b"\n", 0, at) + 1 : at]
        if before[:1] != b"#" and _VISIBLE.search(before):
            return at + 1
        end = at
    return 0


def stage_slow(reader: TextLinesReader, raw: SlowLines) -> Staged:
    """Store one block of a slow log (see the module): by DuckDB when it can, else the parser."""
    assert raw.path is not None and raw.state is not None
    state = raw.state
    if raw.whole_in_python or not (raw.starts_entry and raw.ends_entry and state.at_entry_start):
        return _in_python(reader, raw, raw.path)
    table = reader._table()
    relation = f"(SELECT line FROM {LINES.format(path=literal(raw.path))})"
    last = raw.first_line + raw.line_count - 1
    try:
        reader.cur.execute(f"CREATE TEMP TABLE {table} AS {lines(relation, raw.first_line, last)}")
    except duckdb.InvalidInputException:
        return _in_python(reader, raw, raw.path)  # not text as DuckDB reads it (invalid UTF-8, \x01)
    try:
        row = reader.cur.execute(CHECK.replace("$table", table).replace("$last", str(last))).fetchone()
        assert row is not None
        odd, firsts, count, ends_in_statement, restarted = row
        if odd or not count or firsts != count or not ends_in_statement:
            return _in_python(reader, raw, raw.path)
        staged = _in_duckdb(reader, raw, state, table, None if restarted else state.db)
        return staged if staged is not None else _in_python(reader, raw, raw.path)
    finally:
        reader.cur.execute(f"DROP TABLE IF EXISTS {table}")


def _in_duckdb(
    reader: TextLinesReader, raw: SlowLines, state: SlowLogBlocks, marked: str, db: str | None
) -> Staged | None:
    """The block's entries as events in the store, fingerprinted once per shape; None when
    one is not ``ok`` (nothing stored). ``db``: the database inherited from before the block."""
    cur = reader.cur
    events = reader._table()
    fields = ", ".join(f"{sql} AS {ident(name)}" for name, sql in FIELDS)
    # the database of the entry's own "use db;" or of the last one before it (in the block, or before)
    inherited = "last_value(use_db IGNORE NULLS) OVER (ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    cur.execute(
        f"CREATE TEMP TABLE {events} AS SELECT *, {_SHAPE} AS k FROM (SELECT n, ok, use_db, {fields}, "
        f"coalesce({inherited}, {literal(db) if db else 'NULL'}) AS db FROM ({entries(marked)}))"
    )
    try:
        row = cur.execute(f"SELECT count(*) FILTER (WHERE NOT ok) FROM {events}").fetchone()
        if row is None or row[0]:
            return None
        ends = cur.execute(
            f"SELECT arg_min({ident(TIME_KEY)}, n), arg_max({ident(TIME_KEY)}, n), arg_max(db, n) FROM {events}"
        )
        first, last, db = ends.fetchone() or (None, None, db)
        prints = _fingerprints(reader, events, state)
        try:
            columns = [name for name, _ in FIELDS] + ["db", "fingerprint"]
            # the fingerprints joined as the rows are inserted, in the log's order
            source = f"(SELECT e.*, f.fingerprint FROM {events} AS e JOIN {prints} AS f USING (k) ORDER BY e.n)"
            staged = reader._written(events, columns, source)
            if staged is None:
                relation = f"(SELECT n AS {LINE_KEY}, {', '.join(ident(c) for c in columns)} FROM {source})"
                staged = reader._stage_relation(
                    relation, convert.parse_type(reader._describe(relation)), raw.path or ""
                )
        finally:
            cur.execute(f"DROP TABLE IF EXISTS {prints}")
    finally:
        cur.execute(f"DROP TABLE IF EXISTS {events}")
    assert isinstance(first, datetime) and isinstance(last, datetime)  # the block has entries
    waiting = state.read_elsewhere(first.replace(tzinfo=UTC), last.replace(tzinfo=UTC), db)
    if not waiting:
        return staged
    return reader._with_rest(staged, reader.staged_items(waiting, raw.tag, raw.fmt))


def _fingerprints(reader: TextLinesReader, events: str, state: SlowLogBlocks) -> str:
    """A table ``(k, fingerprint)``: the fingerprint of each ``k`` of ``events`` (see ``_SHAPE``),
    from its first statement."""
    rows = reader.cur.execute(f"SELECT k, arg_min(statement, n) FROM {events} GROUP BY k").fetchall()
    fingerprint = state.fingerprint
    data = b"".join(
        orjson.dumps({"k": k, "fingerprint": fingerprint(text)}, option=orjson.OPT_APPEND_NEWLINE) for k, text in rows
    )
    path = write_file(data, reader.tmp_dir)
    table = reader._table()
    try:
        reader.cur.execute(
            f"CREATE TEMP TABLE {table} AS SELECT * FROM read_json({literal(path)}, format='newline_delimited', "
            "columns={'k': 'VARCHAR', 'fingerprint': 'VARCHAR'})"
        )
    finally:
        os.unlink(path)
    return table


def _in_python(reader: TextLinesReader, raw: SlowLines, path: str) -> Staged:
    """The block parsed by the Python parser, which continues from the blocks before."""
    assert raw.state is not None
    with open(path, "rb") as fh:
        data = fh.read()
    lines = ((n + raw.first_line - 1, line) for n, line in numbered_lines(io.BytesIO(data)))
    items = raw.state.parse(lines if data else iter(()), entry_ends=raw.ends_entry, last=raw.last)
    return reader.staged_items(items, raw.tag, raw.fmt)
