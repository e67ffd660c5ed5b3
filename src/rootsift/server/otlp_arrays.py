"""Arrow arrays from the values ``otlp_columns.Columns`` gathered, and back to JSON lines.

A key's values keep their JSON kind: text, a whole number (int64), a number (float64; NaN
and infinities are null, as orjson writes them), a boolean; a key whose values mix kinds
(other than whole numbers and numbers) is a text column of each value's JSON text, marked
``JSON_TEXT`` in its field's metadata (the store does not take such a column as is: the
applier ingests the table as JSON lines, ``json_lines``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from rootsift.store.arrow_ingest import JSON_TEXT

if TYPE_CHECKING:
    import pyarrow as pa

TIME = "timestamp"
IDS = frozenset({"trace.trace_id", "trace.span_id", "trace.parent_id"})
"""A span's own fields gathered as bytes and hexed for the whole table at once (``hex_ids``)."""
OWN_TYPES = {
    "duration_ms": "float64",
    "span.num_events": "int64",
    "span.num_links": "int64",
    "severity_number": "int64",
}
"""The own columns of a span or a log record that are not text."""


def own(key: str, runs: list[Sequence[Any]]) -> tuple[pa.Array, pa.Field]:
    """A span's own column from its runs of values, whose kind is known (ids as bytes, or
    already as an Arrow array of their hex text)."""
    import pyarrow as pa

    kind = pa.type_for_alias(OWN_TYPES.get(key, "string"))
    if key in IDS:
        runs = [run if isinstance(run, pa.Array) else hex_ids(run) for run in _joined(runs)]
    arrays = [run if isinstance(run, pa.Array) else pa.array(run, type=kind) for run in runs]
    array = pa.chunked_array(arrays, type=kind).combine_chunks()
    return array, pa.field(key, kind)


def _joined(runs: list[Sequence[Any]]) -> list[Sequence[Any]]:
    """The runs with each stretch of runs that are not Arrow arrays joined into one list."""
    import pyarrow as pa

    out: list[Sequence[Any]] = []
    for arrow, group in itertools.groupby(runs, key=lambda run: isinstance(run, pa.Array)):
        if arrow:
            out.extend(group)
        else:
            out.append(list(itertools.chain.from_iterable(group)))
    return out


def hex_ids(ids: Sequence[bytes]) -> Any:
    """Ids as lower-case hex text, an empty one as None: an Arrow array when the others all
    have one length, else a list."""
    import numpy as np
    import pyarrow as pa

    lengths = set(map(len, ids)) - {0}
    if not lengths:
        return [None] * len(ids)
    if len(lengths) != 1:
        return [i.hex() or None for i in ids]
    (width,) = lengths
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    raw = np.frombuffer(b"".join(ids), dtype=np.uint8)
    text = np.empty(2 * len(raw), dtype=np.uint8)
    text[0::2], text[1::2] = digits[raw >> 4], digits[raw & 15]
    count = len(raw) // width
    offsets = np.arange(0, len(text) + 1, 2 * width, dtype=np.int32)
    array = pa.StringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(text.tobytes()))
    if count == len(ids):
        return array
    present = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)) > 0
    index = np.cumsum(present) - 1
    return array.take(pa.array(index, mask=~present))


def column(key: str, values: list[Any]) -> tuple[pa.Array, pa.Field]:
    """The values as one array of their JSON kind, or as JSON text when the kinds mix."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kinds = set(map(type, values))
    if kinds <= {str}:
        return pa.array(values, type=pa.string()), pa.field(key, pa.string())
    if kinds == {bool}:
        return pa.array(values, type=pa.bool_()), pa.field(key, pa.bool_())
    if kinds == {int}:
        try:
            return pa.array(values, type=pa.int64()), pa.field(key, pa.int64())
        except (OverflowError, pa.ArrowInvalid):
            pass
    elif kinds <= {int, float}:  # as numbers, as the JSON ingest takes them (Arrow refuses ints past 2**53)
        numbers = pa.array([float(v) for v in values], type=pa.float64())
        return pc.if_else(pc.is_finite(numbers), numbers, None), pa.field(key, pa.float64())
    text = [orjson.dumps(v, default=str).decode() for v in values]
    return pa.array(text, type=pa.string()), pa.field(key, pa.string(), metadata={JSON_TEXT: b"1"})


def json_lines(table: pa.Table) -> Iterator[bytes]:
    """The table's rows as the JSON lines of their events (absent values left out; JSON
    text columns as the values they hold), for an ingest of the JSON kind."""
    text = {f.name for f in table.schema if f.metadata and JSON_TEXT in f.metadata}
    for batch in table.to_batches(max_chunksize=8192):
        for row in batch.to_pylist():
            event: dict[str, Any] = {}
            for key, value in row.items():
                if key in text and value is not None:
                    value = orjson.loads(value)  # null for a NaN, as orjson writes it
                if value is None:
                    continue
                event[key] = value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if key == TIME else value
            yield orjson.dumps(event) + b"\n"
