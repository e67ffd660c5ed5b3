"""The read API: the same JSON as the CLI's ``--json`` (``/api/datasets``,
``/api/schema/<dataset>``, ``/api/query``), one error envelope
``{"error": {"type", "message"}}`` with the CLI's meaning of its exit codes as HTTP
statuses (a usage error 400, an unknown dataset 404, anything else 500)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rootsift.errors import DatasetNotFoundError, RootsiftError, UsageError
from rootsift.server.ingest_routes import error

if TYPE_CHECKING:
    from rootsift.api import Rootsift

T = TypeVar("T")


def _json(data: Any) -> Response:
    return Response(json.dumps(data, default=str, ensure_ascii=False), media_type="application/json")


def _failure(exc: RootsiftError) -> JSONResponse:
    status = 404 if isinstance(exc, DatasetNotFoundError) else 400 if isinstance(exc, UsageError) else 500
    return error(status, type(exc).__name__, str(exc))


class ApiRoutes:
    """Each read runs in a worker thread and then releases the store's files, so CLI
    commands and file ingests on the same data directory run beside the server (DuckDB
    lets one process write a file or several read it). Reads take turns: a release must
    not detach a file another read is using."""

    def __init__(self, rs: Rootsift, turn: threading.Lock) -> None:
        self.rs = rs
        self._turn = turn

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            with self._turn:
                try:
                    return fn(*args)
                finally:
                    self.rs.backend.release_all()

        return await run_in_threadpool(run)

    async def datasets(self, request: Request) -> Response:
        try:
            infos = await self._read(self.rs.datasets)
        except RootsiftError as exc:
            return _failure(exc)
        return _json({"datasets": [d.as_dict() for d in infos]})

    async def schema(self, request: Request) -> Response:
        try:
            fields = await self._read(self.rs.schema, request.path_params["dataset"])
        except RootsiftError as exc:
            return _failure(exc)
        return _json({"dataset": request.path_params["dataset"], "fields": fields})

    async def query(self, request: Request) -> Response:
        from rootsift.query.spec import QuerySpec

        try:
            data = json.loads(await request.body())
        except ValueError as exc:
            return error(400, "BadBody", f"the body is not JSON: {exc}")
        if not isinstance(data, dict):
            return error(400, "QuerySpecError", "the query spec must be a JSON object")
        try:
            spec = QuerySpec.from_dict(data)
            result = await self._read(self.rs.query, spec)
        except RootsiftError as exc:
            return _failure(exc)
        return _json(result.as_dict())
