"""OTLP/HTTP protobuf ingest through ``rootsift serve`` against file ingest of the same
events, measured in the same run (issue 18's target: ≥ 150k spans/s on 2 cores with
bounded RSS).

    .venv/bin/python bench/serve.py                    # 200k spans, 1,000 per request, 4 clients
    .venv/bin/python bench/serve.py --spans 1000000 --clients 8

The spans (7 resource attributes, 4 span attributes, like an HTTP server's) are made
and serialised before the clock starts. Rows printed:

- acknowledged spans/s: from the first request to the last 200 (events fsync'd in the
  write-ahead log);
- stored spans/s: to the moment the log is empty (every span in the store);
- file ingest events/s: ``rootsift ingest`` of the same spans as JSON lines (what the
  applier writes), a fresh process and store: the baseline;
- request latency p50/p99, and the server's peak RSS (sampled every 50 ms).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import SRC, use_source_tree


def make_requests(spans: int, per_request: int) -> list[bytes]:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts
    from opentelemetry.proto.common.v1 import common_pb2

    def kv(key: str, value: str | int) -> common_pb2.KeyValue:
        pair = common_pb2.KeyValue(key=key)
        if isinstance(value, str):
            pair.value.string_value = value
        else:
            pair.value.int_value = value
        return pair

    bodies = []
    start = time.time_ns() - 3600 * 10**9
    n = 0
    while n < spans:
        req = ts.ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        host = f"web-{n // per_request % 8}"
        rs.resource.attributes.extend(
            [kv("service.name", "api"), kv("host.name", host), kv("k8s.pod.name", host + "-7f9c")]
            + [kv("telemetry.sdk.name", "opentelemetry"), kv("telemetry.sdk.language", "go")]
            + [kv("deployment.environment", "prod"), kv("service.version", "1.4.2")]
        )
        scope = rs.scope_spans.add()
        scope.scope.name = "net/http"
        for i in range(min(per_request, spans - n)):
            t = start + (n + i) * 10_000
            span = scope.spans.add(
                trace_id=os.urandom(16),
                span_id=os.urandom(8),
                name="GET /api/items",
                kind=2,
                start_time_unix_nano=t,
                end_time_unix_nano=t + 1_000_000 * (1 + (n + i) % 97),
            )
            span.attributes.extend(
                [kv("http.request.method", "GET"), kv("http.response.status_code", 200 + 300 * ((n + i) % 50 == 0))]
                + [kv("url.path", f"/api/items/{(n + i) % 1000}"), kv("user.id", f"u{(n + i) % 5000}")]
            )
        n += len(scope.spans)
        bodies.append(req.SerializeToString())
    return bodies


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run_server(work: Path, bodies: list[bytes], clients: int) -> dict[str, float]:
    import httpx

    port, otlp_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-m", "rootsift", "serve", "--data", str(work / "served")]
    argv += ["--port", str(port), "--otlp-port", str(otlp_port), "--apply-every", os.environ.get("APPLY_EVERY", "0.5")]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(base + "/healthz", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    idle = rss(proc.pid)
    peak = [idle]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(proc.pid))
            time.sleep(0.05)

    latencies: list[float] = []
    todo = list(enumerate(bodies))
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=60) as c:
            while True:
                with lock:
                    if not todo:
                        return
                    _, body = todo.pop()
                while True:
                    t0 = time.perf_counter()
                    res = c.post(
                        f"http://127.0.0.1:{otlp_port}/v1/traces",
                        content=body,
                        headers={"Content-Type": "application/x-protobuf"},
                    )
                    if res.status_code == 200:
                        latencies.append(time.perf_counter() - t0)
                        break
                    time.sleep(float(res.headers.get("Retry-After", "1")))

    threading.Thread(target=sample, daemon=True).start()
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acked = time.perf_counter() - t0
    while httpx.get(base + "/healthz", timeout=10).json()["wal_backlog_bytes"]:
        time.sleep(0.05)
    stored = time.perf_counter() - t0
    done.set()
    proc.terminate()
    proc.wait(60)
    latencies.sort()
    return {
        "acked_s": acked,
        "stored_s": stored,
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[int(0.99 * (len(latencies) - 1))],
        "idle_rss": idle,
        "peak_rss": peak[0],
    }


def run_file(work: Path, bodies: list[bytes]) -> float:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

    from rootsift.server import otlp
    from rootsift.server.ingest_routes import lines

    path = work / "spans.jsonl"
    with path.open("wb") as f:
        for body in bodies:
            req = ts.ExportTraceServiceRequest()
            req.ParseFromString(body)
            f.write(lines(otlp.spans(req)[0]))
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = (
        "import sys, time; from rootsift import Rootsift\n"
        "t = time.perf_counter()\n"
        "with Rootsift(sys.argv[1]) as rs: rs.ingest(sys.argv[2], 'traces', format='jsonl', time_field='timestamp')\n"
        "print(time.perf_counter() - t)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(work / "filed"), str(path)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=200_000)
    parser.add_argument("--per-request", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    bodies = make_requests(args.spans, args.per_request)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        served = run_server(work, bodies, args.clients)
        filed = run_file(work, bodies)
    n = args.spans
    print(f"{n:,} spans, {args.per_request} per request, {args.clients} clients")
    print(f"{'acknowledged spans/s':28} {n / served['acked_s']:12,.0f}")
    print(f"{'stored spans/s':28} {n / served['stored_s']:12,.0f}")
    print(f"{'file ingest events/s':28} {n / filed:12,.0f}  (baseline)")
    print(f"{'stored / file ingest':28} {filed / served['stored_s']:12.2f}")
    print(f"{'request latency p50, p99':28} {served['p50_ms']:8.1f} ms {served['p99_ms']:8.1f} ms")
    print(f"{'server RSS idle, peak':28} {served['idle_rss'] / 2**20:8.0f} MiB {served['peak_rss'] / 2**20:8.0f} MiB")


if __name__ == "__main__":
    use_source_tree()
    main()
