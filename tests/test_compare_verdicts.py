"""compare's verdicts a gate relies on: the direction of every metric stated and never
guessed from a name, a healthy zero error rate that can pass, extreme quantiles that
wait for enough events, serial correlation within each host's series, metrics that
must be numbers, and where a regression concentrates in the terminal."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.cli import main
from rootsift.errors import UsageError
from test_compare import START, requests
from test_explain import write_events


def cached(seed: int, n: int, errors_a: float, errors_b: float) -> list[dict[str, Any]]:
    """``n`` requests per version, every one served from the cache (``cache = "hit"``),
    failing at ``errors_a`` in v1 and ``errors_b`` in v2; timings from a graphite backend."""
    rng = np.random.default_rng(seed)
    rows = []
    for version, share in (("v1", errors_a), ("v2", errors_b)):
        failing = rng.random(n) < share
        slow = 1.5 if version == "v2" else 1.0
        for i in range(n):
            rows.append(
                {
                    "timestamp": (START + timedelta(seconds=i * 0.1)).isoformat(),
                    "version": version,
                    "cache": "hit",
                    "status": 503 if failing[i] else 200,
                    "graphite_query_ms": round(float(rng.lognormal(3, 0.5)) * slow, 3),
                }
            )
    return rows


def cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_no_direction_is_guessed_from_a_name(tmp_path: Path) -> None:
    """Errors among cache hits rising from 1 % to ~10 %, and the p99 of a field whose name
    contains "hit" (graphite) rising by half, are regressions: the gate exits 1. Each
    metric says it assumed lower is better, by default, in JSON and in the table."""
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "r.jsonl", cached(1, 5000, 0.01, 0.098)), "api")
    base = ["compare", "api", "--a", 'version = "v1"', "--b", 'version = "v2"', "--data", str(data)]
    for metric in ('rate(status >= 500 and cache = "hit")', "p99(graphite_query_ms)"):
        gate = cli(*base, "--metrics", metric, "--fail-on-regression")
        assert gate.exit_code == 1, gate.output
        assert "regression" in gate.output and "lower (default)" in gate.output
        doc = json.loads(cli(*base, "--metrics", metric, "--json").stdout)
        (m,) = doc["metrics"]
        assert (m["verdict"], m["better"], m["better_source"]) == ("regression", "lower", "default")
    said = cli(*base, "--metrics", "p99(graphite_query_ms)", "--better", "p99(graphite_query_ms)=higher", "--json")
    (m,) = json.loads(said.stdout)["metrics"]
    assert (m["verdict"], m["better"], m["better_source"]) == ("improvement", "higher", "--better")


def test_a_zero_rate_on_both_sides_passes_with_enough_events(rs: Rootsift, tmp_path: Path) -> None:
    """No errors on either side: with ~7,000 events each the difference is bounded within
    0.1 percentage point (no change, the gate passes); with 20 each it is not."""
    rs.ingest(write_events(tmp_path / "big.jsonl", cached(2, 7000, 0.0, 0.0)), "big")
    rs.ingest(write_events(tmp_path / "small.jsonl", cached(3, 20, 0.0, 0.0)), "small")
    cohorts = {"a": 'version = "v1"', "b": 'version = "v2"', "metrics": "rate(status >= 500)"}
    big = rs.compare("big", **cohorts).metrics[0]
    assert big["count_a"] == big["count_b"] == 0
    assert big["verdict"] == "no change" and big["absolute_tolerance"] == 0.001
    assert 0 < big["absolute_ci"][1] < 0.001 and "within" in big["note"]
    small = rs.compare("small", **cohorts).metrics[0]
    assert small["verdict"] == "not enough data" and small["absolute_ci"][1] > 0.001
    assert "events per cohort" in small["note"]
    # errors appearing in B only are still a regression, whatever the bound
    rs.ingest(write_events(tmp_path / "new.jsonl", cached(4, 7000, 0.0, 0.01)), "new")
    assert rs.compare("new", **cohorts).metrics[0]["verdict"] == "regression"


def test_an_extreme_quantile_waits_for_enough_events(rs: Rootsift, tmp_path: Path) -> None:
    """p99.9 of 150 events a side rests on the single largest value: an A/A split of them
    is not enough data, never a verdict, with a note saying how many events are needed, and
    so is a tail that really grew; the curve marks the quantiles it cannot test. p50 and
    p90 of the same events are tested."""
    rs.ingest(write_events(tmp_path / "tail.jsonl", requests(12, n=300, tail=3.0)), "tail")
    chosen = "p50(duration_ms),p90(duration_ms),p99.9(duration_ms)"
    for seed in range(12, 17):
        rs.ingest(write_events(tmp_path / f"aa{seed}.jsonl", requests(seed, n=300)), f"aa{seed}")
        got = by_metric(rs.compare(f"aa{seed}", a='split = "x"', b='split = "y"', metrics=chosen))
        extreme = got["p99.9(duration_ms)"]
        assert extreme["verdict"] == "not enough data" and extreme["enough_events"] is False
        assert "10,000 events per cohort" in extreme["note"]
        assert got["p50(duration_ms)"]["enough_events"] and got["p90(duration_ms)"]["enough_events"]
    m = rs.compare("tail", a='version = "v1"', b='version = "v2"', metrics="p99.9(duration_ms)").metrics[0]
    assert m["n_a"] == m["n_b"] == 150 and m["verdict"] == "not enough data"
    curve = {c["q"]: c["enough_events"] for c in m["curve"]}
    assert curve[0.5] and curve[0.9] and not curve[0.99] and not curve[0.999]


def by_metric(result: Any) -> dict[str, dict[str, Any]]:
    return {m["metric"]: m for m in result.metrics}


def gauge(rows: list[dict[str, Any]], host: str, values: np.ndarray) -> None:
    rows.extend(
        {"timestamp": (START + timedelta(seconds=15 * k)).isoformat(), "host": host, "rss": float(v)}
        for k, v in enumerate(values)
    )


def test_serial_correlation_is_within_each_hosts_series(rs: Rootsift, tmp_path: Path) -> None:
    """Three hosts at levels 100, 10,000 and 1,000,000, each white noise around its level:
    r is near 0 and every sample counts (the hosts' levels must not read as correlation).
    An AR(1) series with phi = 0.6 gives r near 0.6 and n (1 − r) / (1 + r) samples."""
    rng = np.random.default_rng(21)
    rows: list[dict[str, Any]] = []
    for h, level in enumerate((1e2, 1e4, 1e6)):
        gauge(rows, f"h{h}", level + rng.normal(0, 1, 800))
    rs.ingest(write_events(tmp_path / "white.jsonl", rows), "white")
    half = (START + timedelta(seconds=15 * 400)).isoformat()
    m = rs.compare("white", a_to=half, b_from=half, metrics="avg(rss)").metrics[0]
    assert abs(m["autocorrelation_a"]) < 0.1 and abs(m["autocorrelation_b"]) < 0.1
    assert m["effective_n_a"] > 0.8 * m["n_a"] and m["n_a"] == 1200
    x, ar = 0.0, []
    for e in rng.normal(0, 1, 4000):
        x = 0.6 * x + e
        ar.append(1000 + x)
    rows = []
    gauge(rows, "h0", np.array(ar))
    rs.ingest(write_events(tmp_path / "ar.jsonl", rows), "ar")
    half = (START + timedelta(seconds=15 * 2000)).isoformat()
    m = rs.compare("ar", a_to=half, b_from=half, metrics="avg(rss)").metrics[0]
    for side in "ab":
        assert m[f"autocorrelation_{side}"] == pytest.approx(0.6, abs=0.06)
        assert m[f"effective_n_{side}"] == pytest.approx(2000 * 0.4 / 1.6, rel=0.2)


def test_metrics_of_text_fields_are_usage_errors(rs: Rootsift, tmp_path: Path) -> None:
    """avg/pNN/shift/max/min/slope of a text field: exit 2 naming the field and its type; a
    rate's filter is checked by the filter compiler."""
    data = tmp_path / "data"
    with Rootsift(data) as store:
        store.ingest(write_events(tmp_path / "r.jsonl", requests(13, n=400)), "api")
    base = ["compare", "api", "--a", 'version = "v1"', "--b", 'version = "v2"', "--data", str(data)]
    for metric in ("avg(endpoint)", "p99(endpoint)", "shift(endpoint)", "max(endpoint)", "min(endpoint)"):
        run = cli(*base, "--metrics", metric, "--json")
        assert run.exit_code == 2, (metric, run.output)
        message = json.loads(run.stdout)["error"]["message"]
        assert "'endpoint'" in message and "VARCHAR" in message, message
    slope = cli(*base, "--metrics", "slope(endpoint)", "--per", "version")
    assert slope.exit_code == 2 and "VARCHAR" in slope.output
    unknown = cli(*base, "--metrics", "rate(stauts >= 500)")
    assert unknown.exit_code == 2 and "stauts" in unknown.output and "Traceback" not in unknown.output
    with pytest.raises(UsageError, match="VARCHAR"):
        rs.ingest(write_events(tmp_path / "s.jsonl", requests(14, n=100)), "api2")
        rs.compare("api2", a='version = "v1"', b='version = "v2"', metrics="avg(version)")


def test_where_it_concentrates_is_in_the_terminal(tmp_path: Path) -> None:
    """The findings behind a regression are drawn in the terminal, not only in --json."""
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "r.jsonl", requests(5, tail=2.0, only="/c")), "api")
    run = cli(
        "compare",
        "api",
        "--a",
        'version = "v1"',
        "--b",
        'version = "v2"',
        "--metrics",
        "p99(duration_ms)",
        "--data",
        str(data),
    )
    assert run.exit_code == 0, run.output
    text = " ".join(run.output.split())
    assert "where the regression of p99(duration_ms) concentrates" in text
    assert "endpoint = /c" in text
