"""Scratch files of an ingest: blocks written to its temporary folder for DuckDB to read.

Kept apart from ``staging`` (which needs DuckDB) so that a text format's parser process
(``textchild``), which only writes blocks, does not import DuckDB or numpy."""

from __future__ import annotations

import os
import tempfile


def write_file(data: bytes | memoryview | list[bytes], tmp_dir: str, suffix: str = ".jsonl") -> str:
    """Write ``data`` (or its pieces, one after another) to a new temp file in ``tmp_dir``; return its path."""
    fd, path = tempfile.mkstemp(suffix=suffix, dir=tmp_dir)
    with os.fdopen(fd, "wb") as fh:
        if isinstance(data, list):
            fh.writelines(data)
        else:
            fh.write(data)
    return path
