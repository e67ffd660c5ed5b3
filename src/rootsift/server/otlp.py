"""OTLP/HTTP payloads (protobuf or JSON) into rootsift events, through opentelemetry-proto.

Spans and log records become one event each: the resource's attributes, the scope's name
and version, and the item's own attributes flattened under their semantic-convention
names (``service.name``, ``http.request.method``; a map value's keys joined with dots,
arrays kept as JSON text). A span's fields::

    timestamp  its start          trace.trace_id  trace.span_id  trace.parent_id
    name       span.kind          status.code  status.message     duration_ms
    span.num_events  span.num_links  exception.type/.message (from an "exception" event)

A log record's: ``timestamp`` (its time, else when it was observed), ``severity_text``,
``severity_number``, ``body`` (text; a structured body as JSON), trace and span ids.
An item without any time is rejected and counted in the response's ``partial_success``.

Here: decoding a request and counting its rejects, when it is received; the spans and
log records become JSON lines later, in bulk, in the converter (otlp_lines.py); metric
points at once (otlp_metrics.py).
"""

from __future__ import annotations

import base64
import functools
import json
import operator
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message

from rootsift.server.body import BadBody

Event = dict[str, Any]

KINDS = {0: "unspecified", 1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
STATUS = {0: "unset", 1: "ok", 2: "error"}
ID_FIELDS = ("traceId", "spanId", "parentSpanId")
_START = operator.attrgetter("start_time_unix_nano")


def decode(message: Message, body: bytes, content_type: str | None) -> None:
    """Fill ``message`` from a protobuf or OTLP/JSON body; BadBody when it is neither."""
    kind = (content_type or "application/x-protobuf").split(";")[0].strip().lower()
    try:
        if kind == "application/json":
            data = json.loads(body)
            if not isinstance(data, dict):
                raise BadBody("the OTLP/JSON body is not an object")
            json_format.ParseDict(_ids_to_base64(data), message, ignore_unknown_fields=True)
        elif kind in ("application/x-protobuf", "application/protobuf", "application/octet-stream"):
            message.ParseFromString(body)
        else:
            raise BadBody(f"Content-Type {kind!r} is not OTLP (application/x-protobuf or application/json)")
    except (DecodeError, json_format.ParseError, ValueError, RecursionError) as exc:
        raise BadBody(f"not a valid OTLP {type(message).__name__}: {exc}") from exc


def _ids_to_base64(node: Any) -> Any:
    """OTLP/JSON writes trace and span ids as hex, protobuf's JSON mapping reads bytes as
    base64: convert the ids before parsing."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in ID_FIELDS and isinstance(value, str):
                try:
                    value = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError as exc:
                    raise BadBody(f"{key} {value!r} is not hex") from exc
            out[key] = _ids_to_base64(value)
        return out
    if isinstance(node, list):
        return [_ids_to_base64(v) for v in node]
    return node


@functools.lru_cache(maxsize=4096)
def second_text(seconds: int) -> str:
    """Unix seconds as RFC 3339 without the fraction or zone: ``2026-01-01T00:00:00``."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def nanos_iso(nanos: int) -> str:
    """Unix nanoseconds as RFC 3339 with microseconds (the store keeps microseconds)."""
    seconds, rest = divmod(nanos, 1_000_000_000)
    return f"{second_text(seconds)}.{rest // 1000:06d}Z"


SCALARS = frozenset({"string_value", "bool_value", "int_value", "double_value"})


def any_value(value: Any) -> Any:
    which = value.WhichOneof("value")
    if which in SCALARS:
        return getattr(value, which)
    if which is None:
        return None
    if which == "array_value":
        return json.dumps([any_value(v) for v in value.array_value.values], default=str)
    if which == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which)


def flatten(attributes: Iterable[Any], into: Event, prefix: str = "") -> Event:
    for kv in attributes:
        value = kv.value
        which = value.WhichOneof("value")
        if which in SCALARS:  # nearly every attribute: read it directly
            into[prefix + kv.key] = getattr(value, which)
            continue
        value = any_value(value)
        if isinstance(value, dict):
            _flatten_map(value, into, prefix + kv.key + ".")
        elif value is not None:
            into[prefix + kv.key] = value
    return into


def _flatten_map(value: dict[str, Any], into: Event, prefix: str) -> None:
    for key, v in value.items():
        if isinstance(v, dict):
            _flatten_map(v, into, prefix + key + ".")
        elif v is not None:
            into[prefix + key] = v


def scoped(resources: Iterable[Any], scopes: str, items: str) -> Iterator[tuple[Event, Any]]:
    """(the fields every item shares, the item) for each item of every scope of every
    resource: ``scoped(request.resource_spans, "scope_spans", "spans")``. The shared
    fields are the resource's attributes and the scope's name and version."""
    for resource in resources:
        for scope in getattr(resource, scopes):
            base = flatten(resource.resource.attributes, {})
            if scope.scope.name:
                base["otel.scope.name"] = scope.scope.name
            if scope.scope.version:
                base["otel.scope.version"] = scope.scope.version
            for item in getattr(scope, items):
                yield base, item


def rejects(request: Any, signal: str) -> tuple[int, str]:
    """(items rejected, why) of a traces or logs request: an item without any time is
    rejected (counted in the response's ``partial_success``; the conversion skips it)."""
    rejected, why = 0, ""
    if signal == "traces":
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                if all(map(_START, scope.spans)):  # every span has one: read by C code
                    continue
                for span in scope.spans:
                    if not span.start_time_unix_nano:
                        rejected += 1
                        why = f"span {span.name!r} has no start_time_unix_nano"
    else:
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                for record in scope.log_records:
                    if not (record.time_unix_nano or record.observed_time_unix_nano):
                        rejected += 1
                        why = "a log record has neither time_unix_nano nor observed_time_unix_nano"
    return rejected, why
