"""`rootsift serve` as a user runs it: a real process on real ports, real clients (the
OpenTelemetry SDK's OTLP/HTTP exporters, libhoney, curl, httpx), kill -9, gzip bombs."""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import statistics
import struct
import subprocess
import sys
import threading
import time
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers import otlp as otlp_values
from helpers.server import Server, start, stop
from rootsift.server.wal import Wal, encode, records, repair


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = start(tmp_path / "data")
    yield s
    assert stop(s) == 0


def test_otel_sdk_traces_logs_and_metrics_are_queried_back(server: Server) -> None:
    import logging

    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind, Status, StatusCode

    resource = Resource.create({"service.name": "checkout", "host.name": "web-1"})
    seen = InMemorySpanExporter()
    traces = TracerProvider(resource=resource)
    traces.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=server.otlp + "/v1/traces")))
    traces.add_span_processor(SimpleSpanProcessor(seen))
    tracer = traces.get_tracer("shop", "1.2")
    for i in range(50):
        with tracer.start_as_current_span("GET /cart", kind=SpanKind.SERVER, attributes={"cart.items": i}) as span:
            if i % 10 == 0:
                span.set_status(Status(StatusCode.ERROR, "boom"))
            with tracer.start_as_current_span("SELECT carts", kind=SpanKind.CLIENT):
                pass
    traces.shutdown()

    logs = LoggerProvider(resource=resource)
    logs.add_log_record_processor(SimpleLogRecordProcessor(OTLPLogExporter(endpoint=server.otlp + "/v1/logs")))
    logger = logging.getLogger("test_server.app")
    with warnings.catch_warnings():  # the SDK's handler is deprecated in favour of a contrib package
        warnings.simplefilter("ignore", DeprecationWarning)
        handler = LoggingHandler(logger_provider=logs)
    logger.addHandler(handler)
    try:
        logger.warning("disk %s almost full", "sda", extra={"disk.free_bytes": 1234})
    finally:
        logger.removeHandler(handler)
        logs.shutdown()

    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=server.otlp + "/v1/metrics"), export_interval_millis=100_000
    )
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    counter = meters.get_meter("shop").create_counter("orders")
    for _ in range(3):
        counter.add(5, {"region": "eu"})
        reader.force_flush()
    meters.shutdown()

    assert server.settled()["wal_backlog_bytes"] == 0
    spans = seen.get_finished_spans()
    got = server.query(
        {"dataset": "traces", "calculations": ["count"], "breakdowns": ["trace.trace_id", "name"], "limit": 1000}
    )
    stored = {(r[0], r[1]) for r in got["rows"]}
    assert stored == {(format(s.context.trace_id, "032x"), s.name) for s in spans}
    kinds = server.query(
        {"dataset": "traces", "calculations": ["count"], "breakdowns": ["span.kind", "status.code", "service.name"]}
    )
    assert sorted(map(tuple, kinds["rows"])) == [
        ("client", "unset", "checkout", 50),
        ("server", "error", "checkout", 5),
        ("server", "unset", "checkout", 45),
    ]
    mean = server.query({"dataset": "traces", "calculations": ["avg(cart.items)"], "where": 'name = "GET /cart"'})
    assert mean["rows"] == [[24.5]]

    got = server.query({"dataset": "logs", "calculations": ["count"], "breakdowns": ["body", "severity_text"]})
    assert got["rows"] == [["disk sda almost full", "WARN", 1]]
    # a cumulative counter: 5, 10, 15 -> deltas after the first point
    got = server.query(
        {"dataset": "metrics", "calculations": ["max(value)", "sum(delta)"], "where": 'metric.name = "orders"'}
    )
    assert got["rows"] == [[15, 10.0]]


def telemetrygen() -> str | None:
    """OpenTelemetry's load generator, where scripts/install-telemetrygen.sh puts it."""
    import shutil

    gopath = Path(os.environ.get("GOPATH") or Path.home() / "go")
    for candidate in (os.environ.get("TELEMETRYGEN"), gopath / "bin" / "telemetrygen", shutil.which("telemetrygen")):
        if candidate and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@pytest.mark.skipif(
    telemetrygen() is None,
    reason="telemetrygen is not installed: scripts/install-telemetrygen.sh installs it (needs go); "
    "or set TELEMETRYGEN=/path/to/telemetrygen",
)
def test_telemetrygen_traces_logs_and_metrics_are_queried_back(server: Server) -> None:
    """The OpenTelemetry Collector's own load generator (Go's OTLP/HTTP exporters, protobuf)."""
    common = ["--otlp-http", "--otlp-insecure", "--otlp-endpoint", f"127.0.0.1:{server.otlp_port}", "--rate", "0"]
    common += ["--otlp-attributes", 'deployment.environment="ci"', "--telemetry-attributes", 'shard="s7"']
    runs = [
        ["traces", "--traces", "40", "--child-spans", "2", "--service", "tg-svc", "--status-code", "Error"],
        ["logs", "--logs", "30", "--body", "disk full", "--severity-text", "Warn", "--severity-number", "13"],
        ["metrics", "--metrics", "12", "--metric-type", "Sum"],
    ]
    for args in runs:
        res = subprocess.run([str(telemetrygen()), *args, *common], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-2000:]
    health = server.settled()
    assert health["wal_backlog_bytes"] == 0 and health["rejected_events"] == 0
    spans = server.query(
        {"dataset": "traces", "calculations": ["count"], "breakdowns": ["name", "span.kind", "status.code"]}
        | {"where": 'service.name = "tg-svc" and deployment.environment = "ci" and shard = "s7"'}
    )
    # each trace: a client span and its two server children, every one with the status asked for
    assert sorted(map(tuple, spans["rows"])) == [
        ("lets-go", "client", "error", 40),
        ("okey-dokey-0", "server", "error", 40),
        ("okey-dokey-1", "server", "error", 40),
    ]
    traces = server.query(
        {"dataset": "traces", "calculations": ["count"], "breakdowns": ["trace.trace_id"], "limit": 1000}
    )
    assert len(traces["rows"]) == 40 and {row[1] for row in traces["rows"]} == {3}
    parents = server.query({"dataset": "traces", "calculations": ["count"], "where": "exists trace.parent_id"})
    assert parents["rows"] == [[80]]
    logs = server.query(
        {"dataset": "logs", "calculations": ["count"], "breakdowns": ["body", "severity_text", "shard"]}
        | {"where": 'deployment.environment = "ci"'}
    )
    assert logs["rows"] == [["disk full", "Warn", "s7", 30]]
    metrics = server.query(
        {"dataset": "metrics", "calculations": ["count"], "breakdowns": ["metric.name", "metric.type", "shard"]}
    )
    assert metrics["rows"] == [["gen", "sum", "s7", 12]]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # libhoney leaves a socket open
@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_libhoney_events_with_sample_rates(server: Server) -> None:
    import libhoney

    client = libhoney.Client(writekey="any", dataset="shop", api_host=server.url, block_on_send=True)
    try:
        for i in range(30):
            ev = client.new_event()
            ev.add({"endpoint": "/cart", "duration_ms": float(i)})
            ev.sample_rate = 2 if i % 2 else 1
            ev.send_presampled()
        client.flush()
        responses = [client.responses().get(timeout=10) for _ in range(30)]
    finally:
        client.close()
    assert {r["status_code"] for r in responses} == {202}
    server.settled()
    got = server.query({"dataset": "shop", "calculations": ["count", "sum(duration_ms)"]})
    # 15 events stand for 1, 15 for 2: 45 events; the sum counts each odd duration twice
    assert got["rows"] == [[45, float(sum(range(30)) + sum(range(1, 30, 2)))]]


def test_curl_gzipped_otlp_json(server: Server, tmp_path: Path) -> None:
    trace_id, span_id = "5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174"
    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "curl-svc"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,
                                "spanId": span_id,
                                "name": "job",
                                "kind": 2,
                                "startTimeUnixNano": "1700000000000000000",
                                "endTimeUnixNano": "1700000000250000000",
                                "attributes": [{"key": "retries", "value": {"intValue": "3"}}],
                            },
                            {"traceId": trace_id, "spanId": "aaaaaaaaaaaaaaaa", "name": "no time"},
                        ]
                    }
                ],
            }
        ]
    }
    path = tmp_path / "spans.json.gz"
    path.write_bytes(gzip.compress(json.dumps(body).encode()))
    res = subprocess.run(
        ["curl", "-sS", "-X", "POST", server.otlp + "/v1/traces", "--data-binary", f"@{path}"]
        + ["-H", "Content-Type: application/json", "-H", "Content-Encoding: gzip", "-w", "\n%{http_code}"],
        capture_output=True,
        text=True,
        check=True,
    )
    answer, code = res.stdout.rsplit("\n", 1)
    assert code == "200"
    assert json.loads(answer) == {
        "partialSuccess": {"rejectedSpans": "1", "errorMessage": "span 'no time' has no start_time_unix_nano"}
    }
    server.settled()
    got = server.query(
        {
            "dataset": "traces",
            "calculations": ["max(duration_ms)", "max(retries)"],
            "breakdowns": ["trace.trace_id", "trace.span_id", "span.kind", "service.name"],
        }
    )
    assert got["rows"] == [[trace_id, span_id, "server", "curl-svc", 250.0, 3]]


def test_bad_payloads_are_400_and_the_server_stays_up(server: Server) -> None:
    rng = random.Random(7)
    cases: list[tuple[str, bytes, dict[str, str]]] = [
        ("/v1/traces", bytes(rng.getrandbits(8) for _ in range(300)), {"Content-Type": "application/x-protobuf"}),
        ("/v1/logs", b'{"resourceLogs": [', {"Content-Type": "application/json"}),
        (
            "/v1/traces",
            b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}',
            {"Content-Type": "application/json"},
        ),
        ("/v1/metrics", b"[]", {"Content-Type": "application/json"}),
        ("/v1/traces", b"{}", {"Content-Type": "text/plain"}),
        ("/v1/traces", b"not gzip", {"Content-Type": "application/json", "Content-Encoding": "gzip"}),
        ("/v1/traces", b"x", {"Content-Type": "application/json", "Content-Encoding": "br"}),
        ("/1/batch/shop", b'{"data": {}}', {}),
        ("/1/events/shop", b"[1, 2]", {}),
        ("/1/events/bad name!", b"{}", {}),
    ]
    for _ in range(30):  # random protobuf-ish bytes: each is a valid message or a 400, never a crash
        blob = bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 200)))
        cases.append(("/v1/logs", blob, {"Content-Type": "application/x-protobuf"}))
    for path, body, headers in cases:
        res = httpx.post(server.otlp + path, content=body, headers=headers, timeout=10)
        assert res.status_code in (200, 400), (path, body[:40], res.status_code, res.text)
        if res.status_code == 400 and res.headers.get("content-type", "").startswith("application/json"):
            assert res.json()["error"]["message"]
    assert server.health()["status"] == "ok"


def gzip_member_of_zeros(gib: int = 1) -> bytes:
    """A valid gzip member inflating to ``gib`` GiB of zeros, in about 1 MB per GiB, made
    without compressing them: after a full flush, deflate codes each 16 MiB of zeros as
    the same bytes, so those are repeated; the trailer's CRC-32 is computed as usual."""
    chunk = bytes(1 << 24)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(chunk) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush(zlib.Z_FINISH)
    crc, n = 0, gib * 64
    for _ in range(n):
        crc = zlib.crc32(chunk, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    return header + block * n + end + struct.pack("<II", crc, (n << 24) & 0xFFFFFFFF)


def test_the_bomb_builder_makes_valid_gzip() -> None:
    member = gzip_member_of_zeros(1)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    size, data = 0, member
    while data:
        out = inflater.decompress(data, 1 << 26)
        assert not out.strip(b"\0")
        size += len(out)
        data = inflater.unconsumed_tail
    assert inflater.eof and size == 1 << 30 and len(member) < 1_100_000  # the CRC and size checked


def test_a_10_gib_gzip_bomb_is_refused_without_being_inflated(server: Server) -> None:
    bomb = gzip_member_of_zeros(1) * 10  # 10 members: a valid gzip stream of 10 GiB, 10 MB sent
    idle = server.rss()
    res = httpx.post(
        server.otlp + "/v1/logs",
        content=bomb,
        headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
        timeout=60,
    )
    assert res.status_code == 413, res.text
    assert "inflates past" in res.json()["error"]["message"]
    assert server.rss("VmHWM") < 2 * idle  # its peak, ever: never near the 10 GiB
    assert server.health()["status"] == "ok"


def test_every_gzip_member_counts_against_the_limit() -> None:
    import asyncio

    from rootsift.server.body import BadBody, BodyTooLarge, read_body

    async def chunks(data: bytes) -> Any:
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    two = gzip.compress(b"abc" * 1000) + gzip.compress(b"xyz" * 1000)
    assert asyncio.run(read_body(chunks(two), "gzip", 1 << 20)) == b"abc" * 1000 + b"xyz" * 1000
    with pytest.raises(BodyTooLarge):  # each member is under the limit, the three are not
        asyncio.run(read_body(chunks(gzip.compress(bytes(6000)) * 3), "gzip", 10_000))
    with pytest.raises(BadBody, match="after the end"):
        asyncio.run(read_body(chunks(zlib.compress(b"a") + b"zz"), "deflate", 10_000))


def test_overload_is_refused_with_retry_after_never_dropped(tmp_path: Path) -> None:
    s = start(tmp_path / "data", "--max-backlog", "2048", "--apply-every", "3600")
    try:
        events = [{"n": i, "pad": "x" * 100} for i in range(10)]
        first = httpx.post(s.url + "/1/batch/shop", json=[{"data": e} for e in events], timeout=10)
        assert first.status_code == 200
        second = httpx.post(s.url + "/1/batch/shop", json=[{"data": e} for e in events * 3], timeout=10)
        assert second.status_code == 503 and int(second.headers["Retry-After"]) > 0
        assert "behind" in second.json()["error"]["message"]
    finally:
        assert stop(s) == 0  # the graceful stop moves the log into the store
    from rootsift import Rootsift

    with Rootsift(tmp_path / "data", read_only=True) as rs:
        assert rs.events("shop") == 10  # the first batch, all of it; the refused one, none of it


def test_a_full_log_refuses_a_request_before_reading_its_body(tmp_path: Path) -> None:
    """The refusal is decided from Content-Length and the log's state: the server answers
    503 to headers whose body never comes (a refusal costs no body read), and the
    connection stays usable for the next request (uvicorn discards an unread body)."""
    import socket

    s = start(tmp_path / "data", "--max-backlog", "2048", "--apply-every", "3600")
    try:
        events = [{"data": {"n": i, "pad": "x" * 100}} for i in range(10)]
        assert httpx.post(s.url + "/1/batch/shop", json=events, timeout=10).status_code == 200
        with socket.create_connection(("127.0.0.1", s.port), timeout=20) as sock:
            head = (
                "POST /1/batch/shop HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                "Content-Length: 100000\r\n\r\n"
            )
            sock.sendall(head.encode())  # and no body: the old server waited for it
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 503"), answer[:200]
            assert b"retry-after: 5" in answer.lower()
            sock.sendall(b"[" + b" " * 99_998 + b"]")  # the unread body, then one more request
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            rest = b""
            while b"wal_backlog_bytes" not in rest:
                more = sock.recv(65536)
                assert more, "the connection closed"
                rest += more
        assert s.health()["refused_requests"] == 1
    finally:
        assert stop(s) == 0


def test_overload_gets_429_from_the_queue_limit_loses_nothing_and_rss_stays_flat(tmp_path: Path) -> None:
    """Clients that send as fast as they can, many at once, offer more than twice what the
    server stores per second; with a small ingest queue the fsync'ing writer falls behind them
    first: 429 with Retry-After (the queue), not 503 (the backlog). Every acknowledged
    event is stored, and the server's memory is bounded and does not grow: its peak stays
    under idle + the store's writer memory limit + 64 MiB (docs/server.md, "Limits"), and
    its floor (the 10th percentile) in the last third of the run is within 1.2x of the
    first third's, after 2 s of warming up."""
    from rootsift.store.duckdb import WRITER_MEMORY_LIMIT
    from rootsift.store.files import _size_bytes

    s = start(tmp_path / "data", "--max-queue", str(64 << 10), "--apply-every", "0.2")
    idle = s.rss()
    flood = Path(__file__).parent / "helpers" / "flood.py"
    clients = [  # three processes of 8 threads: one interpreter's lock would bound the offer
        subprocess.Popen([sys.executable, str(flood), s.url, str(8 * k), "8", "8", str(tmp_path / f"flood{k}.json")])
        for k in range(3)
    ]
    rss: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while any(c.poll() is None for c in clients) and time.monotonic() < deadline:
            rss.append(s.rss())
            time.sleep(0.1)
        assert [c.poll() for c in clients] == [0, 0, 0], "a flooding client did not finish"
        reports = [json.loads((tmp_path / f"flood{k}.json").read_bytes()) for k in range(3)]
        peak = s.rss("VmHWM")
        assert s.settled(60)["wal_backlog_bytes"] == 0
        got = s.query({"dataset": "flood", "calculations": ["count"], "breakdowns": ["seq"], "limit": 10_000_000})
    finally:
        for c in clients:
            c.kill()
        assert stop(s) == 0
    acked = [n + i for r in reports for n in r["acked"] for i in range(200)]
    refusals = [tuple(x) for r in reports for x in r["refusals"]]
    offered = len(acked) + 200 * len(refusals)
    # An overload: a full queue is refused from the request's Content-Length before its
    # body is read, so a refusal costs the server less than an acceptance. These clients
    # wait for each answer (as real ones do), so the server's answer rate still bounds
    # what they offer: 1.85x what it takes on a quiet 2-core machine, 2-3x on a loaded
    # one (measured). Asked: at least 1.6x, a refusal for every 1.7 acceptances or more.
    assert acked and offered >= 1.6 * len(acked), f"not an overload: {offered} events offered, {len(acked)} taken"
    assert {status for status, _, _ in refusals} == {429}, refusals[:3]
    assert all(after and int(after) > 0 and "queue is full" in text for _, after, text in refusals)
    assert set(acked) <= {row[0] for row in got["rows"]}
    # Bounded: what a move of the log into the store holds is DuckDB's working memory
    # (its limit for a store opened for writing), besides the queue and the bodies read.
    assert peak <= idle + _size_bytes(WRITER_MEMORY_LIMIT) + (64 << 20), (peak, idle)
    # Flat: a leak raises the floor between moves. Not the median: under this overload
    # the store is moving 50-95 % of the time, and the release after a move checkpoints
    # DuckDB's partial row group (+~115 MB for a few hundred ms with these events), so
    # a median over 2 s is decided by where those checkpoints fall (it failed 2 of 189
    # 8 s windows of a flat 120 s flood, at 1.30x; the floor at most 1.12x). Measured
    # over 120-150 s floods: no trend between moves; malloc's arenas settle by ~25 s,
    # within 10 MB of where they are after 2 s (docs/server.md, "Limits").
    rss = rss[20:]  # after 2 s of warming up (the store's first moves)
    third = len(rss) // 3
    first, last = _floor(rss[:third]), _floor(rss[-third:])
    assert last <= 1.2 * first, (first, last)


def _floor(samples: list[int]) -> float:
    """The 10th percentile: RSS between the moves' checkpoints."""
    return statistics.quantiles(samples, n=10)[0]


def test_cli_and_file_ingest_run_beside_the_server(server: Server, tmp_path: Path) -> None:
    assert httpx.post(server.url + "/1/events/shop", json={"a": 1}, timeout=10).status_code == 200
    server.settled()
    server.query({"dataset": "shop", "calculations": ["count"]})  # the server has read the files
    env = {**os.environ, "ROOTSIFT_LOCK_WAIT": "3"}
    events = tmp_path / "more.jsonl"
    events.write_text('{"timestamp": "2026-01-01T00:00:00Z", "a": 2}\n')
    cli = [sys.executable, "-m", "rootsift"]
    ingest = subprocess.run([*cli, "ingest", str(events), "--dataset", "shop", "--data", str(server.data)], env=env)
    assert ingest.returncode == 0
    res = subprocess.run(
        [*cli, "query", "shop", "-c", "count", "--json", "--data", str(server.data)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert json.loads(res.stdout)["rows"] == [[2]]
    assert server.query({"dataset": "shop", "calculations": ["count"]})["rows"] == [[2]]


def test_ctrl_c_to_the_process_group_stops_gracefully_without_a_traceback(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the server and its converter child: the server stores
    what it acknowledged and exits 0, and neither prints a traceback."""
    from helpers.server import free_port

    port, otlp_port = free_port(), free_port()
    argv = [sys.executable, "-m", "rootsift", "serve", "--data", str(tmp_path / "d"), "--port", str(port)]
    proc = subprocess.Popen(
        [*argv, "--otlp-port", str(otlp_port)], stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        for _ in range(300):
            try:
                res = httpx.post(f"http://127.0.0.1:{port}/1/events/shop", json={"a": 1}, timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.1)
        assert res.status_code == 200
        time.sleep(1.5)  # the converter child is up
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0 and "Traceback" not in err, err
    from rootsift import Rootsift

    with Rootsift(tmp_path / "d", read_only=True) as rs:
        assert rs.events("shop") == 1


def test_serving_beyond_loopback_without_keys_is_refused(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "rootsift", "serve", "--host", "0.0.0.0", "--data", str(tmp_path / "d")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 2
    assert "--host 0.0.0.0" in res.stderr and "Traceback" not in res.stderr


def _load(url: str, acked: list[int], stop_flag: threading.Event, seed: int) -> None:
    """Post batches of numbered events until stopped; record the numbers acknowledged."""
    n = seed * 10_000_000
    with httpx.Client(timeout=5) as client:
        while not stop_flag.is_set():
            batch = list(range(n, n + 50))
            n += 50
            try:
                res = client.post(url, json=[{"data": {"seq": i, "pad": "y" * 64}} for i in batch])
            except httpx.HTTPError:
                continue
            if res.status_code == 200 and all(r["status"] == 202 for r in res.json()):
                acked.extend(batch)


def _load_otlp(url: str, acked: list[int], stop_flag: threading.Event, seed: int) -> None:
    """Post OTLP protobuf spans with a numbered attribute until stopped; record those acknowledged."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    n = seed * 10_000_000
    with httpx.Client(timeout=5) as client:
        while not stop_flag.is_set():
            request = ts.ExportTraceServiceRequest()
            scope = request.resource_spans.add().scope_spans.add()
            batch = list(range(n, n + 100))
            n += 100
            for i in batch:
                span = scope.spans.add(trace_id=os.urandom(16), span_id=os.urandom(8), name="op")
                span.start_time_unix_nano, span.end_time_unix_nano = 1_700_000_000 * 10**9 + i, 1_700_000_001 * 10**9
                span.attributes.append(KeyValue(key="seq"))
                span.attributes[0].value.int_value = i
            try:
                res = client.post(
                    url, content=request.SerializeToString(), headers={"Content-Type": "application/x-protobuf"}
                )
            except httpx.HTTPError:
                continue
            if res.status_code == 200:
                acked.extend(batch)


KILL_TRIALS = int(os.environ.get("ROOTSIFT_KILL_TRIALS", "3"))
"""3 in the suite; the issue's 20: ROOTSIFT_KILL_TRIALS=20 pytest tests/test_server.py -k kill_9"""


@pytest.mark.parametrize("trial", range(KILL_TRIALS))
def test_kill_9_under_load_loses_no_acknowledged_event(tmp_path: Path, trial: int) -> None:
    data = tmp_path / "data"
    s = start(data)
    acked: list[int] = []
    spans: list[int] = []
    stop_flag = threading.Event()
    clients = [
        threading.Thread(target=_load, args=(s.url + "/1/batch/load", acked, stop_flag, trial * 10 + k))
        for k in range(2)
    ]
    clients.append(threading.Thread(target=_load_otlp, args=(s.otlp + "/v1/traces", spans, stop_flag, trial)))
    for c in clients:
        c.start()
    time.sleep(random.Random(trial).uniform(0.5, 1.5))
    s.proc.send_signal(signal.SIGKILL)
    s.proc.wait()
    stop_flag.set()
    for c in clients:
        c.join()
    if s.proc.stderr:
        s.proc.stderr.close()
    assert acked and spans, "no request was acknowledged before the kill"
    again = start(data)
    try:
        assert again.settled()["wal_backlog_bytes"] == 0
        got = again.query({"dataset": "load", "calculations": ["count"], "breakdowns": ["seq"], "limit": 1_000_000})
        traced = again.query({"dataset": "traces", "calculations": ["count"], "breakdowns": ["seq"], "limit": 10**6})
    finally:
        assert stop(again) == 0
    assert set(acked) <= {row[0] for row in got["rows"]}
    assert set(spans) <= {row[0] for row in traced["rows"]}


def test_the_log_keeps_every_whole_record_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    wal_dir = tmp_path / "wal"
    wal_dir.mkdir()
    path = wal_dir / "00000001.log"
    good = [encode("a", b'{"n": 1}\n'), encode("b", b'{"n": 2}\n' * 3)]
    torn = encode("a", b'{"n": 3}\n')[:-4]
    path.write_bytes(b"".join(good) + torn)
    assert repair(path) == len(torn)
    assert [(d, p) for d, p, *_ in records(path)] == [("a", b'{"n": 1}\n'), ("b", b'{"n": 2}\n' * 3)]
    flipped = bytearray(path.read_bytes())
    flipped[-3] ^= 0xFF  # a corrupt byte in the last record: its checksum catches it
    path.write_bytes(bytes(flipped))
    wal = Wal(wal_dir)
    try:
        assert wal.stats.repaired_bytes == len(good[1])
        assert [d for d, *_ in records(path)] == ["a"]
    finally:
        wal.close()


def test_a_move_cut_short_is_finished_on_start_without_repeating_its_done_datasets(tmp_path: Path) -> None:
    """apply.state names the log files being moved and the datasets already ingested: on
    start those files are converted again (OTLP records too) and only the rest ingested."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    from rootsift import Rootsift
    from rootsift.server.wal import OTLP_TRACES

    data = tmp_path / "data"
    done = [{"timestamp": f"2026-01-01T00:00:0{i}Z", "n": i} for i in range(2)]
    (tmp_path / "done.jsonl").write_text("".join(json.dumps(e) + "\n" for e in done))
    with Rootsift(data) as rs:  # "a" was ingested just before the crash
        rs.ingest(tmp_path / "done.jsonl", "a", format="jsonl", time_field="timestamp")
    request = ts.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(4):
        scope.spans.add(trace_id=bytes(16), span_id=bytes([i + 1]) * 8, name="op", start_time_unix_nano=10**18 + i)
    wal_dir = data / ".server" / "wal"
    wal_dir.mkdir(parents=True)
    (wal_dir / "00000001.log").write_bytes(
        encode("a", "".join(json.dumps(e) + "\n" for e in done).encode())
        + encode("b", b'{"timestamp": "2026-01-01T00:00:00Z", "n": 7}\n' * 3)
        + encode("traces", request.SerializeToString(), OTLP_TRACES)
    )
    (wal_dir / "apply.state").write_text("00000001.log\na\n")
    s = start(data)
    try:
        assert s.settled()["wal_backlog_bytes"] == 0
        counts = {d: s.query({"dataset": d, "calculations": ["count"]})["rows"] for d in ("a", "b", "traces")}
    finally:
        assert stop(s) == 0
    assert counts == {"a": [[2]], "b": [[3]], "traces": [[4]]}
    assert not (wal_dir / "apply.state").exists() and not list(wal_dir.glob("gen-*"))


def test_a_record_the_converter_always_fails_on_is_quarantined_and_the_log_goes_on(tmp_path: Path) -> None:
    """A logged request that parses as a record (its checksum holds) but that the converter
    rejects every time is moved to DATA/.server/quarantine/ after POISON_TRIES failures,
    counted in /healthz and named in one log line; the records around it are stored."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    from rootsift.server.applier import POISON_TRIES
    from rootsift.server.wal import OTLP_TRACES

    data = tmp_path / "data"
    request = ts.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(5):
        scope.spans.add(trace_id=bytes(16), span_id=bytes([i + 1]) * 8, name="op", start_time_unix_nano=10**18 + i)
    poison = encode("traces", b"\xff\xff\xff\xff", OTLP_TRACES)  # not a protobuf message
    wal_dir = data / ".server" / "wal"
    wal_dir.mkdir(parents=True)
    (wal_dir / "00000001.log").write_bytes(
        encode("b", b'{"timestamp": "2026-01-01T00:00:00Z", "n": 7}\n' * 3)
        + poison
        + encode("traces", request.SerializeToString(), OTLP_TRACES)
    )
    s = start(data)
    try:
        health = s.settled()
        assert health["wal_backlog_bytes"] == 0 and health["quarantined_batches"] == 1
        assert health["apply_failures"] >= POISON_TRIES
        counts = {d: s.query({"dataset": d, "calculations": ["count"]})["rows"] for d in ("b", "traces")}
        after = ts.ExportTraceServiceRequest()
        span = after.resource_spans.add().scope_spans.add().spans.add(trace_id=bytes(16), span_id=bytes(8), name="x")
        span.start_time_unix_nano = 10**18
        res = httpx.post(
            s.otlp + "/v1/traces", content=after.SerializeToString(), headers={"Content-Type": "application/x-protobuf"}
        )
        assert res.status_code == 200
        assert s.settled()["wal_backlog_bytes"] == 0
        later = s.query({"dataset": "traces", "calculations": ["count"]})["rows"]
    finally:
        s.proc.send_signal(signal.SIGTERM)
        _, err = s.proc.communicate(timeout=30)
    assert s.proc.returncode == 0
    assert counts == {"b": [[3]], "traces": [[5]]} and later == [[6]]
    (kept,) = (data / ".server" / "quarantine").iterdir()
    assert kept.read_bytes() == poison
    assert [line for line in err.decode().splitlines() if "quarantined" in line] == [
        line for line in err.decode().splitlines() if kept.name in line
    ]
    assert sum("quarantined" in line for line in err.decode().splitlines()) == 1


def test_the_converter_writes_arrow_for_a_store_that_takes_it_and_json_lines_otherwise(tmp_path: Path) -> None:
    """DuckDB takes Arrow (``Backend.ingest_arrow``); for a backend without it (chdb) the
    converter writes the same spans as JSON lines, as before."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    from rootsift.server.convert import ARROW, convert_files
    from rootsift.server.otlp_arrays import json_lines
    from rootsift.server.otlp_lines import Decoded, span_lines
    from rootsift.server.otlp_types import lazy_request
    from rootsift.server.wal import OTLP_TRACES

    request = ts.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(5):
        scope.spans.add(trace_id=bytes(16), span_id=bytes([i + 1]) * 8, name="op", start_time_unix_nano=10**18 + i)
    body = request.SerializeToString()
    log = tmp_path / "00000001.log"
    log.write_bytes(encode("traces", body, OTLP_TRACES) + encode("b", b'{"timestamp": "2026-01-01T00:00:00Z"}\n'))
    expected = span_lines(lazy_request("traces").FromString(body), Decoded())[0]
    (tmp_path / "a").mkdir()
    (tmp_path / "j").mkdir()
    arrow = convert_files([log], tmp_path / "a")
    assert sorted(arrow) == [ARROW + "traces", "b"] and arrow[ARROW + "traces"].lines == 5
    import pyarrow as pa

    table = pa.ipc.open_file(pa.memory_map(str(arrow[ARROW + "traces"].path))).read_all()
    assert [json.loads(line) for line in json_lines(table)] == [json.loads(line) for line in expected]
    lines = convert_files([log], tmp_path / "j", arrow=False)
    assert sorted(lines) == ["b", "traces"] and lines["traces"].path.read_bytes() == b"".join(expected)


def test_spans_the_store_does_not_take_as_columns_go_in_as_json_lines(server: Server) -> None:
    """An attribute whose values mix kinds in a batch (a number, then text) is a JSON text
    column, which the store does not take as is (Backend.ingest_arrow answers None): the
    applier ingests that batch as JSON lines, as before the Arrow path existed."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    request = ts.ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i, value in enumerate([7, "seven"]):
        span = scope.spans.add(trace_id=bytes(16), span_id=bytes([i + 1]) * 8, name="op", start_time_unix_nano=10**18)
        kv = KeyValue(key="mixed")
        if isinstance(value, int):
            kv.value.int_value = value
        else:
            kv.value.string_value = value
        span.attributes.append(kv)
    res = httpx.post(
        server.otlp + "/v1/traces",
        content=request.SerializeToString(),
        headers={"Content-Type": "application/x-protobuf"},
    )
    assert res.status_code == 200
    health = server.settled()
    assert health["applied_events"] == 2 and health["rejected_events"] == 0
    got = server.query({"dataset": "traces", "calculations": ["count"], "breakdowns": ["trace.span_id", "mixed"]})
    assert sorted(got["rows"]) == [["0101010101010101", "7", 1], ["0202020202020202", "seven", 1]]


def test_the_converter_process_is_started_again_when_it_dies(server: Server) -> None:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    def send(first: int) -> None:
        request = ts.ExportTraceServiceRequest()
        scope = request.resource_spans.add().scope_spans.add()
        for i in range(first, first + 10):
            scope.spans.add(trace_id=bytes(16), span_id=i.to_bytes(8, "big"), name="op", start_time_unix_nano=10**18)
        res = httpx.post(
            server.otlp + "/v1/traces",
            content=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert res.status_code == 200

    def converters() -> list[int]:
        tasks = Path(f"/proc/{server.proc.pid}/task").iterdir()
        return [int(pid) for task in tasks for pid in (task / "children").read_text().split()]

    send(1)
    server.settled()
    (child,) = converters()
    os.kill(child, signal.SIGKILL)
    send(100)
    assert server.settled()["wal_backlog_bytes"] == 0
    assert converters() != [child]
    got = server.query({"dataset": "traces", "calculations": ["count"], "breakdowns": ["trace.span_id"], "limit": 100})
    assert sorted(row[0] for row in got["rows"]) == sorted(
        i.to_bytes(8, "big").hex() for i in [*range(1, 11), *range(100, 110)]
    )


@pytest.mark.parametrize("seed", range(3))
def test_span_lines_are_the_events_json_whatever_the_attributes(seed: int) -> None:
    """The spliced fast path writes each span exactly as orjson writes its event dict
    (the general path): shared and own keys clashing, maps, arrays, bytes, events."""
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    from rootsift.server.otlp_lines import Decoded, _shared, _span_line, span_lines
    from rootsift.server.otlp_types import lazy_request

    rng = random.Random(seed)

    def attribute(key: str) -> KeyValue:
        return otlp_values.attribute(key, rng)

    keys = ["http.method", "user.id", "service.name", "name", "duration_ms", "a.b", "timestamp"]
    request = ts.ExportTraceServiceRequest()
    for r in range(2):
        resource = request.resource_spans.add()
        resource.resource.attributes.extend([attribute("service.name"), attribute(f"host.{r}")])
        scope = resource.scope_spans.add()
        scope.scope.name = rng.choice(["", "net/http"])
        for _ in range(200):
            span = scope.spans.add(trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name=rng.choice(["a", "b\n"]))
            span.start_time_unix_nano = rng.choice([0, 10**18 + rng.randrange(10**12)])
            span.end_time_unix_nano = span.start_time_unix_nano + rng.randrange(10**9)
            span.kind = rng.randrange(7)
            span.attributes.extend(attribute(k) for k in rng.sample(keys, rng.randrange(4)))
            if rng.random() < 0.2:
                span.parent_span_id = rng.randbytes(8)
            if rng.random() < 0.2:
                span.status.code, span.status.message = rng.randrange(3), rng.choice(["", "boom"])
            if rng.random() < 0.1:
                event = span.events.add(name="exception")
                event.attributes.append(KeyValue(key="exception.type"))
                event.attributes[0].value.string_value = "ValueError"
            if rng.random() < 0.1:
                span.links.add(trace_id=bytes(16), span_id=bytes(8))
    lazy = lazy_request("traces").FromString(request.SerializeToString())
    memo = Decoded()
    expected = []
    for base, shared, scope in _shared(lazy.resource_spans, "scope_spans"):
        for span in scope.spans:
            if span.start_time_unix_nano:
                code, message = memo.statuses.get(span.status) or memo.status(span.status)
                expected.append(_span_line(span, base, shared, memo, code, message))
    lines, skipped = span_lines(lazy, Decoded())
    assert lines == expected
    assert skipped == sum(
        1 for rs in request.resource_spans for s in rs.scope_spans[0].spans if not s.start_time_unix_nano
    )
    assert all(json.loads(line) for line in lines)


@pytest.mark.parametrize("seed", range(4))
def test_span_and_log_columns_are_the_events_of_the_json_lines(seed: int) -> None:
    """The converter's Arrow tables (otlp_columns.py) hold the events ``span_lines`` and
    ``log_lines`` write, whatever the attributes: clashing keys, maps, arrays, bytes, NaN,
    mixed kinds (JSON text), exception events, links, parents, status messages, items
    without a time, and spans and logs in one dataset."""
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as ls
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    from rootsift.server.otlp_arrays import json_lines
    from rootsift.server.otlp_columns import Columns
    from rootsift.server.otlp_lines import Decoded, log_lines, span_lines
    from rootsift.server.otlp_types import lazy_request

    rng = random.Random(seed)

    def attribute(key: str) -> KeyValue:
        return otlp_values.attribute(key, rng)

    keys = ["http.method", "user.id", "service.name", "name", "duration_ms", "a.b", "timestamp"]
    keys += ["status.message", "trace.parent_id", "exception.type", "body", "severity_text"]
    traces = ts.ExportTraceServiceRequest()
    logs = ls.ExportLogsServiceRequest()
    for r in range(2):
        resource = traces.resource_spans.add()
        resource.resource.attributes.extend(
            [attribute("service.name"), attribute(f"host.{r}"), attribute(rng.choice(keys))]
        )
        scope = resource.scope_spans.add()
        scope.scope.name = rng.choice(["", "net/http"])
        for _ in range(150):
            span = scope.spans.add(trace_id=rng.randbytes(16), span_id=rng.randbytes(8), name=rng.choice(["a", "b\n"]))
            span.start_time_unix_nano = rng.choice([0, 10**18 + rng.randrange(10**12)])
            span.end_time_unix_nano = max(0, span.start_time_unix_nano + rng.randrange(10**9) - 10**8)
            span.kind = rng.randrange(7)
            span.attributes.extend(attribute(k) for k in rng.sample(keys, rng.randrange(4)))
            if rng.random() < 0.3:
                span.parent_span_id = rng.randbytes(8)
            if rng.random() < 0.2:
                span.status.code, span.status.message = rng.randrange(3), rng.choice(["", "boom"])
            if rng.random() < 0.1:
                event = span.events.add(name="exception")
                event.attributes.append(KeyValue(key="exception.type"))
                event.attributes[0].value.string_value = "ValueError"
            if rng.random() < 0.1:
                span.links.add(trace_id=bytes(16), span_id=bytes(8))
        log_resource = logs.resource_logs.add()
        log_resource.resource.attributes.extend([attribute("service.name"), attribute(rng.choice(keys))])
        log_scope = log_resource.scope_logs.add()
        for _ in range(100):
            record = log_scope.log_records.add(time_unix_nano=rng.choice([0, 10**18 + rng.randrange(10**12)]))
            record.observed_time_unix_nano = rng.choice([0, 10**18])
            record.attributes.extend(attribute(k) for k in rng.sample(keys, rng.randrange(4)))
            record.severity_text, record.severity_number = rng.choice([("", 0), ("ERROR", 17)])
            if rng.random() < 0.7:
                record.body.CopyFrom(attribute("body").value)
            if rng.random() < 0.5:
                record.trace_id, record.span_id = rng.randbytes(16), rng.randbytes(8)
    span_body, log_body = traces.SerializeToString(), logs.SerializeToString()
    lines, skipped = span_lines(lazy_request("traces").FromString(span_body), Decoded())
    more, more_skipped = log_lines(lazy_request("logs").FromString(log_body), Decoded())
    columns = Columns()
    assert columns.add_spans(span_body, Decoded()) == skipped
    assert columns.add_logs(log_body, Decoded()) == more_skipped
    table = columns.table()
    assert table.num_rows == len(lines) + len(more) > 0

    def events(texts: Any) -> list[dict[str, Any]]:  # a null (orjson's NaN) is an absent value
        return [{k: v for k, v in json.loads(t).items() if v is not None} for t in texts]

    assert events(json_lines(table)) == events(lines + more)
    # a column for every key some event has a value for, and none other (a field in the store)
    assert set(table.column_names) == {k for e in events(lines + more) for k in e}


def test_group_commit_shares_fsyncs_between_concurrent_requests(tmp_path: Path) -> None:
    import asyncio

    wal = Wal(tmp_path / "wal")

    async def many() -> None:
        await asyncio.gather(*(wal.append("d", b'{"n": %d}\n' % i) for i in range(200)))

    try:
        asyncio.run(many())
    finally:
        wal.close()
    assert wal.stats.appended_records == 200
    assert wal.stats.fsyncs < 200
    assert sum(1 for f in wal.files() for _ in records(f)) == 200


def test_deflate_and_identity_bodies_within_the_limit() -> None:
    import asyncio

    from rootsift.server.body import BodyTooLarge, read_body

    async def chunks(data: bytes) -> Any:
        for i in range(0, len(data), 1000):
            yield data[i : i + 1000]

    payload = b"abc" * 10_000
    assert asyncio.run(read_body(chunks(zlib.compress(payload)), "deflate", 1 << 20)) == payload
    assert asyncio.run(read_body(chunks(payload), None, 1 << 20)) == payload
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_body(chunks(payload), "identity", 1000))
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_body(chunks(gzip.compress(payload)), "gzip", 1000))


def test_every_command_is_served_or_says_why() -> None:
    """A command added to the CLI fails here until it has a route (automatic for a read
    command) or a reason in NOT_SERVED; the OpenAPI document lists every route."""
    from rootsift.cli import main
    from rootsift.server.app import FIXED_PATHS
    from rootsift.server.commands import NOT_SERVED, openapi, served_commands

    assert set(NOT_SERVED) <= set(main.commands), "NOT_SERVED names a command that does not exist"
    served = served_commands(main)
    assert set(served) | set(NOT_SERVED) == set(main.commands)
    doc = openapi(main, FIXED_PATHS)
    for name in served:
        route = doc["paths"][f"/api/{name}"]["post"]
        assert route["summary"], f"{name} has no help to document its route"
        props = route["requestBody"]["content"]["application/json"]["schema"]["properties"]
        assert "data" not in props and "json" not in props
    assert {"explain", "investigate", "compare", "query", "datasets", "schema"} <= set(served)


def test_analyses_over_http_answer_the_cli_json(server: Server, tmp_path: Path) -> None:
    rows = [
        {
            "timestamp": f"2026-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
            "endpoint": "/a" if i % 3 else "/b",
            "duration_ms": 900.0 + i % 7 if i % 3 == 0 and i > 200 else 20.0 + i % 11,
        }
        for i in range(600)
    ]
    res = httpx.post(server.url + "/1/batch/api", json=[{"data": r} for r in rows], timeout=30)
    assert res.status_code == 200
    server.settled()
    body = {"dataset": "api", "select": "duration_ms > 500"}
    over_http = httpx.post(server.url + "/api/explain", json=body, timeout=60)
    assert over_http.status_code == 200, over_http.text
    cli = subprocess.run(
        [sys.executable, "-m", "rootsift", "explain", "api", "--select", "duration_ms > 500", "--json"]
        + ["--data", str(server.data)],
        capture_output=True,
        text=True,
        env={**os.environ, "ROOTSIFT_LOCK_WAIT": "5"},
    )
    assert cli.returncode == 0, cli.stderr
    assert over_http.json() == json.loads(cli.stdout)
    assert over_http.json()["findings"][0]["value"] == "/b"

    generic = httpx.post(
        server.url + "/api/query", json={"dataset": "api", "calc": ["count"], "breakdown": ["endpoint"]}
    )
    assert sorted(map(tuple, generic.json()["rows"])) == [("/a", 400), ("/b", 200)]
    cases = [
        ("/api/investigate", {"dataset": "api", "report": "/tmp/x.html"}, 400, "not taken over HTTP"),
        ("/api/explain", {"dataset": "api", "bogus": 1}, 400, "unknown option"),
        ("/api/explain", {"dataset": "nope"}, 404, "nope"),
        ("/api/explain", {"dataset": "api", "select": "duration_ms >"}, 400, "expected a value"),
        ("/api/retention", {"dataset": "api", "keep": "1d"}, 404, "keys"),
        ("/api/investigate", {"dataset": "api", "alpha": 7}, 400, "alpha"),
    ]
    for path, payload, status, needle in cases:
        res = httpx.post(server.url + path, json=payload, timeout=60)
        assert res.status_code == status, (path, payload, res.text)
        assert needle in res.json()["error"]["message"], res.text
    doc = httpx.get(server.url + "/api/openapi.json").json()
    assert "/api/investigate" in doc["paths"] and "/v1/traces" in doc["paths"]


def test_keys_401_without_403_for_another_dataset(tmp_path: Path) -> None:
    data = tmp_path / "data"
    cli = [sys.executable, "-m", "rootsift", "keys"]

    def make(dataset: str, scope: str) -> str:
        res = subprocess.run(
            [*cli, "create", "--dataset", dataset, "--scope", scope, "--json", "--data", str(data)],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, res.stderr
        return str(json.loads(res.stdout)["token"])

    ingest_shop, read_all = make("shop", "ingest"), make("*", "read")
    stored = (data / ".server" / "keys.json").read_text()
    assert ingest_shop not in stored and ingest_shop.split("_")[-1] not in stored  # only hashes
    s = start(data, "--host", "0.0.0.0")  # allowed: keys exist
    try:
        event = [{"data": {"a": 1}}]
        assert httpx.post(s.url + "/1/batch/shop", json=event).status_code == 401
        wrong = httpx.post(s.url + "/1/batch/shop", json=event, headers={"X-Honeycomb-Team": "rs_00000000_nope"})
        assert wrong.status_code == 401
        other = httpx.post(s.url + "/1/batch/other", json=event, headers={"X-Honeycomb-Team": ingest_shop})
        assert other.status_code == 403 and "shop" in other.json()["error"]["message"]
        ok = httpx.post(s.url + "/1/batch/shop", json=event, headers={"X-Honeycomb-Team": ingest_shop})
        assert ok.status_code == 200
        # an ingest key does not read; a read key does, with the OTLP/HTTP header form too
        assert (
            httpx.get(s.url + "/api/schema/shop", headers={"Authorization": f"Bearer {ingest_shop}"}).status_code == 403
        )
        s.settled()
        res = httpx.post(
            s.url + "/api/query",
            json={"dataset": "shop", "calc": ["count"]},
            headers={"Authorization": f"Bearer {read_all}"},
        )
        assert res.status_code == 200 and res.json()["rows"] == [[1]]
        assert (
            httpx.post(s.otlp + "/v1/logs", content=b"", headers={"Content-Type": "application/json"}).status_code
            == 401
        )
        revoke = subprocess.run([*cli, "revoke", read_all.split("_")[1], "--data", str(data)], capture_output=True)
        assert revoke.returncode == 0
        gone = httpx.post(s.url + "/api/datasets", json={}, headers={"Authorization": f"Bearer {read_all}"})
        assert gone.status_code == 401  # revoked: refused at once, no restart
        assert httpx.get(s.url + "/healthz").status_code == 200
    finally:
        assert stop(s) == 0


def test_collect_sends_to_the_server(server: Server, tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "rootsift", "collect", "procfs", "--every", "0.2s", "--count", "2"]
        + [
            "--files",
            "meminfo,loadavg",
            "--to",
            server.url,
            "--dataset",
            "hosts",
            "--json",
            "--data",
            str(tmp_path / "local"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["stored_samples"] == 2 and summary["events"] > 0
    server.settled()
    got = server.query({"dataset": "hosts", "calc": ["count"], "breakdown": ["kind"]})
    assert dict(map(tuple, got["rows"])) == {"meminfo": 2, "loadavg": 2}
    stored = server.query({"dataset": "hosts", "calc": ["max(mem_total_bytes)"], "where": 'kind = "meminfo"'})
    assert stored["rows"][0][0] > 0
    # an unreachable server is retried like a busy store until stopped; then the samples are reported unsent
    down = subprocess.Popen(
        [sys.executable, "-m", "rootsift", "collect", "procfs", "--every", "0.2s", "--count", "1", "--files", "loadavg"]
        + ["--to", "http://127.0.0.1:9", "--data", str(tmp_path / "local")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)
    down.send_signal(signal.SIGTERM)
    out, err = down.communicate(timeout=60)
    assert down.returncode == 1
    assert "retrying with backoff" in err and "Connection refused" in err and "Traceback" not in err
