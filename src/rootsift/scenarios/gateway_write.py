"""What the gateway writes: nginx access-log lines in its ``log_format`` and Prometheus
text scrapes of each instance (sample timestamps in milliseconds)."""

from __future__ import annotations

from datetime import datetime, timedelta

from rootsift.scenarios.gateway_sim import Gateway, Instance, Request

LOG_FORMAT = (
    'log_format gateway \'$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
    '"$http_user_agent" rt=$request_time uct="$upstream_connect_time" uht="$upstream_header_time" '
    'urt="$upstream_response_time" ua="$upstream_addr" us="$upstream_status" '
    "service=$service az=$az client=$client_lib';"
)
"""The directive as in nginx.conf; ``$service``, ``$az`` and ``$client_lib`` are set per location."""

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
AGENTS = (
    "python-requests/2.9.1",
    "okhttp/3.2.0",
    "Java/1.8.0_77",
    "Mozilla/5.0 (compatible; opgg-crawler/2.1)",
    "curl/7.47.0",
)


def _secs(value: float) -> str:
    return f"{max(0.0, value):.3f}"


def access_line(req: Request, inst: Instance, start: datetime) -> str:
    """One request as nginx logs it when it completes (``$time_local`` is the end time)."""
    when = start + timedelta(seconds=req.end)
    stamp = f"{when.day:02d}/{MONTHS[when.month - 1]}/{when.year}:{when:%H:%M:%S} +0000"
    up = req.upstream
    uct = uht = urt = addr = ustatus = "-"
    if up is not None and req.start >= 0:
        addr, ustatus = req.upstream_addr, str(req.upstream_status or "-")
        urt = _secs(req.end - req.connect_start)
        if req.connected >= 0:
            uct = _secs(req.connected - req.connect_start)
        if 0 <= req.header <= req.end:
            uht = _secs(req.header - req.connect_start)
    agent = "ELB-HealthChecker/1.0" if up is None else AGENTS[sum(map(ord, req.remote)) % len(AGENTS)]
    return (
        f'{req.remote} - - [{stamp}] "GET {req.path} HTTP/1.1" {req.status} {req.body} "{agent}" '
        f'rt={_secs(req.end - req.arrive)} uct="{uct}" uht="{uht}" urt="{urt}" ua="{addr}" us="{ustatus}" '
        f"service={up.name if up else '-'} az={inst.az} client={up.client if up else '-'}"
    )


METRICS = (
    ("gateway_workers_busy", "gauge", "Worker threads handling a request."),
    ("gateway_workers_max", "gauge", "Size of the worker pool."),
    ("gateway_accept_queue_length", "gauge", "Requests accepted and waiting for a worker."),
    ("gateway_requests_total", "counter", "Requests accepted."),
    ("gateway_requests_rejected_total", "counter", "Requests refused because the accept queue was full."),
    ("gateway_health_check_failures_total", "counter", "Load-balancer health checks that failed or timed out."),
    ("gateway_lb_in_service", "gauge", "1 while the load balancer routes traffic to this instance."),
)


def scrape_text(gw: Gateway, inst: Instance, start: datetime, now: float) -> str:
    """One scrape of ``inst`` at simulated time ``now``, every sample timestamped."""
    ms = round((start + timedelta(seconds=now)).timestamp() * 1000)
    labels = f'instance="{inst.name}:9090",az="{inst.az}"'
    values = (
        inst.busy,
        inst.workers,
        inst.queued,
        inst.requests_total,
        inst.rejected_total,
        inst.hc_failures,
        int(inst.in_service),
    )
    out = []
    for (name, kind, text), value in zip(METRICS, values, strict=True):
        out.append(f"# HELP {name} {text}\n# TYPE {name} {kind}\n{name}{{{labels}}} {value} {ms}\n")
    out.append("# HELP node_tcp_connections TCP sockets by state.\n# TYPE node_tcp_connections gauge\n")
    for state, count in gw.sockets(inst).items():
        out.append(f'node_tcp_connections{{{labels},state="{state}"}} {count} {ms}\n')
    return "".join(out)
