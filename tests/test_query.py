"""Queries against an independent computation: weighted and unweighted aggregates and
percentiles (numpy's inverted CDF), per breakdown and time bucket, heatmaps, filters,
order and limit, the spec's JSON form and its errors, and hostile field names."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers.backends import BACKENDS, opened
from helpers.store import iso, schema_map, write_jsonl
from rootsift import Calculation, QuerySpec, Rootsift
from rootsift.errors import (
    FilterSyntaxError,
    QuerySpecError,
    TimeFormatError,
    UnknownFieldError,
    UsageError,
)

T0 = datetime(2024, 3, 1)
N = 4000
ENDPOINTS = ["/a", "/b", "/c", "/d", "/e"]
MESSAGES = ["ok", "upstream timeout", "connection reset", "Timeout waiting", "50% done", "a_b"]
PCTS = ["p50", "p90", "p99", "p99.9"]


def _make_rows() -> list[dict[str, Any]]:
    """Seeded events over two hours: endpoints with distinct frequencies, lognormal durations
    (some zero, negative or missing), sample rates 1..20 (some missing, 0 or 0.5: weight 1)."""
    rng = np.random.default_rng(20240301)
    offsets = np.sort(rng.integers(0, 7_200_000, N))  # milliseconds
    rows = []
    for k in range(N):
        row: dict[str, Any] = {
            "timestamp": iso(T0 + timedelta(milliseconds=int(offsets[k]))),
            "endpoint": str(rng.choice(ENDPOINTS, p=[0.4, 0.25, 0.18, 0.12, 0.05])),
            "status": int(rng.choice([200, 201, 404, 500, 503], p=[0.6, 0.1, 0.1, 0.12, 0.08])),
            "msg": str(rng.choice(MESSAGES)),
        }
        u = rng.random()
        if u < 0.01:
            row["duration_ms"] = 0
        elif u < 0.015:
            row["duration_ms"] = -1.5
        elif u > 0.98:
            pass  # missing
        else:
            row["duration_ms"] = round(float(rng.lognormal(4, 1.2)), 3)
        s = rng.random()
        if s < 0.03:
            row["samplerate"] = float(rng.choice([0, 0.5]))
        elif s > 0.97:
            pass  # missing: weight 1
        else:
            row["samplerate"] = int(rng.integers(1, 21))
        if rng.random() < 0.7:
            row["user"] = f"u{int(rng.integers(0, 300))}"
        rows.append(row)
    for k in range(30):  # an endpoint whose events never carry a duration
        rows.append(
            {
                "timestamp": iso(T0 + timedelta(minutes=3 * k)),
                "endpoint": "/nodur",
                "status": 200,
                "msg": "ok",
                "samplerate": 4,
            }
        )
    return rows


ROWS = _make_rows()


@pytest.fixture(scope="module", params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterable[Rootsift]:
    """Dataset ``w`` (with samplerate) and ``u`` (the same events without it), ingested once,
    on each backend: every test of this store runs on DuckDB, chdb (embedded ClickHouse) and
    the server backend (over HTTP to the run's ClickHouse server)."""
    tmp = tmp_path_factory.mktemp("query")
    rs = opened(tmp / "data", request.param)
    rs.ingest(write_jsonl(tmp / "w.jsonl", ROWS), dataset="w")
    rs.ingest(
        write_jsonl(tmp / "u.jsonl", ({k: v for k, v in r.items() if k != "samplerate"} for r in ROWS)), dataset="u"
    )
    yield rs
    rs.close()


# -- the independent model ---------------------------------------------------------------


def _time(row: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(row["timestamp"].rstrip("Z"))


def weight(row: dict[str, Any], weighted: bool) -> float:
    if not weighted:
        return 1
    sr = row.get("samplerate")
    return sr if sr is not None and sr >= 1 else 1


def expected(rows: list[dict[str, Any]], calc: str, weighted: bool) -> Any:
    """What ``calc`` over ``rows`` must give, computed here without SQL."""
    c = Calculation.parse(calc)
    if c.op == "count":
        return sum(weight(r, weighted) for r in rows)
    vals = [(r[c.field], weight(r, weighted)) for r in rows if r.get(c.field) is not None]
    if c.op == "count_distinct":
        return len({v for v, _ in vals})
    if not vals:
        return None
    x = np.array([v for v, _ in vals], dtype=float)
    w = np.array([w for _, w in vals], dtype=float)
    if c.op == "sum":
        return float((x * w).sum())
    if c.op == "avg":
        return float((x * w).sum() / w.sum())
    if c.op == "min":
        return float(x.min())
    if c.op == "max":
        return float(x.max())
    if c.op == "percentile":
        if weighted:
            return float(np.quantile(x, c.q, method="inverted_cdf", weights=w))
        return float(np.quantile(x, c.q, method="inverted_cdf"))
    raise AssertionError(calc)


def close(got: Any, want: Any, calc: str) -> bool:
    """Exact for counts, extremes and percentiles (they pick a stored value); 1e-9 relative for sums."""
    if want is None or got is None:
        return got is want
    op = Calculation.parse(calc).op
    if op in ("sum", "avg"):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    return got == want


def bucket(row: dict[str, Any], granularity: timedelta) -> datetime:
    us = (_time(row) - datetime(1970, 1, 1)) // timedelta(microseconds=1)
    g = granularity // timedelta(microseconds=1)
    return datetime(1970, 1, 1) + timedelta(microseconds=(us // g) * g)


def group(rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any]) -> dict[Any, list[dict[str, Any]]]:
    out: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[key(r)].append(r)
    return dict(out)


def check_table(
    out: Any, groups: dict[Any, list[dict[str, Any]]], nkeys: int, calcs: list[str], weighted: bool
) -> None:
    got = {tuple(r[:nkeys]): r[nkeys:] for r in out.rows}
    assert len(got) == len(out.rows), "a group came back twice"
    assert set(got) == set(groups)
    for key, members in groups.items():
        for calc, value in zip(calcs, got[key]):
            want = expected(members, calc, weighted)
            assert close(value, want, calc), (key, calc, value, want)


def q(rs: Rootsift, dataset: str, **kw: Any) -> Any:
    calcs = kw.pop("calculations", None)
    if calcs is not None:
        kw["calculations"] = [Calculation.parse(c) for c in calcs]
    return rs.query(QuerySpec(dataset, **kw))


ALL_CALCS = [
    "count",
    "sum(duration_ms)",
    "avg(duration_ms)",
    "min(duration_ms)",
    "max(duration_ms)",
    *[f"{p}(duration_ms)" for p in PCTS],
    "count_distinct(user)",
]


# -- aggregates ---------------------------------------------------------------------------


def test_the_data_is_what_the_tests_assume() -> None:
    counts = {e: sum(weight(r, True) for r in ROWS if r["endpoint"] == e) for e in ENDPOINTS}
    assert len(set(counts.values())) == len(counts), "endpoint counts must differ for order tests"
    assert any(r.get("duration_ms") is None for r in ROWS) and any(r.get("duration_ms", 1) <= 0 for r in ROWS)
    assert {weight(r, True) for r in ROWS} == set(range(1, 21))


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
def test_overall_aggregates(store: Rootsift, dataset: str) -> None:
    weighted = dataset == "w"
    out = q(store, dataset, calculations=ALL_CALCS)
    assert out.columns == [Calculation.parse(c).label for c in ALL_CALCS]
    assert out.columns[5:9] == ["p50(duration_ms)", "p90(duration_ms)", "p99(duration_ms)", "p99.9(duration_ms)"]
    check_table(out, {(): ROWS}, 0, ALL_CALCS, weighted)
    assert store.events(dataset) == expected(ROWS, "count", weighted)


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
def test_aggregates_per_breakdown(store: Rootsift, dataset: str) -> None:
    out = q(store, dataset, breakdowns=["endpoint"], calculations=ALL_CALCS)
    assert out.columns[0] == "endpoint"
    check_table(out, group(ROWS, lambda r: (r["endpoint"],)), 1, ALL_CALCS, dataset == "w")
    nodur = next(r for r in out.rows if r[0] == "/nodur")
    assert nodur[2:10] == [None] * 8  # sum, avg, min, max and percentiles of nothing


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
@pytest.mark.parametrize("granularity", ["10m", "7m", "1h"])
def test_aggregates_per_time_bucket(store: Rootsift, dataset: str, granularity: str) -> None:
    g = {"10m": timedelta(minutes=10), "7m": timedelta(minutes=7), "1h": timedelta(hours=1)}[granularity]
    calcs = ["count", "sum(duration_ms)", "p50(duration_ms)", "p99(duration_ms)"]
    out = q(store, dataset, granularity=granularity, calculations=calcs)
    assert out.columns[0] == "time" and out.granularity == g
    times = [r[0] for r in out.rows]
    assert times == sorted(times), "time buckets come in time order by default"
    check_table(out, group(ROWS, lambda r: (bucket(r, g),)), 1, calcs, dataset == "w")


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
def test_aggregates_per_time_bucket_and_breakdown(store: Rootsift, dataset: str) -> None:
    g = timedelta(minutes=15)
    calcs = ["count", "avg(duration_ms)", "p90(duration_ms)", "p99.9(duration_ms)"]
    out = q(store, dataset, granularity="15m", breakdowns=["endpoint", "status"], calculations=calcs)
    assert out.columns[:3] == ["time", "endpoint", "status"]
    check_table(out, group(ROWS, lambda r: (bucket(r, g), r["endpoint"], float(r["status"]))), 3, calcs, dataset == "w")


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
def test_time_range(store: Rootsift, dataset: str) -> None:
    start, end = T0 + timedelta(minutes=20), T0 + timedelta(minutes=50, seconds=30)
    calcs = ["count", "p99(duration_ms)", "sum(duration_ms)"]
    out = q(store, dataset, start=iso(start), end=iso(end), calculations=calcs)
    inside = [r for r in ROWS if start <= _time(r) < end]
    check_table(out, {(): inside}, 0, calcs, dataset == "w")
    # relative to a given now, with an offset in the absolute form
    now = T0 + timedelta(hours=2)
    out = store.query(
        QuerySpec(dataset, start="-30m", calculations=[Calculation.parse("count")]), now=now.replace(tzinfo=None)
    )
    assert out.rows == [
        [expected([r for r in ROWS if _time(r) >= now - timedelta(minutes=30)], "count", dataset == "w")]
    ]
    out = q(store, dataset, start="2024-03-01T01:20:00+01:00", end="2024-03-01T00:30:00Z")
    assert out.rows == [
        [
            expected(
                [r for r in ROWS if T0 + timedelta(minutes=20) <= _time(r) < T0 + timedelta(minutes=30)],
                "count",
                dataset == "w",
            )
        ]
    ]


# -- heatmaps -----------------------------------------------------------------------------


def expected_heatmap(rows: list[dict[str, Any]], g: timedelta, weighted: bool) -> dict[str, Any]:
    cells: dict[tuple[datetime, int], float] = defaultdict(float)
    nonpos: dict[datetime, float] = defaultdict(float)
    for r in rows:
        x = r.get("duration_ms")
        if x is None:
            continue
        t = bucket(r, g)
        if x > 0:
            cells[(t, int(np.floor(np.log2(x) * 4)))] += weight(r, weighted)
        else:
            nonpos[t] += weight(r, weighted)
    present = sorted({t for t, _ in cells} | set(nonpos))
    times = [present[0] + i * g for i in range((present[-1] - present[0]) // g + 1)]
    lo, hi = min(b for _, b in cells), max(b for _, b in cells)
    return {
        "times": times,
        "edges": [2 ** (b / 4) for b in range(lo, hi + 1)],
        "counts": [[cells.get((t, b), 0.0) for t in times] for b in range(lo, hi + 1)],
        "nonpositive": [nonpos.get(t, 0.0) for t in times],
    }


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
@pytest.mark.parametrize("where", [None, "status >= 500", "endpoint = /e"])
def test_heatmap_cells_match_numpy_bucketing(store: Rootsift, dataset: str, where: str | None) -> None:
    out = q(store, dataset, calculations=["heatmap(duration_ms)"], granularity="15m", where=where)
    rows = [r for r in ROWS if where is None or (r["status"] >= 500 if "status" in where else r["endpoint"] == "/e")]
    want = expected_heatmap(rows, timedelta(minutes=15), dataset == "w")
    hm = out.heatmap
    assert hm is not None and out.rows == [] and hm.field == "duration_ms"
    assert hm.times == want["times"]
    assert hm.bucket_edges == want["edges"]
    assert hm.counts == want["counts"]
    assert hm.nonpositive == want["nonpositive"]
    assert sum(map(sum, hm.counts)) + sum(hm.nonpositive) == sum(
        weight(r, dataset == "w") for r in rows if r.get("duration_ms") is not None
    )
    d = out.as_dict()["heatmap"]
    assert d["times"][0] == iso(want["times"][0])
    assert all(math.isclose(b["hi"], b["lo"] * 2**0.25) for b in d["buckets"])


def test_heatmap_without_granularity_picks_at_most_60_columns(store: Rootsift) -> None:
    out = q(store, "w", calculations=["heatmap(duration_ms)"])
    hm = out.heatmap
    assert hm is not None and 1 < len(hm.times) <= 60
    assert out.granularity is not None and out.granularity * 60 >= timedelta(hours=2) - timedelta(seconds=1)
    want = expected_heatmap(ROWS, out.granularity, True)
    assert hm.counts == want["counts"] and hm.nonpositive == want["nonpositive"]


# -- filters --------------------------------------------------------------------------------

FILTERS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "status >= 500": lambda r: r["status"] >= 500,
    "status in (500, 503)": lambda r: r["status"] in (500, 503),
    "status not in (200, 201)": lambda r: r["status"] not in (200, 201),
    "exists user": lambda r: "user" in r,
    "not exists user": lambda r: "user" not in r,
    "msg contains timeout": lambda r: "timeout" in r["msg"],
    "msg contains '%'": lambda r: "%" in r["msg"],
    "msg contains _": lambda r: "_" in r["msg"],
    "msg does-not-contain o": lambda r: "o" not in r["msg"],
    "msg starts-with Time": lambda r: r["msg"].startswith("Time"),
    "duration_ms > 1000 or duration_ms <= 0": lambda r: (
        r.get("duration_ms") is not None and (r["duration_ms"] > 1000 or r["duration_ms"] <= 0)
    ),
    "duration_ms != 0": lambda r: r.get("duration_ms") != 0,
    "endpoint = /a and (status = 500 or status = 404)": lambda r: r["endpoint"] == "/a" and r["status"] in (500, 404),
    "not (status < 500 and exists user)": lambda r: not (r["status"] < 500 and "user" in r),
    "user = u7": lambda r: r.get("user") == "u7",
    "user != u7": lambda r: r.get("user") != "u7",
}


@pytest.mark.parametrize("dataset", ["w", "u"], ids=["weighted", "unweighted"])
@pytest.mark.parametrize("where", list(FILTERS))
def test_filters_match_python(store: Rootsift, dataset: str, where: str) -> None:
    calcs = ["count", "sum(duration_ms)", "p90(duration_ms)"]
    out = q(store, dataset, where=where, breakdowns=["endpoint"], calculations=calcs)
    matching = [r for r in ROWS if FILTERS[where](r)]
    assert matching, "every filter must match something"
    check_table(out, group(matching, lambda r: (r["endpoint"],)), 1, calcs, dataset == "w")


def test_filter_values_are_data_not_sql(store: Rootsift) -> None:
    cases = {
        'msg = "\'; DROP TABLE events; --"': lambda r: False,
        "user in ('x\\') OR 1=1 --', u1)": lambda r: r.get("user") == "u1",
        "msg contains \"%' OR '1'='1\"": lambda r: False,
        "msg contains '%'": lambda r: "%" in r["msg"],
    }
    for where, pred in cases.items():
        out = q(store, "u", where=where)
        assert out.rows == [[sum(1 for r in ROWS if pred(r))]], where
    assert store.events("w") == expected(ROWS, "count", True)


def test_weighted_percentiles_alone(store: Rootsift) -> None:
    calcs = ["p50(duration_ms)", "p99(duration_ms)"]
    out = q(store, "w", calculations=calcs)
    check_table(out, {(): ROWS}, 0, calcs, True)


def test_unknown_field_in_a_lone_weighted_percentile(store: Rootsift) -> None:
    with pytest.raises(UnknownFieldError):
        q(store, "w", calculations=["p99(duraton_ms)"])


def test_count_of_nothing_is_zero_with_weights(store: Rootsift) -> None:
    assert q(store, "w", where="msg = nothing-matches").rows == [[0]]


# -- order and limit ------------------------------------------------------------------------


def _by_endpoint(calc: str) -> dict[str, Any]:
    return {e: expected(rs_, calc, True) for (e,), rs_ in group(ROWS, lambda r: (r["endpoint"],)).items()}


def test_default_order_is_the_first_calculation_descending(store: Rootsift) -> None:
    out = q(store, "w", breakdowns=["endpoint"])
    counts = _by_endpoint("count")
    assert [r[0] for r in out.rows] == sorted(counts, key=counts.get, reverse=True)


@pytest.mark.parametrize(
    ("order", "limit", "calc", "reverse"),
    [
        (["count desc"], 3, "count", True),
        (["count asc"], 2, "count", False),
        (["-count"], 1, "count", True),
        (["endpoint"], 10, None, True),
        (["endpoint asc"], 4, None, False),
        (["p99(duration_ms) desc"], 3, "p99(duration_ms)", True),
        (["p99(duration_ms) asc"], 6, "p99(duration_ms)", False),
        (["avg(duration_ms)"], 2, "avg(duration_ms)", True),
    ],
)
def test_order_and_limit(store: Rootsift, order: list[str], limit: int, calc: str | None, reverse: bool) -> None:
    out = q(
        store,
        "w",
        breakdowns=["endpoint"],
        calculations=["count", "p99(duration_ms)", "avg(duration_ms)"],
        order=order,
        limit=limit,
    )
    if calc is None:
        want = sorted(_by_endpoint("count"), reverse=reverse)
    else:
        values = _by_endpoint(calc)
        present = sorted((e for e in values if values[e] is not None), key=values.get, reverse=reverse)
        want = present + [e for e in values if values[e] is None]  # no value sorts last either way
    assert [r[0] for r in out.rows] == want[:limit]


def test_order_with_time_buckets_and_limit(store: Rootsift) -> None:
    out = q(
        store,
        "w",
        granularity="30m",
        breakdowns=["endpoint"],
        calculations=["count", "p50(duration_ms)"],
        order=["time asc", "count desc"],
        limit=7,
    )
    groups = group(ROWS, lambda r: (bucket(r, timedelta(minutes=30)), r["endpoint"]))
    want = sorted(groups, key=lambda k: (k[0], -expected(groups[k], "count", True)))[:7]
    assert [tuple(r[:2]) for r in out.rows] == want


def test_a_field_named_time_does_not_hijack_the_time_order(rs: Rootsift, tmp_path: Path) -> None:
    rows = [{"timestamp": iso(T0 + timedelta(minutes=i)), "time": ["z", "a", "m"][i % 3]} for i in range(9)]
    rs.ingest(write_jsonl(tmp_path / "t.jsonl", rows), dataset="t")
    out = q(rs, "t", granularity="1m", breakdowns=["time"])
    assert [r[0] for r in out.rows] == [T0 + timedelta(minutes=i) for i in range(9)]


# -- the spec's JSON form -------------------------------------------------------------------


def test_spec_round_trips_through_json() -> None:
    spec = QuerySpec(
        "api",
        start="-2h",
        end="2024-03-01T00:00:00Z",
        where='status >= 500 and `a"b` = "x"',
        breakdowns=["endpoint", 'a"b', "k8s.pod", "résumé", "weird name"],
        calculations=[
            Calculation.parse(c)
            for c in [
                "count",
                "count_distinct(user)",
                "sum(duration_ms)",
                "avg(`weird name`)",
                "min(x)",
                "max(x)",
                "p50(duration_ms)",
                "p99.9(duration_ms)",
                "percentile(duration_ms, 0.95)",
                "percentile(duration_ms, 95)",
                "P90(`x; drop table events; --`)",
                "sum(`select`)",
            ]
        ],
        granularity="1m",
        order=["count desc", "endpoint"],
        limit=25,
    )
    text = json.dumps(spec.to_dict())
    again = QuerySpec.from_dict(json.loads(text))
    assert again == spec
    assert again.to_dict() == spec.to_dict()
    assert spec.to_dict()["calculations"][8:] == [
        "p95(duration_ms)",
        "p95(duration_ms)",
        "p90(x; drop table events; --)",
        "sum(select)",
    ]
    heat = QuerySpec("api", calculations=[Calculation.parse("heatmap(duration_ms)")])
    assert QuerySpec.from_dict(heat.to_dict()) == heat and heat.heatmap == Calculation("heatmap", "duration_ms")
    minimal = QuerySpec.from_dict({"dataset": "api"})
    assert minimal.calculations == [Calculation("count")] and minimal.limit == 1000 and minimal.breakdowns == []


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"dataset": "api", "filter": "x"}, "filter"),
        ({"dataset": "api", "calculation": ["count"], "group_by": []}, "calculation, group_by"),
        ({"where": "x = 1"}, "dataset"),
        ({"dataset": "api", "calculations": ["p101(x)"]}, "p0 and p100"),
        ({"dataset": "api", "calculations": ["median(x)"]}, "unknown calculation"),
        ({"dataset": "api", "calculations": ["sum()"]}, "needs a field"),
        ({"dataset": "api", "calculations": ["avg"]}, "needs a field"),
        ({"dataset": "api", "calculations": ["percentile(x)"]}, "percentile"),
        ({"dataset": "api", "calculations": ["percentile(x, abc)"]}, "percentile"),
        ({"dataset": "api", "calculations": ["sum(x"]}, "cannot read"),
        ({"dataset": "api", "calculations": ["heatmap(x)"], "breakdowns": ["endpoint"]}, "heatmap"),
        ({"dataset": "api", "calculations": ["heatmap(x)", "count"]}, "heatmap"),
        ({"dataset": "api", "limit": 0}, "limit"),
    ],
)
def test_spec_errors(data: dict[str, Any], match: str) -> None:
    with pytest.raises(QuerySpecError, match=match) as info:
        QuerySpec.from_dict(data)
    assert isinstance(info.value, UsageError) and info.value.exit_code == 2


@pytest.mark.parametrize(
    ("kw", "error", "match"),
    [
        ({"order": ["nope desc"]}, QuerySpecError, "order"),
        ({"start": "2024-03-01T02:00:00Z", "end": "2024-03-01T01:00:00Z"}, QuerySpecError, "before"),
        ({"granularity": "0s"}, QuerySpecError, "positive"),
        ({"granularity": "soon"}, TimeFormatError, "duration"),
        ({"start": "yesterday-ish"}, TimeFormatError, "time"),
        ({"calculations": ["sum(endpoint)"]}, QuerySpecError, "numeric"),
        ({"calculations": ["heatmap(msg)"]}, QuerySpecError, "numeric"),
        ({"where": "status >="}, FilterSyntaxError, "value"),
        ({"where": "status = abc"}, UsageError, "number"),
    ],
)
def test_query_errors_are_usage_errors(store: Rootsift, kw: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as info:
        q(store, "w", **kw)
    assert isinstance(info.value, UsageError)


@pytest.mark.parametrize(
    ("kw", "field", "suggestion"),
    [
        ({"breakdowns": ["endpont"]}, "endpont", "endpoint"),
        ({"calculations": ["p99(duraton_ms)"], "breakdowns": ["endpoint"]}, "duraton_ms", "duration_ms"),
        ({"calculations": ["count_distinct(usr)"]}, "usr", "user"),
        ({"where": "stauts >= 500"}, "stauts", "status"),
        ({"where": "exists samplerat"}, "samplerat", "samplerate"),
        ({"calculations": ["heatmap(duration)"]}, "duration", "duration_ms"),
    ],
)
def test_unknown_fields_suggest_close_names(store: Rootsift, kw: dict[str, Any], field: str, suggestion: str) -> None:
    with pytest.raises(UnknownFieldError) as info:
        q(store, "w", **kw)
    assert info.value.field == field
    assert suggestion in info.value.suggestions
    assert repr(suggestion) in str(info.value)


def test_raw_conflict_columns_are_not_fields(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(write_jsonl(tmp_path / "a.jsonl", [{"timestamp": iso(T0), "v": 1}]), dataset="c")
    rs.ingest(write_jsonl(tmp_path / "b.jsonl", [{"timestamp": iso(T0), "v": "text"}]), dataset="c")
    assert schema_map(rs, "c")["v"]["conflicts"] == 1
    with pytest.raises(UnknownFieldError):
        q(rs, "c", breakdowns=["v#raw"])


# -- hostile field names --------------------------------------------------------------------

HOSTILE_N = 240


def _hostile_rows() -> list[dict[str, Any]]:
    rows = []
    for i in range(HOSTILE_N):
        row: dict[str, Any] = {
            "timestamp": iso(T0 + timedelta(seconds=i)),
            "select": i % 7,
            'a"b': f"v{i % 3}",
            "x; drop table events; --": float(i),
            "k8s": {"pod": f"p{i % 2}"},
            "résumé": f"r{i % 4}",
            "weird name": i % 5,
            "back`tick": i * 2,
            "it's": f"q'{i % 2}",
            "Robert'); DROP TABLE events;--": "bobby",
            "http.route": f"/r{i % 2}",  # a literal dotted key, beside the nested k8s.pod
        }
        if i % 3:
            row["from"] = "yes"
        rows.append(row)
    return rows


HOSTILE = _hostile_rows()


def _py(rows: list[dict[str, Any]], field: str) -> list[Any]:
    if field == "k8s.pod":
        return [r["k8s"]["pod"] for r in rows]
    return [r[field] for r in rows if field in r]


@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf8", "escaped"])
def test_hostile_field_names(ascii_only: bool, rs: Rootsift, tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in HOSTILE), encoding="utf-8")
    summary = rs.ingest(path, dataset="h")
    assert summary.events == HOSTILE_N and summary.rejects == 0
    names = {
        "select",
        'a"b',
        "x; drop table events; --",
        "k8s.pod",
        "résumé",
        "weird name",
        "back`tick",
        "it's",
        "Robert'); DROP TABLE events;--",
        "from",
        "http.route",
    }
    before = {f["field"]: (f["type"], f["present"]) for f in rs.schema("h")}
    assert set(before) == names | {"timestamp"}

    # breakdowns and calculations (backquoted in the calculation text)
    calcs = [
        "count",
        "sum(`weird name`)",
        "p50(`select`)",
        "avg(`x; drop table events; --`)",
        "max(`back``tick`)",
        "count_distinct(`it's`)",
        "min(select)",
    ]
    out = q(rs, "h", breakdowns=['a"b', "résumé"], calculations=calcs, where="`select` >= 2 and `k8s.pod` = p1")
    assert out.columns == [
        'a"b',
        "résumé",
        "count",
        "sum(weird name)",
        "p50(select)",
        "avg(x; drop table events; --)",
        "max(back`tick)",
        "count_distinct(it's)",
        "min(select)",
    ]
    keep = [r for r in HOSTILE if r["select"] >= 2 and r["k8s"]["pod"] == "p1"]
    got = {tuple(r[:2]): r[2:] for r in out.rows}
    want_groups = group(keep, lambda r: (r['a"b'], r["résumé"]))
    assert set(got) == set(want_groups)
    for key, members in want_groups.items():
        assert got[key] == [
            len(members),
            float(sum(r["weird name"] for r in members)),
            float(np.quantile([r["select"] for r in members], 0.5, method="inverted_cdf")),
            pytest.approx(sum(r["x; drop table events; --"] for r in members) / len(members)),
            float(max(r["back`tick"] for r in members)),
            len({r["it's"] for r in members}),
            float(min(r["select"] for r in members)),
        ], key

    # filters naming every kind of hostile field
    cases: dict[str, Callable[[dict[str, Any]], bool]] = {
        '`a"b` in ("v0", "v2") and exists `from` and `résumé` contains "1"': lambda r: (
            r['a"b'] in ("v0", "v2") and "from" in r and "1" in r["résumé"]
        ),
        "`x; drop table events; --` > 100 or `weird name` = 0": lambda r: (
            r["x; drop table events; --"] > 100 or r["weird name"] == 0
        ),
        "not (`select` < 3)": lambda r: not r["select"] < 3,
        "`it's` = \"q'1\"": lambda r: r["it's"] == "q'1",
        "`back``tick` <= 10": lambda r: r["back`tick"] <= 10,
        "`Robert'); DROP TABLE events;--` starts-with bob and not exists `from`": lambda r: (
            r["Robert'); DROP TABLE events;--"].startswith("bob") and "from" not in r
        ),
        "k8s.pod != p0": lambda r: r["k8s"]["pod"] != "p0",
        "résumé = r3": lambda r: r["résumé"] == "r3",
        "http.route = /r1 and `weird name` in (1, 2)": lambda r: r["http.route"] == "/r1" and r["weird name"] in (1, 2),
    }
    for where, pred in cases.items():
        out = q(rs, "h", where=where, breakdowns=["k8s.pod"], calculations=["count", "sum(`weird name`)"])
        want = group([r for r in HOSTILE if pred(r)], lambda r: (r["k8s"]["pod"],))
        assert {r[0]: r[1:] for r in out.rows} == {
            k[0]: [len(v), float(sum(r["weird name"] for r in v))] for k, v in want.items()
        }, where

    out = q(rs, "h", breakdowns=["http.route", "k8s.pod"], calculations=["count"], order=["http.route asc"])
    assert out.columns == ["http.route", "k8s.pod", "count"]
    assert out.rows == [["/r0", "p0", HOSTILE_N // 2], ["/r1", "p1", HOSTILE_N // 2]]

    # a heatmap and time buckets over a hostile numeric field
    hm = q(rs, "h", calculations=["heatmap(`x; drop table events; --`)"], granularity="1m").heatmap
    assert hm is not None and sum(map(sum, hm.counts)) + sum(hm.nonpositive) == HOSTILE_N
    assert sum(hm.nonpositive) == 1  # the value 0
    # the dataset is intact afterwards
    assert rs.events("h") == HOSTILE_N
    assert {f["field"]: (f["type"], f["present"]) for f in rs.schema("h")} == before
    assert [d.name for d in rs.datasets()] == ["h"]


def test_unknown_hostile_name_is_an_unknown_field_not_sql(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(write_jsonl(tmp_path / "h.jsonl", HOSTILE[:10]), dataset="h")
    for spec in [
        {"breakdowns": ['x"; DROP TABLE events; --']},
        {"calculations": ["sum(`1); DROP TABLE events; --`)"]},
        {"where": '`select"` = 1'},
    ]:
        with pytest.raises(UnknownFieldError):
            q(rs, "h", **spec)
    assert rs.events("h") == 10


def test_the_time_field_and_text_fields_in_queries(store: Rootsift) -> None:
    """min/max of text and of the time, a filter on the time, a breakdown on it: exact, no driver errors."""
    out = q(store, "u", calculations=["min(msg)", "max(msg)", "min(timestamp)", "max(timestamp)"])
    times = sorted(_time(r) for r in ROWS)
    assert out.rows == [[min(r["msg"] for r in ROWS), max(r["msg"] for r in ROWS), times[0], times[-1]]]
    out = q(store, "u", where="timestamp >= '2024-03-01T00:30:00Z'")
    assert out.rows == [[sum(t >= T0 + timedelta(minutes=30) for t in times)]]
    out = q(store, "u", where="timestamp < '2024-03-01T01:10:00+01:00' and endpoint = /nodur")
    assert out.rows == [[sum(1 for r in ROWS if r["endpoint"] == "/nodur" and _time(r) < T0 + timedelta(minutes=10))]]
    with pytest.raises(TimeFormatError):
        q(store, "u", where="timestamp >= nonsense")
    out = q(store, "u", breakdowns=["timestamp"], order=["timestamp asc"], limit=3)
    assert [r[0] for r in out.rows] == sorted(set(times))[:3]
    d = out.as_dict()
    assert d["rows"][0][0] == iso(sorted(set(times))[0]) and d["columns"] == ["timestamp", "count"]
    json.dumps(d)
