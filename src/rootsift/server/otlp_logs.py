"""OTLP log records gathered into ``Columns`` (otlp_columns.py), column by column.

A record's event is the resource's and the scope's fields, its attributes (a later one
winning), and its own fields, which win over an attribute of the same name where the
record has them: ``timestamp`` (its time, else when it was observed), ``severity_text``,
``severity_number``, ``body`` (text; any other value as ``otlp.any_value`` makes it, a
structure as JSON), ``trace.trace_id`` and ``trace.span_id`` (otlp.py; ``log_lines``
writes the same events as JSON lines). As for spans, the attributes are placed by their
encodings' numbers, a record whose attribute keys clash (with its own fields, the shared
ones, each other) is gathered from its attributes as a dict, and the own fields are runs
of values (None where a record has none). The native scanner reads the records where it
is installed (``rootsift_native.scan_logs``, ADR 0028); otherwise, or where it declines,
the request is parsed as a lazy message in Python: the same table.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rootsift.server.otlp import Event, any_value
from rootsift.server.otlp_arrays import TIME
from rootsift.server.otlp_lines import Decoded

if TYPE_CHECKING:
    from rootsift.server.otlp_columns import Columns

LOG_OWN = ("severity_text", "severity_number", "body", "trace.trace_id", "trace.span_id")
LOG_FIELDS = frozenset({TIME, *LOG_OWN})
"""A record's own fields: an attribute of the same name yields to them (``timestamp`` always)."""


def add_logs(columns: Columns, payload: bytes, memo: Decoded) -> int:
    """Gather the records of a logs request into ``columns``; the number skipped for having
    no time at all (counted as rejected when the request was received)."""
    from rootsift.server.native import log_scanner

    scan = log_scanner()
    scanned = scan(payload) if scan is not None else None
    if scanned is not None:
        return _add_scanned(columns, scanned, memo)
    return _add_parsed(columns, payload, memo)


def _add_parsed(columns: Columns, payload: bytes, memo: Decoded) -> int:
    from rootsift.server.otlp_columns import scope_fields
    from rootsift.server.otlp_types import lazy_request

    request = lazy_request("logs").FromString(payload)
    scoped = ((base, list(scope.log_records)) for base, scope in scope_fields(request.resource_logs, "scope_logs"))
    # a shared field named timestamp yields to the record's time
    records, bases, per_scope, skipped = columns.gather(scoped, _timed, drop=TIME)
    if not records:
        return skipped
    first, n = columns.rows, len(records)
    attributes = [r.attributes for r in records]
    entries = columns.numbered(list(itertools.chain.from_iterable(attributes)), memo)
    counts = list(map(len, attributes))
    for i in columns.place(first, counts, entries, bases, per_scope, [0] * n, LOG_FIELDS):
        columns.put(first + i, _extras(attributes[i], memo))
    times = [r.time_unix_nano or r.observed_time_unix_nano for r in records]
    runs = (
        [r.severity_text or None for r in records],
        [int(r.severity_number) or None for r in records],
        [_body(r.body) if r.HasField("body") else None for r in records],
        [r.trace_id for r in records],
        [r.span_id for r in records],
    )
    columns.add_own(times, list(zip(LOG_OWN, runs)))
    return skipped


def _timed(record: Any) -> bool:
    return bool(record.time_unix_nano or record.observed_time_unix_nano)


def _add_scanned(columns: Columns, scanned: tuple[Any, ...], memo: Decoded) -> int:
    import numpy as np
    import pyarrow as pa

    from rootsift.server.otlp_scan import Placed, hex_array, shared

    (scopes, skipped, n, times, ids, severity_texts, severity_index, severity_numbers, body, attributes) = scanned
    if not n:
        return int(skipped)
    first = columns.rows
    bases, per_scope = shared(columns, scopes, drop=TIME)
    placed = Placed(columns, attributes, memo)
    for i in columns.place(first, placed.counts, placed.entries, bases, per_scope, np.zeros(n), LOG_FIELDS):
        columns.put(first + i, _extras(placed.of(i), memo))
    texts = pa.array([t or None for t in severity_texts], type=pa.string())
    numbers = np.frombuffer(severity_numbers, dtype="<i4").astype(np.int64)
    trace_ids, span_ids = (hex_array(n, offsets, text) for offsets, text in ids)
    runs = (
        texts.take(pa.array(np.frombuffer(severity_index, dtype="<u4"))),
        pa.array(numbers, type=pa.int64(), mask=numbers == 0),
        _bodies(n, *body),
        trace_ids,
        span_ids,
    )
    columns.add_own(np.frombuffer(times, dtype="<i8"), list(zip(LOG_OWN, runs)))
    return int(skipped)


def _bodies(n: int, offsets: bytes, text: bytes, kinds: bytes, others: list[tuple[int, bytes]]) -> Any:
    """The scanned bodies as a string array: text as it is, none null, any other value as
    ``_body`` makes it from its encoding."""
    import numpy as np
    import pyarrow as pa

    present = np.frombuffer(kinds, dtype=np.uint8) == 1
    missing = n - int(present.sum())
    bitmap = pa.py_buffer(np.packbits(present, bitorder="little").tobytes()) if missing else None
    array = pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text), bitmap, missing)
    if not others:
        return array
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    values = array.to_pylist()
    for row, raw in others:
        values[row] = _body(AnyValue.FromString(raw))
    return pa.array(values, type=pa.string())


def _body(value: Any) -> str | None:
    """A record's body (an AnyValue) as its field: text as it is, None for no value, any
    other value as JSON text."""
    body = any_value(value)
    if body is None or isinstance(body, str):
        return body
    return json.dumps(body, default=str)


def _extras(attributes: Sequence[bytes], memo: Decoded) -> Event:
    """A record's attributes as a dict, a later one winning, without ``timestamp`` (the
    record's own fields are runs of their own, which win where the record has them)."""
    event: Event = {}
    for raw in attributes:
        for key, value in (memo.attributes.get(raw) or memo.attribute(raw))[0]:
            event[key] = value
    event.pop(TIME, None)
    return event
