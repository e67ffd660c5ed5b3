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
from rootsift.server.keys import Keys, check

if TYPE_CHECKING:
    from rootsift.api import Rootsift

T = TypeVar("T")


SPEC_KEYS = {"calculations", "breakdowns", "filters", "granularity_seconds"}
"""Keys that make a body of /api/query a query spec (docs/query.md) rather than options."""


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, default=str, ensure_ascii=False), status, media_type="application/json")


def _query_body(request: Request, command: Any) -> dict[str, Any]:
    """``GET /api/<command>?dataset=api&select=...``: the same body from the query string
    (a repeated key is a list; a flag is true unless ``false`` or ``0``), so a result's
    JSON is a link."""
    import click

    from rootsift.server.commands import keys

    flags = {k for p in command.params if isinstance(p, click.Option) and p.is_flag for k in keys(p)}
    multiple = {k for p in command.params if getattr(p, "multiple", False) for k in keys(p)}
    body: dict[str, Any] = {}
    for key in dict.fromkeys(request.query_params.keys()):
        values = request.query_params.getlist(key)
        if key in flags:
            body[key] = values[-1].lower() not in ("false", "0")
        elif key in multiple:
            body[key] = values
        else:
            body[key] = values[-1]
    return body


async def _json_body(request: Request) -> dict[str, Any] | Response:
    try:
        data = json.loads(await request.body() or b"{}")
    except ValueError as exc:
        return error(400, "BadBody", f"the body is not JSON: {exc}")
    if not isinstance(data, dict):
        return error(400, "BadBody", "the body must be a JSON object")
    return data


def _failure(exc: RootsiftError) -> JSONResponse:
    status = 404 if isinstance(exc, DatasetNotFoundError) else 400 if isinstance(exc, UsageError) else 500
    return error(status, type(exc).__name__, str(exc))


class ApiRoutes:
    """Each read runs in a worker thread and then releases the store's files, so CLI
    commands and file ingests on the same data directory run beside the server (DuckDB
    lets one process write a file or several read it). Reads take turns: a release must
    not detach a file another read is using."""

    def __init__(self, rs: Rootsift, turn: threading.Lock, keys: Keys) -> None:
        self.rs = rs
        self._turn = turn
        self.keys = keys

    def _denied(self, request: Request, dataset: Any) -> Response | None:
        denied = check(self.keys, request.headers, dataset if isinstance(dataset, str) else None, "read")
        if denied is None:
            return None
        return error(denied[0], "Unauthorized" if denied[0] == 401 else "Forbidden", denied[1])

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            with self._turn:
                try:
                    return fn(*args)
                finally:
                    self.rs.backend.release_all()

        return await run_in_threadpool(run)

    async def datasets(self, request: Request) -> Response:
        if (denied := self._denied(request, None)) is not None:
            return denied
        try:
            infos = await self._read(self.rs.datasets)
        except RootsiftError as exc:
            return _failure(exc)
        return _json({"datasets": [d.as_dict() for d in infos]})

    async def schema(self, request: Request) -> Response:
        if (denied := self._denied(request, request.path_params["dataset"])) is not None:
            return denied
        try:
            fields = await self._read(self.rs.schema, request.path_params["dataset"])
        except RootsiftError as exc:
            return _failure(exc)
        return _json({"dataset": request.path_params["dataset"], "fields": fields})

    async def flamegraph(self, request: Request) -> Response:
        """``GET /api/flamegraph?dataset=&a=&b=[&type=&focus=]``: profile-diff's differential
        flame graph as the self-contained page ``--report`` writes (the web page shows it)."""
        q = request.query_params
        if (denied := self._denied(request, q.get("dataset"))) is not None:
            return denied
        if not q.get("dataset"):
            return error(400, "UsageError", "dataset is required")

        def render() -> str:
            from rootsift.ui import flamegraph

            result = self.rs.profile_diff(
                q["dataset"], a=q.get("a") or None, b=q.get("b") or None, where=q.get("where") or None,
                profile_type=q.get("type") or None, focus=q.get("focus") or None,
            )  # fmt: skip
            return flamegraph.render(result, f"{q['dataset']}: B ({q.get('b')}) against A ({q.get('a')})")

        try:
            page = await self._read(render)
        except RootsiftError as exc:
            return _failure(exc)
        return Response(page, media_type="text/html; charset=utf-8")

    async def command(self, request: Request) -> Response:
        """``POST /api/<command>``: a CLI command with its options as a JSON object."""
        from rootsift.cli import main
        from rootsift.server import commands

        name = request.path_params["command"]
        command = commands.served_commands(main).get(name)
        if command is None:
            why = commands.NOT_SERVED.get(name)
            return error(404, "NoSuchRoute", f"{name}: not over HTTP ({why})" if why else f"no command {name!r}")
        data = _query_body(request, command) if request.method == "GET" else await _json_body(request)
        if isinstance(data, Response):
            return data
        if (denied := self._denied(request, data.get("dataset"))) is not None:
            return denied
        if name == "query" and SPEC_KEYS & set(data):
            return await self.query_spec(data)
        try:
            args = commands.argv(command, data)
        except commands.BadRequest as exc:
            return error(400, "UsageError", str(exc))
        status, result = await self._read(commands.run, command, args, self.rs)
        return _json(result, status)

    async def query_spec(self, data: dict[str, Any]) -> Response:
        from rootsift.query.spec import QuerySpec

        try:
            spec = QuerySpec.from_dict(data)
            result = await self._read(self.rs.query, spec)
        except RootsiftError as exc:
            return _failure(exc)
        return _json(result.as_dict())
