"""JSON lines into a staging table, exactly, at DuckDB's parsing speed.

Fast path: DuckDB's ``read_json`` reads the block with explicit columns (the dataset's
known fields plus those found in a small sample). Explicit columns silently drop keys
they do not name, so a byte-level check proves nothing was dropped: every key in the
block is a ``":`` token, and the tokens the typed rows account for must equal the
tokens in the raw bytes (null-valued keys excepted: they carry no value to lose). Any
difference, a parse error, or a row without a readable time sends the block down the
exact path, which validates each line, numbers it and lets DuckDB detect types over
the whole block. See docs/storage.md, "Ingest".
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import orjson

from rootsift.ingest import convert
from rootsift.ingest.rejects import Reject
from rootsift.ingest.timefield import TimeSpec, detect_format, pick_field
from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal, path_expr

LINE_KEY = "__rootsift_line__"
SAMPLE_ROWS = 2048
SUSPECT = (b'" :', b"\\u00")


@dataclass(frozen=True)
class BlockStats:
    """Byte-level counts of a block of JSON lines, for the fast path's key check, and
    the block written to a file for DuckDB (``path``; the reader deletes it)."""

    key_tokens: int
    null_tokens: int
    suspect: bool
    path: str | None = None

    @classmethod
    def of(cls, block: bytes, tmp_dir: str | None = None) -> BlockStats:
        nulls = block.count(b'":null') + block.count(b'": null') if b"null" in block else 0
        suspect = any(s in block for s in SUSPECT)
        path = None if suspect or tmp_dir is None else _write_file(block, tmp_dir)
        return cls(block.count(b'":'), nulls, suspect, path)


@dataclass
class Staged:
    """A block turned into the temp table ``table``, ready for Backend.append_stage."""

    table: str
    rows: int
    span: tuple[datetime | None, datetime | None]
    new_fields: list[FieldInfo]
    rejects: list[Reject] = field(default_factory=list)
    exact: bool = False


class JsonLinesReader:
    """Stages blocks of JSON lines for one dataset; keeps the time spec across blocks."""

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
        self._n = 0

    def stage(self, block: bytes, first_line: int, stats: BlockStats | None = None) -> Staged:
        """Stage one block of complete lines; lines that cannot be events come back as rejects."""
        stats = stats or BlockStats.of(block, self.tmp_dir)
        if stats.suspect or stats.path is None:
            return self._exact(block, first_line)
        path = stats.path
        try:
            # Known fields first (no type sampling); a sample only when the block has new keys.
            for sample in (False, True) if self.time is not None else (True,):
                staged = self._fast(path, stats, sample)
                if staged is not None:
                    return staged
            return self._exact(block, first_line)
        finally:
            os.unlink(path)

    # -- fast path -----------------------------------------------------------------
    def _fast(self, path: str, stats: BlockStats, sample: bool) -> Staged | None:
        try:
            if sample:
                detected = convert.parse_type(
                    self._describe(
                        f"read_json({literal(path)}, sample_size={SAMPLE_ROWS}, map_inference_threshold=-1, "
                        "format='newline_delimited')"
                    )
                )
                time = self._time_spec(detected, path)
            else:
                detected = convert.Node()
                assert self.time is not None
                time = self.time
            tree = convert.merge_detected(convert.tree_from_fields(self.fields), detected)
            tree.children.pop(time.field, None)
            spec = convert.columns_spec(tree)[:-1]
            spec += (", " if tree.children else "") + f"{literal(time.field)}: {literal(time.read_type)}}}"
            source = f"read_json({literal(path)}, columns={spec}, format='newline_delimited')"
            table = self._table()
            leaves = tree.leaves()
            names = self._names(leaves)
            items = [f"{time.sql(path_expr('src', [time.field]), time.read_type)} AS {ident(TIME_COLUMN)}"]
            items += [
                f"{'CAST(' + path_expr('src', p) + ' AS TIMESTAMP)' if t == 'TIMESTAMP' else path_expr('src', p)} "
                f"AS {ident(n)}"
                for (p, t), n in zip(leaves, names)
            ]
            if time.read_type == "VARCHAR":
                items.append(f"{path_expr('src', [time.field])} AS {ident('__time_text__')}")
            self.cur.execute(f"CREATE OR REPLACE TEMP TABLE {table} AS SELECT {', '.join(items)} FROM {source} src")
        except duckdb.Error:
            return None
        counts = self._counts(table, leaves, names, tree, time)
        rows, bad_time, typed, lo, hi = counts[:5]
        nonnull = counts[5:]
        want = stats.key_tokens - stats.null_tokens
        if not bad_time and want > typed:
            # Strings may hold '":' (embedded JSON, arrays as text): count those too.
            typed += self._string_tokens(table, leaves, names)
        if bad_time or want != typed:
            self.cur.execute(f"DROP TABLE {table}")
            return None
        keep = [n for (p, t), n, c in zip(leaves, names, nonnull) if c or n in self.fields]
        drop = [n for n in names if n not in keep] + (["__time_text__"] if time.read_type == "VARCHAR" else [])
        for col in drop:
            self.cur.execute(f"ALTER TABLE {table} DROP COLUMN {ident(col)}")
        new = [FieldInfo(n, t, p) for (p, t), n in zip(leaves, names) if n in keep and n not in self.fields]
        return self._done(Staged(table, rows, (lo, hi), new))

    def _counts(
        self, table: str, leaves: list[tuple[list[str], str]], names: list[str], tree: convert.Node, time: TimeSpec
    ) -> tuple[Any, ...]:
        """Row count, unreadable times, key tokens the typed rows account for, time span, non-nulls."""
        time_col = TIME_COLUMN if time.read_type == "DOUBLE" else "__time_text__"
        parts = [f"count({ident(n)})" for n in names] + [f"count({ident(time_col)})"]
        for spath in tree.structs():
            below = [ident(n) for (p, t), n in zip(leaves, names) if p[: len(spath)] == spath]
            if below:
                parts.append(f"count(*) FILTER (WHERE {' OR '.join(f'{b} IS NOT NULL' for b in below)})")
        ts = ident(TIME_COLUMN)
        nonnull = "".join(f", count({ident(n)})" for n in names)
        row = self.cur.execute(
            f"SELECT count(*), count(*) - count({ts}), {' + '.join(parts)}, min({ts}), max({ts}){nonnull} FROM {table}"
        ).fetchone()
        assert row is not None
        return tuple(row)

    def _string_tokens(self, table: str, leaves: list[tuple[list[str], str]], names: list[str]) -> int:
        """Key tokens inside string values ('":' minus '":null'), which the raw bytes also count."""
        parts = []
        for (_, t), n in zip(leaves, names):
            if t == "VARCHAR":
                col = ident(n)
                parts.append(
                    f"coalesce(sum((strlen({col}) - strlen(replace({col}, '\":', ''))) // 2 "
                    f"- (strlen({col}) - strlen(replace({col}, '\":null', ''))) // 6) "
                    f"FILTER (WHERE contains({col}, '\":')), 0)"
                )
        if not parts:
            return 0
        row = self.cur.execute(f"SELECT {' + '.join(parts)} FROM {table}").fetchone()
        return int(row[0]) if row else 0

    # -- exact path ----------------------------------------------------------------
    def _exact(self, block: bytes, first_line: int) -> Staged:
        rejects: list[Reject] = []
        lines: list[bytes] = []
        for offset, line in enumerate(block.split(b"\n")):
            number = first_line + offset
            text = line.strip()
            if not text:
                continue
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                rejects.append(Reject(number, f"invalid JSON: {exc}", line.decode("utf-8", "replace")))
                continue
            if not isinstance(obj, dict):
                rejects.append(
                    Reject(number, f"not a JSON object but {type(obj).__name__}", line.decode("utf-8", "replace"))
                )
                continue
            inner = text[1:].lstrip()
            sep = b"" if inner.startswith(b"}") else b","
            lines.append(b'{"' + LINE_KEY.encode() + b'":' + str(number).encode() + sep + inner)
        staged = self._exact_lines(lines, rejects)
        staged.rejects = sorted(rejects + staged.rejects, key=lambda r: r.line)
        staged.exact = True
        return staged

    def _exact_lines(self, lines: list[bytes], rejects: list[Reject]) -> Staged:
        if not lines:
            return self._empty()
        path = self._write(b"\n".join(lines) + b"\n")
        try:
            return self._exact_file(path)
        except duckdb.Error as exc:
            if len(lines) == 1:
                number = int(orjson.loads(lines[0])[LINE_KEY])
                text = lines[0].decode("utf-8", "replace")
                rejects.append(Reject(number, f"unreadable: {str(exc).splitlines()[0]}", text))
                return self._empty()
            half = len(lines) // 2
            a, b = self._exact_lines(lines[:half], rejects), self._exact_lines(lines[half:], rejects)
            return self._union(a, b)
        finally:
            os.unlink(path)

    def _exact_file(self, path: str) -> Staged:
        source = f"read_json({literal(path)}, sample_size=-1, map_inference_threshold=-1, format='newline_delimited')"
        detected = convert.parse_type(self._describe(source))
        return self._stage_relation(source, detected, path)

    def _stage_relation(self, source: str, detected: convert.Node, path: str) -> Staged:
        """Stage every row of ``source`` (which has a ``LINE_KEY`` column), converting to catalog types."""
        time = self._time_spec(detected, path)
        src_node = detected.children.pop(time.field, None)
        src_time = src_node if src_node is not None and src_node.type is not None else convert.Node(type="JSON")
        time_expr = path_expr("src", [time.field]) if src_node is not None else "CAST(NULL AS JSON)"
        line_node = detected.children.pop(LINE_KEY)
        assert line_node.type is not None
        catalog = {tuple(f.path): f for f in self.fields.values()}
        taken = {n: f.path for n, f in self.fields.items()}
        items = [
            f"{time.sql(time_expr, src_time.type or 'JSON')} AS {ident(TIME_COLUMN)}",
            f"src.{ident(LINE_KEY)} AS {ident(LINE_KEY)}",
            f"{convert.as_text(time_expr, src_time.type or 'JSON')} AS __time_text__",
        ]
        new: list[FieldInfo] = []
        for p, t in detected.leaves():
            known = catalog.get(tuple(p))
            if known is None:
                name = convert.display_name(p, taken)
                taken[name] = p
                target = "VARCHAR" if t == "JSON" else convert.storage_type(t)
                known = FieldInfo(name, target, p)
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
    def _time_spec(self, detected: convert.Node, path: str) -> TimeSpec:
        if self.time is None:
            name = pick_field(list(detected.children), self.time_field)
            self.time = TimeSpec(name, detect_format(self.cur, self._sample(path, name), self.time_format))
        return self.time

    def _sample(self, path: str, name: str) -> list[str]:
        """Values of the time field from the start of the staged file, as text."""
        return _sample_values(path, name)

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
        return staged

    def _table(self) -> str:
        self._n += 1
        return f"stage_{self._n}"

    def _write(self, data: bytes) -> str:
        return _write_file(data, self.tmp_dir)

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


def _sample_values(path: str, name: str, limit: int = 1000) -> list[str]:
    """Up to ``limit`` values of top-level field ``name`` from the first lines of a JSON-lines file."""
    values: list[str] = []
    with open(path, "rb") as fh:
        for line in fh:
            if len(values) >= limit:
                break
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            value = obj.get(name) if isinstance(obj, dict) else None
            if value is not None:
                values.append(value if isinstance(value, str) else orjson.dumps(value).decode())
    return values


def _write_file(data: bytes, tmp_dir: str) -> str:
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=tmp_dir)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    return path
