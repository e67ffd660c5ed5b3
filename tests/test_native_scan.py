"""The native scanner (native/, ADR 0028) against the converter's Python path, for spans
and for log records.

Every test converts the same requests both ways and asks for the same Arrow table, value
for value and type for type: the scanner is only ever a faster way to the Python path's
answer, and where it cannot read a request exactly as upb does it declines (None).
``ROOTSIFT_REQUIRE_NATIVE=1`` (scripts/test.sh, where cargo is installed) makes a missing
scanner a failure instead of a skip.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pytest

from helpers import otlp as otlp_values
from rootsift.server import native

SCANNER = native.span_scanner()
LOG_SCANNER = native.log_scanner()

if SCANNER is None and os.environ.get("ROOTSIFT_REQUIRE_NATIVE") == "1":
    raise RuntimeError("ROOTSIFT_REQUIRE_NATIVE=1 but rootsift_native is not installed (scripts/setup.sh builds it)")

needs_scanner = pytest.mark.skipif(SCANNER is None, reason="rootsift_native is not installed (needs cargo)")


def _request(rng: random.Random, resources: int = 2, spans: int = 150) -> bytes:
    """A traces request with what real ones hold and what they rarely do: clashing keys,
    maps, arrays, bytes, NaN, mixed kinds, exception events, links, parents, status
    messages, spans without a start, ids of odd lengths, unknown kinds, empty scopes."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    def attribute(key: str) -> KeyValue:
        return otlp_values.attribute(key, rng, ("s", "s", *otlp_values.KINDS), extreme=True)

    keys = ["http.method", "user.id", "service.name", "name", "duration_ms", "a.b", "timestamp"]
    keys += ["status.message", "trace.parent_id", "exception.type", "span.kind", "trace.trace_id"]
    request = ts.ExportTraceServiceRequest()
    for r in range(resources):
        resource = request.resource_spans.add()
        resource.resource.attributes.extend(
            [attribute("service.name"), attribute(f"host.{r}"), attribute(rng.choice(keys))]
        )
        for _ in range(rng.choice([1, 1, 2])):
            scope = resource.scope_spans.add()
            scope.scope.name = rng.choice(["", "net/http"])
            scope.scope.version = rng.choice(["", "1.2"])
            for _ in range(rng.randrange(spans + 1)):
                span = scope.spans.add(name=rng.choice(["a", "b\n", "GET /", "ünï"]))
                span.trace_id = rng.choice([rng.randbytes(16)] * 9 + [b"", rng.randbytes(8)])
                span.span_id = rng.choice([rng.randbytes(8)] * 9 + [b""])
                span.start_time_unix_nano = rng.choice([0] + [10**18 + rng.randrange(10**12)] * 9)
                span.end_time_unix_nano = max(0, span.start_time_unix_nano + rng.randrange(10**9) - 10**8)
                span.kind = rng.choice([*range(6), 9, -1])
                span.attributes.extend(attribute(k) for k in rng.sample(keys, rng.randrange(5)))
                if rng.random() < 0.3:
                    span.parent_span_id = rng.randbytes(8)
                if rng.random() < 0.2:
                    span.status.code, span.status.message = rng.randrange(4), rng.choice(["", "boom"])
                if rng.random() < 0.1:
                    event = span.events.add(name=rng.choice(["exception", "log"]))
                    event.attributes.append(KeyValue(key="exception.type"))
                    event.attributes[0].value.string_value = "ValueError"
                if rng.random() < 0.1:
                    span.links.add(trace_id=bytes(16), span_id=bytes(8))
                    if rng.random() < 0.5:
                        span.links.add(trace_id=bytes(16), span_id=bytes(8))
    return request.SerializeToString()


def _table(bodies: list[bytes], scanner: Callable[[bytes], Any] | None, monkeypatch: pytest.MonkeyPatch) -> Any:
    from rootsift.server.otlp_columns import Columns
    from rootsift.server.otlp_lines import Decoded

    monkeypatch.setattr(native, "span_scanner", lambda: scanner)
    columns, memo = Columns(), Decoded()
    skipped = [columns.add_spans(body, memo) for body in bodies]
    return columns.table(), skipped


def _log_table(bodies: list[bytes], on: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    from rootsift.server.otlp_columns import Columns
    from rootsift.server.otlp_lines import Decoded

    monkeypatch.setattr(native, "log_scanner", lambda: LOG_SCANNER if on else None)
    columns, memo = Columns(), Decoded()
    skipped = [columns.add_logs(body, memo) for body in bodies]
    return columns.table(), skipped


def _same_logs(bodies: list[bytes], monkeypatch: pytest.MonkeyPatch) -> Any:
    expected, skipped = _log_table(bodies, False, monkeypatch)
    got, got_skipped = _log_table(bodies, True, monkeypatch)
    assert got_skipped == skipped
    assert got.schema == expected.schema
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert got.equals(expected)
    return got


def _logs_request(rng: random.Random, resources: int = 2, records: int = 150) -> bytes:
    """A logs request with every kind of body (text, empty text, numbers, structures,
    bytes, an empty value, none), severities, ids, records timed only when observed or not
    at all, and attributes named like a record's own fields."""
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as ls
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    def attribute(key: str) -> KeyValue:
        return otlp_values.attribute(key, rng, ("s", "s", "i", "d", "map", "empty"))

    keys = ["user.id", "http.method", "body", "severity_text", "severity_number", "timestamp"]
    keys += ["trace.trace_id", "service.name", "a.b"]
    request = ls.ExportLogsServiceRequest()
    for r in range(resources):
        resource = request.resource_logs.add()
        resource.resource.attributes.extend([attribute("service.name"), attribute(rng.choice(keys + [f"h{r}"]))])
        for _ in range(rng.choice([1, 2])):
            scope = resource.scope_logs.add()
            scope.scope.name = rng.choice(["", "app"])
            for _ in range(rng.randrange(records + 1)):
                record = scope.log_records.add()
                record.time_unix_nano = rng.choice([0, 0] + [10**18 + rng.randrange(10**12)] * 8)
                record.observed_time_unix_nano = rng.choice([0, 10**18 + 7])
                record.severity_text, record.severity_number = rng.choice([("", 0), ("INFO", 9), ("ERROR", 17)])
                kind = rng.choice(["text"] * 6 + ["value"] * 6 + ["none", "unset"])
                if kind == "text":
                    record.body.string_value = rng.choice(["GET /a 200", 'ünï "quoted"', "x" * 300])
                elif kind == "value":  # text, empty text, a number, a structure, bytes...
                    otlp_values.fill(record.body, rng)
                elif kind == "none":
                    record.body.SetInParent()  # a body with no value
                record.attributes.extend(attribute(k) for k in rng.sample(keys, rng.randrange(4)))
                if rng.random() < 0.6:
                    record.trace_id, record.span_id = rng.randbytes(16), rng.randbytes(8)
    return request.SerializeToString()


needs_log_scanner = pytest.mark.skipif(LOG_SCANNER is None, reason="rootsift_native is not installed (needs cargo)")


@needs_log_scanner
@pytest.mark.parametrize("seed", range(10))
def test_the_scanner_gathers_the_log_table_the_python_path_does(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    assert LOG_SCANNER is not None
    rng = random.Random(seed)
    bodies = [_logs_request(rng) for _ in range(rng.randrange(1, 4))]
    assert all(LOG_SCANNER(body) is not None for body in bodies)
    table = _same_logs(bodies, monkeypatch)
    assert table.num_rows > 0


def test_the_log_columns_are_the_events_of_the_json_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python path's log table (the scanner's reference) holds what ``log_lines``
    writes: each record's event, bodies of every kind and clashing keys included."""
    import json

    from rootsift.server.otlp_arrays import json_lines
    from rootsift.server.otlp_lines import Decoded, log_lines
    from rootsift.server.otlp_types import lazy_request

    rng = random.Random(11)
    bodies = [_logs_request(rng) for _ in range(2)]
    table, _ = _log_table(bodies, False, monkeypatch)
    lines = [line for body in bodies for line in log_lines(lazy_request("logs").FromString(body), Decoded())[0]]

    def events(texts: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in json.loads(t).items() if v is not None} for t in texts]

    assert events(json_lines(table)) == events(lines)


def _same(bodies: list[bytes], monkeypatch: pytest.MonkeyPatch) -> Any:
    assert SCANNER is not None
    expected, skipped = _table(bodies, None, monkeypatch)
    got, got_skipped = _table(bodies, SCANNER, monkeypatch)
    assert got_skipped == skipped
    assert got.schema == expected.schema
    for name in expected.column_names:  # one column at a time, to name the one that differs
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
    assert got.equals(expected)
    return got


@needs_scanner
@pytest.mark.parametrize("seed", range(12))
def test_the_scanner_gathers_the_table_the_python_path_does(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    bodies = [_request(rng) for _ in range(rng.randrange(1, 4))]
    assert all(SCANNER(body) is not None for body in bodies)  # none declined: it is the scanner's table
    table = _same(bodies, monkeypatch)
    assert table.num_rows > 0


@needs_scanner
def test_scanned_and_python_converted_requests_mix_in_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """A declined request is converted in Python beside scanned ones (ids as bytes in some
    runs, as Arrow in others)."""
    from rootsift.server.otlp_columns import Columns
    from rootsift.server.otlp_lines import Decoded

    assert SCANNER is not None
    rng = random.Random(7)
    bodies = [_request(rng, spans=60) for _ in range(4)]
    expected, _ = _table(bodies, None, monkeypatch)
    turns = iter([True, False, False, True])
    monkeypatch.setattr(native, "span_scanner", lambda: SCANNER if next(turns) else None)
    columns, memo = Columns(), Decoded()
    for body in bodies:
        columns.add_spans(body, memo)
    assert columns.table().equals(expected)


def test_an_empty_event_or_link_is_counted_and_an_earlier_exception_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """An event or a link with no fields is still one (protobuf keeps it in the repeated
    field): counted, and an exception event before it read, by both paths."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    request = ts.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    span = scope.spans.add(name="op", start_time_unix_nano=10**18, trace_id=bytes(16), span_id=bytes(8))
    event = span.events.add(name="exception")
    event.attributes.add(key="exception.type").value.string_value = "ValueError"
    span.events.add()
    linked = scope.spans.add(name="op", start_time_unix_nano=10**18, trace_id=bytes(16), span_id=bytes(8))
    linked.links.add(trace_id=bytes(16), span_id=bytes(8))
    linked.links.add()
    body = request.SerializeToString()
    for scanner in [None, SCANNER] if SCANNER is not None else [None]:
        table, _ = _table([body], scanner, monkeypatch)
        assert table.column("span.num_events").to_pylist() == [2, 0]
        assert table.column("span.num_links").to_pylist() == [0, 2]
        assert table.column("exception.type").to_pylist() == ["ValueError", None]


def test_odd_attributes_convert_a_value_of_none_first_and_big_whole_numbers_among_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An attribute with no value as the first key a conversion sees, and whole numbers
    past 2**53 among numbers of the same key (a float column, as the JSON ingest makes it):
    both once failed the conversion."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    request = ts.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    first = scope.spans.add(name="op", start_time_unix_nano=10**18, trace_id=bytes(16), span_id=bytes(8))
    first.attributes.add(key="nothing")
    first.attributes.add(key="n").value.int_value = 2**62
    second = scope.spans.add(name="op", start_time_unix_nano=10**18, trace_id=bytes(16), span_id=bytes(8))
    second.attributes.add(key="n").value.double_value = 0.5
    body = request.SerializeToString()
    for scanner in [None, SCANNER] if SCANNER is not None else [None]:
        table, _ = _table([body], scanner, monkeypatch)
        assert table.column("n").to_pylist() == [float(2**62), 0.5]
        assert "nothing" not in table.column_names


@needs_scanner
def test_a_resource_is_held_once_however_many_scopes_share_it() -> None:
    """Scopes without items are left out and a resource's encoding is one bytes object for
    all its scopes: a large resource over many empty scopes (a request of 110 kB) is not
    copied once per scope (it took 516 MB when it was)."""
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    assert SCANNER is not None
    resource = Resource()
    resource.attributes.add(key="big").value.string_value = "x" * 100_000
    with_span = _field(2, 2, _span())
    scopes = _field(2, 2, b"") * 5000 + _field(2, 2, with_span) * 3
    got = SCANNER(_field(1, 2, _field(1, 2, resource.SerializeToString()) + scopes))
    assert got is not None
    held = got[0]
    assert [kept for _, _, kept in held] == [1, 1, 1]
    assert held[0][0] is held[1][0] is held[2][0]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    tag = _varint(number << 3 | wire)
    return tag + (_varint(len(payload)) + payload if wire == 2 else payload)


def _wrap(*span_encodings: bytes, resource: bytes = b"", scope: bytes = b"") -> bytes:
    scope_spans = _field(1, 2, scope) + b"".join(_field(2, 2, s) for s in span_encodings)
    return _field(1, 2, _field(1, 2, resource) + _field(2, 2, scope_spans))


def _span(**extra: bytes) -> bytes:
    start = (10**18).to_bytes(8, "little")
    end = (10**18 + 5_000_000).to_bytes(8, "little")
    base = _field(1, 2, bytes(range(16))) + _field(2, 2, bytes(8)) + _field(5, 2, b"op")
    return base + _field(7, 1, start) + _field(8, 1, end) + b"".join(extra.values())


@needs_scanner
def test_the_wire_as_upb_reads_it_last_value_wins_messages_merge_unknown_fields_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource

    def attribute(key: str, value: str) -> bytes:
        kv = KeyValue(key=key)
        kv.value.string_value = value
        return _field(9, 2, kv.SerializeToString())

    one = Resource()
    one.attributes.add(key="service.name").value.string_value = "a"
    other = Resource()
    other.attributes.add(key="host").value.string_value = "h"
    name_twice = _span(again=_field(5, 2, b"second"), unknown=_field(99, 0, _varint(5)) + _field(98, 5, bytes(4)))
    attrs = _span(a=attribute("k", "1"), b=attribute("k", "2"), c=attribute("j", "x"))
    status = _span(s=_field(15, 2, _field(3, 0, _varint(2))), t=_field(15, 2, _field(2, 2, b"late")))
    body = _wrap(name_twice, attrs, status, resource=one.SerializeToString())
    body += _wrap(_span(), resource=other.SerializeToString())  # a second resource
    assert SCANNER is not None and SCANNER(body) is not None
    table = _same([body], monkeypatch)
    assert table.column("name").to_pylist()[0] == "second"
    assert table.column("k").to_pylist()[1] == "2"  # the later attribute of a key wins
    # a resource given twice is the two merged, as protobuf merges a message field
    twice = _field(1, 2, one.SerializeToString()) + _field(1, 2, other.SerializeToString())
    body = _field(1, 2, twice + _field(2, 2, _field(2, 2, _span())))
    table = _same([body], monkeypatch)
    assert table.column("service.name").to_pylist() == ["a"] and table.column("host").to_pylist() == ["h"]


@needs_scanner
@pytest.mark.parametrize(
    "why, body",
    [
        ("a group", _wrap(_span(g=bytes([0x5B]) + bytes([0x5C])))),
        ("a known field with another wire type", _wrap(_span(k=_field(7, 0, _varint(5))))),
        ("a name that is not UTF-8", _wrap(_span(n=_field(5, 2, b"\xff\xfe")))),
        ("a time past int64", _wrap(_span(t=_field(7, 1, (2**63).to_bytes(8, "little"))))),
        ("a truncated field", _wrap(_span())[:-3]),
        ("an overlong varint", _wrap(_span(v=_field(6, 0, b"\xff" * 10 + b"\x01")))),
    ],
)
def test_the_scanner_declines_what_it_would_not_read_as_upb(why: str, body: bytes) -> None:
    assert SCANNER is not None
    assert SCANNER(body) is None, why


@needs_scanner
@pytest.mark.parametrize("signal", ["traces", "logs"])
def test_random_bytes_never_crash_the_scanner(signal: str) -> None:
    """Whatever the bytes (it is only given bodies the real message parsed, but a defect
    there must not be a crash here): None or a tuple, never an exception."""
    scan, size = (SCANNER, 15) if signal == "traces" else (LOG_SCANNER, 10)
    assert scan is not None
    rng = random.Random(3)
    valid = _request(rng, resources=1, spans=20) if signal == "traces" else _logs_request(rng, 1, 20)
    for i in range(3000):
        if i % 2:
            body = bytearray(valid)
            for _ in range(rng.randrange(1, 6)):
                body[rng.randrange(len(body))] = rng.randrange(256)
            data = bytes(body[: rng.randrange(len(body) + 1)])
        else:
            data = rng.randbytes(rng.randrange(64))
        got = scan(data)
        assert got is None or (isinstance(got, tuple) and len(got) == size)


def _record(**extra: bytes) -> bytes:
    return _field(1, 1, (10**18).to_bytes(8, "little")) + _field(3, 2, b"INFO") + b"".join(extra.values())


def _logs(*records: bytes) -> bytes:
    return _field(1, 2, _field(2, 2, b"".join(_field(2, 2, r) for r in records)))


@needs_log_scanner
def test_log_bodies_on_the_wire_as_upb_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """A body given twice is the two merged (the later value wins, of whatever kind); an
    empty body is none; unknown fields inside a body leave it to Python."""
    assert LOG_SCANNER is not None
    text = _field(1, 2, b"first")
    number = _field(3, 0, _varint(7))
    bodies = [
        _record(a=_field(5, 2, text), b=_field(5, 2, _field(1, 2, b"second"))),
        _record(a=_field(5, 2, text), b=_field(5, 2, number)),
        _record(a=_field(5, 2, number), b=_field(5, 2, text)),
        _record(a=_field(5, 2, b"")),
        _record(a=_field(5, 2, text + _field(99, 0, _varint(1)))),
        _record(u=_field(99, 2, b"unknown"), t=_field(11, 1, (5).to_bytes(8, "little"))),
    ]
    body = _logs(*bodies)
    assert LOG_SCANNER(body) is not None
    table = _same_logs([body], monkeypatch)
    assert table.column("body").to_pylist() == ["second", "7", "first", None, "first", None]


@needs_log_scanner
@pytest.mark.parametrize(
    "why, body",
    [
        ("a time of another wire type", _logs(_record(t=_field(1, 0, _varint(5))))),
        ("severity text that is not UTF-8", _logs(_record(s=_field(3, 2, b"\xff")))),
        ("a body text that is not UTF-8", _logs(_record(b=_field(5, 2, _field(1, 2, b"\xfe"))))),
        ("a time past int64", _logs(_record(t=_field(1, 1, (2**63).to_bytes(8, "little"))))),
        ("a truncated record", _logs(_record())[:-2]),
    ],
)
def test_the_log_scanner_declines_what_it_would_not_read_as_upb(why: str, body: bytes) -> None:
    assert LOG_SCANNER is not None
    assert LOG_SCANNER(body) is None, why


def test_the_scanner_is_off_when_rootsift_native_is_0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOTSIFT_NATIVE", "0")
    native._module.cache_clear()
    try:
        assert native.span_scanner() is None and native.log_scanner() is None
    finally:
        monkeypatch.delenv("ROOTSIFT_NATIVE")
        native._module.cache_clear()
