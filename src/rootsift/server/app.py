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
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from rootsift.server.api_routes import ApiRoutes
from rootsift.server.applier import Applier
from rootsift.server.body import MAX_BODY_BYTES
from rootsift.server.ingest_routes import IngestRoutes
from rootsift.server.wal import Wal


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
    wal = Wal(config.data_dir / ".server" / "wal", max_queued=config.max_queued, max_backlog=config.max_backlog)
    turn = threading.Lock()  # reads and the releases of the store's files take turns
    applier = Applier(wal, rs, turn, every=config.apply_every)
    ingest, api = IngestRoutes(wal, config.max_body), ApiRoutes(rs, turn)

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "wal_backlog_bytes": wal.backlog_bytes,
                "applied_events": applier.events,
                "rejected_events": applier.rejects,
                "apply_failures": applier.failures,
                "refused_requests": wal.stats.refused,
                "repaired_bytes": wal.stats.repaired_bytes,
            }
        )

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
        Route("/api/query", api.query, methods=["POST"]),
        Route("/healthz", health, methods=["GET"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.parts = Parts(wal, applier)
    return app
