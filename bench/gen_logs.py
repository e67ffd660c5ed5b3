"""Seeded generators of real-looking log files for the parser benchmark.

Each writes about ``n`` lines (slow logs: ``n`` entries) in the format's real layout,
with the variety parsers meet: long-tailed timings, many paths and statements, odd
requests, multi-upstream values, continuation lines.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

START = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
PATHS = [f"/api/v1/{p}" for p in ("users", "orders", "search", "cart", "login", "feed", "items", "pay")]
AGENTS = ["curl/8.5.0", "Mozilla/5.0 (X11; Linux x86_64; rv:124.0) Gecko/20100101 Firefox/124.0", "okhttp/4.12.0"]
TABLES = ["orders", "users", "items", "carts", "payments", "sessions"]


def _stamps(rng: random.Random, n: int, per_second: int = 200) -> Iterator[datetime]:
    for i in range(n):
        yield START + timedelta(seconds=i // per_second, microseconds=rng.randrange(1_000_000))


def nginx(rng: random.Random, n: int) -> Iterator[str]:
    """nginx combined + rt/uct/uht/urt timings, ~2 % multi-upstream retries, ~0.1 % TLS probes."""
    for ts in _stamps(rng, n):
        rt = rng.lognormvariate(-3.5, 1.0)
        path = rng.choice(PATHS) + (f"?id={rng.randrange(10**6)}" if rng.random() < 0.5 else "")
        req = "\\x16\\x03\\x01\\x00" if rng.random() < 0.001 else f"{rng.choice(('GET', 'POST'))} {path} HTTP/1.1"
        if rng.random() < 0.02:
            urt, uct, addr = f"{rt / 2:.3f}, {rt / 2:.3f}", "0.001, 0.000", "10.0.0.1:8080, 10.0.0.2:8080"
        else:
            urt, uct, addr = f"{rt:.3f}", "0.000", f"10.0.0.{rng.randrange(1, 9)}:8080"
        yield (
            f'10.1.{rng.randrange(256)}.{rng.randrange(256)} - - [{ts:%d/%b/%Y:%H:%M:%S +0000}] "{req}" '
            f'{rng.choice((200, 200, 200, 404, 500, 502))} {rng.randrange(100, 50_000)} "-" "{rng.choice(AGENTS)}" '
            f'rt={rt + 0.001:.3f} uct="{uct}" uht="{urt}" urt="{urt}" ua="{addr}"'
        )


def nginx_combined(rng: random.Random, n: int) -> Iterator[str]:
    """nginx's default ``combined`` format (read without ``--log-format``: the parser detects it)."""
    for line in nginx(rng, n):
        yield line[: line.index(" rt=")]


NGINX_FORMAT = (
    '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" '
    '"$http_user_agent" rt=$request_time uct="$upstream_connect_time" uht="$upstream_header_time" '
    'urt="$upstream_response_time" ua="$upstream_addr"'
)


def apache(rng: random.Random, n: int) -> Iterator[str]:
    """Apache combined with %D (microseconds) at the end."""
    for ts in _stamps(rng, n):
        yield (
            f"192.168.{rng.randrange(256)}.{rng.randrange(256)} - - [{ts:%d/%b/%Y:%H:%M:%S +0000}] "
            f'"GET {rng.choice(PATHS)} HTTP/1.1" {rng.choice((200, 304, 404))} {rng.randrange(100, 9000)} '
            f'"-" "{rng.choice(AGENTS)}" {rng.randrange(100, 2_000_000)}'
        )


def _statement(rng: random.Random) -> str:
    t = rng.choice(TABLES)
    kind = rng.random()
    if kind < 0.5:
        return f"SELECT * FROM {t} WHERE id = {rng.randrange(10**7)} AND status = 'open' LIMIT 10"
    if kind < 0.7:
        ids = ", ".join(str(rng.randrange(10**6)) for _ in range(rng.randrange(1, 20)))
        return f"SELECT id, total FROM {t} WHERE user_id IN ({ids})"
    if kind < 0.85:
        return f"UPDATE {t} SET updated_at = NOW(), qty = qty + {rng.randrange(9)} WHERE id = {rng.randrange(10**7)}"
    return f"INSERT INTO {t} (a, b, note) VALUES ({rng.randrange(99)}, {rng.random():.4f}, 'x{rng.randrange(999)}')"


def mysql_slow(rng: random.Random, n: int) -> Iterator[str]:
    """MySQL 8 slow log entries (n entries, ~5 lines each), with the odd multi-line statement."""
    yield "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:"
    yield "Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock"
    yield "Time                 Id Command    Argument"
    for ts in _stamps(rng, n):
        qt = rng.lognormvariate(-6, 1.5)
        yield f"# Time: {ts:%Y-%m-%dT%H:%M:%S.%fZ}"
        yield f"# User@Host: app[app] @ web{rng.randrange(9)} [10.0.0.{rng.randrange(250)}]  Id: {rng.randrange(10**5)}"
        yield (
            f"# Query_time: {qt:.6f}  Lock_time: {qt / 10:.6f} Rows_sent: {rng.randrange(50)}  "
            f"Rows_examined: {rng.randrange(10**4)}"
        )
        yield f"SET timestamp={int(ts.timestamp())};"
        stmt = _statement(rng)
        yield (stmt.replace(" WHERE", "\n  WHERE") if rng.random() < 0.1 else stmt) + ";"


def postgres_stderr(rng: random.Random, n: int) -> Iterator[str]:
    """PostgreSQL stderr with '%m [%p] %q%u@%d ' and log_min_duration_statement=0."""
    for ts in _stamps(rng, n):
        yield (
            f"{ts:%Y-%m-%d %H:%M:%S}.{ts.microsecond // 1000:03d} UTC [{rng.randrange(1000, 9999)}] app@shop "
            f"LOG:  duration: {rng.lognormvariate(0, 1.5):.3f} ms  statement: {_statement(rng)}"
        )


def prometheus(rng: random.Random, n: int) -> Iterator[str]:
    """Scrapes of a histogram and a counter with a timestamp per sample."""
    bounds = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "+Inf"]
    i = 0
    while i < n:
        ms = int((START + timedelta(seconds=15 * i // 100)).timestamp() * 1000)
        yield "# HELP http_request_duration_seconds Request latency."
        yield "# TYPE http_request_duration_seconds histogram"
        for path in PATHS:
            total = 0
            for b in bounds:
                total += rng.randrange(100)
                yield f'http_request_duration_seconds_bucket{{path="{path}",le="{b}"}} {total} {ms}'
            yield f'http_request_duration_seconds_sum{{path="{path}"}} {total * 0.07:.3f} {ms}'
            yield f'http_request_duration_seconds_count{{path="{path}"}} {total} {ms}'
            i += len(bounds) + 2
        i += 2


def logfmt(rng: random.Random, n: int) -> Iterator[str]:
    for ts in _stamps(rng, n):
        yield (
            f"time={ts:%Y-%m-%dT%H:%M:%S.%f}Z level={rng.choice(('info', 'info', 'warn', 'error'))} "
            f"path={rng.choice(PATHS)} status={rng.choice((200, 404, 500))} duration_ms={rng.lognormvariate(3, 1):.2f} "
            f'msg="request done" pod=api-{rng.randrange(40)}'
        )


GENERATORS: dict[str, tuple[Callable[[random.Random, int], Iterator[str]], dict[str, str]]] = {
    "nginx": (nginx, {"log_format": NGINX_FORMAT}),
    "nginx-combined": (nginx_combined, {}),
    "apache": (apache, {}),
    "mysql-slow": (mysql_slow, {}),
    "postgres-stderr": (postgres_stderr, {}),
    "prometheus": (prometheus, {}),
    "logfmt": (logfmt, {}),
}
"""Benchmark cases by name: the generator and the options the format is read with."""
FORMAT_OF = {"nginx-combined": "nginx"}
"""The registered format of the cases not named after one."""


def cached(out: Path, fmt: str, n: int, seed: int = 7) -> Path:
    """The generated file for ``fmt`` and ``n``, written once per seed."""
    path = out / f"{fmt}-{n}-s{seed}.log"
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        rng = random.Random(seed)
        with open(tmp, "w") as fh:
            for line in GENERATORS[fmt][0](rng, n):
                fh.write(line + "\n")
        tmp.rename(path)
    return path
