"""JSON arrays: spooled to disk and split by DuckDB into one object per line, so they are
read by the JSON-lines reader like any JSON lines."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import BinaryIO

import duckdb

from rootsift.errors import InputFormatError
from rootsift.ingest.sources import Input
from rootsift.store.sqltext import literal


@contextlib.contextmanager
def array_to_lines(cur: duckdb.DuckDBPyConnection, head: bytes, inp: Input, tmp: str) -> Iterator[BinaryIO]:
    """Spool a JSON array to disk, then let DuckDB split it into one object per line."""
    src = os.path.join(tmp, "array.json")
    with open(src, "wb") as fh:
        fh.write(head)
        while chunk := inp.stream.read(8 << 20):
            fh.write(chunk)
    out = os.path.join(tmp, "array.jsonl")
    try:
        # json() minifies: a pretty-printed element becomes one line.
        rel = cur.execute(f"SELECT json(json) FROM read_json_objects({literal(src)}, format='array')")
        with open(out, "wb") as fh:
            while batch := rel.fetchmany(50_000):
                fh.write(b"".join(str(row[0]).encode() + b"\n" for row in batch))
    except duckdb.Error as exc:
        raise InputFormatError(f"{inp.name}: not a valid JSON array: {str(exc).splitlines()[0]}") from exc
    finally:
        os.unlink(src)
    with open(out, "rb") as stream:
        yield stream
