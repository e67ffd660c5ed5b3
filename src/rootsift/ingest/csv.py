"""CSV and TSV with a header row, staged through DuckDB's CSV reader.

Blocks are cut at line boundaries that are outside quoted fields (an even count of
quote characters before the cut), each block gets the header and a line-number column,
and DuckDB detects types over the whole block. Malformed rows become rejects with their
line numbers (DuckDB's ``store_rejects``).
"""

from __future__ import annotations

import os

import duckdb

from rootsift.ingest import convert
from rootsift.ingest.rejects import Reject
from rootsift.ingest.staging import LINE_KEY, Staged, Stager
from rootsift.store.sqltext import ident, literal


class CsvReader(Stager):
    """Stages CSV/TSV blocks; ``header`` is the input's first line."""

    def __init__(self, *args: object, delimiter: str, header: bytes, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.delimiter = delimiter
        self.header = header.rstrip(b"\r\n")

    def stage(self, block: bytes, first_line: int, stats: object = None) -> Staged:
        sep = self.delimiter.encode()
        numbered = [LINE_KEY.encode() + sep + self.header]
        number = first_line
        pending: list[bytes] = []
        for line in block.split(b"\n"):
            if pending or line.strip():
                if not pending:
                    start = number
                pending.append(line)
                if b"".join(pending).count(b'"') % 2 == 0:
                    numbered.append(str(start).encode() + sep + b"\n".join(pending))
                    pending = []
            number += 1
        if pending:
            numbered.append(str(start).encode() + sep + b"\n".join(pending))
        if len(numbered) == 1:
            return self._empty()
        path = self._write(b"\n".join(numbered) + b"\n")
        try:
            source = (
                f"read_csv({literal(path)}, header=true, delim={literal(self.delimiter)}, sample_size=-1, "
                f"store_rejects=true, rejects_table='csv_rejects', rejects_scan='csv_scans')"
            )
            try:
                detected = convert.parse_type(self._describe(source))
                staged = self._stage_relation(source, detected, path)
            except duckdb.Error as exc:
                raise_msg = str(exc).splitlines()[0]
                return self._reject_all(numbered[1:], raise_msg)
            for content, error in self.cur.execute(
                "SELECT csv_line_content, error_message FROM csv_rejects"
            ).fetchall():
                line_text = str(content or "")
                head, _, rest = line_text.partition(self.delimiter)
                number = int(head) if head.isdigit() else first_line
                staged.rejects.append(Reject(number, f"malformed CSV row: {error}", rest))
            return staged
        finally:
            os.unlink(path)

    def _sample(self, path: str, name: str) -> list[str]:
        rows = self.cur.execute(
            f"SELECT {ident(name)} FROM read_csv({literal(path)}, header=true, delim={literal(self.delimiter)}, "
            f"all_varchar=true) WHERE {ident(name)} IS NOT NULL LIMIT 1000"
        ).fetchall()
        return [r[0] for r in rows]

    def _reject_all(self, lines: list[bytes], reason: str) -> Staged:
        staged = self._empty()
        for raw in lines:
            head, _, rest = raw.partition(self.delimiter.encode())
            staged.rejects.append(Reject(int(head), f"unreadable CSV block: {reason}", rest.decode("utf-8", "replace")))
        return staged
