"""The stored uniform sample and explain's sampled mode: the sample is about one event in
64 on every write path and through retention, and a sampled explain finds what the exact
one finds, with baseline shares inside the error it states, and stays calibrated."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from rootsift import Rootsift
from rootsift.analysis.findings import Finding
from rootsift.store.segment import SAMPLE_EVERY, SAMPLE_TABLE
from test_explain import START, homogeneous, planted, write_events


def sample_rows(rs: Rootsift, dataset: str) -> int:
    rel = rs.backend.sample_relation(dataset, None, None)
    assert rel is not None
    return int(rs.backend.execute_sql(f"SELECT count(*) FROM {rel.sql(dialect='duckdb')}", []).rows[0][0])


def within_binomial(k: int, n: int) -> bool:
    """k is within five standard deviations of n / SAMPLE_EVERY."""
    p = 1 / SAMPLE_EVERY
    return abs(k - n * p) <= 5 * math.sqrt(n * p * (1 - p))


def test_every_write_path_keeps_a_sample(tmp_path: Path) -> None:
    rows = homogeneous(1, 40000)
    logfmt = tmp_path / "e.log"
    logfmt.write_text("".join(f"ts={r['timestamp']} host={r['host']} duration_ms={r['duration_ms']}\n" for r in rows))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", rows), "json")  # DuckDB's reader, checked insert
        rs.ingest(logfmt, "text", format="logfmt")  # staged tables, queued inserts
        for name in ("json", "text"):
            assert within_binomial(sample_rows(rs, name), 40000), name
        events = rs.backend.fields("json")
        rel = rs.backend.sample_relation("json", None, None)
        assert rel is not None
        got = rs.backend.execute_sql(f"SELECT * FROM {rel.sql(dialect='duckdb')} LIMIT 1", [])
        assert set(got.columns) >= set(events)


def test_retention_keeps_the_sample_in_range(tmp_path: Path) -> None:
    with Rootsift(tmp_path / "data", segment_rows=10000) as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", homogeneous(2, 40000)), "api")
        cutoff = START.replace(tzinfo=None) + timedelta(minutes=25)  # inside a segment: rewritten
        rs.backend.drop_before("api", cutoff)
        rel = rs.backend.sample_relation("api", None, None)
        assert rel is not None
        first = rs.backend.execute_sql(f"SELECT min(timestamp) FROM {rel.sql(dialect='duckdb')}", []).rows[0][0]
        assert first >= cutoff
        assert within_binomial(sample_rows(rs, "api"), rs.datasets()[0].events)


def test_old_segments_get_a_sample_when_opened_for_writing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", planted(3, 20000)), "api")
    for seg in (data / "api" / "segments").glob("seg-*.duckdb"):  # as written before samples existed
        with duckdb.connect(str(seg)) as con:
            con.execute(f"DROP TABLE {SAMPLE_TABLE}")
    with Rootsift(data, read_only=True) as rs:
        result = rs.explain("api", select="duration_ms > 1000", sampled=True)
        assert result.method["exact"] and any("no sample" in w for w in result.warnings)
    with Rootsift(data) as rs:
        rs.datasets()
    with Rootsift(data, read_only=True) as rs:
        assert within_binomial(sample_rows(rs, "api"), 20000)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Rootsift:
    tmp = tmp_path_factory.mktemp("sampled")
    rs = Rootsift(tmp / "data")
    rs.ingest(write_events(tmp / "e.jsonl", planted(5, 150000)), "api")
    yield rs
    rs.close()


def test_sampled_finds_what_exact_finds(big: Rootsift) -> None:
    exact = big.explain("api", select="duration_ms > 1000")
    fast = big.explain("api", select="duration_ms > 1000", sampled=True)
    assert exact.method["exact"] and not fast.method["exact"]
    sampling = fast.method["sampling"]
    assert within_binomial(sampling["baseline_sample_events"], exact.baseline["events"])
    assert fast.selection["events"] == exact.selection["events"]  # the selection is exact
    top = next(f for f in fast.findings if f.kind in ("dimension", "combination"))
    assert {(c["field"], c["value"]) for c in top.conditions or []} == {("region", "ap"), ("host", "h7")}
    assert next(f for f in fast.findings if f.kind == "measure").field == "queue_ms"
    # each baseline share within the stated bound (95 %; five of them at 99.9 %)
    bound = sampling["share_error_95"]

    def key(f: Finding) -> tuple[str, str]:
        return f.kind, repr((f.field, f.value, f.conditions))

    by_key = {key(f): f for f in fast.findings if f.kind != "measure"}
    compared = 0
    for f in exact.findings:
        other = by_key.get(key(f))
        if other is not None:
            compared += 1
            assert abs((other.baseline_fraction or 0) - (f.baseline_fraction or 0)) <= 1.7 * bound
    assert compared >= 3


def test_sampled_a_a_calibration(tmp_path: Path) -> None:
    """Random selections of homogeneous events, baseline from the sample: at most 6 of 60
    runs report any finding (a 5 % rate gives more than 6 with probability 0.04)."""
    runs = with_findings = 0
    with Rootsift(tmp_path / "data") as rs:
        for seed in range(3):
            rs.ingest(
                write_events(tmp_path / f"e{seed}.jsonl", homogeneous(200 + seed, 20000, selectors=20)), f"d{seed}"
            )
        widths = [0.005, 0.02, 0.1, 0.3]
        for seed in range(3):
            for k in range(20):
                result = rs.explain(f"d{seed}", select=f"s{k} < {widths[k % 4]}", sampled=True)
                assert not result.method["exact"]
                runs += 1
                with_findings += bool(result.findings)
    assert runs == 60
    assert with_findings <= 6, f"{with_findings} of {runs} sampled A/A runs reported a finding"


def test_a_large_selection_is_read_from_the_sample_too(big: Rootsift) -> None:
    """A selection the sample already holds 1,000 times over is read from the sample (a
    scattered selection costs nearly a full scan), and says so with its own error."""
    exact = big.explain("api", select="queue_ms > 2")
    fast = big.explain("api", select="queue_ms > 2", sampled=True)
    sampling = fast.method["sampling"]
    assert sampling["selection"].startswith("the store's uniform sample")
    assert within_binomial(fast.selection["events"], exact.selection["events"])
    assert 0 < sampling["share_error_95"] < 0.05 and 0 < sampling["selection_share_error_95"] < 0.05
    assert fast.selection["weighted_events"] == SAMPLE_EVERY * fast.selection["events"]
    # fewer events, less power: what it finds, the exact run finds too
    assert {(f.kind, f.field, repr(f.value)) for f in fast.findings} <= {
        (f.kind, f.field, repr(f.value)) for f in exact.findings
    }
