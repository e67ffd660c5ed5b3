"""The native scanner's column buffers of a traces request, gathered into ``Columns``.

``rootsift_native.scan_spans`` (native/src/lib.rs, ADR 0028) reads the spans off the wire
as the lazy message does and hands over each column as a buffer: times as int64, ids as
hex text with Arrow's offsets, names, statuses and attribute encodings as their distinct
values with each span's number of its value. Here they become the same runs of values
``Columns.add_spans`` gathers in Python (otlp_columns.py): the shared fields per scope,
the attributes placed by their encodings' numbers, a span whose keys clash or that has
events gathered from its event as a dict, and the span's own fields as Arrow arrays.
The scanned log records (otlp_logs.py) share the scopes' fields, the attributes and the
ids the same way (``shared``, ``Placed``, ``hex_array``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rootsift.server.otlp import KINDS, Event, flatten
from rootsift.server.otlp_lines import Decoded

if TYPE_CHECKING:
    import pyarrow as pa

    from rootsift.server.otlp_columns import Columns


def add_scanned(columns: Columns, scanned: tuple[Any, ...], memo: Decoded) -> int:
    """Gather one scanned request's spans into ``columns``; the number skipped for having
    no start time (as ``Columns.add_spans``)."""
    import numpy as np
    import pyarrow as pa

    from rootsift.server.otlp_columns import own_runs, span_extras

    (scopes, skipped, n, starts, ends, ids, names, name_index, kinds) = scanned[:9]
    (statuses, status_index, attributes, event_counts, link_counts, events) = scanned[9:]
    if not n:
        return int(skipped)
    first = columns.rows
    bases, per_scope = shared(columns, scopes)
    n_events = np.frombuffer(event_counts, dtype="<u4").astype(np.int64)
    placed = Placed(columns, attributes, memo)
    events_of = dict(events)
    for i in columns.place(first, placed.counts, placed.entries, bases, per_scope, n_events):
        columns.put(first + i, span_extras(placed.of(i), events_of.get(i, ()), memo))

    start = np.frombuffer(starts, dtype="<i8")
    durations = np.maximum(np.frombuffer(ends, dtype="<i8") - start, 0) / 1e6
    trace_ids, span_ids, parents = (hex_array(n, offsets, text) for offsets, text in ids)
    found = [memo.statuses.get(raw) or memo.status(raw) for raw in statuses]
    by_status = pa.array(np.frombuffer(status_index, dtype="<u4"))
    codes = pa.array([code for code, _ in found], type=pa.string()).take(by_status)
    messages = (
        pa.array([m or None for _, m in found], type=pa.string()).take(by_status)
        if any(m for _, m in found)
        else pa.nulls(n, pa.string())
    )
    span_names = pa.array(names, type=pa.string()).take(pa.array(np.frombuffer(name_index, dtype="<u4")))
    distinct, inverse = np.unique(np.frombuffer(kinds, dtype="<i4"), return_inverse=True)
    texts = [KINDS.get(k) or str(k) for k in distinct.tolist()]
    kind_texts = pa.array(texts, type=pa.string()).take(pa.array(inverse.reshape(-1)))
    values = (trace_ids, span_ids, span_names, kind_texts, codes, durations)
    links = np.frombuffer(link_counts, dtype="<u4").astype(np.int64)
    columns.add_own(start, own_runs(values, (n_events, links), (parents, messages)))
    return int(skipped)


class Placed:
    """A scanned request's attributes numbered in ``columns`` (``entries``, each item's
    ``counts``), and any one item's encodings (``of``)."""

    def __init__(self, columns: Columns, attributes: tuple[list[bytes], bytes, bytes], memo: Decoded) -> None:
        import numpy as np

        self.distinct, index, counts = attributes
        self.occurrences = np.frombuffer(index, dtype="<u4").astype(np.int64)
        self.entries = columns.numbered(self.distinct, memo)[self.occurrences]
        self.counts = np.frombuffer(counts, dtype="<u4").astype(np.int64)
        self._bounds: list[int] | None = None

    def of(self, item: int) -> list[bytes]:
        import numpy as np

        if self._bounds is None:
            self._bounds = np.concatenate(([0], np.cumsum(self.counts))).tolist()
        lo, hi = self._bounds[item], self._bounds[item + 1]
        return [self.distinct[j] for j in self.occurrences[lo:hi].tolist()]


def shared(columns: Columns, scopes: list[tuple[bytes, bytes, int]], drop: str = "") -> tuple[list[Event], list[int]]:
    """``Columns.share_scopes`` of the scanned scopes, each (its resource's encoding, its
    scope's, its number of items): each distinct pair's fields decoded once."""
    made: dict[tuple[bytes, bytes], Event] = {}
    for resource, scope, _ in scopes:
        if (resource, scope) not in made:
            made[resource, scope] = base_of(resource, scope)
    return columns.share_scopes(((made[resource, scope], kept) for resource, scope, kept in scopes), drop)


def base_of(resource: bytes, scope: bytes) -> Event:
    """The fields a scope's spans share, from the encodings of its resource and scope."""
    from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    base = flatten(Resource.FromString(resource).attributes, {})
    instrumentation = InstrumentationScope.FromString(scope)
    if instrumentation.name:
        base["otel.scope.name"] = instrumentation.name
    if instrumentation.version:
        base["otel.scope.version"] = instrumentation.version
    return base


def hex_array(n: int, offsets: bytes, text: bytes) -> pa.Array:
    """Ids' hex text (Arrow's offsets and data) as a string array, an empty id null."""
    import numpy as np
    import pyarrow as pa

    present = np.diff(np.frombuffer(offsets, dtype="<i4")) > 0
    missing = n - int(present.sum())
    bitmap = pa.py_buffer(np.packbits(present, bitorder="little").tobytes()) if missing else None
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text), bitmap, missing)
