"""serve: live ingest and the read API over HTTP."""

from __future__ import annotations

from pathlib import Path

import click

from rootsift.cli.common import data_option, err, fail
from rootsift.errors import RootsiftError


@click.command()
@data_option
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (loopback only until keys exist)."
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8080,
    show_default=True,
    help="Port of the read API (it takes ingest too).",
)
@click.option(
    "--otlp-port",
    type=click.IntRange(0, 65535),
    default=4318,
    show_default=True,
    help="Port of OTLP/HTTP ingest (/v1/traces, /v1/logs, /v1/metrics).",
)
@click.option(
    "--max-body",
    type=click.IntRange(min=1024),
    default=16 << 20,
    show_default=True,
    help="Largest request body in bytes, after decompression (413 past it).",
)
@click.option(
    "--max-queue",
    type=click.IntRange(min=1024),
    default=64 << 20,
    show_default=True,
    help="Bytes accepted but not yet fsync'd before requests get 429.",
)
@click.option(
    "--max-backlog",
    type=click.IntRange(min=1024),
    default=1 << 30,
    show_default=True,
    help="Bytes in the write-ahead log not yet in the store before requests get 503.",
)
@click.option(
    "--apply-every",
    type=click.FloatRange(min=0.05),
    default=1.0,
    show_default=True,
    help="Seconds between moves of the write-ahead log into the store.",
)
def serve(
    data_dir: Path | None,
    host: str,
    port: int,
    otlp_port: int,
    max_body: int,
    max_queue: int,
    max_backlog: int,
    apply_every: float,
) -> None:
    """Take events over HTTP (OTLP/HTTP, Honeycomb's events API) and answer queries.

    A request is answered 200 only once its events are in an fsync'd write-ahead log;
    the log moves into the store every --apply-every seconds. SIGTERM or Ctrl-C stops
    accepting, writes what is queued and moves it into the store (docs/server.md).

    Example: rootsift serve --data ./data --port 8080 --otlp-port 4318
    """
    from rootsift.api import default_data_dir
    from rootsift.server.app import ServerConfig
    from rootsift.server.run import serve as run

    data_dir = Path(data_dir or default_data_dir())

    err.print(
        f"rootsift serve: API on http://{host}:{port}, OTLP/HTTP on http://{host}:{otlp_port}; data in {data_dir}"
    )
    try:
        err.print(_keys_note(data_dir))
        run(ServerConfig(data_dir, max_body, max_queue, max_backlog, apply_every), host, [port, otlp_port])
    except RootsiftError as exc:
        fail(exc, False)


def _keys_note(data_dir: Path) -> str:
    """What the server asks of a request: a key, or nothing (and then it listens on this
    machine only: docs/server.md, "Keys")."""
    from rootsift.server.keys import load

    keys = load(data_dir)
    if not keys:
        return (
            "rootsift serve: no keys: requests are not checked, so it listens on this machine only "
            "(`rootsift keys create --dataset NAME --scope ingest|read` to serve beyond it)"
        )
    return f"rootsift serve: {len(keys)} key(s): every ingest and /api request needs one (not /healthz)"
