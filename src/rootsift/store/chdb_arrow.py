"""Moving Arrow record batches into a ClickHouse dataset's table (a server's or chdb's):
the columns a batch brings added first (``ALTER TABLE ADD COLUMN``, Nullable, the JSON
path as comment), then one streaming INSERT in Arrow's IPC stream format, with the
sampling key of each row (the connection streams it: an HTTP body, or chdb's
``send_insert``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from rootsift.errors import StoreError
from rootsift.store.base import TIME_COLUMN, FieldInfo
from rootsift.store.sqltext import ident, literal

if TYPE_CHECKING:
    import pyarrow as pa

    from rootsift.store.clickhouse import ClickHouseBackend

_ARROW = {"double": "DOUBLE", "int64": "BIGINT", "bool": "BOOLEAN", "string": "VARCHAR", "large_string": "VARCHAR"}


def append_arrow(
    backend: ClickHouseBackend,
    dataset: str,
    batches: pa.RecordBatchReader,
    new_fields: list[FieldInfo],
    table: str | None = None,
) -> int:
    """Insert Arrow record batches into the dataset (or its pending ``table``) in one
    INSERT, adding a Nullable column for each field it has not seen; return the rows.
    The caller holds the backend's lock."""
    import pyarrow as pa

    from rootsift.store import clickhouse_cluster
    from rootsift.store.clickhouse import COLUMN_TYPES, INSERT_SETTINGS, SAMPLE_KEY, rows_of

    target = table or dataset
    dist = clickhouse_cluster.of(backend, dataset)
    paths = {f.name: f.path for f in new_fields}
    have = backend.columns_of(target)
    schema = batches.schema
    for col in schema:
        if col.name not in have:
            ctype = COLUMN_TYPES[_storage_type(col.type)]
            column = f"{ident(col.name)} {ctype} COMMENT {literal(json.dumps(paths.get(col.name, [col.name])))}"
            if dist is not None:  # every shard's local table, every node's Distributed table
                clickhouse_cluster.add_column(backend, dataset, dist, column, col.name)
                continue
            for name in {dataset, target}:  # the pending table and the dataset keep one shape
                backend.run(f"ALTER TABLE {backend.table_sql(name)} ADD COLUMN IF NOT EXISTS {column}")
    first = int(rows_of(backend.run(f"SELECT count() FROM {backend.table_sql(dataset)}")).rows[0][0])
    if table is not None:
        first += int(rows_of(backend.run(f"SELECT count() FROM {backend.table_sql(table)}")).rows[0][0])
    out_schema = pa.schema([*(_plain(f) for f in schema), pa.field(SAMPLE_KEY, pa.uint32())])
    written = expired = 0
    count_expired = _expired_counter(backend, dataset, schema)

    def stream() -> Iterator[bytes]:
        nonlocal written, expired
        chunks: list[bytes] = []
        with pa.ipc.new_stream(pa.PythonFile(_Sink(chunks.append), mode="w"), out_schema) as ipc:
            for batch in _batches(batches):
                keys = _sample_keys(first + written, batch.num_rows)
                arrays = [_plain_array(a) for a in batch.columns]
                expired += count_expired(arrays)
                ipc.write_batch(pa.record_batch([*arrays, keys], schema=out_schema))
                written += batch.num_rows
                yield b"".join(chunks)
                chunks.clear()
        yield b"".join(chunks)  # the end of the stream

    try:
        backend.connection.insert_arrow(
            backend.table_sql(target),
            [f.name for f in out_schema],
            stream(),
            {**INSERT_SETTINGS, **(clickhouse_cluster.FOREGROUND if dist is not None else {})},
        )
    except StoreError:
        backend.recover()
        raise
    except Exception as exc:
        backend.recover()
        raise backend.translate(exc, f"writing to dataset {dataset!r}") from exc
    if expired:  # told only of rows that were stored
        backend.expired[dataset] = backend.expired.get(dataset, 0) + expired
    return written


class _Sink:
    """A file-like object whose writes go to a streaming INSERT (``append``)."""

    def __init__(self, append: Any) -> None:
        self.append = append
        self.closed = False

    def write(self, data: bytes) -> int:
        self.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _expired_counter(backend: ClickHouseBackend, dataset: str, schema: pa.Schema) -> Callable[[list[Any]], int]:
    """A function counting the rows of a batch that the dataset's standing retention
    deletes on arrival (older than its keep by this machine's clock)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    policy = backend.standing_retention(dataset) if backend.runs_between_commands else None
    if policy is None or policy.keep_seconds is None or TIME_COLUMN not in schema.names:
        return lambda arrays: 0
    at = schema.names.index(TIME_COLUMN)
    now = datetime.now(UTC).replace(tzinfo=None)
    cutoff = pa.scalar(now - timedelta(seconds=policy.keep_seconds), pa.timestamp("us"))
    return lambda arrays: int(pc.sum(pc.less(arrays[at], cutoff)).as_py() or 0)


def _batches(reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
    while True:
        try:
            yield reader.read_next_batch()
        except StopIteration:
            return


def _sample_keys(first: int, rows: int) -> pa.Array:
    """The sampling key of rows ``first`` … ``first + rows - 1`` of a dataset: a Fibonacci
    hash of the ordinal, so every 64th slice of the key space holds one row in 64, whatever the content."""
    import numpy as np
    import pyarrow as pa

    ordinal = np.arange(first, first + rows, dtype=np.uint64)
    keys = ((ordinal * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)).astype(np.uint32)
    # from the buffer, not pa.array(keys): that asks pandas whether keys is a Series,
    # importing pandas (about 0.25 s of CPU) into every ingest
    return pa.Array.from_buffers(pa.uint32(), rows, [None, pa.py_buffer(keys)])


def _storage_type(arrow_type: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type):
        return "TIMESTAMP"
    return _ARROW.get(str(arrow_type), "VARCHAR")


def _plain(field: pa.Field) -> pa.Field:
    """The Arrow type a column is sent as: string views as strings, other kinds as text."""
    import pyarrow as pa

    if pa.types.is_timestamp(field.type):
        return pa.field(field.name, pa.timestamp("us"))
    if str(field.type) in _ARROW:
        return field
    return pa.field(field.name, pa.string())


def _plain_array(array: pa.Array) -> pa.Array:
    import pyarrow as pa

    target = _plain(pa.field("x", array.type)).type
    return array if array.type == target else array.cast(target)
