"""OTLP spans and log records as JSON lines, in bulk, for the applier (convert.py).

Requests are parsed as lazy messages (otlp_types.lazy_request): an item's attributes (a
span's events, links and status too) stay encoded, and each distinct encoding is decoded
once into its JSON text (``Decoded``), since the same attributes repeat across a batch.
The fields a scope's items share (resource, scope) are written once per scope; a span's
line is that text, its attributes' texts, and its own fields. A line is exactly what
``orjson.dumps`` of the event as a dict would write (otlp.py documents the fields); a
span whose keys clash (an attribute named like a shared or a span field) is written from
that dict, where the later value wins in the earlier place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import orjson

from rootsift.server.otlp import KINDS, STATUS, Event, any_value, flatten, nanos_iso, second_text

SPAN_FIELDS = frozenset(
    {"timestamp", "trace.trace_id", "trace.span_id", "name", "span.kind", "status.code", "duration_ms"}
    | {"span.num_events", "span.num_links", "trace.parent_id", "status.message", "exception.type", "exception.message"}
)
"""A span's own fields: an attribute of the same name is overwritten by them."""


class Decoded:
    """Attributes, spans' statuses and names decoded once per distinct encoding, at most
    ``limit`` of each (past it the memo starts afresh).

    ``attributes[raw]`` is (the attribute's fields, their keys, their JSON text without
    braces): a map attribute is several fields, an empty value none."""

    def __init__(self, limit: int = 1 << 14) -> None:
        self.limit = limit
        self.attributes: dict[bytes, tuple[tuple[tuple[str, Any], ...], tuple[str, ...], bytes]] = {}
        self.statuses: dict[bytes, tuple[str, str]] = {}
        self.names: dict[str, str] = {}

    def attribute(self, raw: bytes) -> tuple[tuple[tuple[str, Any], ...], tuple[str, ...], bytes]:
        from opentelemetry.proto.common.v1.common_pb2 import KeyValue

        if len(self.attributes) >= self.limit:
            self.attributes.clear()
        fields = flatten([KeyValue.FromString(raw)], {})
        text = orjson.dumps(fields, default=str)[1:-1]
        found = self.attributes[raw] = (tuple(fields.items()), tuple(fields), text)
        return found

    def status(self, raw: bytes) -> tuple[str, str]:
        from opentelemetry.proto.trace.v1.trace_pb2 import Status

        if len(self.statuses) >= self.limit:
            self.statuses.clear()
        status = Status.FromString(raw)
        found = self.statuses[raw] = (STATUS.get(status.code) or str(status.code), status.message)
        return found

    def name(self, name: str) -> str:
        if len(self.names) >= self.limit:
            self.names.clear()
        found = self.names[name] = orjson.dumps(name).decode()
        return found


def span_lines(request: Any, memo: Decoded | None = None) -> tuple[list[bytes], int]:
    """JSON lines of a lazy traces request's spans (``otlp_types.lazy_request("traces")``;
    each line ends with a newline), and the number skipped for having no start time
    (counted as rejected when the request arrived: ``otlp.rejects``)."""
    memo = memo or Decoded()
    attributes, statuses, names = memo.attributes, memo.statuses, memo.names
    out: list[bytes] = []
    skipped = 0
    kinds = KINDS
    seconds: dict[int, str] = {}  # the seconds' text, made once per second of a request
    for base, shared, scope in _shared(request.resource_spans, "scope_spans"):
        taken = SPAN_FIELDS | base.keys()
        for span in scope.spans:
            start = span.start_time_unix_nano
            if not start:
                skipped += 1
                continue
            texts: list[bytes] = []
            keys: list[str] = []
            for raw in span.attributes:
                _, names_of, json_text = attributes.get(raw) or memo.attribute(raw)
                if json_text:
                    texts.append(json_text)
                    keys.extend(names_of)
            code, message = statuses.get(span.status) or memo.status(span.status)
            if span.events or not taken.isdisjoint(keys) or len(set(keys)) < len(keys):
                out.append(_span_line(span, base, shared, memo, code, message))  # the general way
                continue
            sec, rest = divmod(start, 1_000_000_000)
            stamp = seconds.get(sec) or seconds.setdefault(sec, second_text(sec))
            name = span.name
            own = (
                f'"timestamp":"{stamp}.{rest // 1000:06d}Z","trace.trace_id":"{span.trace_id.hex()}",'
                f'"trace.span_id":"{span.span_id.hex()}","name":{names.get(name) or memo.name(name)},'
                f'"span.kind":"{kinds.get(span.kind) or span.kind}","status.code":"{code}",'
                f'"duration_ms":{max(span.end_time_unix_nano - start, 0) / 1e6!r},'
                f'"span.num_events":0,"span.num_links":{len(span.links)}'
            )
            if span.parent_span_id:
                own += f',"trace.parent_id":"{span.parent_span_id.hex()}"'
            if message:
                own += ',"status.message":' + orjson.dumps(message).decode()
            texts.append(own.encode())
            out.append(shared + b",".join(texts) + b"}\n")
    return out, skipped


def _span_line(span: Any, base: Event, shared: bytes, memo: Decoded, code: str, message: str) -> bytes:
    """One span's line from its event as a dict: any keys, the later value winning."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    event: Event = {}
    for raw in span.attributes:
        for key, value in (memo.attributes.get(raw) or memo.attribute(raw))[0]:
            event[key] = value
    start = span.start_time_unix_nano
    event["timestamp"] = nanos_iso(start)
    event["trace.trace_id"] = span.trace_id.hex()
    event["trace.span_id"] = span.span_id.hex()
    event["name"] = span.name
    event["span.kind"] = KINDS.get(span.kind) or str(span.kind)
    event["status.code"] = code
    event["duration_ms"] = max(span.end_time_unix_nano - start, 0) / 1e6
    event["span.num_events"] = len(span.events)
    event["span.num_links"] = len(span.links)
    if span.parent_span_id:
        event["trace.parent_id"] = span.parent_span_id.hex()
    if message:
        event["status.message"] = message
    if span.events:
        _exception([Span.Event.FromString(raw) for raw in span.events], event)
    return _line(base, shared, event)


def _exception(span_events: Iterable[Any], event: Event) -> None:
    for ev in span_events:
        if ev.name == "exception":
            attrs = flatten(ev.attributes, {})
            for key in ("exception.type", "exception.message"):
                if key in attrs:
                    event.setdefault(key, attrs[key])


def log_lines(request: Any, memo: Decoded | None = None) -> tuple[list[bytes], int]:
    """JSON lines of a lazy logs request's records (``otlp_types.lazy_request("logs")``),
    and the number skipped for having no time at all (see ``rejects``)."""
    memo = memo or Decoded()
    out: list[bytes] = []
    skipped = 0
    for base, shared, scope in _shared(request.resource_logs, "scope_logs"):
        for record in scope.log_records:
            nanos = record.time_unix_nano or record.observed_time_unix_nano
            if not nanos:
                skipped += 1
                continue
            event = attributes_of(record, memo)
            event["timestamp"] = nanos_iso(nanos)
            log_fields(record, event)
            out.append(_line(base, shared, event))
    return out, skipped


def _shared(resources: Iterable[Any], scopes: str) -> Iterator[tuple[Event, bytes, Any]]:
    """(the fields a scope's items share, them as the start of a JSON object, the scope)."""
    for resource in resources:
        attributes = flatten(resource.resource.attributes, {})
        for scope in getattr(resource, scopes):
            base = dict(attributes)
            if scope.scope.name:
                base["otel.scope.name"] = scope.scope.name
            if scope.scope.version:
                base["otel.scope.version"] = scope.scope.version
            shared = orjson.dumps(base, default=str)[:-1] + (b"," if base else b"")
            yield base, shared, scope


def _line(base: Event, shared: bytes, event: Event) -> bytes:
    """``base`` then ``event`` as one JSON line; a key of both keeps base's place and event's value."""
    if not base.keys().isdisjoint(event):
        return orjson.dumps({**base, **event}, default=str) + b"\n"
    return shared + orjson.dumps(event, default=str)[1:] + b"\n"


def attributes_of(record: Any, memo: Decoded) -> Event:
    """A record's attributes, flattened (each distinct one decoded once per request)."""
    event: Event = {}
    for raw in record.attributes:
        for key, value in (memo.attributes.get(raw) or memo.attribute(raw))[0]:
            event[key] = value
    return event


def log_fields(record: Any, event: Event) -> None:
    """A log record's own fields (severity, body, trace and span ids) into ``event``."""
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
