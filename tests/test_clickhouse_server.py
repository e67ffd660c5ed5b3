"""The server backend's own behaviour (``--backend clickhouse --clickhouse-url``): the URL,
a server that cannot be reached or does not answer (a clean one-line error naming the
URL, exit 1, each timeout honoured), the driver's errors mapped into rootsift's tree, and
what a store shared with other processes must do. Its queries and analyses are tested
with the other backends' (test_query.py, test_backend_chdb.py, test_otel_clickhouse.py,
test_analyses_chdb.py) over HTTP to the run's ClickHouse server (helpers/backends.py).

The network tests talk to sockets of this process that never answer; each CLI run has a
generous ``timeout`` only so that a timeout that is not enforced fails the test instead
of hanging it (no test asserts a duration).
"""

from __future__ import annotations

import inspect
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlglot import exp

from helpers.backends import HAVE_CLICKHOUSE_CONNECT, clickhouse_url, live_server, needs_chdb, needs_clickhouse, opened
from rootsift.cli import main
from rootsift.errors import StoreError, StoreUnavailableError, UsageError
from rootsift.store.clickhouse_driver import ClickHouseURL, parse_url

needs_driver = pytest.mark.skipif(not HAVE_CLICKHOUSE_CONNECT, reason="clickhouse-connect is not installed")
GUARD = 120
"""Seconds a CLI run may take before the test fails (it would hang if a timeout were not
enforced); the timeouts under test are 1 s."""


def _rootsift(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "rootsift", *args, "--data", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=GUARD,
        env=env,
    )


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr and done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    return lines[0]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@needs_driver
def test_an_unreachable_server_is_one_line_naming_the_url_and_exit_1(tmp_path: Path) -> None:
    port = _closed_port()
    url = f"http://reader:s3cret@127.0.0.1:{port}/observability"
    line = _one_line_error(_rootsift("datasets", "--clickhouse-url", url, tmp_path=tmp_path))
    assert f"cannot reach ClickHouse at http://reader@127.0.0.1:{port}/observability" in line
    assert "refused" in line.lower() and "s3cret" not in line
    as_json = _rootsift("query", "api", "-c", "count", "--json", "--clickhouse-url", url, tmp_path=tmp_path)
    assert as_json.returncode == 1 and "Traceback" not in as_json.stderr
    error = json.loads(as_json.stdout)["error"]
    assert "cannot reach ClickHouse" in error["message"] and "s3cret" not in as_json.stdout


@pytest.fixture
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A listening socket that never accepts: connections wait in its backlog unanswered.
    ``fill`` connections taken from it leave no room, so a further connect is not answered."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    held: list[socket.socket] = []
    try:
        yield int(server.getsockname()[1]), held
    finally:
        for s in held:
            s.close()
        server.close()


@needs_driver
def test_the_connect_timeout_is_honoured(silent_server: tuple[int, list[socket.socket]], tmp_path: Path) -> None:
    port, held = silent_server
    held.append(socket.create_connection(("127.0.0.1", port)))  # the backlog (of 1) is full now
    url = f"http://127.0.0.1:{port}?connect_timeout=1&read_timeout=60"
    line = _one_line_error(_rootsift("datasets", "--clickhouse-url", url, tmp_path=tmp_path))
    assert (
        f"cannot reach ClickHouse at http://127.0.0.1:{port}/rootsift: no connection within connect_timeout=1 s" in line
    )


@needs_driver
def test_the_read_timeout_is_honoured(silent_server: tuple[int, list[socket.socket]], tmp_path: Path) -> None:
    port, _ = silent_server  # the connection is taken into the backlog; nothing ever answers
    url = f"http://127.0.0.1:{port}?connect_timeout=60&read_timeout=1"
    line = _one_line_error(_rootsift("schema", "api", "--clickhouse-url", url, tmp_path=tmp_path))
    assert "no answer within read_timeout=1 s" in line


@needs_clickhouse
@pytest.mark.parametrize("transport", ["http", "chdb"])
def test_a_query_running_past_the_read_timeout_is_stopped(transport: str, tmp_path: Path) -> None:
    """The server sends progress headers while a query runs, so a socket timeout alone would
    not stop a long query: ``read_timeout`` is also the query's ``max_execution_time``. Over
    HTTP to the run's server, and through chdb's transport."""
    if transport == "http":
        url = clickhouse_url(tmp_path / "data") + "?read_timeout=1"
    else:
        url = f"chdb://{tmp_path / 'data' / 'clickhouse'}?read_timeout=1"
    with opened(tmp_path / "data", "clickhouse", clickhouse_url=url) as rs:
        with pytest.raises(StoreError, match=r"TIMEOUT_EXCEEDED.*\(read_timeout=1 s of --clickhouse-url\)"):
            rs.backend.run("SELECT sleepEachRow(0.2) FROM numbers(30) SETTINGS max_block_size = 1")
        assert rs.backend.run("SELECT 1 AS one").to_pylist() == [{"one": 1}]  # and the next one runs


@needs_clickhouse
def test_a_wrong_password_is_one_line_naming_the_user_never_the_password(tmp_path: Path) -> None:
    """A real server's refusal (AUTHENTICATION_FAILED over HTTP): one line, exit 1, the URL
    without its password, and where the credentials come from."""
    server = live_server()
    wrong = "not-" + server.password
    url = server.url("t_auth", password=wrong)
    line = _one_line_error(_rootsift("datasets", "--clickhouse-url", url, tmp_path=tmp_path))
    host = server.address.removeprefix("http://")
    assert line.startswith(f"error: ClickHouse at http://rootsift@{host}/t_auth: Code: 516."), line
    assert "AUTHENTICATION_FAILED" in line and "$ROOTSIFT_CLICKHOUSE_URL" in line
    assert wrong not in line and server.password not in line
    right = _rootsift("datasets", "--json", "--clickhouse-url", server.url("t_auth"), tmp_path=tmp_path)
    assert right.returncode == 0 and json.loads(right.stdout) == {"datasets": []}, right.stderr


def test_urls_parse_and_never_show_the_password() -> None:
    url = parse_url("https://ops:p%40ss@ch.example:8443/observability?connect_timeout=3&read_timeout=900")
    assert (url.scheme, url.host, url.port, url.username, url.password, url.database) == (
        "https",
        "ch.example",
        8443,
        "ops",
        "p@ss",
        "observability",
    )
    assert (url.connect_timeout, url.read_timeout) == (3, 900)
    assert url.shown() == "https://ops@ch.example:8443/observability"
    plain = parse_url("http://localhost")
    assert (plain.port, plain.database, plain.username, plain.connect_timeout, plain.read_timeout) == (
        8123,
        "rootsift",
        "",
        10,
        300,
    )
    assert parse_url("https://h").port == 8443
    assert parse_url("chdb:///var/lib/rootsift") == ClickHouseURL("chdb", path="/var/lib/rootsift")
    for bad, why in [
        ("clickhouse://h:9000", "scheme must be http, https or chdb"),
        ("http://h:8123/db?timeout=3", "unknown parameter 'timeout'"),
        ("http://h:8123/db?read_timeout=0.5", "whole number of seconds"),
        ("http://h:8123/my-db", "not a database name"),
        ("http://:8123/db", "no host"),
        ("chdb://relative/dir", "chdb:///absolute/path"),
        ("http://h:99999", "out of range"),
    ]:
        with pytest.raises(UsageError, match=why):
            parse_url(bad)


def test_backend_and_url_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    data = ["--data", str(tmp_path / "data"), "--json"]
    no_url = runner.invoke(main, ["datasets", "--backend", "clickhouse", *data], env={"ROOTSIFT_CLICKHOUSE_URL": ""})
    assert no_url.exit_code == 2 and "needs --clickhouse-url" in no_url.output
    both = runner.invoke(main, ["datasets", "--backend", "chdb", "--clickhouse-url", "http://h", *data])
    assert both.exit_code == 2 and "--clickhouse-url is for --backend clickhouse" in both.output
    bad = runner.invoke(main, ["datasets", "--clickhouse-url", "ftp://h", *data])
    assert bad.exit_code == 2 and "--clickhouse-url 'ftp://h'" in bad.output
    # a URL in the environment is ignored by another --backend (the flag wins)
    duck = runner.invoke(main, ["datasets", "--backend", "duckdb", *data], env={"ROOTSIFT_CLICKHOUSE_URL": "ftp://h"})
    assert duck.exit_code == 0 and json.loads(duck.stdout)["datasets"] == []


@needs_driver
def test_every_driver_exception_is_mapped() -> None:
    """Like httpx's: an exception class clickhouse-connect adds fails this test until it
    has its place in rootsift's tree."""
    from clickhouse_connect.driver import exceptions as cc

    from rootsift.store.clickhouse_driver import errors

    classes = [
        c
        for _, c in inspect.getmembers(cc, inspect.isclass)
        if issubclass(c, BaseException) and c.__module__ == cc.__name__
    ]
    assert len(classes) >= 10
    missing = [c.__name__ for c in classes if c not in errors()]
    assert not missing, f"clickhouse-connect exceptions with no rootsift error: {missing}"
    assert errors()[cc.OperationalError] is StoreUnavailableError


@needs_driver
def test_a_server_error_becomes_a_store_error_with_the_engine_message() -> None:
    """An error as clickhouse-connect builds it from a server's HTTP answer (its own
    ``build_http_error``): the engine's words, without the URL and version it adds."""
    from clickhouse_connect.driver._backend.httpcommon import build_http_error

    from rootsift.store.clickhouse_driver import translate

    body = "Code: 60. DB::Exception: Unknown table expression identifier 'rootsift.nope'. (UNKNOWN_TABLE) (version 24.8.4.13 (official build))"
    error = build_http_error(404, "60", body, True, "http://ch:8123", False)
    translated = translate(error, "query failed", parse_url("http://ops:pw@ch:8123"))
    assert type(translated) is StoreError
    assert str(translated) == (
        "query failed: Code: 60. DB::Exception: Unknown table expression identifier 'rootsift.nope'. (UNKNOWN_TABLE)"
    )


PARAMETERS: list[Any] = ["a\\b", "tab\there", "new\nline", "quote's", "", None, True, 3, 2.5]


@pytest.mark.parametrize("engine", ["duckdb", pytest.param("chdb", marks=needs_chdb), "clickhouse"])
def test_parameters_bind_as_given_on_every_backend(engine: str, tmp_path: Path) -> None:
    """Bound values arrive unchanged: a backslash, a tab, a newline in a string (chdb's own
    session API would read them as escapes; rootsift no longer uses it), NULL."""
    if engine == "clickhouse" and not HAVE_CLICKHOUSE_CONNECT:
        pytest.skip("clickhouse-connect is not installed")
    query = exp.select(*(exp.alias_(exp.Placeholder(), f"v{i}") for i in range(len(PARAMETERS))))
    with opened(tmp_path / "data", engine) as rs:
        assert list(rs.backend.execute(query, PARAMETERS).rows[0]) == PARAMETERS


@needs_clickhouse
def test_a_shared_store_sees_other_writers_columns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a server other processes change tables: catalog answers are kept only
    ``CATALOG_SECONDS`` (here 0), where chdb (the store's only user) keeps them."""
    import rootsift.store.clickhouse as clickhouse
    from rootsift.store.clickhouse_driver import ClientConnection

    monkeypatch.setattr(clickhouse, "CATALOG_SECONDS", 0.0)
    with opened(tmp_path / "data", "clickhouse") as rs:
        backend: Any = rs.backend
        backend.state("api", create=True)
        assert "zone" not in backend.fields("api")
        other = ClientConnection(backend.url)  # another client of the same store
        try:
            other.command(f"ALTER TABLE {backend.database}.api ADD COLUMN zone Nullable(String)", {})
        finally:
            other.close()
        assert backend.fields("api")["zone"].type == "VARCHAR"
