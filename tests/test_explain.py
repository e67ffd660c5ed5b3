"""explain: planted differences are found and ranked, nothing is found where there is
nothing (A/A calibration over many seeds), and the contract of its JSON."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.cli import main
from rootsift.errors import UnknownFieldError, UsageError

START = datetime(2024, 5, 1, tzinfo=UTC)


def write_events(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def homogeneous(seed: int, n: int, weighted: bool = False, selectors: int = 0) -> list[dict[str, Any]]:
    """Events whose fields are independent of each other and of time: nothing to find.
    ``s0``… are independent uniform numbers to draw independent random selections with."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        row: dict[str, Any] = {
            "timestamp": (START + timedelta(seconds=float(i) * 3600 / n)).isoformat(),
            "region": ["eu", "us", "ap"][rng.choice(3, p=[0.5, 0.3, 0.2])],
            "endpoint": f"/api/v{rng.integers(1, 3)}/{rng.choice(['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'])}",
            "host": f"h{rng.integers(0, 40)}",
            "user": f"u{rng.integers(0, 100000)}",
            "status": int(rng.choice([200, 200, 200, 200, 404, 500])),
            "duration_ms": float(np.round(rng.lognormal(3, 1), 3)),
            "queue_ms": float(np.round(rng.exponential(5), 3)),
            "u": float(rng.random()),
        }
        for k in range(selectors):
            row[f"s{k}"] = float(np.round(rng.random(), 4))
        if rng.random() < 0.3:
            row["cache"] = "hit"
        if weighted:
            row["samplerate"] = int(rng.choice([1, 1, 10, 100]))
        rows.append(row)
    return rows


def planted(seed: int, n: int = 20000) -> list[dict[str, Any]]:
    """Slow requests come from region ap on host h7 together (the host serves every region,
    and ap's other hosts are fine), and they wait in a queue."""
    rng = np.random.default_rng(seed)
    rows = homogeneous(seed, n)
    for row in rows:
        if row["region"] == "ap" and row["host"] == "h7" and rng.random() < 0.9:
            row["queue_ms"] = float(np.round(rng.exponential(400), 3))
            row["duration_ms"] = float(np.round(row["duration_ms"] + 1000 + row["queue_ms"], 3))
    return rows


@pytest.fixture
def planted_store(tmp_path: Path) -> Rootsift:
    rs = Rootsift(tmp_path / "data")
    rs.ingest(write_events(tmp_path / "e.jsonl", planted(3)), "api")
    yield rs
    rs.close()


def test_planted_cause_ranks_first(planted_store: Rootsift) -> None:
    result = planted_store.explain("api", select="duration_ms > 1000")
    kinds = [f.kind for f in result.findings]
    first_value = next(f for f in result.findings if f.kind in ("dimension", "combination"))
    assert first_value.kind == "combination"
    assert {(c["field"], c["value"]) for c in first_value.conditions or []} == {("region", "ap"), ("host", "h7")}
    parts = {(f.field, f.value): f.score for f in result.findings if f.kind == "dimension"}
    assert first_value.score > max(parts[("region", "ap")], parts[("host", "h7")])
    first_measure = next(f for f in result.findings if f.kind == "measure")
    assert first_measure.field == "queue_ms" and first_measure.effect > 0.5
    assert (
        first_measure.detail["quantiles"]["p50"]["selection"]
        > 10 * first_measure.detail["quantiles"]["p50"]["baseline"]
    )
    # the selection's own field is not a finding
    assert "duration_ms" not in {f.field for f in result.findings}
    assert result.fields["duration_ms"]["role"] == "skipped"
    assert "measure" in kinds and all(f.q_value < 0.05 for f in result.findings)
    # dimension culprits first, then the measures (how the selection differs), each tier by score
    tiers = [[f.score for f in result.findings if (f.kind == "measure") == m] for m in (False, True)]
    assert [f.kind == "measure" for f in result.findings] == sorted(f.kind == "measure" for f in result.findings)
    assert all(t == sorted(t, reverse=True) for t in tiers)


def test_missing_is_a_value_of_its_own(tmp_path: Path) -> None:
    rows = homogeneous(9, 5000)
    for row in rows:
        if row["u"] < 0.1:
            del row["host"]
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", rows), "api")
        result = rs.explain("api", select="u < 0.1")
    first = result.findings[0]
    assert (first.kind, first.field, first.value) == ("dimension", "host", None)
    assert first.selection_fraction == 1.0 and first.baseline_fraction == 0.0
    assert first.as_dict()["value"] is None


def test_high_cardinality_is_summarised_not_dropped(planted_store: Rootsift) -> None:
    result = planted_store.explain("api", select="duration_ms > 1000", top_values=10)
    user = result.fields["user"]  # 100k possible ids over 20k events: counted as heavy hitters only
    assert user["id_like"] and user["role"] == "heavy hitters" and user["distinct_in_pilot"] > 10000
    assert 0.95 < user["other"]["selection_fraction"] <= 1 and 0.99 < user["other"]["baseline_fraction"] <= 1
    assert result.fields["host"]["distinct"] == 40 and "other" in result.fields["host"]


def test_one_id_behind_the_errors_is_found(tmp_path: Path) -> None:
    """An id-like field is not counted value by value, but a value the selection keeps repeating is."""
    rows = homogeneous(12, 20000)
    for i, row in enumerate(rows):
        if i % 500 == 0:
            row["user"], row["status"] = "u-bot", 503
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", rows), "api")
        result = rs.explain("api", select="status = 503")
    first = next(f for f in result.findings if f.kind == "dimension")
    assert (first.field, first.value) == ("user", "u-bot")
    assert first.selection_fraction == 1.0 and first.q_value < 1e-6


def test_time_sub_range_and_explicit_baseline(tmp_path: Path) -> None:
    rows = homogeneous(5, 6000)
    for row in rows[3000:3600]:  # ten minutes in which region us errors
        if row["region"] == "us":
            row["status"] = 503
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", rows), "api")
        when = START + timedelta(minutes=30)
        result = rs.explain("api", select_from=when, select_to=when + timedelta(minutes=6))
        top = next(f for f in result.findings if f.kind != "measure")
        assert (top.field, top.value) in {("status", 503)} or top.conditions
        only_ok = rs.explain("api", select="status = 503", baseline="status = 200")
        assert only_ok.baseline["where"] == "status = 200"
        assert only_ok.selection["events"] + only_ok.baseline["events"] < 6000
        best = next(f for f in only_ok.findings if f.kind == "dimension")
        assert (best.field, best.value) == ("region", "us")


def test_weights_use_the_effective_sample_size(tmp_path: Path) -> None:
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", homogeneous(7, 4000, weighted=True)), "api")
        result = rs.explain("api", select="u < 0.05")
        sel = result.selection
        assert sel["weighted_events"] > 5 * sel["events"]
        assert sel["effective_events"] < sel["events"]
        assert result.fields["samplerate"]["role"] == "skipped"
        assert any("count as" in w for w in result.warnings)


def test_small_and_empty_selections_warn(tmp_path: Path) -> None:
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", homogeneous(8, 2000)), "api")
        small = rs.explain("api", select="u < 0.004")
        assert any("only" in w for w in small.warnings)
        empty = rs.explain("api", select="u > 2")
        assert empty.findings == [] and any("empty" in w for w in empty.warnings)
        with pytest.raises(UsageError, match="--select"):
            rs.explain("api")
        with pytest.raises(UnknownFieldError, match="durration_ms"):
            rs.explain("api", select="durration_ms > 1")
        with pytest.raises(UsageError, match="--alpha"):
            rs.explain("api", select="u < 0.5", alpha=1.5)


@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "weighted"])
def test_a_a_calibration(tmp_path: Path, weighted: bool) -> None:
    """Random selections of homogeneous events: at most 5 % of runs report any finding.

    Each run selects with its own independent random field, so the runs are independent
    (overlapping ranges of one field would repeat one chance deviation several times);
    sizes range from 0.5 % to half of the events."""
    runs = with_findings = 0
    with Rootsift(tmp_path / "data") as rs:
        for seed in range(4):
            rows = homogeneous(100 + seed, 4000, weighted, selectors=25)
            rs.ingest(write_events(tmp_path / f"e{seed}.jsonl", rows), f"d{seed}")
        widths = [0.005, 0.02, 0.1, 0.3, 0.5]
        for seed in range(4):
            for k in range(25):
                result = rs.explain(f"d{seed}", select=f"s{k} < {widths[k % 5]}", where=None)
                runs += 1
                with_findings += bool(result.findings)
    assert runs == 100
    assert with_findings <= 5, f"{with_findings} of {runs} A/A runs reported a finding"


def test_cli_json_contract(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", planted(4, 8000)), "api")
    args = ["explain", "api", "--select", "duration_ms > 1000", "--data", str(data), "--json"]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0, run.output
    out = json.loads(run.stdout)
    assert set(out) >= {"selection", "baseline", "findings", "warnings"}
    for finding in out["findings"]:
        assert finding["kind"] in ("dimension", "measure", "combination")
        assert ("conditions" in finding) != ("field" in finding)
        for key in ("selection_fraction", "baseline_fraction", "score", "p_value", "q_value", "counts"):
            assert key in finding
    combo = next(f for f in out["findings"] if f["kind"] == "combination")
    assert all(set(c) == {"field", "value"} for c in combo["conditions"])
    text = CliRunner().invoke(main, args[:-1])
    assert text.exit_code == 0 and "selection" in text.output and "queue_ms" in text.output
    bad = CliRunner().invoke(main, ["explain", "api", "--data", str(data), "--select", "nope >", "--json"])
    assert bad.exit_code == 2 and "error" in json.loads(bad.stdout)


def test_select_by_start(tmp_path: Path) -> None:
    """Logs stamped at completion: the time box bounds each event's start instead."""
    data = tmp_path / "data"
    rows = homogeneous(9, 4000)
    for r in rows:  # seconds-long requests, events 0.9 s apart: starts cross the box's edges
        r["duration_ms"] = round(r["duration_ms"] * 100, 3)
    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", rows), "api")
        box = {"select_from": START + timedelta(minutes=10), "select_to": START + timedelta(minutes=20)}
        by_end = rs.explain("api", **box)
        by_start = rs.explain("api", **box, select_start_of="duration_ms")
        started = sum(
            1
            for r in rows
            if box["select_from"]
            <= datetime.fromisoformat(r["timestamp"]) - timedelta(milliseconds=r["duration_ms"])
            < box["select_to"]
        )
    assert by_start.selection["events"] == started != by_end.selection["events"]
    assert by_start.selection["time"] == "start: timestamp - duration_ms"
    bad = CliRunner().invoke(
        main,
        ["explain", "api", "--select-from", "2024-06-01T00:10:00Z", "--select-by-start", "nope", "--data", str(data)],
    )
    assert bad.exit_code == 2 and "nope" in bad.output


def sessions(seed: int, n: int, stall: Any) -> list[dict[str, Any]]:
    """Video sessions over an hour: bitrate, device, cdn and os drawn independently; each
    session stalls with probability ``stall(row)``; the second half of the hour only."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        row: dict[str, Any] = {
            "timestamp": (START + timedelta(seconds=float(i) * 3600 / n)).isoformat(),
            "bitrate": int(rng.choice([800, 1500, 2500, 4000, 6000])),
            "device": str(rng.choice(["adr", "ios", "web", "tv"])),
            "cdn": str(rng.choice(["c1", "c2", "c3"])),
            "os": str(rng.choice(["v1", "v2", "v3"])),
        }
        late = i >= n // 2
        row["stalled"] = "yes" if rng.random() < (stall(row) if late else 0.02) else "no"
        rows.append(row)
    return rows


def cause_set(result: Any) -> list[set[tuple[str, Any]]]:
    out = []
    for f in result.cause_set:
        conds = f.conditions or [{"field": f.field, "value": f.value}]
        out.append({(c["field"], c["value"]) for c in conds})
    return out


PLANTED_CAUSES = {
    "part": (lambda r: 0.4 if r["bitrate"] == 4000 else 0.02, [{("bitrate", 4000)}]),
    "pair": (
        lambda r: 0.5 if r["bitrate"] == 4000 and r["device"] == "adr" else 0.02,
        [{("bitrate", 4000), ("device", "adr")}],
    ),
    "two": (
        lambda r: 0.5 if (r["bitrate"] == 4000 and r["device"] == "adr") or r["cdn"] == "c3" else 0.02,
        [{("cdn", "c3")}, {("bitrate", 4000), ("device", "adr")}],
    ),
}


@pytest.mark.parametrize("case", list(PLANTED_CAUSES))
@pytest.mark.parametrize("seed", [1, 2])
def test_cause_set_is_neither_too_specific_nor_too_coarse(tmp_path: Path, case: str, seed: int) -> None:
    """A cause on one value with an unrelated field beside it is that value, not a pair
    with an extra value; a cause on a pair is the pair, not either part; two disjoint
    causes are both in the set, listed first. The same answer whichever baseline: the rest
    of the range, only the sessions that did not stall, or the stalls of the half hour before."""
    stall, expected = PLANTED_CAUSES[case]
    late = START + timedelta(minutes=30)
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", sessions(seed, 20000, stall)), "video")
        everything_else = rs.explain("video", select='stalled = "yes"', select_from=late)
        good_rows = rs.explain("video", select='stalled = "yes"', select_from=late, baseline='stalled = "no"')
        earlier = f'stalled = "yes" and timestamp < "{late.isoformat()}"'
        same_rows_earlier = rs.explain("video", select='stalled = "yes"', select_from=late, baseline=earlier)
    for result in (everything_else, good_rows, same_rows_earlier):
        found = cause_set(result)
        assert sorted(found, key=len) == sorted(expected, key=len), found
        assert result.findings[: len(found)] == result.cause_set
        assert all(f.detail["cause_set"] and f.q_value < 0.05 for f in result.cause_set)
        assert (
            result.as_dict()["cause_set"][0]["selection_fraction"]
            > result.as_dict()["cause_set"][0]["baseline_fraction"]
        )


def test_no_cause_set_without_a_cause(tmp_path: Path) -> None:
    """Stalls at the same rate everywhere in the selected half hour: no cause to name."""
    late = START + timedelta(minutes=30)
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "e.jsonl", sessions(3, 20000, lambda r: 0.05)), "video")
        result = rs.explain("video", select='stalled = "yes"', select_from=late)
    assert result.cause_set == [] and result.as_dict()["cause_set"] == []
