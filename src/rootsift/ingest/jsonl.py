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
``"key" : value``) take the exact path directly.
"""

from __future__ import annotations

import json
import mmap
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, cast

import duckdb
import numpy as np
import orjson

from rootsift.errors import UsageError
from rootsift.ingest import convert
from rootsift.ingest.rejects import Reject
from rootsift.ingest.sources import GZIP_MAGIC, read_full
from rootsift.ingest.staging import LINE_KEY, Staged, Stager, write_file
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal, path_expr
from rootsift.store.writer import SegmentWriter, Verified

SPACED_KEY = re.compile(rb'(?<!\\)"[ \t\r]+:')
"""A key written ``"key" :``: its colon does not follow the quote, so ``":`` misses it."""
SAMPLE_ROWS = 2048
WHOLE_FILE_SAMPLE = 4096


@dataclass
class BlockStats:
    """Byte-level counts of a block of JSON lines for the fast path's key check, and the
    file that holds the block (``path``).

    Every key ends in a ``":`` token. The typed rows must account for all of them, less
    two kinds that are not values to keep: tokens inside strings (a quote in a string is
    escaped, so they read ``\\":``) and null-valued keys outside strings. Those two are
    counted only when the typed rows fall short (``keys_with_values()``).
    """

    key_tokens: int
    suspect: bool
    path: str | None = None
    _with_values: int | None = None

    @classmethod
    def of(cls, block: bytes | bytearray, tmp_dir: str | None = None, end: int | None = None) -> BlockStats:
        """Count ``block[:end]`` and, given ``tmp_dir``, write it to a file there."""
        end = len(block) if end is None else end
        path = write_file(memoryview(block)[:end], tmp_dir) if tmp_dir is not None else None
        keys, spaced = _quote_pairs(block, 0, end)
        return cls(keys, _suspect(block, 0, end, spaced), path)

    @classmethod
    def of_file(cls, path: str, chunk: int = 32 << 20) -> BlockStats:
        """The same counts over a whole file, mapped rather than read (no copy); a gzip
        file is counted as it decompresses, one window at a time."""
        if _is_gzip(path):
            from isal import igzip_lib

            corrupt = cast("type[Exception]", igzip_lib.IsalError)
            try:
                return cls._of_stream(path, chunk)
            except (EOFError, OSError, corrupt):
                # Truncated or corrupt: vouch for nothing; DuckDB's read fails too and the
                # blocks path reports what it could read.
                return cls(0, True, path)
        size = os.path.getsize(path)
        if size == 0:
            return cls(0, False, path)
        keys = 0
        suspect = False
        chunk -= chunk % mmap.ALLOCATIONGRANULARITY
        with open(path, "rb") as fh:
            # One mapped window at a time, so the process does not hold the file's pages.
            # Each pair is counted at its quote: windows overlap by one byte.
            for lo in range(0, size, chunk):
                length = min(chunk + 1, size - lo)
                with mmap.mmap(fh.fileno(), length, offset=lo, access=mmap.ACCESS_READ) as mm:
                    found, spaced = _quote_pairs(mm, 0, length)
                    keys += found
                    # A seam may split a spaced key: check across it too.
                    suspect = suspect or _suspect(mm, 0, length, spaced)
                    if not suspect and lo:
                        suspect = _seam_suspect(fh, lo)
        return cls(keys, suspect, path)

    @classmethod
    def _of_stream(cls, path: str, chunk: int) -> BlockStats:
        keys = 0
        suspect = False
        spaced_before = 0
        for buf, seam, end in _windows(path, chunk):
            # Each pair is counted at its quote (the seam repeats the last bytes before).
            found, spaced = _quote_pairs(buf, max(0, seam - 1), end)
            keys += found
            # A spaced key whose quote was in the window before may end in this one.
            suspect = suspect or _suspect(buf, 0, end, spaced + spaced_before)
            spaced_before = spaced
        return cls(keys, suspect, path)

    def keys_with_values(self) -> int:
        r"""Key tokens outside strings whose value is not null; counted on first use.

        A ``":`` is inside a string when its quote is escaped, i.e. preceded by an odd run
        of backslashes: ``\":`` is a quote in a string, ``\\":`` ends a key whose name
        ends in a backslash. -1 when a run is too long to tell across window seams (then
        no count matches and the block takes the next rung).
        """
        if self._with_values is None:
            assert self.path is not None
            total = 0
            for buf, seam, end in _windows(self.path):
                outside = [_unescaped(buf, tok, seam, end) for tok in (b'":', b'":null', b'": null')]
                if min(outside) < 0:
                    total = -1
                    break
                total += outside[0] - outside[1] - outside[2]
            self._with_values = total
        return self._with_values


def _seam_suspect(fh: Any, at: int) -> bool:
    """Whether the bytes around a window boundary hold a pattern ``_suspect`` looks for."""
    fh.seek(max(0, at - 16))
    around = fh.read(32)
    return _suspect(around, 0, len(around), around.count(b'" '))


def _quote_pairs(buf: bytes | bytearray | mmap.mmap, start: int, end: int) -> tuple[int, int]:
    """How many quotes in ``buf[start:end]`` are followed by a colon, and by whitespace.

    numpy compares all bytes at once (and without the GIL): about 3x faster than two
    ``bytes.count`` scans, and this runs beside DuckDB on every byte ingested.
    """
    a = np.frombuffer(buf, dtype=np.uint8, count=end)[start:]
    if a.size < 2:
        return 0, 0
    quote = a[:-1] == 34
    after = a[1:]
    # Whitespace (or a control byte, never raw in a JSON string) after a quote may hide a
    # key's colon: ``"key"\t:``.
    return int(np.count_nonzero(quote & (after == 58))), int(np.count_nonzero(quote & (after <= 32)))


def _suspect(buf: bytes | bytearray | mmap.mmap, start: int, end: int, spaced: int) -> bool:
    r"""Blocks the count cannot vouch for: a key written ``"key" : value`` (no ``":`` token),
    or one that may hold an empty key ``"":`` (renamed on the exact path).

    Escapes are no reason: in the raw bytes a quote inside a string is always escaped
    (``\"`` or ``\u0022``), so an escape can neither make nor hide a ``":`` token, and
    nothing is counted in decoded text.
    """
    # An empty key (DuckDB reads its object as a MAP) is renamed on the exact path.
    if buf.find(b'"":', start, end) >= 0:
        return True
    # A quote followed by a space may only open a string that starts with one; a regex
    # looks for the spaced colon itself, only then.
    return spaced > 0 and SPACED_KEY.search(buf, start, end) is not None


SEAM = 64
"""Bytes carried from one window into the next: longer than any counted token."""


def _windows(path: str, chunk: int = 32 << 20) -> Iterator[tuple[bytearray, int, int]]:
    """(buffer, seam, end) windows over a file (decompressed, if gzip), in one reused buffer
    (no page faults per chunk): ``buffer[:seam]`` repeats the last bytes of the window
    before, new bytes run to ``end``. Count with ``_count`` so a token is counted in the
    window where it ends."""
    buf = bytearray(SEAM + chunk)
    view = memoryview(buf)
    carried = 0
    with _open(path) as fh:
        while n := read_full(fh, view[carried:]):
            end = carried + n
            yield buf, carried, end
            keep = min(SEAM, end)
            buf[:keep] = buf[end - keep : end]
            carried = keep


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(2) == GZIP_MAGIC


def _open(path: str) -> BinaryIO:
    """The file's bytes, decompressed when it is gzip (in place ingest reads ``.gz`` files).

    ISA-L's inflate (``isal``) is about twice as fast as zlib's, and the counts of a
    ``.gz`` read in place decompress it a second time, beside DuckDB.
    """
    if _is_gzip(path):
        from isal import igzip

        return igzip.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")  # noqa: SIM115 - the caller closes it


def _count(buf: bytearray, token: bytes, seam: int, end: int) -> int:
    """Occurrences of ``token`` in ``buf[:end]`` that end after ``seam`` (not counted before)."""
    return buf.count(token, max(0, seam - len(token) + 1), end)


def _unescaped(buf: bytearray, token: bytes, seam: int, end: int) -> int:
    r"""Occurrences of ``token`` (which starts with a quote) whose quote is not escaped, i.e.
    preceded by an even run of backslashes; -1 if a run is longer than the seam can hold.

    ``\`` * j + token counts the runs of at least j, so the alternating sum over j counts
    the odd runs once and the even runs not at all.
    """
    escaped, j = 0, 1
    while n := _count(buf, b"\\" * j + token, seam, end):
        if j + len(token) > SEAM:
            return -1
        escaped += n if j % 2 else -n
        j += 1
    return _count(buf, token, seam, end) - escaped


class JsonLinesReader(Stager):
    """Stages blocks of JSON lines: a fast path checked byte by byte, an exact path otherwise."""

    writer: SegmentWriter | None = None
    """Where the fast path writes; set by the pipeline. Without one, blocks take the exact path."""
    _too_wide = False
    """The last fast attempt found more fields than the dataset's limit allows."""

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
                    staged = self._fast(path, lambda: stats, self.writer, sample_rows)
                    if staged is not None:
                        return staged
                    if self._too_wide:  # keys past the field limit: only the exact path moves them
                        break
            with open(path, "rb") as fh:
                return self._exact(fh.read() if block is None else block, first_line)
        finally:
            os.unlink(path)

    def stage_whole(self, path: str, stats: Callable[[], BlockStats]) -> Staged | None:
        """Write a whole uncompressed file in one checked transaction, reading it in place.

        ``stats`` gives the file's byte counts (computed beside the insert). None when the
        check fails: nothing was written, and the caller goes block by block.
        """
        if self.writer is None:
            return None
        return self._fast(path, stats, self.writer, WHOLE_FILE_SAMPLE, "gzip" if _is_gzip(path) else "none")

    # -- fast path -----------------------------------------------------------------
    def _fast(
        self,
        path: str,
        stats_of: Callable[[], BlockStats],
        writer: SegmentWriter,
        sample_rows: int,
        compression: str = "none",
    ) -> Staged | None:
        """Write the block through the checked insert; ``sample_rows`` 0 reads only known fields.

        ``compression`` is DuckDB's name for how the file at ``path`` is compressed."""
        options = f"format='newline_delimited', compression={literal(compression)}"
        try:
            if sample_rows:
                detected = convert.parse_type(
                    self._describe(
                        f"read_json({literal(path)}, sample_size={sample_rows}, map_inference_threshold=-1, {options})"
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
        self._too_wide = len(tree.leaves()) > self.keys.limit
        if self._too_wide:
            return None
        # Numbers are read as text and cast exactly: DuckDB's reader would turn true into 1.0.
        # A value that does not cast becomes NULL, so the key count below sees it as missing.
        spec = convert.columns_spec(convert.read_tree(tree))[:-1]
        # RFC 3339 times are parsed by the reader itself; one it cannot read fails the block
        # over to the exact path, which also accepts a lower-case 't' or 'z'.
        time_type = "TIMESTAMPTZ" if time.format == "rfc3339" else "VARCHAR"
        spec += (", " if tree.children else "") + f"{literal(time.field)}: {literal(time_type)}}}"
        leaves = tree.leaves()
        names = self._names(leaves)
        items = [f"{time.sql(path_expr('src', [time.field]), time_type)} AS {ident(TIME_COLUMN)}"]
        for (p, t), n in zip(leaves, names):
            col = path_expr("src", p)
            number = convert.finite(f"TRY_CAST({col} AS DOUBLE)")
            cast = {"DOUBLE": number, "TIMESTAMP": f"CAST({col} AS TIMESTAMP)"}.get(t, col)
            items.append(f"{cast} AS {ident(n)}")
        select = f"SELECT {', '.join(items)} FROM read_json({literal(path)}, columns={spec}, {options}) src"
        columns = {TIME_COLUMN: "TIMESTAMP", **{n: t for (_, t), n in zip(leaves, names)}}
        new = [FieldInfo(n, t, p) for (p, t), n in zip(leaves, names) if n not in self.fields]

        def verify(rel: str) -> Verified | None:
            row = self._counts(rel, leaves, names, tree)
            rows, bad_time, typed, lo, hi = row
            stats = stats_of()
            if stats.suspect or bad_time:
                return None
            # Typed rows accounting for every token leaves no room for a dropped key; only
            # when they fall short are strings and nulls told apart in the raw bytes.
            if typed == stats.key_tokens or typed == stats.keys_with_values():
                return Verified(rows, (lo, hi))
            return None

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

    # -- exact path ----------------------------------------------------------------
    def _exact(self, block: bytes, first_line: int) -> Staged:
        rejects: list[Reject] = []
        lines: list[bytes] = []
        for offset, line in enumerate(block.split(b"\n")):
            number = first_line + offset
            text = line.strip()
            if not text:
                continue
            lenient = False
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                obj = _lenient(text)  # NaN and Infinity: not JSON, but common (Python's json.dumps)
                lenient = True
                if obj is None:
                    rejects.append(Reject(number, f"invalid JSON: {exc}", line.decode("utf-8", "replace")))
                    continue
            if not isinstance(obj, dict):
                rejects.append(
                    Reject(number, f"not a JSON object but {type(obj).__name__}", line.decode("utf-8", "replace"))
                )
                continue
            fitted = self.keys.fit(obj)
            if fitted is not None:  # an empty key renamed, or keys past the field limit moved
                # orjson would write NaN and Infinity (read by _lenient) as null
                text = json.dumps(fitted, ensure_ascii=False).encode() if lenient else orjson.dumps(fitted)
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
        """Types detected over the whole block, then read again with them: lists as their
        JSON text, and the time field as text, so the time format (detected or given
        with --time-format) is the one that reads it, not DuckDB's own guess."""
        source = f"read_json({literal(path)}, sample_size=-1, map_inference_threshold=-1, format='newline_delimited')"
        detected = convert.lists_as_json(convert.parse_type(self._describe(source)))
        time = self._time_spec(detected, path)
        if time.field in detected.children:
            detected.children[time.field] = convert.Node(type="VARCHAR")
        source = f"read_json({literal(path)}, columns={convert.columns_spec(detected)}, format='newline_delimited')"
        return self._stage_relation(source, detected, path)

    def _sample(self, path: str, name: str) -> list[str]:
        return _sample_values(path, name)


def _sample_values(path: str, name: str, limit: int = 1000) -> list[str]:
    """Up to ``limit`` values of top-level field ``name`` from the first lines of a JSON-lines file."""
    values: list[str] = []
    with _open(path) as fh:
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


def _lenient(text: bytes) -> object | None:
    """The line parsed by the standard library, which accepts NaN and Infinity; None if not."""
    try:
        return json.loads(text)
    except ValueError:
        return None
