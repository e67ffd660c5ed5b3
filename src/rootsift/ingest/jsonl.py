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
from dataclasses import dataclass
from typing import Any

import duckdb
import orjson

from rootsift.errors import UsageError
from rootsift.ingest import convert
from rootsift.ingest.rejects import Reject
from rootsift.ingest.staging import LINE_KEY, Staged, Stager, write_file
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal, path_expr
from rootsift.store.writer import SegmentWriter, Verified

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
        path = None if suspect or tmp_dir is None else write_file(block, tmp_dir)
        return cls(block.count(b'":'), nulls, suspect, path)


class JsonLinesReader(Stager):
    """Stages blocks of JSON lines: a fast path checked byte by byte, an exact path otherwise."""

    writer: SegmentWriter | None = None
    """Where the fast path writes; set by the pipeline. Without one, blocks take the exact path."""

    def stage(self, block: bytes, first_line: int, stats: BlockStats | None = None) -> Staged:
        """Stage one block of complete lines; lines that cannot be events come back as rejects.

        On the fast path the block is written and committed here (``Staged.committed``).
        """
        stats = stats or BlockStats.of(block, self.tmp_dir)
        if stats.suspect or stats.path is None or self.writer is None:
            if stats.path is not None:
                os.unlink(stats.path)
            return self._exact(block, first_line)
        try:
            # Known fields first (no type sampling); a sample only when the block has new keys.
            for sample in (False, True) if self.time is not None else (True,):
                staged = self._fast(stats.path, stats, sample, self.writer)
                if staged is not None:
                    return staged
            return self._exact(block, first_line)
        finally:
            os.unlink(stats.path)

    # -- fast path -----------------------------------------------------------------
    def _fast(self, path: str, stats: BlockStats, sample: bool, writer: SegmentWriter) -> Staged | None:
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
        except (duckdb.Error, UsageError):
            # Unreadable for the fast path (a malformed line, no objects in the sample):
            # the exact path finds out which lines and why.
            return None
        tree = convert.merge_detected(convert.tree_from_fields(self.fields), detected)
        tree.children.pop(time.field, None)
        # Numbers are read as text and cast exactly: DuckDB's reader would turn true into 1.0.
        # A value that does not cast becomes NULL, so the key count below sees it as missing.
        spec = convert.columns_spec(convert.read_tree(tree))[:-1]
        spec += (", " if tree.children else "") + f"{literal(time.field)}: 'VARCHAR'}}"
        leaves = tree.leaves()
        names = self._names(leaves)
        items = [f"{time.sql(path_expr('src', [time.field]))} AS {ident(TIME_COLUMN)}"]
        for (p, t), n in zip(leaves, names):
            col = path_expr("src", p)
            cast = {"DOUBLE": f"TRY_CAST({col} AS DOUBLE)", "TIMESTAMP": f"CAST({col} AS TIMESTAMP)"}.get(t, col)
            items.append(f"{cast} AS {ident(n)}")
        select = (f"SELECT {', '.join(items)} FROM read_json({literal(path)}, columns={spec}, "
                  "format='newline_delimited') src")
        columns = {TIME_COLUMN: "TIMESTAMP", **{n: t for (_, t), n in zip(leaves, names)}}
        new = [FieldInfo(n, t, p) for (p, t), n in zip(leaves, names) if n not in self.fields]

        def verify(rel: str) -> Verified | None:
            row = self._counts(rel, leaves, names, tree)
            rows, bad_time, typed, lo, hi = row
            want = stats.key_tokens - stats.null_tokens
            if not bad_time and want > typed:
                # Strings may hold '":' (embedded JSON, arrays as text): count those too.
                typed += self._string_tokens(rel, leaves, names)
            return Verified(rows, (lo, hi)) if not bad_time and typed == want else None

        verified = writer.write_checked(select, columns, new, verify)
        if verified is None:
            return None
        return self._done(Staged("", verified.rows, verified.span, new, committed=True))

    def _counts(
        self, rel: str, leaves: list[tuple[list[str], str]], names: list[str], tree: convert.Node
    ) -> tuple[Any, ...]:
        """Rows, rows without a readable time, key tokens the typed rows account for, time span."""
        parts = [f"count({ident(n)})" for n in names] + [f"count({ident(TIME_COLUMN)})"]
        for spath in tree.structs():
            below = [ident(n) for (p, _), n in zip(leaves, names) if p[: len(spath)] == spath]
            if below:
                parts.append(f"count(*) FILTER (WHERE {' OR '.join(f'{b} IS NOT NULL' for b in below)})")
        ts = ident(TIME_COLUMN)
        row = self.cur.execute(
            f"SELECT count(*), count(*) - count({ts}), {' + '.join(parts)}, min({ts}), max({ts}) FROM {rel} AS r"
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
        row = self.cur.execute(f"SELECT {' + '.join(parts)} FROM {table} AS r").fetchone()
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

    def _sample(self, path: str, name: str) -> list[str]:
        return _sample_values(path, name)


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
