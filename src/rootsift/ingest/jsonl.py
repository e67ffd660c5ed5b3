"""JSON lines into a staging table, exactly, at DuckDB's parsing speed.

Fast path: DuckDB's ``read_json`` reads the block with explicit columns (the dataset's
known fields plus those found in a small sample). Explicit columns silently drop keys
they do not name, so a byte-level check proves nothing was dropped: every key in the
block is a ``":`` token, and the tokens the typed rows account for must equal the
tokens in the raw bytes (null-valued keys excepted: they carry no value to lose). Any
difference, a parse error, or a row without a readable time sends the block down the
exact path, which validates each line, numbers it and lets DuckDB detect types over
the whole block. See docs/storage.md, "Ingest".

Blocks the count cannot vouch for (a quote followed by a space outside a string, as in
``"key" : value``; an empty key) take the exact path directly. The counts are in
``blockstats``. In plain input the reader parses number fields as DOUBLE itself; the
0s and 1s it wrote there (a boolean becomes one) are checked line by line in ``vouch``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import duckdb
import orjson

from rootsift.errors import UsageError
from rootsift.ingest import convert
from rootsift.ingest.blockstats import BlockStats, LineStarts, is_gzip, open_decompressed, unreadable_gzip
from rootsift.ingest.jsonexact import ExactJsonLines
from rootsift.ingest.staging import Staged
from rootsift.ingest.vouch import vouch
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal, path_expr
from rootsift.store.writer import ROW_COLUMN, SegmentWriter, Verified

SUSPECTS_CHECKED = 10_000
"""Most 0s and 1s in numbers the reader parsed as DOUBLE that are checked line by line
(``vouch``); a block with more is read again with those fields as text, cast exactly."""
NUMBER_REFUSED = "Failed to cast value to numerical"
"""DuckDB's reader on a value of a field it parses as a number that it cannot read."""
SAMPLE_ROWS = 2048
WHOLE_FILE_SAMPLE = 4096
HEAD_BYTES = 16 << 20
"""Most bytes read for the whole-file sample (``JsonLinesReader._head``)."""
HEAD_READ = 1 << 20
"""Bytes read at a time for the whole-file sample."""

__all__ = ["BlockStats", "JsonLinesReader"]  # BlockStats: runner.py imports it from here


class JsonLinesReader(ExactJsonLines):
    """Stages blocks of JSON lines: a fast path checked byte by byte, the exact path
    (``ExactJsonLines``) otherwise."""

    writer: SegmentWriter | None = None
    """Where the fast path writes; set by the pipeline. Without one, blocks take the exact path."""
    _too_wide = False
    """The last fast attempt found more fields than the dataset's limit allows."""
    _cast: frozenset[tuple[str, ...]] = frozenset()
    """Number fields read as text and cast: the reader's DOUBLE could not be vouched for."""
    _parse_numbers = False
    """Whether the reader parses number fields as DOUBLE itself (checked by ``vouch.py``);
    False once the reader refused a number field's text. Off by default: with it, a file
    read as one block held memory in proportion to its size (a 1.5 GB file peaked at
    1.2 GiB against 0.33 GiB with the numbers cast; ADR 0005 amendment), which breaks
    the bounded-memory promise, and it measured no faster on a quiet machine."""
    _retry = False
    """The last fast attempt failed on a parsed number the cast may read: worth another."""

    def stage(self, block: bytes | None, first_line: int, stats: BlockStats | None = None) -> Staged:
        """Stage one block of complete lines; lines that cannot be events come back as rejects.

        ``block`` may be None when ``stats.path`` holds it. On the fast path the block is
        written and committed here (``Staged.committed``).
        """
        if stats is None:
            assert block is not None
            stats = BlockStats.of(block, self.tmp_dir)
        path = stats.path
        assert path is not None
        try:
            if not stats.suspect and self.writer is not None:
                # Known fields first (no type sampling); a sample when the block has new keys;
                # types over the whole block when a new key is too rare for the sample. Each
                # field found joins the catalog, so later blocks pass on the first try.
                for sample_rows in (0, SAMPLE_ROWS, -1) if self.time is not None else (SAMPLE_ROWS, -1):
                    staged = self._fast(
                        path, lambda: stats, self.writer, sample_rows, lines_counted=stats.lines is not None
                    )
                    if staged is not None:
                        return staged
                    if self._too_wide:  # keys past the field limit: only the exact path moves them
                        break
            with open(path, "rb") as fh:
                return self._exact(fh.read() if block is None else block, first_line)
        finally:
            os.unlink(path)

    def stage_whole(self, path: str, stats: Callable[[], BlockStats]) -> Staged | None:
        """Write a whole file (plain or gzip) in one checked transaction, reading it in place.

        ``stats`` gives the file's byte counts (computed beside the insert). None when the
        check fails: nothing was written, and the caller goes block by block.
        """
        if self.writer is None:
            return None
        sample = self._head(path)
        try:
            compression = "gzip" if is_gzip(path) else "none"
            self._retry = False
            staged = self._fast(path, stats, self.writer, WHOLE_FILE_SAMPLE, compression, sample)
            if staged is None and self._retry:
                # A number the reader parsed could not be vouched for, yet the cast may read
                # it (too many suspects, rows not mapped to lines): once more, casting it.
                staged = self._fast(path, stats, self.writer, WHOLE_FILE_SAMPLE, compression, sample)
            return staged
        finally:
            if sample is not None:
                os.unlink(sample)

    def _head(self, path: str) -> str | None:
        """The file's first ``WHOLE_FILE_SAMPLE`` lines, in a file of their own: DuckDB
        detects types there rather than reading (and, for gzip, inflating) a whole buffer
        of the input (0.4-0.6 s at 1M events on a busy machine). None when they are longer
        than ``HEAD_BYTES``."""
        head = bytearray()
        lines = 0
        try:
            with open_decompressed(path) as fh:
                # A MiB at a time, up to the lines wanted: 4096 lines are ~2 MB, and a .gz
                # is inflated only that far.
                while len(head) < HEAD_BYTES and lines < WHOLE_FILE_SAMPLE:
                    more = fh.read(min(HEAD_READ, HEAD_BYTES - len(head)))
                    if not more:
                        break
                    head += more
                    lines += more.count(b"\n")
        except unreadable_gzip():  # cut short or corrupt: DuckDB's read of the file says why
            return None
        end = -1
        for _ in range(WHOLE_FILE_SAMPLE):
            end = head.find(b"\n", end + 1)
            if end < 0:
                break
        if end < 0:
            end = head.rfind(b"\n") if len(head) == HEAD_BYTES else len(head) - 1
        return self._write(bytes(head[: end + 1])) if end >= 0 else None

    # -- fast path -----------------------------------------------------------------
    def _fast(
        self,
        path: str,
        stats_of: Callable[[], BlockStats],
        writer: SegmentWriter,
        sample_rows: int,
        compression: str = "none",
        sample: str | None = None,
        lines_counted: bool = True,
    ) -> Staged | None:
        """Write the block through the checked insert; ``sample_rows`` 0 reads only known fields.

        ``compression`` is DuckDB's name for how the file at ``path`` is compressed; types
        are detected in ``sample`` (plain JSON lines) when given, else in ``path``."""
        options = f"format='newline_delimited', compression={literal(compression)}"
        try:
            if sample_rows:
                head, how = (sample, "compression='none'") if sample else (path, f"compression={literal(compression)}")
                detected = convert.parse_type(
                    self._describe(
                        f"read_json({literal(head)}, sample_size={sample_rows}, map_inference_threshold=-1, "
                        f"format='newline_delimited', {how})"
                    )
                )
                time = self._time_spec(detected, head)
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
        self._too_wide = len(tree.leaves()) > self.keys.limit
        if self._too_wide:
            return None
        leaves = tree.leaves()
        # Numbers the reader parses as DOUBLE itself where it can be checked (a plain file);
        # the rest are read as text and cast exactly (a value that does not cast becomes
        # NULL, so the key count below sees it as missing).
        direct = self._direct_paths(tree, leaves, sample, compression if lines_counted else "unknown")
        spec = convert.columns_spec(convert.read_tree(tree, direct))[:-1]
        # RFC 3339 times are parsed by the reader itself; one it cannot read fails the block
        # over to the exact path, which also accepts a lower-case 't' or 'z'.
        time_type = "TIMESTAMPTZ" if time.format == "rfc3339" else "VARCHAR"
        spec += (", " if tree.children else "") + f"{literal(time.field)}: {literal(time_type)}}}"
        names = self._names(leaves)
        items = [f"{time.sql(path_expr('src', [time.field]), time_type)} AS {ident(TIME_COLUMN)}"]
        for (p, t), n in zip(leaves, names):
            col = path_expr("src", p)
            number = col if tuple(p) in direct else convert.finite(f"TRY_CAST({col} AS DOUBLE)")
            cast = {"DOUBLE": number, "TIMESTAMP": f"CAST({col} AS TIMESTAMP)"}.get(t, col)
            items.append(f"{cast} AS {ident(n)}")
        select = f"SELECT {', '.join(items)} FROM read_json({literal(path)}, columns={spec}, {options}) src"
        columns = {TIME_COLUMN: "TIMESTAMP", **{n: t for (_, t), n in zip(leaves, names)}}
        new = [FieldInfo(n, t, p) for (p, t), n in zip(leaves, names) if n not in self.fields]

        parsed = [(tuple(p), n) for (p, _), n in zip(leaves, names) if tuple(p) in direct]

        def verify(rel: str) -> Verified | None:
            row = self._counts(rel, leaves, names, tree, [n for _, n in parsed])
            rows, bad_time, typed, lo, hi, *doubts = row
            stats = stats_of()
            if stats.suspect or bad_time:
                return None
            # Typed rows accounting for every token leaves no room for a dropped key; only
            # when they fall short are strings and nulls told apart in the raw bytes.
            if typed != stats.key_tokens and typed != stats.keys_with_values():
                return None
            if not self._vouched(rel, path, rows, parsed, doubts, stats.lines):
                return None
            return Verified(rows, (lo, hi))

        verified = writer.write_checked(select, columns, new, verify)
        if verified is None:
            if direct and writer.error is not None and self._cast_reads(writer.error):
                self._parse_numbers, self._retry = False, True  # text only the cast reads
            return None
        return self._done(Staged("", verified.rows, verified.span, new, committed=True))

    def _cast_reads(self, error: duckdb.Error) -> bool:
        """Whether the reader refused a value of a number field that the exact cast reads
        (``" 7 "``): then casting is worth another try. A value nothing reads (``"abc"``)
        fails either way. Only chooses whether to try again; the check decides what is kept."""
        text = str(error)
        if NUMBER_REFUSED not in text:
            return False
        value = text.split(NUMBER_REFUSED, 1)[1].lstrip(": ").splitlines()[0].strip()
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(parsed, str):
            return False
        row = self.cur.execute("SELECT isfinite(TRY_CAST(? AS DOUBLE))", [parsed]).fetchone()
        return bool(row and row[0])

    def _direct_paths(
        self, tree: convert.Node, leaves: list[tuple[list[str], str]], sample: str | None, compression: str
    ) -> frozenset[tuple[str, ...]]:
        """Number fields the reader parses as DOUBLE itself: not those a check failed on
        before (``_cast``), nor those whose values in ``sample`` (the file's first lines)
        hold a 0, a 1 or a non-finite number (too many suspects to vouch for; vouch.py).
        Input whose line starts are not counted (compressed, or staged from memory) is cast:
        vouching finds suspect rows by them."""
        if compression != "none" or not self._parse_numbers:
            return frozenset()
        paths = frozenset(tuple(p) for p, t in leaves if t == "DOUBLE") - self._cast
        if sample is None or not paths:
            return paths
        source = f"read_json({literal(sample)}, columns={convert.columns_spec(convert.read_tree(tree, paths))}, "
        order = sorted(paths)
        cols = [path_expr("src", list(p)) for p in order]
        try:
            row = self.cur.execute(
                "SELECT "
                + ", ".join(f"count(*) FILTER (WHERE {c} IN (0, 1) OR NOT isfinite({c}))" for c in cols)
                + f" FROM {source}format='newline_delimited') src"
            ).fetchone()
        except duckdb.Error:  # a number field holds text in its first lines: cast them all
            return frozenset()
        assert row is not None
        return frozenset(p for p, n in zip(order, row) if n == 0)

    def _vouched(
        self,
        rel: str,
        path: str,
        rows: int,
        parsed: list[tuple[tuple[str, ...], str]],
        doubts: list[int],
        starts: LineStarts | None,
    ) -> bool:
        """Whether the numbers the reader parsed as DOUBLE are what the lines hold: a 0 or
        a 1 may have been ``false`` or ``true`` (checked line by line when there are few:
        vouch.py), a non-finite number belongs in ``#raw``. A field that fails is cast
        from then on (``_cast``)."""
        zero_one, infinite = doubts[0::2], doubts[1::2]
        doubtful = [(p, n) for (p, n), k, inf in zip(parsed, zero_one, infinite) if k or inf]
        if not doubtful:
            return True
        # Non-finite values and booleans fail the cast too (they go to #raw); too many
        # suspects, or rows not found by line, may well pass it.
        verdict: bool | None = None
        if not any(infinite) and sum(zero_one) <= SUSPECTS_CHECKED:
            cond = " OR ".join(f"{ident(n)} IN (0, 1)" for _, n in doubtful)
            found = self.cur.execute(
                f"SELECT {ident(ROW_COLUMN)}, {', '.join(ident(n) for _, n in doubtful)} FROM {rel} AS r WHERE {cond}"
            ).fetchall()
            suspects = [(int(r[0]), p) for r in found for (p, _), v in zip(doubtful, r[1:]) if v in (0.0, 1.0)]
            verdict = vouch(path, suspects, rows, starts)
            if verdict:
                return True
        self._retry = verdict is None and not any(infinite)
        self._cast = self._cast | {p for p, _ in doubtful}
        return False

    def _counts(
        self,
        rel: str,
        leaves: list[tuple[list[str], str]],
        names: list[str],
        tree: convert.Node,
        parsed: list[str],
    ) -> tuple[Any, ...]:
        """Rows, rows without a readable time, key tokens the typed rows account for, time
        span; then for each column in ``parsed``, its values that are 0 or 1 and that are
        not finite."""
        doubts = "".join(
            f", count(*) FILTER (WHERE {c} IN (0, 1)), count(*) FILTER (WHERE NOT isfinite({c}))"
            for c in map(ident, parsed)
        )
        parts = [f"count({ident(n)})" for n in names] + [f"count({ident(TIME_COLUMN)})"]
        for spath in tree.structs():
            below = [ident(n) for (p, _), n in zip(leaves, names) if p[: len(spath)] == spath]
            if below:
                parts.append(f"count(*) FILTER (WHERE {' OR '.join(f'{b} IS NOT NULL' for b in below)})")
        ts = ident(TIME_COLUMN)
        row = self.cur.execute(
            f"SELECT count(*), count(*) - count({ts}), {' + '.join(parts)}, min({ts}), max({ts}){doubts} FROM {rel} AS r"
        ).fetchone()
        assert row is not None
        return tuple(row)
