"""CSV and TSV with a header row, staged through DuckDB's CSV reader.

Blocks are cut at line boundaries that are outside quoted fields (an even count of
quote characters before the cut), each block gets the header and a line-number column,
and DuckDB detects types over the whole block. Malformed rows become rejects with their
line numbers (DuckDB's ``store_rejects``).
"""

from __future__ import annotations

import contextlib
import csv as pycsv
import os

import duckdb

from rootsift.errors import InputFormatError
from rootsift.ingest import convert
from rootsift.ingest.rejects import Reject
from rootsift.ingest.staging import LINE_KEY, Staged, Stager
from rootsift.store.sqltext import ident, literal

NOT_CSV = "if the input is not CSV, name its format with --format (see `rootsift formats`)"


class CsvReader(Stager):
    """Stages CSV/TSV blocks; ``header`` is the input's first line."""

    def __init__(self, *args: object, delimiter: str, header: bytes, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.delimiter = delimiter
        self.header = header.rstrip(b"\r\n")
        text = self.header.decode("utf-8", "replace")
        try:
            self.names = next(pycsv.reader([text], delimiter=delimiter)) if text else []
        except pycsv.Error as exc:
            raise InputFormatError(f"cannot read the header line {text[:200]!r} as CSV ({exc}); {NOT_CSV}") from exc
        if "\x00" in text:
            raise InputFormatError(
                f"the header line {text[:200]!r} holds a NUL byte: the input looks binary; {NOT_CSV}"
            )
        if not self.names or len(set(self.names)) != len(self.names) or any(not n for n in self.names):
            raise InputFormatError(f"the header line {text[:200]!r} must name every column once; {NOT_CSV}")

    def stage(self, block: bytes | None, first_line: int, stats: object = None) -> Staged:
        assert block is not None, "CSV blocks travel in memory"
        sep = self.delimiter.encode()
        numbered = [LINE_KEY.encode() + sep + self.header]
        number = first_line
        pending: list[bytes] = []
        odd = False
        for line in block.split(b"\n"):
            line = line.removesuffix(b"\r")
            if pending or line.strip():
                if not pending:
                    start = number
                pending.append(line)
                odd ^= line.count(b'"') % 2 == 1
                if not odd:
                    numbered.append(str(start).encode() + sep + b"\n".join(pending))
                    pending = []
            number += 1
        if pending:
            numbered.append(str(start).encode() + sep + b"\n".join(pending))
        if len(numbered) == 1:
            return self._empty()
        path = self._write(b"\n".join(numbered) + b"\n")
        try:
            return self._stage_file(path, numbered[1:], first_line)
        finally:
            os.unlink(path)

    def _stage_file(self, path: str, lines: list[bytes], first_line: int) -> Staged:
        """Read the numbered block as text (no sniffing: rows of the wrong width are rejects),
        give each column DOUBLE when every value is a number, then stage it."""
        names = [LINE_KEY, *self.names]
        columns = "{" + ", ".join(f"{literal(n)}: 'VARCHAR'" for n in names) + "}"
        raw = self._table()
        rejects_table, scans_table = f"{raw}_rejects", f"{raw}_scans"
        try:
            self.cur.execute(
                f"CREATE TEMP TABLE {raw} AS SELECT * FROM read_csv({literal(path)}, header=true, auto_detect=false, "
                f"delim={literal(self.delimiter)}, quote='\"', escape='\"', columns={columns}, "
                f"store_rejects=true, rejects_table={literal(rejects_table)}, rejects_scan={literal(scans_table)})"
            )
            bad = self.cur.execute(f"SELECT csv_line, error_message FROM {rejects_table}").fetchall()
        except duckdb.Error as exc:
            return self._reject_all(lines, str(exc).splitlines()[0])
        finally:
            for t in (rejects_table, scans_table):
                with contextlib.suppress(duckdb.Error):
                    self.cur.execute(f"DROP TABLE IF EXISTS {t}")
        fields = [ident(n) for n in self.names]
        numeric = (
            self.cur.execute(
                "SELECT "
                + ", ".join(f"count({f}) > 0 AND count(TRY_CAST({f} AS DOUBLE)) = count({f})" for f in fields)
                + f" FROM {raw}"
            ).fetchone()
            if fields
            else ()
        )
        typed = [f"CAST({ident(LINE_KEY)} AS BIGINT) AS {ident(LINE_KEY)}"] + [
            f"CAST({f} AS DOUBLE) AS {f}" if is_num else f for f, is_num in zip(fields, numeric or ())
        ]
        source = f"(SELECT {', '.join(typed)} FROM {raw})"
        self._source = source
        try:
            staged = self._stage_relation(source, convert.parse_type(self._describe(source)), path)
        finally:
            self.cur.execute(f"DROP TABLE IF EXISTS {raw}")
        for content, error in bad:
            head, _, rest = str(content or "").partition(self.delimiter)
            number = int(head) if head.isdigit() else first_line
            staged.rejects.append(Reject(number, f"malformed CSV row: {error}", rest))
        staged.rejects.sort(key=lambda r: r.line)
        return staged

    def _sample(self, path: str, name: str) -> list[str]:
        # Called from _stage_relation, where the block's text table is ``self._raw``.
        rows = self.cur.execute(
            f"SELECT CAST({ident(name)} AS VARCHAR) FROM {self._source} src WHERE {ident(name)} IS NOT NULL LIMIT 1000"
        ).fetchall()
        return [r[0] for r in rows]

    def _reject_all(self, lines: list[bytes], reason: str) -> Staged:
        staged = self._empty()
        for raw in lines:
            head, _, rest = raw.partition(self.delimiter.encode())
            staged.rejects.append(Reject(int(head), f"unreadable CSV block: {reason}", rest.decode("utf-8", "replace")))
        return staged
