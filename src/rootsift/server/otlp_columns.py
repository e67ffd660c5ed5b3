"""OTLP spans and log records as Arrow tables, column by column, for the applier (convert.py).

The events are those ``otlp_lines`` writes as JSON lines (otlp.py documents the fields),
gathered per column instead of per line: an item's own fields go into one run of values
per field and request (``add_own``), each attribute's decoded value (``Decoded``, once per
distinct encoding) into its key's column with the row it belongs to (``place``), and the
fields a scope's items share (resource, scope) once per scope as a run of rows
(``share``). ``Columns.table`` then builds each column as one Arrow array of its JSON kind
(otlp_arrays.py; a key whose values mix kinds is JSON text, which the store leaves to the
JSON-lines ingest). Spans are read here (or by the native scanner: otlp_scan.py), log
records in otlp_logs.py.

Where keys clash (an attribute named like an item's own or a shared field, the same key
twice) an item is gathered from its event as a dict, as ``otlp_lines._span_line`` makes it,
so the same value wins: an item's own fields over its attributes, its attributes over the
shared fields, a later attribute over an earlier one.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rootsift.server.otlp import KINDS, Event, flatten
from rootsift.server.otlp_arrays import IDS, TIME, column, own
from rootsift.server.otlp_lines import SPAN_FIELDS, Decoded, _exception

if TYPE_CHECKING:
    import pyarrow as pa

OWN = ("trace.trace_id", "trace.span_id", "name", "span.kind", "status.code", "duration_ms")
COUNTS = ("span.num_events", "span.num_links")
OPTIONAL = ("trace.parent_id", "status.message")
"""A span's own fields that it may not have: an attribute of the name stays where it has none."""


SPAN = operator.attrgetter(
    "start_time_unix_nano",
    "end_time_unix_nano",
    "trace_id",
    "span_id",
    "name",
    "kind",
    "status",
    "parent_span_id",
    "attributes",
    "events",
    "links",
)
"""A lazy span's fields in one call, read by C code (``map(SPAN, scope.spans)``)."""
_START = operator.itemgetter(0)


class Columns:
    """The events of one dataset, gathered column by column (``add_spans``, ``add_logs``).

    Each key's distinct values are numbered as they come (``_values``): a column is then
    its distinct values as one Arrow array and, for each row, the number of its value
    (``table``). An attribute's encoding is numbered once (``_entry``: its key and value
    numbers), so placing a request's attributes is numpy work over those numbers."""

    def __init__(self) -> None:
        self.rows = 0
        self.times: list[Any] = []
        """Each row's time, in Unix nanoseconds, in runs of rows (lists or arrays)."""
        self.order: dict[str, None] = {}
        """Every key, in the order it first came."""
        self.shared: dict[str, list[tuple[int, int, Any]]] = {}
        """key -> (first row, row past the last, value): fields a scope's items share."""
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {}
        """key -> (rows, values): a row's fields gathered one by one, after ``shared``."""
        self.dense: dict[str, list[tuple[int, Sequence[Any]]]] = {}
        """key -> (first row, a value for each row from there): a span's own fields, last."""
        self._placed: list[tuple[Any, Any, Any]] = []
        """(rows, key numbers, value numbers) of attributes placed by numpy, after ``sparse``."""
        self._keys: dict[str, int] = {}
        self._values: list[dict[tuple[type, Any], int]] = []
        self._distinct: list[list[Any]] = []
        self._entries: dict[bytes, int] = {}
        self._entry_key: list[int] = []
        self._entry_value: list[int] = []
        self._entry_single: list[bool] = []

    def __len__(self) -> int:
        return self.rows

    def _key(self, key: str) -> int:
        number = self._keys.get(key)
        if number is None:
            number = self._keys[key] = len(self._keys)
            self.order[key] = None
            self._values.append({})
            self._distinct.append([])
        return number

    def _value(self, key: int, value: Any) -> int:
        numbers = self._values[key]
        number = numbers.get((type(value), value))
        if number is None:
            number = numbers[(type(value), value)] = len(self._distinct[key])
            self._distinct[key].append(value)
        return number

    def _entry(self, raw: bytes, memo: Decoded) -> int:
        fields = (memo.attributes.get(raw) or memo.attribute(raw))[0]
        number = self._entries[raw] = len(self._entry_key)
        single = len(fields) == 1
        key = self._key(fields[0][0]) if single else 0
        self._entry_key.append(key)
        self._entry_value.append(self._value(key, fields[0][1]) if single else 0)
        self._entry_single.append(single)
        return number

    def _entry_arrays(self) -> tuple[Any, Any, Any]:
        """Each entry's key number, value number, and whether it is one field, as arrays
        (made again only when entries were added)."""
        import numpy as np

        cached = getattr(self, "_arrays", None)
        if cached is None or len(cached[0]) != len(self._entry_key):
            cached = self._arrays = (
                np.asarray(self._entry_key, dtype=np.int64),
                np.asarray(self._entry_value, dtype=np.int64),
                np.asarray(self._entry_single, dtype=bool),
            )
        return cached

    def share(self, base: Event, first: int, past: int) -> None:
        if past > first:
            for key, value in base.items():
                self._key(key)
                self.shared.setdefault(key, []).append((first, past, value))

    def put(self, row: int, event: Event) -> None:
        for key, value in event.items():
            self._key(key)
            rows, values = self.sparse.get(key) or self.sparse.setdefault(key, ([], []))
            rows.append(row)
            values.append(value)

    def add_spans(self, payload: bytes, memo: Decoded) -> int:
        """Gather the spans of a traces request (protobuf, a body the real message parsed);
        the number skipped for having no start time (counted as rejected when received).

        The native scanner reads it where it is installed (otlp_scan.py); otherwise, or
        where it declines, it is parsed as a lazy message whose spans' attributes, events,
        links and status stay encoded (``otlp_types.lazy_request("traces")``)."""
        import numpy as np

        from rootsift.server.native import span_scanner
        from rootsift.server.otlp_types import lazy_request

        scan = span_scanner()
        scanned = scan(payload) if scan is not None else None
        if scanned is not None:
            from rootsift.server.otlp_scan import add_scanned

            return add_scanned(self, scanned, memo)
        request = lazy_request("traces").FromString(payload)
        scoped = (
            (base, list(map(SPAN, scope.spans))) for base, scope in scope_fields(request.resource_spans, "scope_spans")
        )
        spans, bases, per_scope, skipped = self.gather(scoped, _START)
        if not spans:
            return skipped
        first, n = self.rows, len(spans)
        starts, ends, trace_ids, span_ids, names, kinds, statuses, parents, attrs, events, links = zip(*spans)
        found = list(map(memo.statuses.get, statuses))
        if None in found:
            found = [f or memo.status(raw) for f, raw in zip(found, statuses)]
        codes, messages = zip(*found)
        n_events = list(map(len, events))
        counts = list(map(len, attrs))
        entries = self.numbered(list(itertools.chain.from_iterable(attrs)), memo)
        slow = self.place(first, counts, entries, bases, per_scope, n_events)
        for i in slow:
            self.put(first + i, span_extras(attrs[i], events[i], memo))
        try:
            spent = np.asarray(ends, dtype=np.int64) - np.asarray(starts, dtype=np.int64)
            durations: Sequence[float] = (np.maximum(spent, 0) / 1e6).tolist()
        except OverflowError:  # past int64 nanoseconds (year 2262): as Python does it
            durations = [max(end - start, 0) / 1e6 for start, end in zip(starts, ends)]
        texts = list(map(KINDS.get, kinds))
        if None in texts:
            texts = [t or str(k) for t, k in zip(texts, kinds)]
        values = (trace_ids, span_ids, names, texts, codes, durations)  # ids hexed in table()
        optional = (parents, [m or None for m in messages] if any(messages) else [None] * n)  # None: has none
        self.add_own(starts, own_runs(values, (n_events, list(map(len, links))), optional))
        return skipped

    def gather(
        self, scoped: Iterable[tuple[Event, list[Any]]], keep: Any, drop: str = ""
    ) -> tuple[list[Any], list[Event], list[int], int]:
        """Each scope's items that ``keep`` keeps (``scoped``: each scope's shared fields and
        items), the fields shared over their rows from the next row on, less the key
        ``drop``: (the items, each scope's fields, each scope's number of items, the number
        of items not kept)."""
        items: list[Any] = []
        counted: list[tuple[Event, int]] = []
        skipped = 0
        for base, got in scoped:
            kept = got if all(map(keep, got)) else [item for item in got if keep(item)]
            skipped += len(got) - len(kept)
            items.extend(kept)
            counted.append((base, len(kept)))
        return (items, *self.share_scopes(counted, drop), skipped)

    def share_scopes(self, scopes: Iterable[tuple[Event, int]], drop: str = "") -> tuple[list[Event], list[int]]:
        """Share each scope's fields (less the key ``drop``) over its items' rows, the
        scopes' items coming in order from the next row on (``scopes``: each scope's fields
        and number of items); (each scope's fields, each one's number of items), for the
        scopes that have items."""
        bases: list[Event] = []
        per_scope: list[int] = []
        row = self.rows
        for base, count in scopes:
            if count:
                fields = {k: v for k, v in base.items() if k != drop} if drop in base else base
                self.share(fields, row, row + count)
                row += count
                bases.append(fields)
                per_scope.append(count)
        return bases, per_scope

    def numbered(self, raws: list[bytes], memo: Decoded) -> Any:
        """Each attribute encoding's number (a new one numbered as it comes), as an array."""
        import numpy as np

        numbers = list(map(self._entries.get, raws))
        if None in numbers:
            numbers = [e if e is not None else self._entry(raw, memo) for e, raw in zip(numbers, raws)]
        return np.asarray(numbers, dtype=np.int64)

    def place(
        self,
        first: int,
        counts: Any,
        entries: Any,
        bases: list[Event],
        per_scope: list[int],
        n_events: Any,
        fields: frozenset[str] = SPAN_FIELDS,
    ) -> list[int]:
        """Place the attributes of the items from row ``first`` (``counts`` of them each,
        ``entries`` their encodings' numbers, in order; ``bases`` the fields each scope's
        items share, ``per_scope`` how many items each has): each encoding's key and value
        numbers, placed by numpy. The items (from 0) left to gather from their events as a
        dict (``span_extras``, otlp_logs' ``_extras``): those whose keys clash (with their own ``fields``, the shared
        ones, each other) or that have events."""
        import numpy as np

        n = len(counts)
        entry_key, entry_value, entry_single = self._entry_arrays()
        keys = entry_key[entries]
        single = entry_single[entries]
        at = np.repeat(np.arange(n), counts)
        width = max(len(self._keys), 1)  # an attribute with no value is entry key 0 even before any key
        own = np.zeros(width, dtype=bool)
        own[[number for key, number in self._keys.items() if key in fields]] = True
        taken = np.zeros((len(bases), width), dtype=bool)
        for s, base in enumerate(bases):
            taken[s, [self._keys[key] for key in base]] = True
        scope_of = np.repeat(np.repeat(np.arange(len(bases)), per_scope), counts)
        clash = ~single | own[keys] | taken[scope_of, keys]
        slow = np.asarray(n_events, dtype=np.int64) > 0
        slow[at[clash]] = True
        pairs = np.sort(at * width + keys)
        slow[pairs[1:][pairs[1:] == pairs[:-1]] // width] = True
        placed = ~slow[at]
        self._placed.append((at[placed] + first, keys[placed], entry_value[entries][placed]))
        return list(np.flatnonzero(slow).tolist())

    def add_own(self, times: Any, runs: Sequence[tuple[str, Any]]) -> None:
        """Add the next items' rows: their times (Unix nanoseconds) and their own fields,
        each (key, a run of a value for each row: ids as bytes or an Arrow array of their
        hex text, None where an item has no such field)."""
        first = self.rows
        self.rows += len(times)
        self.times.append(times)
        for key, run in runs:
            self._key(key)
            self.dense.setdefault(key, []).append((first, run))

    def add_logs(self, payload: bytes, memo: Decoded) -> int:
        """Gather the log records of a logs request (protobuf, a body the real message
        parsed); the number skipped for having no time at all (otlp_logs.py)."""
        from rootsift.server.otlp_logs import add_logs

        return add_logs(self, payload, memo)

    def table(self) -> pa.Table:
        """The gathered events as one Arrow table: ``timestamp`` (microseconds, UTC, no
        zone) first, then every key in the order it first came; absent values are null."""
        import numpy as np
        import pyarrow as pa

        n = self.rows
        runs = [np.asarray(run, dtype=np.int64) for run in self.times]
        times = (np.concatenate(runs) if runs else np.zeros(0, dtype=np.int64)) // 1000
        arrays = [pa.array(times, type=pa.timestamp("us"))]
        fields = [pa.field(TIME, pa.timestamp("us"))]
        rows, keys, values = (
            (np.concatenate([p[i] for p in self._placed]) for i in range(3))
            if self._placed
            else (np.zeros(0, dtype=np.int64) for _ in range(3))
        )
        by_key = np.argsort(keys, kind="stable")
        rows, keys, values = rows[by_key], keys[by_key], values[by_key]
        bounds = np.searchsorted(keys, np.arange(len(self._keys) + 1))
        for key in self.order:
            if key == TIME:
                continue  # a shared field named so: the item's own time wins
            number = self._keys[key]
            dense = self.dense.get(key, ())
            if dense and key not in self.shared and key not in self.sparse and bounds[number] == bounds[number + 1]:
                array, field = own(key, [run for _, run in dense])
                if sum(len(run) for _, run in dense) < n:  # rows of log records too: null there
                    where = np.concatenate([np.arange(f, f + len(run)) for f, run in dense])
                    index = np.full(n, -1, dtype=np.int64)
                    index[where] = np.arange(len(where))
                    array = array.take(pa.array(index, mask=index < 0))
                if array.null_count < n:  # a key no row has a value for is no field (as in JSON)
                    arrays.append(array)
                    fields.append(field)
                continue
            # the sources in the order they win a row: shared, placed, sparse, dense (no
            # source holds a row twice, so each assignment sets a row at most once there)
            index = np.full(n, -1, dtype=np.int64)
            for lo, hi, value in self.shared.get(key, ()):
                index[lo:hi] = self._value(number, value)
            lo, hi = bounds[number], bounds[number + 1]
            index[rows[lo:hi]] = values[lo:hi]
            if key in self.sparse:
                listed_rows, got = self.sparse[key]
                index[np.asarray(listed_rows, dtype=np.int64)] = [self._value(number, v) for v in got]
            for lo, run in dense:
                for at, value in enumerate(_listed(key, run), lo):
                    if value is not None:  # an optional field the span has not (OPTIONAL)
                        index[at] = self._value(number, value)
            array, field = column(key, self._distinct[number])
            array = array.take(pa.array(index, mask=index < 0))
            if array.null_count < n:
                arrays.append(array)
                fields.append(field)
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def own_runs(values: Sequence[Any], counts: Sequence[Any], optional: Sequence[Any]) -> list[tuple[str, Any]]:
    """A span's own fields as ``Columns.add_own`` takes them, from runs in the order of
    ``OWN``, ``COUNTS`` and ``OPTIONAL``."""
    return [*zip(OWN, values), *zip(COUNTS, counts), *zip(OPTIONAL, optional)]


def _listed(key: str, run: Sequence[Any]) -> Sequence[Any]:
    """A run of a span's own field as Python values (ids as hex text, None for none)."""
    if hasattr(run, "to_pylist"):  # an Arrow array (the native scanner's)
        return list(run.to_pylist())
    if hasattr(run, "tolist"):  # a numpy array
        return list(run.tolist())
    return [i.hex() or None for i in run] if key in IDS else run


def span_extras(attributes: Sequence[bytes], events: Sequence[bytes], memo: Decoded) -> Event:
    """A span's fields other than those ``add_spans`` keeps in lists of their own, from its
    event as a dict (``otlp_lines._span_line``): attributes (a later one winning), then an
    ``exception`` event's type and message where no attribute set them."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    event: Event = {}
    for raw in attributes:
        for key, value in (memo.attributes.get(raw) or memo.attribute(raw))[0]:
            event[key] = value
    for key in (TIME, *OWN, *COUNTS):  # the span's own columns win
        event.pop(key, None)
    if events:
        _exception([Span.Event.FromString(raw) for raw in events], event)
    return event


def scope_fields(resources: Iterable[Any], scopes: str) -> Iterator[tuple[Event, Any]]:
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
