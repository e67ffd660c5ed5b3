"""Kept query plans (rootsift.query.plan, ADR 0027): a query run from its kept plan gives
what compiling it gives, for every query shape and for a relative time range run at
another moment; any change to what the SQL depends on (a segment in range, a field, the
weight, the heatmap's automatic bucket, a percentile's exact level, the code) compiles
again; a plan holding a filter's time, or that cannot be read, written or trusted, is not
used; errors come in the order they did before plans were kept; the store is not
written; the command line's second run of a query does not import sqlglot."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.store import SRC, iso, write_jsonl
from rootsift import QuerySpec, Rootsift
from rootsift.query import plan as kept
from rootsift.query import planner

T0 = datetime(2024, 3, 1)
NOW = datetime(2024, 3, 1, 2, 0, tzinfo=UTC)


def rows(n: int, seed: int, start: datetime = T0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        row: dict[str, Any] = {
            "timestamp": iso(start + timedelta(seconds=int(k * 7200 / n))),
            "endpoint": ["/a", "/b", "/c"][int(rng.integers(0, 3))],
            "status": int(rng.choice([200, 500])),
            "duration_ms": round(float(rng.lognormal(3, 1)), 3),
            "samplerate": int(rng.integers(1, 5)),
        }
        out.append(row)
    return out


@pytest.fixture(autouse=True)
def plans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's folder of kept plans."""
    monkeypatch.setenv(kept.CACHE_DIR, str(tmp_path / "cache"))
    return tmp_path / "cache" / "plans"


def kept_files(plans: Path) -> list[Path]:
    return list(plans.glob("*.json"))


@pytest.fixture
def rs(tmp_path: Path) -> Rootsift:
    store = Rootsift(tmp_path / "data")
    store.ingest(write_jsonl(tmp_path / "a.jsonl", rows(2000, 1)), dataset="api")
    return store


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The datasets of the queries compiled (not run from a kept plan), in order."""
    seen: list[str] = []
    real = planner.plan_query

    def counting(inputs: kept.Inputs, *args: Any) -> kept.Plan:
        seen.append(inputs.spec.dataset)
        return real(inputs, *args)

    monkeypatch.setattr(planner, "plan_query", counting)
    return seen


SPECS = [
    {"calculations": ["count"]},
    {"calculations": ["count", "p99(duration_ms)", "avg(duration_ms)"], "breakdowns": ["endpoint"]},
    {"calculations": ["p50(duration_ms)", "p90(duration_ms)"], "breakdowns": ["status"], "order": ["status asc"]},
    {"calculations": ["count"], "granularity": "10m", "where": "status >= 500 and endpoint != '/c'"},
    {"calculations": ["max(duration_ms)"], "where": "endpoint in ('/a', '/b')", "limit": 2, "breakdowns": ["endpoint"]},
    {"calculations": ["heatmap(duration_ms)"], "granularity": "5m"},
    {"calculations": ["count"], "start": "2024-03-01T00:30:00Z", "end": "2024-03-01T01:10:00Z"},
    {"calculations": ["p99(duration_ms)"], "start": "-75m", "granularity": "15m", "breakdowns": ["endpoint"]},
]


def answer(rs: Rootsift, spec: dict[str, Any], now: datetime = NOW) -> dict[str, Any]:
    return rs.query(QuerySpec.from_dict({"dataset": "api", **spec}), now=now, keep_plan=True).as_dict()


@pytest.mark.parametrize("spec", SPECS, ids=[json.dumps(s) for s in SPECS])
def test_a_kept_plan_answers_as_compiling_does(
    rs: Rootsift, spec: dict[str, Any], compiles: list[str], monkeypatch: pytest.MonkeyPatch, plans: Path
) -> None:
    first = answer(rs, spec)
    assert compiles == ["api"] and len(kept_files(plans)) == 1
    again = answer(rs, spec)
    assert compiles == ["api"], "the second run compiled again"
    assert again == first
    monkeypatch.setenv(kept.SWITCH, "0")
    assert answer(rs, spec) == first
    assert compiles == ["api", "api"]


def test_a_relative_range_is_bound_anew(rs: Rootsift, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {"calculations": ["count", "p50(duration_ms)"], "start": "-40m", "end": "-5m", "breakdowns": ["endpoint"]}
    answer(rs, spec, NOW)
    later = NOW + timedelta(minutes=17)
    reused = answer(rs, spec, later)
    assert compiles == ["api"]
    monkeypatch.setenv(kept.SWITCH, "off")
    assert reused == answer(rs, spec, later)
    assert reused != answer(rs, spec, NOW)  # the range moved, and the counts with it


def test_what_the_sql_depends_on_is_in_the_key(rs: Rootsift, tmp_path: Path, compiles: list[str]) -> None:
    spec = {"calculations": ["count", "avg(duration_ms)"], "breakdowns": ["endpoint"]}
    answer(rs, spec)
    answer(rs, {**spec, "where": "status = 500"})  # another filter
    answer(rs, {**spec, "limit": 5})  # another limit
    assert len(compiles) == 3
    more = [{**r, "region": "eu"} for r in rows(500, 2, T0 + timedelta(hours=1))]
    rs.ingest(write_jsonl(tmp_path / "b.jsonl", more), dataset="api")  # a field (the same segment)
    after = answer(rs, spec)
    assert len(compiles) == 4
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(kept.SWITCH, "0")
        assert after == answer(rs, spec)
    assert after["rows"] != answer(rs, {**spec, "end": "2024-03-01T01:00:00Z"})["rows"]


def test_the_segments_a_range_reads_are_in_the_key(tmp_path: Path, compiles: list[str]) -> None:
    """Two segments: a range in the later one reads it alone; the same query from an
    earlier start must read both (another relation, another plan)."""
    rs = Rootsift(tmp_path / "data", segment_rows=1000)
    rs.ingest(write_jsonl(tmp_path / "a.jsonl", rows(1000, 4)), dataset="api")
    rs.ingest(write_jsonl(tmp_path / "b.jsonl", rows(1000, 5, T0 + timedelta(hours=2))), dataset="api")
    assert len(rs.backend.state("api").segments) == 2
    spec = {"calculations": ["count"], "breakdowns": ["endpoint"]}
    late = answer(rs, {**spec, "start": "2024-03-01T02:40:00Z"})
    early = answer(rs, {**spec, "start": "2024-03-01T00:10:00Z"})
    assert len(compiles) == 2
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(kept.SWITCH, "0")
        assert early == answer(rs, {**spec, "start": "2024-03-01T00:10:00Z"})
        assert late == answer(rs, {**spec, "start": "2024-03-01T02:40:00Z"})


def test_the_weight_is_in_the_key(rs: Rootsift, compiles: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The same fields, read with and without their sample rates: two plans, two answers."""
    spec = {"calculations": ["count", "p90(duration_ms)"], "breakdowns": ["endpoint"]}
    weighted = answer(rs, spec)
    monkeypatch.setattr(rs.backend, "weight_field", lambda dataset: None)
    plain = answer(rs, spec)
    assert len(compiles) == 2 and plain != weighted
    monkeypatch.setenv(kept.SWITCH, "0")
    assert plain == answer(rs, spec)


def test_the_heatmaps_automatic_bucket_is_in_the_key(rs: Rootsift, tmp_path: Path, compiles: list[str]) -> None:
    """A heatmap without -g takes its bucket from the data's span: more events in the same
    segment and fields widen it, and the kept plan of the narrower span must not answer."""
    spec = {"calculations": ["heatmap(duration_ms)"]}
    narrow = answer(rs, spec)
    later = rows(300, 6, T0 + timedelta(hours=6))
    rs.ingest(write_jsonl(tmp_path / "c.jsonl", later), dataset="api")
    wide = answer(rs, spec)
    assert len(compiles) == 2 and wide["granularity"] != narrow["granularity"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(kept.SWITCH, "0")
        assert wide == answer(rs, spec)


def test_a_percentiles_exact_level_is_in_the_key(rs: Rootsift, compiles: list[str]) -> None:
    """``percentile(f, 0.5000000004)`` is labelled as p50 is; its plan is its own."""
    p50 = answer(rs, {"calculations": ["p50(duration_ms)"]})
    nearly = answer(rs, {"calculations": ["percentile(duration_ms, 0.5000000004)"]})
    assert len(compiles) == 2
    assert p50["columns"] == nearly["columns"]


@pytest.mark.parametrize(
    "where", ["timestamp >= '2024-03-01T01:00:00Z'", "timestamp >= -30m", "timestamp < now"], ids=str
)
def test_a_plan_holding_a_filters_time_is_not_kept(rs: Rootsift, compiles: list[str], where: str, plans: Path) -> None:
    """A time in a filter is a value when compiled (``-30m``: from the clock then): kept, it
    would be that time on every later run."""
    spec = {"calculations": ["count"], "where": where}
    assert answer(rs, spec) == answer(rs, spec)
    assert len(compiles) == 2 and kept_files(plans) == []


def test_the_code_is_in_the_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cache = kept.PlanCache(tmp_path, "store")
    before = cache.key({"query": 1})
    assert before == cache.key({"query": 1}) != cache.key({"query": 2})
    assert kept.PlanCache(tmp_path, "another store").key({"query": 1}) != before
    source = tmp_path / "compile.py"
    source.write_text("x = 1\n")
    monkeypatch.setattr(kept, "_code_files", lambda: [source])
    monkeypatch.setattr(kept, "_STAMP", None)
    stamped = cache.key({"query": 1})
    monkeypatch.setattr(kept, "_STAMP", None)
    os.utime(source, ns=(source.stat().st_atime_ns, source.stat().st_mtime_ns + 1_000_000))
    assert cache.key({"query": 1}) != stamped  # an edited file, another key
    monkeypatch.setattr(kept, "_STAMP", None)
    names = {Path(entry[0]).name for entry in kept._code_stamp()[1:]}
    assert names == {"compile.py"}
    monkeypatch.undo()
    every = {Path(entry[0]).name for entry in kept._code_stamp()[1:]}
    assert {"compile.py", "filters.py", "filter_sql.py", "timeutil.py", "dialects.py", "_version.py"} <= every


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"calculations": ["count"], "where": "nosuch = 1", "order": ["bogus desc"]}, "nosuch"),
        ({"calculations": ["count"], "breakdowns": ["nosuch"], "order": ["bogus desc"]}, "nosuch"),
        ({"calculations": ["count"], "where": "status >", "granularity": "99999999d"}, "status"),
        ({"calculations": ["count"], "where": "endpoint = 3 and", "granularity": "-5m"}, "endpoint"),
    ],
    ids=["filter-before-order", "breakdown-before-order", "filter-before-range", "filter-before-granularity"],
)
def test_a_query_with_several_faults_reports_the_first_as_compiling_does(
    rs: Rootsift, spec: dict[str, Any], error: str
) -> None:
    with pytest.raises(Exception) as raised:
        answer(rs, spec)
    assert error in str(raised.value) and "--order" not in str(raised.value)
    assert "--granularity" not in str(raised.value)


def test_the_store_is_not_written(rs: Rootsift, plans: Path) -> None:
    before = sorted(p.relative_to(rs.data_dir) for p in rs.data_dir.rglob("*"))
    answer(rs, {"calculations": ["count"]})
    assert sorted(p.relative_to(rs.data_dir) for p in rs.data_dir.rglob("*")) == before
    assert len(kept_files(plans)) == 1


def test_an_unreadable_plan_is_compiled_again(rs: Rootsift, compiles: list[str], plans: Path) -> None:
    spec = {"calculations": ["count"], "breakdowns": ["status"]}
    first = answer(rs, spec)
    (path,) = kept_files(plans)
    for broken in ("{not json", json.dumps({"kind": "table"}), json.dumps([1, 2]), ""):
        path.write_text(broken)
        assert answer(rs, spec) == first
    assert len(compiles) == 5
    assert json.loads(path.read_text())["kind"] == "table"  # written again


def test_a_plan_that_cannot_be_written_is_not_kept(rs: Rootsift, compiles: list[str], plans: Path) -> None:
    plans.parent.mkdir(parents=True)
    plans.write_text("a file where the folder would be")
    spec = {"calculations": ["count"]}
    assert answer(rs, spec) == answer(rs, spec)
    assert len(compiles) == 2


def test_a_range_time_not_bound_as_itself_is_not_kept(tmp_path: Path) -> None:
    start = datetime(2024, 3, 1)
    cache = kept.PlanCache(tmp_path, "store")
    derived = kept.Plan("table", kept.Statement(None, [start + timedelta(0)], "SELECT ?"))
    assert derived.main.params[0] is not start
    assert not cache.store("k", derived, start, None)
    bound = kept.Plan("table", kept.Statement(None, [start, 3, "x", None, 1.5, True], "SELECT ?"))
    assert cache.store("k", bound, start, None)
    other = datetime(2025, 1, 1)
    loaded = cache.load("k", other, None)
    assert loaded is not None and loaded.main.params == [other, 3, "x", None, 1.5, True]
    assert cache.load("k", None, None) is None  # a plan for a range does not answer without one
    assert not cache.store("k2", kept.Plan("table", kept.Statement(None, [object()], "SELECT ?")), None, None)


def test_at_most_keep_plans_are_kept(rs: Rootsift, monkeypatch: pytest.MonkeyPatch, plans: Path) -> None:
    monkeypatch.setattr(kept, "KEEP", 3)
    for limit in range(1, 7):
        answer(rs, {"calculations": ["count"], "limit": limit})
    assert len(kept_files(plans)) == 3


def test_a_dataset_past_its_field_limit_compiles_every_time(tmp_path: Path, compiles: list[str], plans: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROOTSIFT_MAX_FIELDS", "3")
        store = Rootsift(tmp_path / "data")
        store.ingest(
            write_jsonl(tmp_path / "w.jsonl", [{**r, f"k{i}": i} for i, r in enumerate(rows(200, 3))]), dataset="w"
        )
    spec = QuerySpec.from_dict({"dataset": "w", "calculations": ["count"], "where": "k7 = 7"})
    assert store.query(spec, keep_plan=True).rows == store.query(spec, keep_plan=True).rows == [[1]]
    assert compiles == ["w", "w"] and kept_files(plans) == []


def test_only_what_asks_keeps_plans(rs: Rootsift, compiles: list[str], plans: Path) -> None:
    """The Python API and the server compile once per process and keep nothing."""
    spec = QuerySpec.from_dict({"dataset": "api", "calculations": ["count"]})
    assert rs.query(spec).rows == rs.query(spec).rows
    assert len(compiles) == 2 and kept_files(plans) == []


def test_the_second_run_of_a_query_does_not_import_sqlglot(rs: Rootsift) -> None:
    code = (
        "import sys\n"
        "from rootsift.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n"
        "    print('sqlglot' in sys.modules, file=sys.stderr)\n"
    )
    argv = [sys.executable, "-c", code, "query", "api", "-c", "count", "-b", "endpoint", "--from", "-100000d"]
    argv += ["--data", str(rs.data_dir), "--json"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}  # $ROOTSIFT_CACHE_DIR: this test's (fixture plans)
    rs.close()  # the store's writer: a reader in another process waits for it
    runs = [subprocess.run(argv, env=env, capture_output=True, text=True) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr + runs[1].stderr
    assert [r.stderr.strip() for r in runs] == ["True", "False"]
    assert json.loads(runs[0].stdout)["rows"] == json.loads(runs[1].stdout)["rows"]
    assert sum(row[1] for row in json.loads(runs[1].stdout)["rows"]) == sum(r["samplerate"] for r in rows(2000, 1))
