"""Rows a text format's Python parser gives, staged and stored beside the rows DuckDB reads.

``TextStager`` is the JSON-lines reader with what the readers of text formats DuckDB parses
(``textsql``: access logs; ``textslow``: slow logs) share: a parser's events staged as JSON
lines (``staged_items``), a block's rows checked into the store from a temp table
(``_written``), and the rows of the lines DuckDB did not read joined to its block's
(``_with_rest``): added to an uncommitted block, or kept back and committed once after the
input's last block (``_flush``; docs/adr/0016-text-formats-in-one-duckdb-pass.md, second
amendment).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rootsift.ingest import convert
from rootsift.ingest.formats.base import TIME_KEY, Item
from rootsift.ingest.jsonl import JsonLinesReader
from rootsift.ingest.rejects import Reject
from rootsift.ingest.staging import LINE_KEY, Staged
from rootsift.ingest.timefield import TimeSpec
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident
from rootsift.store.writer import Verified


class TextStager(JsonLinesReader):
    """The JSON-lines reader, with the staging the text formats DuckDB parses share (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deferred: list[Staged] = []
        """The staged rows of odd lines kept back until the input's last block (``textsql.DEFER_ROWS``)."""

    def _with_rest(self, staged: Staged, rest: Staged) -> Staged:
        """``staged`` and ``rest`` (the rows the Python parser gave for the same block) together."""
        if staged.committed:
            # the rest waits for the input's last block (``_flush``)
            staged.rejects = sorted(staged.rejects + rest.rejects, key=lambda r: r.line)
            staged.new_fields += rest.new_fields
            if rest.rows and self.writer is not None:
                self._deferred.append(rest)
            else:
                self.cur.execute(f"DROP TABLE IF EXISTS {rest.table}")
            return staged
        try:
            return self._absorbed(staged, rest)
        finally:
            self.cur.execute(f"DROP TABLE IF EXISTS {rest.table}")

    def _flush(self) -> None:
        """Queue the odd lines' rows kept back on the writer (committed after this block)."""
        deferred, self._deferred = self._deferred, []
        for rest in deferred:
            assert self.writer is not None  # only deferred with a writer
            self.writer.append(rest.table, rest.new_fields, rest.rows, rest.span)

    def _written(self, table: str, columns: list[str], source: str | None = None) -> Staged | None:
        """The ``columns`` of the rows of ``table`` where ``ok`` (events DuckDB read), inserted
        into the store in one checked statement (committed), when every column has its catalog
        type already or is new; None otherwise (or when there is no writer), and
        ``_stage_relation`` converts them instead. ``source``, a relation with the columns of
        ``table`` and more, is what is inserted when given; a column only it has is never all NULL."""
        if self.writer is None or (self.time_field, self.time_format) != (TIME_KEY, "rfc3339"):
            return None
        source = source or table
        types = {r[0]: r[1] for r in self.cur.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
        leaves = [([name], convert.storage_type(types[name])) for name in columns if name != TIME_KEY]
        names = self._names(leaves)
        if any(n in self.fields and self.fields[n].type != t for (_, t), n in zip(leaves, names)):
            return None
        have = {r[0] for r in self.cur.execute(f"DESCRIBE {table}").fetchall()}
        counted = [p[0] for p, _ in leaves if p[0] in have]
        row = self.cur.execute(
            "SELECT " + ", ".join([f"count({ident(c)})" for c in counted] or ["0"]) + f" FROM {table} WHERE ok"
        ).fetchone()
        counts = dict(zip(counted, row or ()))
        kept = [(p, t, n) for (p, t), n in zip(leaves, names) if counts.get(p[0], 1) or n in self.fields]
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
            f"{select} FROM {source} WHERE ok", {TIME_COLUMN: "TIMESTAMP", **{n: t for _, t, n in kept}}, new, verify
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

    def staged_items(self, items: Iterable[Item], tag: str | None, fmt: str) -> Staged:
        """A parser's events (staged as JSON lines) and rejects (``tag``: the file's name for them)."""
        from rootsift.ingest.textrun import dumped, named  # textrun imports this module

        rejects: list[Reject] = []
        out: list[bytes] = []
        for item in items:
            if isinstance(item, Reject):
                rejects.append(Reject(item.line, named(item.reason, tag), item.text))
                continue
            number, event = item
            data = dumped(event, fmt)
            if isinstance(data, str):
                rejects.append(Reject(number, named(data, tag), ""))
                continue
            inner = data[1:].rstrip(b"\n")
            sep = b"" if inner.startswith(b"}") else b","
            out.append(b'{"' + LINE_KEY.encode() + b'":' + str(number).encode() + sep + inner)
        staged = self._exact_lines(out, rejects)
        staged.rejects = sorted(rejects + staged.rejects, key=lambda r: r.line)
        return staged
