"""Rows that stand for many events (a count field) in compare, canary and investigate:
count rows give what the same events written out one by one give, with or without
sample rates, and a few rows standing for thousands of events are thousands of
observations (sample rates of the same size are not)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.analysis.compare import Comparison
from rootsift.cli import main
from test_counts_field import expanded, write_events

START = datetime(2024, 6, 1, tzinfo=UTC)
METRICS = "p50(duration_ms),p90(duration_ms),p99(duration_ms),avg(duration_ms),shift(duration_ms),rate(status >= 500)"


def rollup(seed: int, minutes: int = 30, sampled: bool = False) -> list[dict[str, Any]]:
    """Per-minute rows (minute, version, status, duration in whole milliseconds) with how
    many requests had them (``event_count``). v2's slow requests are 40 % slower and it
    fails twice as often. ``sampled``: each row also has a sample rate."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(minutes):
        ts = (START + timedelta(minutes=m)).isoformat()
        for version in ("v1", "v2"):
            d = np.round(rng.lognormal(3, 0.5, size=60))
            if version == "v2":
                d = np.where(d > 30, np.round(d * 1.4), d)
            fail = rng.random(60) < (0.04 if version == "v2" else 0.02)
            groups: dict[tuple[float, int], int] = {}
            for value, bad in zip(d, fail, strict=True):
                key = (float(value), 503 if bad else 200)
                groups[key] = groups.get(key, 0) + 1
            keys = list(groups)
            for i in rng.permutation(len(keys)):  # a minute's rows in no particular order
                (value, status), n = keys[i], groups[keys[i]]
                row: dict[str, Any] = {
                    "timestamp": ts,
                    "version": version,
                    "status": status,
                    "duration_ms": value,
                    "event_count": n,
                }
                if sampled:
                    row["samplerate"] = int(rng.choice([1, 1, 4, 10]))
                rows.append(row)
    return rows


def by_metric(result: Comparison) -> dict[str, dict[str, Any]]:
    return {m["metric"]: m for m in result.metrics}


@pytest.mark.parametrize("sampled", [False, True], ids=["counts", "counts-and-sample-rates"])
def test_count_rows_compare_as_the_expanded_events(tmp_path: Path, sampled: bool) -> None:
    rows = rollup(11, sampled=sampled)
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "agg.jsonl", rows), "agg")
        rs.ingest(write_events(tmp_path / "all.jsonl", expanded(rows)), "all")
        agg = rs.compare("agg", a='version = "v1"', b='version = "v2"', metrics=METRICS)
        full = rs.compare("all", a='version = "v1"', b='version = "v2"', metrics=METRICS)
    assert "count ('event_count'" in agg.method["weights"]
    assert agg.a["events"] < full.a["events"]
    assert agg.a["weighted_events"] == full.a.get("weighted_events", full.a["events"])
    assert agg.a["effective_events"] == pytest.approx(full.a.get("effective_events", full.a["events"]))
    assert agg.verdict == full.verdict == "regression"
    got, want = by_metric(agg), by_metric(full)
    for name in METRICS.split(","):
        g, w = got[name], want[name]
        assert g["verdict"] == w["verdict"], name
        assert (g["a"], g["b"]) == (w["a"], w["b"]), name  # the estimates: exact
        if name.startswith("avg"):
            # r is over the rows' series: the copies of one row, written out next to each
            # other, look serially correlated (r ≈ 0.25) and discount the expanded events;
            # the rows are independent, and count as Kish's effective size
            assert abs(g["autocorrelation_a"]) < 0.1 < w["autocorrelation_a"]
            assert g["effective_n_a"] == pytest.approx(agg.a["effective_events"], rel=0.01)
            assert g["effective_n_a"] > w["effective_n_a"] and g["p_value"] < w["p_value"]
        else:  # the same binned counts, the same bootstrap seed: the same numbers
            assert g["p_value"] == pytest.approx(w["p_value"], rel=1e-3, abs=1e-300), name
            assert g["ci"] == pytest.approx(w["ci"], rel=1e-3), name
    assert got["p90(duration_ms)"]["curve"] == want["p90(duration_ms)"]["curve"]


def test_few_count_rows_standing_for_many_events_are_significant(tmp_path: Path) -> None:
    """20 rows a cohort standing for 6,000 requests: as counts, 1 % of errors against 3 %
    is certain; as sample rates of the same size, the same rows are 20 observations."""
    rows = []
    for i in range(10):
        ts = (START + timedelta(minutes=i)).isoformat()
        for version, errors in (("v1", 3), ("v2", 9)):
            rows.append({"timestamp": ts, "version": version, "status": 200, "event_count": 300 - errors})
            rows.append({"timestamp": ts, "version": version, "status": 503, "event_count": errors})
    as_rates = [{**{k: v for k, v in r.items() if k != "event_count"}, "samplerate": r["event_count"]} for r in rows]
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "c.jsonl", rows), "counted")
        rs.ingest(write_events(tmp_path / "s.jsonl", as_rates), "sampled")
        counted = rs.compare("counted", a='version = "v1"', b='version = "v2"', metrics="rate(status >= 500)")
        sampled = rs.compare("sampled", a='version = "v1"', b='version = "v2"', metrics="rate(status >= 500)")
    c, s = counted.metrics[0], sampled.metrics[0]
    assert (c["a"], c["b"]) == (s["a"], s["b"]) == (0.01, 0.03)
    assert counted.verdict == "regression" and c["p_value"] < 1e-6
    assert counted.a["effective_events"] == counted.a["weighted_events"] == 3000
    assert sampled.verdict != "regression" and s["p_value"] > 0.05
    assert sampled.a["effective_events"] < 25


def test_count_field_named_on_compare_and_canary(tmp_path: Path) -> None:
    rows = [{**{k: v for k, v in r.items() if k != "event_count"}, "hits": r["event_count"]} for r in rollup(12)]
    data = str(tmp_path / "data")
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "agg.jsonl", rows), "agg")
        named = rs.compare(
            "agg", a='version = "v1"', b='version = "v2"', metrics="p99(duration_ms)", count_field="hits"
        )
        plain = rs.compare("agg", a='version = "v1"', b='version = "v2"', metrics="p99(duration_ms)")
    assert named.a["weighted_events"] == sum(r["hits"] for r in rows if r["version"] == "v1")
    assert "weighted_events" not in plain.a and named.metrics[0]["a"] != plain.metrics[0]["a"]
    base = ["compare", "agg", "--a", 'version = "v1"', "--b", 'version = "v2"', "--data", data]
    run = CliRunner().invoke(main, [*base, "--metrics", "p99(duration_ms)", "--count-field", "hits", "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["a"]["weighted_events"] == named.a["weighted_events"]
    bad = CliRunner().invoke(main, [*base, "--count-field", "nope"])
    assert bad.exit_code != 0 and "--count-field 'nope'" in bad.output and "Traceback" not in bad.output
    watch = [
        *("canary", "agg", "--baseline", 'version = "v1"', "--canary", 'version = "v2"'),
        *("--every", "10m", "--for", "30m", "--from", START.isoformat(), "--replay", "--data", data, "--json"),
        *("--metrics", "rate(status >= 500)", "--count-field", "hits"),
    ]
    looks = CliRunner().invoke(main, watch)
    assert looks.exit_code in (0, 1), looks.output
    first = json.loads(looks.stdout.splitlines()[0])
    assert first["a"]["weighted_events"] == sum(
        r["hits"] for r in rows if r["version"] == "v1" and r["timestamp"] < (START + timedelta(minutes=10)).isoformat()
    )


def burst(seed: int) -> list[dict[str, Any]]:
    """Per-minute rollup rows over four hours (minute, pop, status): pop fra fails a third
    of its requests from 02:00 to 02:20."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(240):
        ts = (START + timedelta(minutes=m)).isoformat()
        for pop in ("fra", "ams", "lhr", "cdg"):
            fails = 0.33 if pop == "fra" and 120 <= m < 140 else 0.01
            n = int(rng.poisson(40))
            bad = int(rng.binomial(n, fails))
            for status, k in ((200, n - bad), (503, bad)):
                if k:
                    rows.append({"timestamp": ts, "pop": pop, "status": status, "event_count": k})
    return rows


def test_investigate_a_rollup_as_the_expanded_events(tmp_path: Path) -> None:
    rows = burst(13)
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "agg.jsonl", rows), "agg")
        rs.ingest(write_events(tmp_path / "all.jsonl", expanded(rows)), "all")
        agg = rs.investigate("agg")
        full = rs.investigate("all")
        assert rs.investigate("agg", count_field="event_count").anomaly == agg.anomaly
    assert agg.anomaly is not None and full.anomaly is not None
    assert agg.anomaly.kind == full.anomaly.kind == "errors"
    bucket = timedelta(seconds=float(full.method["shift_bucket_seconds"]))
    assert abs(agg.anomaly.start - full.anomaly.start) <= bucket
    assert abs(agg.anomaly.end - full.anomaly.end) <= bucket
    naive = START.replace(tzinfo=None)
    assert naive + timedelta(minutes=115) <= agg.anomaly.start <= naive + timedelta(minutes=121)
    top = [(f.field, f.value) for f in agg.findings if f.kind == "dimension"][:1]
    assert top == [(f.field, f.value) for f in full.findings if f.kind == "dimension"][:1] == [("pop", "fra")]
    assert agg.selection["weighted_events"] == pytest.approx(full.selection["events"])


def test_stall_events_count_rows_as_their_events(tmp_path: Path) -> None:
    """What completes just after a stall, and how often it completes elsewhere, counts a
    row with a count as that many events."""
    from rootsift.analysis.frame import Frame
    from rootsift.analysis.stalls import stall_events

    rows = []
    for s in range(120):
        ts = (START + timedelta(seconds=s)).isoformat()
        rows.append({"timestamp": ts, "query": "select 1", "event_count": 7})
        if s in (60, 90):
            rows.append({"timestamp": ts, "query": "flush logs", "event_count": 2})
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "agg.jsonl", rows), "agg")
        rs.ingest(write_events(tmp_path / "all.jsonl", expanded(rows)), "all")
        got = {}
        for name in ("agg", "all"):
            frame = Frame(rs.backend, name, None, None)
            at = START.replace(tzinfo=None) + timedelta(seconds=60)
            found = stall_events(frame, at, at, timedelta(seconds=1))
            got[name] = [(f.value, f.selection_count, f.baseline_count, f.baseline_fraction) for f in found]
    assert got["agg"] == got["all"]
    assert ("flush logs", 2.0, 2.0, 2 / (7 * 119 + 2)) in got["agg"]
