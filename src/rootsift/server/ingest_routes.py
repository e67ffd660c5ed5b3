"""Routes that take events: OTLP/HTTP (``/v1/traces``, ``/v1/logs``, ``/v1/metrics``) and
Honeycomb's events API (``/1/events/<dataset>``, ``/1/batch/<dataset>``), so OpenTelemetry
exporters and libhoney clients send here unmodified; ``/1/batch/<dataset>`` also takes JSON
lines (``Content-Type: application/x-ndjson``), for scripts. Every one answers only once its
events are in the fsync'd write-ahead log (wal.py); otherwise it refuses the request:

    400  a body that cannot be decoded      413  a body past the limit (after inflating)
    429  the ingest queue is full           503  the store is behind (both: Retry-After)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rootsift.errors import UsageError
from rootsift.server import otlp
from rootsift.server.body import MAX_BODY_BYTES, BadBody, BodyTooLarge, read_body
from rootsift.server.keys import Keys, check
from rootsift.server.wal import OTLP_LOGS, OTLP_TRACES, Overloaded, Wal
from rootsift.store.base import check_dataset_name

SIGNALS = {"traces": "traces", "logs": "logs", "metrics": "metrics"}
"""Each OTLP signal's default dataset; the ``X-Rootsift-Dataset`` header overrides it."""

DATASET_HEADER = "x-rootsift-dataset"


def error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status, headers=headers)


async def _body(request: Request, wal: Wal, limit: int) -> bytes:
    """The request's body, once the log would take it: refused before it is read when the
    queue or the backlog is full (decided from its Content-Length; a chunked body counts 0
    and is refused when it is appended)."""
    try:
        expected = max(0, int(request.headers.get("content-length") or 0))
    except ValueError:
        expected = 0
    wal.admit(expected)
    return await read_body(request.stream(), request.headers.get("content-encoding"), limit)


def lines(events: list[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(e, default=str) + b"\n" for e in events)


async def guarded(call: Callable[[], Any]) -> Response:
    """Run a route body, mapping the refusals to their status codes."""
    try:
        result: Response = await call()
        return result
    except Denied as exc:
        return error(exc.status, "Unauthorized" if exc.status == 401 else "Forbidden", str(exc))
    except BodyTooLarge as exc:
        return error(413, "BodyTooLarge", str(exc))
    except BadBody as exc:
        return error(400, "BadBody", str(exc))
    except UsageError as exc:
        return error(400, type(exc).__name__, str(exc))
    except Overloaded as exc:
        status = 429 if "queue" in str(exc) else 503
        return error(status, "Overloaded", str(exc), {"Retry-After": str(exc.retry_after)})


class Denied(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class IngestRoutes:
    def __init__(self, wal: Wal, keys: Keys, limit: int = MAX_BODY_BYTES) -> None:
        from rootsift.server.otlp_metrics import Series

        self.wal, self.keys, self.limit = wal, keys, limit
        self.series = Series()

    def _allow(self, request: Request, dataset: str) -> None:
        denied = check(self.keys, request.headers, dataset, "ingest")
        if denied is not None:
            raise Denied(*denied)

    async def otlp(self, request: Request) -> Response:
        signal = request.url.path.rsplit("/", 1)[-1]
        return await guarded(lambda: self._otlp(request, signal))

    async def _otlp(self, request: Request, signal: str) -> Response:
        from rootsift.server import otlp_metrics, otlp_types

        dataset = check_dataset_name(request.headers.get(DATASET_HEADER) or SIGNALS[signal])
        self._allow(request, dataset)
        body = await _body(request, self.wal, self.limit)
        message, response = otlp_types.messages(signal)
        otlp.decode(message, body, request.headers.get("content-type"))
        if signal == "metrics":  # converted now: a cumulative series' delta needs its last point
            events, rejected, why = otlp_metrics.points(message, self.series)
            if events:
                await self.wal.append(dataset, lines(events))
        else:  # logged as received, converted in bulk by the applier (convert.py)
            rejected, why = otlp.rejects(message, signal)
            if not _is_protobuf(request):
                body = message.SerializeToString()
            if body:
                await self.wal.append(dataset, body, OTLP_TRACES if signal == "traces" else OTLP_LOGS)
        if rejected:
            partial = response.partial_success
            setattr(partial, otlp_types.REJECTED[signal], rejected)
            partial.error_message = why
        if not _is_protobuf(request):
            from google.protobuf import json_format

            return JSONResponse(json_format.MessageToDict(response))
        return Response(response.SerializeToString(), media_type="application/x-protobuf")

    async def honeycomb_event(self, request: Request) -> Response:
        return await guarded(lambda: self._honeycomb(request, batch=False))

    async def honeycomb_batch(self, request: Request) -> Response:
        return await guarded(lambda: self._honeycomb(request, batch=True))

    async def _honeycomb(self, request: Request, batch: bool) -> Response:
        dataset = check_dataset_name(request.path_params["dataset"])
        self._allow(request, dataset)
        body = await _body(request, self.wal, self.limit)
        if batch and _is_json_lines(request):
            events, statuses = _json_lines_events(body)
            if events:
                await self.wal.append(dataset, lines(events))
            return JSONResponse(statuses)
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise BadBody(f"the body is not JSON: {exc}") from exc
        if not batch:
            if not isinstance(data, dict):
                raise BadBody("an event is a JSON object")
            item = {"data": data, "time": request.headers.get("x-honeycomb-event-time")}
            item["samplerate"] = request.headers.get("x-honeycomb-samplerate")
            events, statuses = _honeycomb_events([item])
        else:
            if not isinstance(data, list):
                raise BadBody("a batch is a JSON array of {data, time, samplerate}")
            events, statuses = _honeycomb_events(data)
        if events:
            await self.wal.append(dataset, lines(events))
        if batch:
            return JSONResponse(statuses)
        if statuses[0]["status"] != 202:
            return error(400, "BadEvent", statuses[0]["error"])
        return Response(status_code=200)


JSON_LINES = frozenset(
    {"application/x-ndjson", "application/jsonl", "application/x-jsonlines", "application/jsonlines"}
)
"""Media types of a JSON-lines body (one event per line) on ``/1/batch/<dataset>``."""


def _is_json_lines(request: Request) -> bool:
    return (request.headers.get("content-type") or "").split(";")[0].strip().lower() in JSON_LINES


def _json_lines_events(body: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """JSON lines, each line one event as ``rootsift ingest --format jsonl`` reads it (its
    ``timestamp`` field, else the time it arrived), and one status per non-empty line."""
    items: list[Any] = []
    bad: dict[int, str] = {}
    for number, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            event = exc
        if not isinstance(event, dict):
            bad[len(items)] = f"line {number}: " + (
                f"not JSON: {event}" if isinstance(event, Exception) else "not a JSON object"
            )
            event = None
        items.append({"data": event, "time": event.get("timestamp") if event else None})
    events, statuses = _honeycomb_events(items)
    for i, why in bad.items():
        statuses[i] = {"status": 400, "error": why}
    return events, statuses


def _is_protobuf(request: Request) -> bool:
    return not (request.headers.get("content-type") or "").startswith("application/json")


def _honeycomb_events(items: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Honeycomb batch items as events, and one status per item (202, or 400 with why)."""
    events, statuses = [], []
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for i, item in enumerate(items):
        data = item.get("data") if isinstance(item, dict) else None
        if not isinstance(data, dict):
            statuses.append({"status": 400, "error": f"item {i}: no 'data' object"})
            continue
        event = dict(data)
        when = item.get("time")
        if when:
            event["timestamp"] = when
        else:
            event.setdefault("timestamp", now)
        rate = item.get("samplerate")
        try:
            rate = int(rate) if rate not in (None, "") else 1
        except (TypeError, ValueError):
            statuses.append({"status": 400, "error": f"item {i}: samplerate {rate!r} is not an integer"})
            continue
        if rate > 1:
            event["samplerate"] = rate
        events.append(event)
        statuses.append({"status": 202})
    return events, statuses
