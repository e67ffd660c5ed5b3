"""The exact path of JSON lines: each line validated and numbered, its types detected by
DuckDB over the whole block. A complete reader on its own; ``jsonl.JsonLinesReader`` tries
its fast path first and comes here when the fast path cannot vouch for a block (a parse
error, a key the byte count cannot account for, a row without a readable time). A line
that is not a JSON object is rejected with its number and why; NaN and Infinity (Python's
``json.dumps`` writes them) are read as the standard library reads them; a block DuckDB
refuses is halved until the line it refuses is found and rejected alone. See
docs/storage.md, "Ingest"."""

from __future__ import annotations

import json
import os

import duckdb
import orjson

from rootsift.ingest import convert
from rootsift.ingest.blockstats import open_decompressed
from rootsift.ingest.rejects import Reject
from rootsift.ingest.staging import LINE_KEY, Staged, Stager
from rootsift.store.sqltext import literal


class ExactJsonLines(Stager):
    """Stages blocks of JSON lines line by line (``_exact``): exact, at Python's speed."""

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
    with open_decompressed(path) as fh:
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
