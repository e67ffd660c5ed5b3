"""The Starlette application: ingest routes, the read API, and the store, write-ahead log
and applier they share, opened and closed with the application's lifespan."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from rootsift.server.api_routes import ApiRoutes
from rootsift.server.applier import BATCH_BYTES, Applier
from rootsift.server.body import MAX_BODY_BYTES
from rootsift.server.ingest_routes import IngestRoutes
from rootsift.server.keys import Keys
from rootsift.server.wal import Wal

STATIC = Path(__file__).parent / "static"
"""The web page (docs/web.md): bundled in the wheel, no network needed."""

FIXED_PATHS = {
    "/v1/traces": {
        "post": {
            "summary": "OTLP/HTTP traces (protobuf or JSON, gzip)",
            "responses": {"200": {"description": "ExportTraceServiceResponse"}},
        }
    },
    "/v1/logs": {
        "post": {"summary": "OTLP/HTTP logs", "responses": {"200": {"description": "ExportLogsServiceResponse"}}}
    },
    "/v1/metrics": {
        "post": {"summary": "OTLP/HTTP metrics", "responses": {"200": {"description": "ExportMetricsServiceResponse"}}}
    },
    "/1/events/{dataset}": {
        "post": {"summary": "Honeycomb events API: one event", "responses": {"200": {"description": "durable"}}}
    },
    "/1/batch/{dataset}": {
        "post": {
            "summary": "Honeycomb batch API; or JSON lines (Content-Type: application/x-ndjson), an event a line",
            "responses": {"200": {"description": "one status per item"}},
        }
    },
    "/api/datasets": {
        "get": {"summary": "rootsift datasets --json", "responses": {"200": {"description": "datasets"}}}
    },
    "/api/schema/{dataset}": {
        "get": {"summary": "rootsift schema DATASET --json", "responses": {"200": {"description": "fields"}}}
    },
    "/api/openapi.json": {"get": {"summary": "this document", "responses": {"200": {"description": "OpenAPI 3.1"}}}},
    "/api/flamegraph": {
        "get": {
            "summary": "profile-diff's differential flame graph (HTML) for dataset, a, b, type, focus",
            "responses": {"200": {"description": "text/html"}},
        }
    },
    "/healthz": {"get": {"summary": "the log's backlog and counters", "responses": {"200": {"description": "ok"}}}},
}
"""Routes not made from a CLI command (docs/server.md); /api/<command> are added from the CLI."""


@dataclass
class ServerConfig:
    data_dir: Path
    max_body: int = MAX_BODY_BYTES
    max_queued: int = 64 << 20
    max_backlog: int = 1 << 30
    apply_every: float = 1.0


@dataclass
class Parts:
    wal: Wal
    applier: Applier


def create_app(config: ServerConfig) -> Starlette:
    """The server as an ASGI application (``rootsift serve`` runs it under uvicorn)."""
    from rootsift.api import Rootsift

    rs = Rootsift(config.data_dir)
    wal = Wal(
        config.data_dir / ".server" / "wal",
        max_queued=config.max_queued,
        max_backlog=config.max_backlog,
        file_bytes=BATCH_BYTES,
    )
    turn = threading.Lock()  # reads and the releases of the store's files take turns
    applier = Applier(wal, rs, turn, every=config.apply_every)
    keys = Keys(config.data_dir)
    ingest, api = IngestRoutes(wal, keys, config.max_body), ApiRoutes(rs, turn, keys)

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "wal_backlog_bytes": wal.backlog_bytes,
                "applied_events": applier.events,
                "rejected_events": applier.rejects,
                "apply_failures": applier.failures,
                "applies": applier.moves,
                "quarantined_batches": applier.quarantined,
                "refused_requests": wal.stats.refused,
                "repaired_bytes": wal.stats.repaired_bytes,
            }
        )

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})

    async def openapi(request: Request) -> Response:
        from rootsift.cli import main
        from rootsift.server.commands import openapi as document

        return JSONResponse(document(main, FIXED_PATHS))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        applier.start()  # first moves what a previous run left in the log
        try:
            yield
        finally:  # graceful stop: the log is written and moved into the store
            wal.close()
            applier.stop()
            rs.close()

    routes = [
        Route("/v1/traces", ingest.otlp, methods=["POST"]),
        Route("/v1/logs", ingest.otlp, methods=["POST"]),
        Route("/v1/metrics", ingest.otlp, methods=["POST"]),
        Route("/1/events/{dataset}", ingest.honeycomb_event, methods=["POST"]),
        Route("/1/batch/{dataset}", ingest.honeycomb_batch, methods=["POST"]),
        Route("/api/datasets", api.datasets, methods=["GET"]),
        Route("/api/schema/{dataset}", api.schema, methods=["GET"]),
        Route("/api/openapi.json", openapi, methods=["GET"]),
        Route("/api/flamegraph", api.flamegraph, methods=["GET"]),
        Route("/api/{command}", api.command, methods=["POST", "GET"]),
        Route("/", page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        Route("/healthz", health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.parts = Parts(wal, applier)
    return app
