"""The server's routes against their documents (the OpenAPI document, docs/server.md), and
JSON lines posted to ``/1/batch/<dataset>``, as a script sends them."""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.routing import Route

from helpers.server import Server, start, stop

DOC = Path(__file__).parents[1] / "docs" / "server.md"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = start(tmp_path / "data")
    yield s
    assert stop(s) == 0


def test_every_route_is_in_the_openapi_document_and_docs(tmp_path: Path) -> None:
    """A route added to the app fails here until the OpenAPI document (FIXED_PATHS, or a
    CLI command's) and docs/server.md name it."""
    from rootsift.cli import main
    from rootsift.server.app import FIXED_PATHS, ServerConfig, create_app
    from rootsift.server.commands import openapi

    app = create_app(ServerConfig(tmp_path / "data"))
    try:
        routes = [r for r in app.routes if isinstance(r, Route)]
    finally:
        app.state.parts.wal.close()
    paths = openapi(main, FIXED_PATHS)["paths"]
    doc = DOC.read_text()
    generic = {"/", "/api/{command}"}  # the page (docs/web.md) and one route per command
    for route in routes:
        if route.path in generic:
            continue
        assert route.path in paths, f"{route.path} is not in the OpenAPI document (app.FIXED_PATHS)"
        methods = {m.lower() for m in route.methods or ()} - {"head"}
        assert methods <= set(paths[route.path]), (route.path, methods, set(paths[route.path]))
    for path in FIXED_PATHS:
        written = re.sub(r"\{(\w+)\}", r"<\1>", path)
        assert re.search(re.escape(written) + r"(?![\w/<])", doc), f"docs/server.md does not name {written}"
    assert "/api/<command>" in doc


def test_serve_says_whether_requests_need_a_key(tmp_path: Path) -> None:
    from rootsift.server.keys import create

    data = tmp_path / "data"
    for expected in ("no keys: requests are not checked, so it listens on this machine only", "1 key(s)"):
        s = start(data)
        s.proc.send_signal(signal.SIGTERM)
        _, err = s.proc.communicate(timeout=60)
        said = " ".join(err.decode().split())  # the console wraps long lines
        assert s.proc.returncode == 0 and expected in said, said
        create(data, dataset="shop", scope="ingest")


def test_json_lines_posted_to_the_batch_route(server: Server) -> None:
    body = (
        b'{"timestamp": "2026-01-01T00:00:00Z", "endpoint": "/a", "duration_ms": 12.5}\n'
        b"\n"
        b'{"timestamp": "2026-01-01T00:00:01Z", "endpoint": "/b", "duration_ms": 30}\n'
        b"not json\n"
        b"[1, 2]\n"
        b'{"endpoint": "/c", "duration_ms": 1}\n'
    )
    res = httpx.post(
        server.url + "/1/batch/script", content=body, headers={"Content-Type": "application/x-ndjson"}, timeout=10
    )
    assert res.status_code == 200
    statuses = res.json()
    assert [s["status"] for s in statuses] == [202, 202, 400, 400, 202]
    assert statuses[2]["error"].startswith("line 4: not JSON") and statuses[3]["error"] == "line 5: not a JSON object"
    server.settled()
    got = server.query({"dataset": "script", "calculations": ["count", "sum(duration_ms)"], "breakdowns": ["endpoint"]})
    assert sorted(got["rows"]) == [["/a", 1, 12.5], ["/b", 1, 30.0], ["/c", 1, 1.0]]
    # each line's own timestamp is its time; a line without one arrived now
    early = {"dataset": "script", "calculations": ["count"], "start": "2026-01-01T00:00:00Z", "end": "2026-01-02"}
    assert server.query(early)["rows"] == [[2]]
