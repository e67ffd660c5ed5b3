"""Rows that stand for many events (a count field): explain on count rows finds the same
as on the same events written out one by one, with or without sample rates; the count
field is kept as a dataset setting at ingest and can be named on the analysis."""

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
from rootsift.analysis.explain import Explanation
from rootsift.cli import main
from rootsift.errors import RootsiftError

START = datetime(2024, 5, 1, tzinfo=UTC)
POPS = ["fra", "ams", "lhr", "cdg", "iad", "sjc", "nrt", "syd"]
DEVICES = ["adr", "ios", "web", "tv"]


def write_events(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


def rollup(seed: int, minutes: int = 40, sampled: bool = False) -> list[dict[str, Any]]:
    """CDN-like per-minute rows: (minute, pop, device, status) with how many requests
    (``event_count``) and their mean time to first byte. Pop fra fails more often, and
    its failures are slow. ``sampled``: each row also has a sample rate."""
    rng = np.random.default_rng(seed)
    rows = []
    for m in range(minutes):
        ts = (START + timedelta(minutes=m)).isoformat()
        for pop in POPS:
            for device in DEVICES:
                bad = 0.08 if pop == "fra" else 0.02
                for status, share in ((200, 1 - bad), (500, bad * 0.7), (503, bad * 0.3)):
                    n = int(rng.poisson(12 * share))
                    if n == 0:
                        continue
                    slow = 300.0 if status != 200 and pop == "fra" else 0.0
                    row: dict[str, Any] = {
                        "timestamp": ts,
                        "pop": pop,
                        "device": device,
                        "status": status,
                        "ttfb_ms": float(np.round(rng.lognormal(4, 0.5) + slow, 3)),
                        "event_count": n,
                    }
                    if sampled:
                        row["samplerate"] = int(rng.choice([1, 1, 5, 20]))
                    rows.append(row)
    return rows


def expanded(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same events, one row each (the count field dropped)."""
    out = []
    for row in rows:
        one = {k: v for k, v in row.items() if k != "event_count"}
        out += [dict(one) for _ in range(int(row["event_count"]))]
    return out


def summary(result: Explanation) -> dict[tuple[Any, ...], tuple[float, float, float]]:
    """Each finding by what it points at: (selection share, baseline share, p-value)."""
    out = {}
    for f in result.findings:
        what = (
            f.field
            if f.kind != "combination"
            else tuple(sorted((c["field"], str(c["value"])) for c in f.conditions or []))
        )
        out[(f.kind, what, f.value)] = (f.selection_fraction or 0.0, f.baseline_fraction or 0.0, f.p_value)
    return out


def same_findings(a: Explanation, b: Explanation) -> None:
    sa, sb = summary(a), summary(b)
    assert sa.keys() == sb.keys()
    for key in sa:
        assert sa[key] == pytest.approx(sb[key], rel=1e-9, abs=1e-300), key
    assert [(f.kind, f.field, f.value) for f in a.findings] == [(f.kind, f.field, f.value) for f in b.findings]


@pytest.mark.parametrize("sampled", [False, True], ids=["counts", "counts-and-sample-rates"])
def test_count_rows_find_what_the_expanded_events_find(tmp_path: Path, sampled: bool) -> None:
    rows = rollup(4, sampled=sampled)
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "agg.jsonl", rows), "agg")
        rs.ingest(write_events(tmp_path / "all.jsonl", expanded(rows)), "all")
        agg = rs.explain("agg", select="status >= 500")
        full = rs.explain("all", select="status >= 500")
    assert agg.method["count_field"] == "event_count" and "count_field" not in full.method
    assert agg.fields["event_count"]["role"] == "skipped"
    first = next(f for f in agg.findings if f.kind == "dimension")
    assert (first.field, first.value) == ("pop", "fra")
    assert any(f.kind == "measure" and f.field == "ttfb_ms" for f in agg.findings)
    same_findings(agg, full)
    # the groups say how many events the rows stand for, and the tests see them all
    assert agg.selection["events"] < full.selection["events"]
    assert agg.selection["weighted_events"] == pytest.approx(
        full.selection.get("weighted_events", full.selection["events"])
    )
    effective = full.selection.get("effective_events", full.selection["events"])
    assert agg.selection["effective_events"] == pytest.approx(effective, rel=1e-6)


def test_few_count_rows_standing_for_many_events_are_significant(tmp_path: Path) -> None:
    """33 rows standing for thousands of viewers are thousands of observations, not 33
    (a sample rate of the same size would be: its events were not all observed)."""
    rows = []
    for i in range(33):
        bad = i < 11
        rows.append(
            {
                "timestamp": (START + timedelta(minutes=i)).isoformat(),
                "cdn": "edge-b" if bad else "edge-a",
                "stalled": "yes" if bad else "no",
                "event_count": 80 + i,
            }
        )
    weighted = [{**{k: v for k, v in r.items() if k != "event_count"}, "samplerate": r["event_count"]} for r in rows]
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "c.jsonl", rows), "counted")
        rs.ingest(write_events(tmp_path / "w.jsonl", weighted), "sampled")
        counted = rs.explain("counted", select='stalled = "yes"')
        sampled = rs.explain("sampled", select='stalled = "yes"')
    first = counted.findings[0]
    assert (first.field, first.value, first.selection_fraction) == ("cdn", "edge-b", 1.0)
    assert first.q_value < 1e-100
    assert counted.selection["effective_events"] == counted.selection["weighted_events"] > 900
    # as sample rates, the same weights are 11 observed events: far less sure
    same = next(f for f in sampled.findings if f.field == "cdn")
    assert same.q_value > 1e-10


def test_count_field_named_at_ingest_and_on_the_analysis(tmp_path: Path) -> None:
    rows = [{**{k: v for k, v in r.items() if k != "event_count"}, "hits": r["event_count"]} for r in rollup(5)]
    source = write_events(tmp_path / "agg.jsonl", rows)
    data = str(tmp_path / "data")
    runner = CliRunner()
    done = runner.invoke(main, ["ingest", str(source), "--data", data, "-d", "cdn", "--count-field", "hits"])
    assert done.exit_code == 0, done.output
    settings = json.loads((tmp_path / "data" / "cdn" / "dataset.json").read_text())
    assert settings["count_field"] == "hits"
    res = runner.invoke(main, ["explain", "cdn", "--data", data, "--select", "status >= 500", "--json"])
    assert res.exit_code == 0, res.output
    from_setting = json.loads(res.output)
    assert from_setting["method"]["count_field"] == "hits"
    with Rootsift(tmp_path / "data2") as rs:
        rs.ingest(source, "plain")  # no setting: named on the analysis instead
        named = rs.explain("plain", select="status >= 500", count_field="hits")
        unnamed = rs.explain("plain", select="status >= 500")
        assert named.method["count_field"] == "hits" and "count_field" not in unnamed.method
        assert named.selection["weighted_events"] == from_setting["selection"]["weighted_events"]
        with pytest.raises(RootsiftError, match="--count-field 'nope'"):
            rs.explain("plain", select="status >= 500", count_field="nope")
        with pytest.raises(RootsiftError, match="--count-field 'pop' holds varchar"):
            rs.explain("plain", select="status >= 500", count_field="pop")
    bad = runner.invoke(main, ["explain", "cdn", "--data", data, "--select", "status >= 500", "--count-field", "x"])
    assert bad.exit_code != 0 and "--count-field 'x'" in bad.output and "Traceback" not in bad.output


def test_fractional_and_zero_counts(tmp_path: Path) -> None:
    """Counts need not be whole (rollups of rates); a count of zero or below stands for nothing."""
    rows = rollup(6)
    halves = [{**r, "event_count": r["event_count"] / 2} for r in rows]
    halves += [{**rows[0], "event_count": 0.0, "pop": "ghost"}, {**rows[1], "event_count": -3.0, "pop": "ghost"}]
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "h.jsonl", halves), "halves")
        rs.ingest(write_events(tmp_path / "w.jsonl", rows), "whole")
        half = rs.explain("halves", select="status >= 500")
        whole = rs.explain("whole", select="status >= 500")
    assert half.selection["weighted_events"] == pytest.approx(whole.selection["weighted_events"] / 2)
    assert "ghost" not in {f.value for f in half.findings}
    shares = {(f.field, f.value): f.selection_fraction for f in whole.findings if f.kind == "dimension"}
    for f in half.findings:
        if f.kind == "dimension" and (f.field, f.value) in shares:
            assert f.selection_fraction == pytest.approx(shares[(f.field, f.value)])
