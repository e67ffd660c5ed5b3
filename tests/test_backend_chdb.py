"""The ClickHouse backends against the DuckDB store, on the same data: chdb (embedded
ClickHouse) and the server backend (``clickhouse``: over HTTP to the run's ClickHouse server,
helpers/backends.py).

``helpers.backends.BACKENDS`` parametrises the fixtures that open a store (test_query.py),
so the query tests run on all three; chdb and clickhouse-connect are in the ``dev`` extra,
and a missing one skips its half with the reason (never silently). chdb opens one data
directory per process, so each test opens its store, uses it and closes it before the
next opens.

Tolerances: counts, sums' groups, extremes and percentiles are equal (both engines take
percentiles as the inverted CDF: DuckDB's ``quantile_disc``, ClickHouse's
``quantileExactWeighted(q)(x, 1)``); sums and averages agree to 1e-9 relative (the
engines add in other orders); ``distinct_estimate`` in ``schema`` is an estimate on both
(DuckDB's HyperLogLog, ClickHouse's ``uniq``) and agrees within 5 %.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from sqlglot import exp

from helpers.backends import CLICKHOUSE_ENGINES, HAVE_CLICKHOUSE_CONNECT, cli_env, needs_chdb, opened
from helpers.store import iso, write_jsonl
from rootsift import Calculation, QuerySpec, Rootsift
from rootsift.errors import StoreError, UsageError
from rootsift.store.dialects import number_placeholders, render

T0 = datetime(2024, 6, 1)
N = 3000


def _rows() -> list[dict[str, Any]]:
    """Seeded wide events over three hours: sparse fields, nested keys, a sample rate."""
    rng = np.random.default_rng(2022)
    rows = []
    for k in range(N):
        row: dict[str, Any] = {
            "timestamp": iso(T0 + timedelta(seconds=float(k) * 3.6 + float(rng.random()))),
            "service": str(rng.choice(["api", "db", "web"], p=[0.5, 0.3, 0.2])),
            "status": int(rng.choice([200, 500, 503], p=[0.85, 0.1, 0.05])),
            "duration_ms": round(float(rng.lognormal(3, 1)), 3),
            "http": {"route": str(rng.choice(["/a", "/b", "/c"]))},
        }
        if k % 5 == 0:
            row["user"] = f"u{k % 17}"
        if k % 3 == 0:
            row["samplerate"] = int(rng.integers(1, 10))
        rows.append(row)
    return rows


ROWS = _rows()
QUERIES: list[dict[str, Any]] = [
    {"calculations": ["count"]},
    {"calculations": ["count", "p50(duration_ms)", "p99(duration_ms)", "avg(duration_ms)"], "breakdowns": ["service"]},
    {"calculations": ["count"], "where": "status >= 500", "granularity": "30m"},
    {"calculations": ["count", "max(duration_ms)"], "where": 'exists user and http.route in ("/a", "/b")'},
    {"calculations": ["count_distinct(user)", "sum(duration_ms)"], "breakdowns": ["http.route", "status"]},
    {
        "calculations": ["p90(duration_ms)"],
        "breakdowns": ["service"],
        "where": "not (service = 'db') or http.route contains '_'",
    },
    {"calculations": ["heatmap(duration_ms)"], "granularity": "20m"},
    {"calculations": ["heatmap(duration_ms)"], "where": "service starts-with 'a'"},
]


@pytest.fixture(scope="module")
def jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_jsonl(tmp_path_factory.mktemp("chdb") / "events.jsonl", ROWS)


def _open(path: Path, engine: str) -> Rootsift:
    return opened(path, engine)


ENGINES = ("duckdb", "chdb", "clickhouse") if HAVE_CLICKHOUSE_CONNECT else ("duckdb", "chdb")
"""The backends the agreement tests compare: DuckDB first, then each ClickHouse backend."""


def _answers(rs: Rootsift, dataset: str) -> list[dict[str, Any]]:
    now = datetime(2024, 6, 2, tzinfo=UTC)
    out = []
    for kw in QUERIES:
        spec = QuerySpec(dataset, **{**kw, "calculations": [Calculation.parse(c) for c in kw["calculations"]]})
        result = rs.query(spec, now).as_dict()
        result["rows"] = sorted(result["rows"], key=json.dumps)  # ties may come in any order
        out.append(result)
    return out


def _same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, float) or isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (where, a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    else:
        assert a == b, (where, a, b)


@needs_chdb
def test_queries_datasets_schema_and_retention_agree(jsonl: Path, tmp_path: Path) -> None:
    seen: dict[str, dict[str, Any]] = {}
    now = datetime(2024, 6, 1, 2, 0, tzinfo=UTC)
    for engine in ENGINES:
        with _open(tmp_path / engine, engine) as rs:
            summary = rs.ingest(jsonl, dataset="api")
            assert summary.events == N and summary.rejects == 0
            answers = _answers(rs, "api")
            info = rs.datasets()[0].as_dict()
            schema = {f["field"]: f for f in rs.schema("api")}
            events = rs.events("api")
            dry = rs.retention("api", timedelta(hours=1), now, dry_run=True)
            done = rs.retention("api", timedelta(hours=1), now)
            after = rs.query(QuerySpec("api"), now).rows
            seen[engine] = {
                "answers": answers,
                "info": info,
                "schema": schema,
                "dry": dry,
                "done": done,
                "after": after,
                "events": events,
                "events_after": rs.events("api"),
            }
    for engine in ENGINES[1:]:
        _agree(seen["duckdb"], seen[engine])


def _agree(duck: dict[str, Any], ch: dict[str, Any]) -> None:
    _same(duck["answers"], ch["answers"], "query")
    assert any(a["heatmap"] for a in ch["answers"]) and all(a["rows"] or a["heatmap"] for a in ch["answers"])
    for key in ("name", "events", "stored_rows", "first", "last"):
        assert duck["info"][key] == ch["info"][key], key
    assert ch["info"]["events"] > N  # weighted by the sample rate
    assert duck["events"] == ch["events"] == ch["info"]["events"]
    assert duck["schema"].keys() == ch["schema"].keys()
    for name, field in duck["schema"].items():
        other = ch["schema"][name]
        for key in ("type", "present", "conflicts", "path"):
            assert field[key] == other[key], (name, key)
        assert other["distinct_estimate"] == pytest.approx(field["distinct_estimate"], rel=0.05), name
    assert duck["dry"]["would_delete_events"] == ch["dry"]["would_delete_events"] > 0
    assert duck["done"]["deleted_events"] == ch["done"]["deleted_events"] == duck["dry"]["would_delete_events"]
    assert ch["done"]["bytes_after"] < ch["done"]["bytes_before"]  # the disk is given back
    assert duck["after"] == ch["after"] == [[duck["events_after"]]] == [[ch["events_after"]]]
    assert duck["events_after"] < duck["events"]


def _capturing(rs: Rootsift) -> list[tuple[exp.Expr, list[Any]]]:
    """Record every (query, parameters) the query engine hands ``rs``'s backend."""
    seen: list[tuple[exp.Expr, list[Any]]] = []
    execute = rs.backend.execute

    def record(query: exp.Expr, params: list[Any]) -> Any:
        seen.append((query.copy(), list(params)))
        return execute(query, params)

    rs.backend.execute = record  # type: ignore[method-assign]
    return seen


DUCKDB_ONLY_TEXT = ("make_timestamp", "quantile_disc", "epoch_us", "list_", "json_extract", "?")


def test_every_compiled_query_renders_for_clickhouse(
    jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOTSIFT_PLAN_CACHE", "0")  # every query compiled and executed as a tree
    with Rootsift(tmp_path / "d") as rs:
        rs.ingest(jsonl, dataset="api")
        rs.ingest(write_jsonl(tmp_path / "u.jsonl", ({**r, "samplerate": 1} for r in ROWS)), dataset="plain")
        queries = _capturing(rs)
        _answers(rs, "api")  # weighted: percentiles as window queries
        _answers(rs, "plain")
    assert len(queries) >= 2 * len(QUERIES)
    for query, params in queries:
        duck = render(query, "duckdb")
        assert duck.count("?") == len(params)
        named, binds = number_placeholders(query, params)
        text = render(named, "clickhouse")
        for word in DUCKDB_ONLY_TEXT:
            assert word not in text.lower(), (word, text)
        assert [f"{{p{i}:" in text for i in range(len(params))] == [True] * len(params)
        assert list(binds) == [f"p{i}" for i in range(len(params))]


def test_placeholders_are_numbered_in_the_order_parameters_are_bound() -> None:
    x = exp.column("x")
    when = datetime(2024, 1, 2, 3, 4, 5, 6)
    # built WHERE first, then the SELECT list: the tree's order is not the text's order
    query = exp.select(exp.If(this=x > exp.Placeholder(), true=x)).from_("t").where(x < exp.Placeholder())
    query = query.where(exp.column("ts") >= exp.Placeholder())
    named, binds = number_placeholders(query, [1.5, "a'b", when])
    text = render(named, "clickhouse")
    assert text.index("{p0:Float64}") < text.index("{p1:String}") < text.index("{p2:DateTime64(6, 'UTC')}")
    assert binds == {"p0": 1.5, "p1": "a'b", "p2": "2024-01-02 03:04:05.000006"}
    with pytest.raises(UsageError, match="2 placeholders but 1 parameters"):
        number_placeholders(exp.select(exp.Placeholder(), exp.Placeholder()), [1])


def test_duckdb_only_functions_are_refused_by_name_for_clickhouse() -> None:
    query = exp.select(
        exp.Anonymous(this="json_extract_string", expressions=[exp.column("o"), exp.Literal.string("/k")])
    )
    assert "json_extract_string" in render(query, "duckdb").lower()
    with pytest.raises(UsageError, match=r"json_extract_string\(\) is DuckDB's"):
        render(query, "clickhouse")


@pytest.fixture(params=CLICKHOUSE_ENGINES)
def chdb_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rootsift]:
    """A store on each ClickHouse backend: chdb, and the server backend over HTTP."""
    rs = _open(tmp_path / "data", str(request.param))
    try:
        yield rs
    finally:
        rs.close()


@pytest.mark.parametrize("engine", CLICKHOUSE_ENGINES)
def test_an_input_in_many_blocks_is_published_whole_and_survives_a_reopen(
    engine: str, jsonl: Path, tmp_path: Path
) -> None:
    with _open(tmp_path / "data", engine) as rs:
        summary = rs.ingest(jsonl, dataset="api", block_bytes=64 * 1024)
        assert summary.blocks > 3 and summary.events == N
        backend: Any = rs.backend
        assert backend.tables(pending=True) == []  # the pending table was moved in and dropped
        fields = backend.fields("api")
        assert fields["http.route"].path == ["http", "route"] and fields["status"].type == "DOUBLE"
    with _open(tmp_path / "data", engine) as rs:
        assert rs.query(QuerySpec("api")).rows == [[rs.events("api")]] != [[N]]  # weighted by samplerate
        assert rs.datasets()[0].stored_rows == N


def test_the_stored_sample_is_one_in_64_and_repeats(chdb_store: Rootsift, tmp_path: Path) -> None:
    rows = [{"timestamp": iso(T0 + timedelta(seconds=k)), "k": k} for k in range(64 * 300)]
    chdb_store.ingest(write_jsonl(tmp_path / "many.jsonl", rows), dataset="s")
    backend: Any = chdb_store.backend
    query = exp.select(exp.Count(this=exp.Star())).from_(backend.sample_relation("s", None, None))
    first = backend.execute(query, []).rows[0][0]
    assert 200 <= first <= 400  # 300 expected; the key is a hash of the row's ordinal
    assert backend.execute(query, []).rows[0][0] == first


@needs_chdb
def test_a_second_chdb_store_in_one_process_is_a_clear_error(tmp_path: Path) -> None:
    with _open(tmp_path / "data", "chdb"), pytest.raises(StoreError, match="one store per process"):
        _open(tmp_path / "other", "chdb")


def test_a_missing_chdb_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(__import__("sys").modules, "chdb", None)
    with pytest.raises(UsageError, match=r"rootsift\[clickhouse\]"):
        _open(tmp_path / "data", "chdb")


def test_an_unknown_backend_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--backend 'sqlite' is not one of duckdb, chdb"):
        _open(tmp_path / "data", "sqlite")


@needs_chdb
def test_the_cli_takes_backend_and_its_variable(jsonl: Path, tmp_path: Path) -> None:
    from rootsift.cli import main

    runner = CliRunner()
    data = str(tmp_path / "data")
    ingested = runner.invoke(main, ["ingest", str(jsonl), "--dataset", "api", "--data", data, "--backend", "chdb"])
    assert ingested.exit_code == 0, ingested.output
    assert (tmp_path / "data" / "clickhouse").is_dir() and not (tmp_path / "data" / "api" / "segments").exists()
    env = {"ROOTSIFT_BACKEND": "chdb"}
    queried = runner.invoke(main, ["query", "api", "--data", data, "-c", "count", "--json"], env=env)
    assert queried.exit_code == 0, queried.output
    assert json.loads(queried.stdout)["rows"][0][0] > N
    listed = runner.invoke(main, ["datasets", "--data", data, "--json"], env=env)
    assert [d["name"] for d in json.loads(listed.stdout)["datasets"]] == ["api"]
    on_duckdb = runner.invoke(main, ["datasets", "--data", data, "--json", "--backend", "duckdb"])
    assert json.loads(on_duckdb.stdout)["datasets"] == []  # the flag wins over the variable


def _incident() -> list[dict[str, Any]]:
    """Requests where one zone's upstream turns slow: what explain and compare must find."""
    rng = np.random.default_rng(7)
    rows = []
    for k in range(4000):
        zone, upstream = str(rng.choice(["a", "b", "c"])), str(rng.choice(["spectator", "lobby", "auth"]))
        slow = zone == "b" and upstream == "spectator" and k > 2000
        rows.append(
            {
                "timestamp": iso(T0 + timedelta(seconds=k)),
                "zone": zone,
                "upstream": upstream,
                "version": str(rng.choice(["1.4", "1.5"])),
                "duration_ms": round(float(rng.lognormal(7 if slow else 4, 0.5)), 3),
            }
        )
    return rows


@needs_chdb
def test_explain_and_compare_find_the_same_on_both_backends(tmp_path: Path) -> None:
    """The analyses still write DuckDB SQL text: on chdb it is parsed and rendered for
    ClickHouse (``ChdbBackend.execute_sql``), and the findings must be the same."""
    path = write_jsonl(tmp_path / "incident.jsonl", _incident())
    found: dict[str, Any] = {}
    for engine in ENGINES:
        with _open(tmp_path / engine, engine) as rs:
            rs.ingest(path, dataset="api")
            explained = rs.explain("api", select="duration_ms > 500").as_dict()
            compared = rs.compare("api", a="version = '1.4'", b="version = '1.5'").as_dict()
            found[engine] = (explained, compared)
    duck_explain, duck_compare = found["duckdb"]
    top = duck_explain["findings"][0]
    assert top["kind"] == "combination"
    assert {(c["field"], c["value"]) for c in top["conditions"]} == {("zone", "b"), ("upstream", "spectator")}
    for engine in ENGINES[1:]:
        ch_explain, ch_compare = found[engine]
        _same(duck_explain["findings"], ch_explain["findings"], f"{engine}: explain.findings")
        assert ch_compare["verdict"] == duck_compare["verdict"]
        _same(duck_compare["metrics"], ch_compare["metrics"], f"{engine}: compare.metrics")


@pytest.mark.parametrize("engine", CLICKHOUSE_ENGINES)
def test_serve_takes_events_into_chdb(engine: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``serve`` with ``$ROOTSIFT_BACKEND=chdb`` (or ``clickhouse`` and
    ``$ROOTSIFT_CLICKHOUSE_URL``): events posted to the batch API reach the ClickHouse
    store through the write-ahead log, and the query API reads them there."""
    import httpx

    from helpers import server as served

    for name, value in cli_env(engine, tmp_path / "data").items():
        monkeypatch.setenv(name, value)
    srv = served.start(tmp_path / "data")
    try:
        batch = [
            {"time": iso(T0 + timedelta(seconds=k)), "data": {"duration_ms": k, "service": "ab"[k % 2]}}
            for k in range(10)
        ]
        res = httpx.post(srv.url + "/1/batch/api", json=batch, timeout=30)
        assert res.status_code == 200 and all(item["status"] == 202 for item in res.json())
        assert srv.settled()["applied_events"] == 10
        answer = srv.query({"dataset": "api", "calculations": ["count", "max(duration_ms)"], "breakdowns": ["service"]})
        assert sorted(answer["rows"]) == [["a", 5, 8.0], ["b", 5, 9.0]]
    finally:
        assert served.stop(srv) == 0
    # chdb's store is beside the data folder's WAL; the server's is on the server.
    assert (tmp_path / "data" / "clickhouse").is_dir() == (engine == "chdb")
    assert not (tmp_path / "data" / "api" / "segments").exists()
    with _open(tmp_path / "data", engine) as rs:
        assert rs.datasets()[0].stored_rows == 10


def test_overflow_keys_are_refused_on_chdb_by_name(monkeypatch: pytest.MonkeyPatch, chdb_store: Rootsift) -> None:
    """Keys past the field limit live in ``_overflow`` (ADR 0011), read with DuckDB's JSON
    functions: on chdb a query naming one is a usage error naming the function, while
    the columns still answer."""
    monkeypatch.setenv("ROOTSIFT_MAX_FIELDS", "3")
    rows = [{"timestamp": iso(T0 + timedelta(seconds=k)), "a": k, "b": k, "c": k, "d": k} for k in range(20)]
    chdb_store.ingest(write_jsonl(chdb_store.data_dir.parent / "wide.jsonl", rows), dataset="w")
    assert "_overflow" in chdb_store.backend.fields("w")
    assert chdb_store.query(QuerySpec("w", where="a >= 10")).rows == [[10]]
    with pytest.raises(UsageError, match=r"json_exists\(\) is DuckDB's"):
        chdb_store.query(QuerySpec("w", where="d > 3"))


def test_a_query_failing_midway_does_not_spoil_the_next(chdb_store: Rootsift) -> None:
    """chdb keeps what a failed query wrote and puts it before the next result (seen in
    chdb 26.9); the backend clears it (``ClickHouseBackend.recover``)."""
    backend: Any = chdb_store.backend
    for _ in range(2):
        with pytest.raises(StoreError, match="FUNCTION_THROW_IF_VALUE_IS_NON_ZERO"):
            backend.run("SELECT throwIf(number = 5) FROM numbers(10) SETTINGS max_block_size = 1")
        assert backend.run("SELECT 1 AS one").to_pylist() == [{"one": 1}]


def test_clickhouse_errors_become_store_errors_with_the_engine_message(chdb_store: Rootsift, jsonl: Path) -> None:
    chdb_store.ingest(jsonl, dataset="api")
    with pytest.raises(StoreError, match="query failed: .*UNKNOWN_IDENTIFIER"):
        chdb_store.backend.execute_sql(
            'SELECT "nope" FROM ' + str(chdb_store.backend.relation_text("api", None, None)), []
        )
    with pytest.raises(StoreError, match="cannot read DuckDB SQL"):
        chdb_store.backend.execute_sql("SELECT FROM WHERE (", [])


@needs_chdb
def test_canary_takes_backend_like_every_command(tmp_path: Path) -> None:
    """canary opens the store at each look: --backend chdb reads the ClickHouse store (the
    DuckDB one in the same directory is empty), and --backend clickhouse needs a URL."""
    from rootsift.cli import main

    path = write_jsonl(tmp_path / "incident.jsonl", _incident())
    data = str(tmp_path / "data")
    runner = CliRunner()
    assert (
        runner.invoke(main, ["ingest", str(path), "--dataset", "api", "--data", data, "--backend", "chdb"]).exit_code
        == 0
    )
    argv = ["canary", "api", "--baseline", 'zone = "a"', "--canary", 'zone = "b"', "--from", iso(T0)]
    argv += ["--every", "20m", "--for", "60m", "--replay", "--data", data, "--json"]
    looks = runner.invoke(main, [*argv, "--backend", "chdb"])
    assert looks.exit_code == 1, looks.output  # zone b's upstream turns slow: a regression
    assert json.loads(looks.stdout.splitlines()[-1])["verdict"] == "regression"
    assert runner.invoke(main, [*argv, "--backend", "duckdb"]).exit_code != 1  # no events there
    assert runner.invoke(main, [*argv, "--backend", "clickhouse"]).exit_code == 2  # and no --clickhouse-url
