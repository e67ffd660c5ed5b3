"""OTLP spans and log records as Arrow tables, column by column, for the applier (convert.py).

The events are those ``otlp_lines`` writes as JSON lines (otlp.py documents the fields),
gathered per column instead of per line: a span's own fields go into one Python list per
field, each attribute's decoded value (``Decoded``, once per distinct encoding) into its
key's column with the row it belongs to, and the fields a scope's items share (resource,
scope) once per scope as a run of rows. ``Columns.table`` then builds each column as one
Arrow array. A key's values keep their JSON kind: text, a whole number (int64), a number
(float64; NaN and infinities are null, as orjson writes them), a boolean; a key whose values
mix kinds (other than whole numbers and numbers) is a text column of each value's JSON text,
marked ``JSON_TEXT`` in its field's metadata, which the store does not take as columns
(the applier ingests such a table as JSON lines instead: ``json_lines``).

Where keys clash (an attribute named like a span's own or a shared field, the same key
twice) a span is gathered from its event as a dict, as ``otlp_lines._span_line`` makes it,
so the same value wins: a span's own fields over its attributes, its attributes over the
shared fields, a later attribute over an earlier one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from rootsift.server.otlp import KINDS, Event, any_value, flatten
from rootsift.server.otlp_lines import SPAN_FIELDS, Decoded, _exception
from rootsift.store.arrow_ingest import JSON_TEXT

if TYPE_CHECKING:
    import pyarrow as pa

TIME = "timestamp"
OWN = ("trace.trace_id", "trace.span_id", "name", "span.kind", "status.code", "duration_ms")
COUNTS = ("span.num_events", "span.num_links")


class Columns:
    """The events of one dataset, gathered column by column (``add_spans``, ``add_logs``)."""

    def __init__(self) -> None:
        self.rows = 0
        self.times: list[int] = []
        """Each row's time, in Unix nanoseconds."""
        self.order: dict[str, None] = {}
        """Every key, in the order it first came."""
        self.shared: dict[str, list[tuple[int, int, Any]]] = {}
        """key -> (first row, row past the last, value): fields a scope's items share."""
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {}
        """key -> (rows, values): attributes and per-item fields, applied after ``shared``."""
        self.dense: dict[str, list[tuple[int, list[Any]]]] = {}
        """key -> (first row, a value for each row from there): a span's own fields, last."""

    def __len__(self) -> int:
        return self.rows

    def _key(self, key: str) -> None:
        if key not in self.order:
            self.order[key] = None

    def _share(self, base: Event, first: int, past: int) -> None:
        if past > first:
            for key, value in base.items():
                self._key(key)
                self.shared.setdefault(key, []).append((first, past, value))

    def _put(self, row: int, event: Event) -> None:
        for key, value in event.items():
            self._key(key)
            rows, values = self.sparse.get(key) or self.sparse.setdefault(key, ([], []))
            rows.append(row)
            values.append(value)

    def add_spans(self, request: Any, memo: Decoded) -> int:
        """Gather a lazy traces request's spans (``otlp_types.lazy_request("traces")``); the
        number skipped for having no start time (counted as rejected when received)."""
        attributes, statuses, sparse = memo.attributes, memo.statuses, self.sparse
        skipped = 0
        for base, scope in _scopes(request.resource_spans, "scope_spans"):
            first = row = self.rows
            taken = SPAN_FIELDS | base.keys()
            starts, ends, trace_ids, span_ids, names, kinds, codes, events, links = ([] for _ in range(9))
            for span in scope.spans:
                start = span.start_time_unix_nano
                if not start:
                    skipped += 1
                    continue
                found = [attributes.get(raw) or memo.attribute(raw) for raw in span.attributes]
                keys = [key for fields in found for key in fields[1]]
                code, message = statuses.get(span.status) or memo.status(span.status)
                if span.events or not taken.isdisjoint(keys) or len(set(keys)) < len(keys):
                    extras = _span_extras(span, found)
                    if message:
                        extras["status.message"] = message
                    self._put(row, extras)
                else:
                    for fields in found:
                        for key, value in fields[0]:
                            column = sparse.get(key)
                            if column is None:
                                self._key(key)
                                column = sparse[key] = ([], [])
                            column[0].append(row)
                            column[1].append(value)
                    if span.parent_span_id or message:
                        extras = {"trace.parent_id": span.parent_span_id.hex()} if span.parent_span_id else {}
                        if message:
                            extras["status.message"] = message
                        self._put(row, extras)
                starts.append(start)
                ends.append(span.end_time_unix_nano)
                trace_ids.append(span.trace_id)
                span_ids.append(span.span_id)
                names.append(span.name)
                kinds.append(span.kind)
                codes.append(code)
                events.append(len(span.events))
                links.append(len(span.links))
                row += 1
            if row == first:
                continue
            self.rows = row
            self.times.extend(starts)
            self._share(base, first, row)
            durations = [max(end - start, 0) / 1e6 for start, end in zip(starts, ends)]
            own = (
                [t.hex() for t in trace_ids],
                [s.hex() for s in span_ids],
                names,
                [KINDS.get(k) or str(k) for k in kinds],
                codes,
                durations,
            )
            for key, values in (*zip(OWN, own), *zip(COUNTS, (events, links))):
                self._key(key)
                self.dense.setdefault(key, []).append((first, values))
        return skipped

    def add_logs(self, request: Any, memo: Decoded) -> int:
        """Gather a lazy logs request's records (``otlp_types.lazy_request("logs")``); the
        number skipped for having no time at all."""
        attributes = memo.attributes
        skipped = 0
        for base, scope in _scopes(request.resource_logs, "scope_logs"):
            first = self.rows
            for record in scope.log_records:
                nanos = record.time_unix_nano or record.observed_time_unix_nano
                if not nanos:
                    skipped += 1
                    continue
                event: Event = {}
                for raw in record.attributes:
                    for key, value in (attributes.get(raw) or memo.attribute(raw))[0]:
                        event[key] = value
                event.pop(TIME, None)  # the record's time wins, in the time column
                if record.severity_text:
                    event["severity_text"] = record.severity_text
                if record.severity_number:
                    event["severity_number"] = int(record.severity_number)
                body = any_value(record.body) if record.HasField("body") else None
                if body is not None:
                    event["body"] = body if isinstance(body, str) else json.dumps(body, default=str)
                if record.trace_id:
                    event["trace.trace_id"] = record.trace_id.hex()
                if record.span_id:
                    event["trace.span_id"] = record.span_id.hex()
                self._put(self.rows, event)
                self.times.append(nanos)
                self.rows += 1
            self._share({k: v for k, v in base.items() if k != TIME}, first, self.rows)
        return skipped

    def table(self) -> pa.Table:
        """The gathered events as one Arrow table: ``timestamp`` (microseconds, UTC, no
        zone) first, then every key in the order it first came; absent values are null."""
        import numpy as np
        import pyarrow as pa

        n = self.rows
        times = np.asarray(self.times, dtype=np.int64) // 1000
        arrays = [pa.array(times, type=pa.timestamp("us"))]
        fields = [pa.field(TIME, pa.timestamp("us"))]
        for key in self.order:
            if key == TIME:
                continue  # a shared field named so: the item's own time wins
            # sources in the order they win a row: shared, then sparse, then dense (no
            # source holds a row twice, so each assignment below sets a row at most once)
            rows: list[Any] = []
            values: list[Any] = []
            for first, past, value in self.shared.get(key, ()):
                rows.append(np.arange(first, past))
                values.extend([value] * (past - first))
            if key in self.sparse:
                rows.append(np.asarray(self.sparse[key][0], dtype=np.int64))
                values.extend(self.sparse[key][1])
            for first, run in self.dense.get(key, ()):
                rows.append(np.arange(first, first + len(run)))
                values.extend(run)
            array, field = _column(key, values)
            index = np.full(n, -1, dtype=np.int64)
            at = 0
            for where in rows:
                index[where] = np.arange(at, at + len(where))
                at += len(where)
            arrays.append(array.take(pa.array(index, mask=index < 0)))
            fields.append(field)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _column(key: str, values: list[Any]) -> tuple[pa.Array, pa.Field]:
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
    elif kinds <= {int, float}:
        numbers = pa.array(values, type=pa.float64())
        finite = pc.is_finite(numbers)
        return pc.if_else(finite, numbers, None), pa.field(key, pa.float64())
    text = [orjson.dumps(v, default=str).decode() for v in values]
    return pa.array(text, type=pa.string()), pa.field(key, pa.string(), metadata={JSON_TEXT: b"1"})


def _span_extras(span: Any, found: list[Any]) -> Event:
    """A span's fields other than those ``add_spans`` keeps in lists of their own, from its
    event as a dict (``otlp_lines._span_line``): attributes, then the span's optional fields
    over them, then an ``exception`` event's type and message where no attribute set them."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    event: Event = {}
    for fields in found:
        for key, value in fields[0]:
            event[key] = value
    for key in (TIME, *OWN, *COUNTS):  # the span's own columns win
        event.pop(key, None)
    if span.parent_span_id:
        event["trace.parent_id"] = span.parent_span_id.hex()
    if span.events:
        _exception([Span.Event.FromString(raw) for raw in span.events], event)
    return event


def _scopes(resources: Iterable[Any], scopes: str) -> Iterator[tuple[Event, Any]]:
    """(the fields a scope's items share, the scope)."""
    for resource in resources:
        attributes = flatten(resource.resource.attributes, {})
        for scope in getattr(resource, scopes):
            base = dict(attributes)
            if scope.scope.name:
                base["otel.scope.name"] = scope.scope.name
            if scope.scope.version:
                base["otel.scope.version"] = scope.scope.version
            yield base, scope


def json_lines(table: pa.Table) -> Iterator[bytes]:
    """The table's rows as the JSON lines of their events (absent values left out; JSON
    text columns as the values they hold), for an ingest of the JSON kind."""
    text = {f.name for f in table.schema if f.metadata and JSON_TEXT in f.metadata}
    for batch in table.to_batches(max_chunksize=8192):
        for row in batch.to_pylist():
            event: Event = {}
            for key, value in row.items():
                if key in text and value is not None:
                    value = orjson.loads(value)  # null for a NaN, as orjson writes it
                if value is None:
                    continue
                event[key] = value.strftime("%Y-%m-%dT%H:%M:%S.%fZ") if key == TIME else value
            yield orjson.dumps(event) + b"\n"
