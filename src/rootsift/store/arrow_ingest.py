"""Arrow tables into a DuckDB dataset, without JSON text in between (the server's converted
OTLP spans and logs: server/otlp_columns.py).

The table's columns are top-level keys (``service.name`` is one key, as in a JSON line whose
key holds a dot) and ``timestamp`` (a timestamp, microseconds, UTC, no zone). It is written
as the JSON-lines ingest would write the same events, through the same writer
(``SegmentWriter.write_checked``: one transaction, new columns added, fields registered in
``_fields``, the segment's uniform sample kept), or not at all: ``ingest_arrow`` returns
None, writing nothing, for a table whose values the JSON ingest would store otherwise than
as they are, and the caller ingests its events as JSON lines. That is a table with

- a key that is empty, or a column marked as each value's JSON text (``JSON_TEXT``);
- a value that does not fit its field's stored type as is (text for a number field, a
  number for a text field, anything for a time field: the JSON ingest converts those, or
  keeps them in ``field#raw``);
- more fields than the dataset's limit (``ROOTSIFT_MAX_FIELDS``: the JSON ingest moves
  the rest into ``_overflow``);
- a new text field the JSON reader would detect as a time (in its first 2,048 values).

Types follow ADR 0002: numbers are DOUBLE, text and booleans VARCHAR (``true``/``false``).
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.files import threads_set
from rootsift.store.sqltext import ident, literal
from rootsift.store.writer import Verified

if TYPE_CHECKING:
    import pyarrow as pa

    from rootsift.store.duckdb import DuckDBBackend

JSON_TEXT = b"rootsift.json_text"
"""Field metadata key: the column holds each value's JSON text (its values mix kinds)."""
SAMPLE_ROWS = 2048
"""Values of a new text field checked for what the JSON reader would detect (its sample)."""
INGEST_THREADS = 1
"""DuckDB's worker threads while the rows are written: one writes them with 7-16 % less CPU
than two (measured on 2 cores: the same rows, compressed by one thread, without the
workers' hand-offs), and the server that calls this converts its next batch on the other
core meanwhile (bench/README.md, "serve")."""
FITS = {("DOUBLE", "DOUBLE"), ("VARCHAR", "VARCHAR"), ("BOOLEAN", "VARCHAR")}
"""(the column's kind, the field's stored type) written as they are."""


def ingest_arrow(backend: DuckDBBackend, dataset: str, table: pa.Table) -> int | None:
    """Write ``table``'s rows into ``dataset`` (created if new) in one durable transaction;
    the rows written, or None (nothing written) when the JSON-lines ingest must take them."""
    import pyarrow as pa

    from rootsift.ingest.convert import display_name, storage_type
    from rootsift.ingest.keys import max_fields

    if TIME_COLUMN not in table.schema.names or not pa.types.is_timestamp(table.schema.field(TIME_COLUMN).type):
        return None
    if table.num_rows == 0:
        return 0
    fields = {k: v for k, v in backend.fields(dataset).items() if k != TIME_COLUMN} if backend.exists(dataset) else {}
    by_path = {tuple(f.path): name for name, f in fields.items() if f.path}
    taken = {name: f.path for name, f in fields.items()}
    admitted = set(by_path) | {(TIME_COLUMN,)}
    items = [f"CAST(src.{ident(TIME_COLUMN)} AS TIMESTAMP) AS {ident(TIME_COLUMN)}"]
    columns = {TIME_COLUMN: "TIMESTAMP"}
    new: list[FieldInfo] = []
    texts: list[str] = []
    for field in table.schema:
        key = field.name
        if key == TIME_COLUMN:
            continue
        kind = _kind(field)
        if kind is None or key == "":
            return None
        name = by_path.get((key,)) or display_name([key], taken)
        taken[name] = [key]
        admitted.add((key,))
        known = fields.get(name) if (key,) in by_path else None
        stored = known.type if known is not None else ("DOUBLE" if kind == "DOUBLE" else "VARCHAR")
        if (kind, stored) not in FITS:
            return None
        if known is None:
            new.append(FieldInfo(name, stored, [key]))
            if kind == "VARCHAR":
                texts.append(key)
        value = f"src.{ident(key)}"
        items.append(f"CAST({value} AS {stored}) AS {ident(name)}")
        columns[name] = stored
    if len(admitted) > max_fields():
        return None
    cur = backend.cursor()
    try:
        if texts and any(storage_type(t) != "VARCHAR" for t in _detected(cur, backend, table.select(texts))):
            return None
        view = f"arrow_{id(table):x}"
        cur.register(view, table)
        select = f"SELECT {', '.join(items)} FROM {view} src"
        ts = ident(TIME_COLUMN)

        def verify(rel: str) -> Verified | None:
            row = cur.execute(f"SELECT count(*), min({ts}), max({ts}) FROM {rel}").fetchone()
            if row is None or row[0] != table.num_rows:
                return None
            return Verified(int(row[0]), (row[1], row[2]))

        writer = backend.writer(dataset, cur)
        with threads_set(backend._con, backend._lock, INGEST_THREADS):
            verified = writer.write_checked(select, columns, new, verify)
        cur.unregister(view)
        if verified is None and writer.error is not None:
            from rootsift.store.driver import translate

            raise translate(writer.error, f"writing to dataset {dataset!r}") from writer.error
        return verified.rows if verified is not None else None
    finally:
        cur.close()


def _kind(field: pa.Field) -> str | None:
    """DOUBLE, VARCHAR or BOOLEAN: how the JSON reader would see the column's values; None
    for a column it takes differently (mixed JSON text, anything else)."""
    import pyarrow as pa

    if field.metadata and JSON_TEXT in field.metadata:
        return None
    kind = field.type
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        return "DOUBLE"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "VARCHAR"
    if pa.types.is_boolean(kind):
        return "BOOLEAN"
    return None


def _detected(cur: object, backend: DuckDBBackend, table: pa.Table) -> list[str]:
    """The types the JSON reader detects for ``table``'s text columns, each from its first
    ``SAMPLE_ROWS`` values (as the JSON ingest's sample, or its whole block when a key is
    too rare for the sample)."""
    import orjson

    rows = [{key: v} for key in table.column_names for v in table[key].drop_null()[:SAMPLE_ROWS].to_pylist()]
    tmp = backend.data_dir / ".tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    fd, path = tempfile.mkstemp(suffix=".jsonl", dir=tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            f.writelines(orjson.dumps(row) + b"\n" for row in rows)
        described = cur.execute(  # type: ignore[attr-defined]
            f"DESCRIBE SELECT * FROM read_json({literal(path)}, format='newline_delimited', "
            f"sample_size=-1, map_inference_threshold=-1)"
        ).fetchall()
        return [str(r[1]) for r in described]
    finally:
        os.unlink(path)
