"""OTLP/HTTP protobuf ingest through ``rootsift serve`` against file ingest of the same
events, measured in the same run (issue 18's target: ≥ 150k spans/s on 2 cores with
bounded RSS).

    .venv/bin/python bench/serve.py                    # 200k spans, 1,000 per request, 4 clients
    .venv/bin/python bench/serve.py --rounds 3 --before /tmp/old/src   # and an older server
    .venv/bin/python bench/serve.py --spans 1000000 --clients 8
    .venv/bin/python bench/serve.py --signal logs      # log records instead (/v1/logs)

The spans (7 resource attributes, 4 span attributes, like an HTTP server's), or with
``--signal logs`` as many log records (2 resource and 2 record attributes, a severity,
ids and a text body, like an access log's; ``--spans`` counts them), are made and
serialised before the clock starts. ``--before DIR`` also runs the server of another
checkout's ``src/`` (``git archive OLD src | tar -x -C /tmp/old``); with ``--rounds`` the
contenders alternate their order and medians are printed. Rows:

- file ingest events/s: ``rootsift ingest`` of the same spans as JSON lines (what the
  converter writes), a fresh process and store: the baseline, and its CPU seconds;
- acknowledged spans/s: from the first request to the last 200 (events fsync'd in the
  write-ahead log);
- stored spans/s: to the moment the log is empty (every span in the store), and that
  wall time over file ingest's;
- the server's CPU (user + system, its converter child included) over file ingest's;
- moves of the log into the store (batches ingested);
- request latency p50/p99, and the server's RSS (with its child) idle and at its peak
  (sampled every 50 ms).
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
from typing import Any

from common import SRC, use_source_tree


def kv(key: str, value: str | int) -> Any:
    """An OTLP attribute of text or a whole number."""
    from opentelemetry.proto.common.v1 import common_pb2

    pair = common_pb2.KeyValue(key=key)
    if isinstance(value, str):
        pair.value.string_value = value
    else:
        pair.value.int_value = value
    return pair


def make_requests(spans: int, per_request: int) -> list[bytes]:
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as ts

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


def make_log_requests(records: int, per_request: int) -> list[bytes]:
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2 as ls

    bodies = []
    start = time.time_ns() - 3600 * 10**9
    n = 0
    while n < records:
        req = ls.ExportLogsServiceRequest()
        rl = req.resource_logs.add()
        rl.resource.attributes.extend([kv("service.name", "api"), kv("host.name", f"web-{n // per_request % 8}")])
        scope = rl.scope_logs.add()
        scope.scope.name = "app"
        for i in range(min(per_request, records - n)):
            k = n + i
            record = scope.log_records.add(time_unix_nano=start + k * 10_000, severity_text="INFO", severity_number=9)
            record.body.string_value = f"GET /api/items/{k % 1000} 200 in {1 + k % 97} ms"
            record.attributes.extend([kv("http.request.method", "GET"), kv("user.id", f"u{k % 5000}")])
            record.trace_id, record.span_id = os.urandom(16), os.urandom(8)
        n += len(scope.log_records)
        bodies.append(req.SerializeToString())
    return bodies


SIGNALS = {"traces": (make_requests, "spans"), "logs": (make_log_requests, "log records")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss(pid: int, children: bool = True) -> int:
    """Resident bytes of ``pid`` and (``children``) its children (the converter)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total = int(line.split()[1]) * 1024
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split() if children else ():
                total += rss(int(child))
    except OSError:
        pass
    return total


def cpu_seconds(pid: int, children: bool = True) -> float:
    """User + system CPU of ``pid`` (and of its children: the converter), so far."""
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split() if children else ():
                total += cpu_seconds(int(child))
    except OSError:
        pass
    return total


def run_server(
    work: Path, bodies: list[bytes], clients: int, src: Path = SRC, signal: str = "traces"
) -> dict[str, float]:
    import httpx

    port, otlp_port = free_port(), free_port()
    env = {**os.environ, "PYTHONPATH": str(src)}
    argv = [sys.executable, "-m", "rootsift", "serve", "--data", str(work / f"served-{time.monotonic_ns()}")]
    argv += ["--port", str(port), "--otlp-port", str(otlp_port), "--apply-every", os.environ.get("APPLY_EVERY", "0.5")]
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(base + "/healthz", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    # started: wait until the server and its converter child are idle (the child imports
    # and prepares while the server already answers), so the clock measures ingest only
    before, deadline = cpu_seconds(proc.pid), time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = cpu_seconds(proc.pid)
        if now - before < 0.02:
            break
        before = now
    idle = rss(proc.pid)
    peak = [idle, rss(proc.pid, children=False)]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss(proc.pid))
            peak[1] = max(peak[1], rss(proc.pid, children=False))
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
                        f"http://127.0.0.1:{otlp_port}/v1/{signal}",
                        content=body,
                        headers={"Content-Type": "application/x-protobuf"},
                    )
                    if res.status_code == 200:
                        latencies.append(time.perf_counter() - t0)
                        break
                    time.sleep(float(res.headers.get("Retry-After", "1")))

    threading.Thread(target=sample, daemon=True).start()
    cpu0, own0 = cpu_seconds(proc.pid), cpu_seconds(proc.pid, children=False)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    acked = time.perf_counter() - t0
    while (health := httpx.get(base + "/healthz", timeout=10).json())["wal_backlog_bytes"]:
        time.sleep(0.05)
    stored = time.perf_counter() - t0
    cpu, own = cpu_seconds(proc.pid) - cpu0, cpu_seconds(proc.pid, children=False) - own0
    done.set()
    proc.terminate()
    proc.wait(60)
    latencies.sort()
    return {
        "acked_s": acked,
        "stored_s": stored,
        "cpu_s": cpu,
        "children_cpu_s": cpu - own,
        "applies": health.get("applies", 0),
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[int(0.99 * (len(latencies) - 1))],
        "idle_rss": idle,
        "peak_rss": peak[0],
        "peak_own_rss": peak[1],
    }


def run_file(work: Path, bodies: list[bytes], signal: str = "traces") -> dict[str, float]:
    """``rootsift ingest`` of the items as JSON lines (converted before the clock starts):
    wall and CPU seconds of the ingest in a fresh process and store."""
    from rootsift.server import otlp_lines
    from rootsift.server.otlp_types import lazy_request

    path = work / f"{signal}.jsonl"
    store = work / f"filed-{time.monotonic_ns()}"
    lines = otlp_lines.span_lines if signal == "traces" else otlp_lines.log_lines
    with path.open("wb") as f:
        for body in bodies:
            f.writelines(lines(lazy_request(signal).FromString(body))[0])
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    code = (
        "import sys, time; from rootsift import Rootsift\n"
        "t, c = time.perf_counter(), time.process_time()\n"
        "with Rootsift(sys.argv[1]) as rs: rs.ingest(sys.argv[2], 'traces', format='jsonl', time_field='timestamp')\n"
        "print(time.perf_counter() - t, time.process_time() - c)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(store), str(path)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    wall, cpu = map(float, out.stdout.strip().splitlines()[-1].split())
    return {"wall_s": wall, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=200_000, help="spans, or log records with --signal logs")
    parser.add_argument("--signal", choices=sorted(SIGNALS), default="traces")
    parser.add_argument("--per-request", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1, help="medians of this many runs, the order alternating")
    parser.add_argument(
        "--before", type=Path, help="another checkout's src/ (git archive of an older commit): its server too"
    )
    args = parser.parse_args()
    make, items = SIGNALS[args.signal]
    bodies = make(args.spans, args.per_request)
    contenders: list[tuple[str, Any]] = [("serve", lambda w: run_server(w, bodies, args.clients, signal=args.signal))]
    if args.before:
        before = args.before
        contenders.append(("serve (before)", lambda w: run_server(w, bodies, args.clients, before, args.signal)))
    contenders.append(("file ingest", lambda w: run_file(w, bodies, args.signal)))
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in contenders}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for name, run in contenders if r % 2 == 0 else contenders[::-1]:
                results[name].append(run(Path(tmp)))
    med = {name: {k: statistics.median(x[k] for x in runs) for k in runs[0]} for name, runs in results.items()}
    n, filed = args.spans, med["file ingest"]
    print(f"{n:,} {items}, {args.per_request} per request, {args.clients} clients, {args.rounds} round(s), medians")
    print(f"{'file ingest events/s':34} {n / filed['wall_s']:10,.0f}  (baseline; CPU {filed['cpu_s']:.2f} s)")
    for name in results:
        if name == "file ingest":
            continue
        s = med[name]
        print(f"{name}:")
        print(f"  {'acknowledged ' + items + '/s':32} {n / s['acked_s']:10,.0f}")
        print(f"  {'stored ' + items + '/s':32} {n / s['stored_s']:10,.0f}")
        print(f"  {'stored wall / file ingest wall':32} {s['stored_s'] / filed['wall_s']:10.2f}")
        print(
            f"  {'server CPU / file ingest CPU':32} {s['cpu_s'] / filed['cpu_s']:10.2f}"
            f"  ({s['cpu_s']:.2f} s, of which the converter {s['children_cpu_s']:.2f} s)"
        )
        print(f"  {'moves of the log into the store':32} {s['applies']:10.0f}")
        print(f"  {'request latency p50, p99':32} {s['p50_ms']:6.1f} ms {s['p99_ms']:6.1f} ms")
        print(
            f"  {'server RSS idle, peak (+child)':32} {s['idle_rss'] / 2**20:6.0f} MiB {s['peak_rss'] / 2**20:6.0f} MiB"
            f"  (the server alone at its peak {s['peak_own_rss'] / 2**20:.0f} MiB)"
        )


if __name__ == "__main__":
    use_source_tree()
    main()
