"""The consul scenario: ingests cleanly, and what rootsift reads back shows the write
latency step after the streaming change, the slow leaders and their growing freelists."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.store import query_rows
from rootsift import Rootsift, scenarios
from rootsift.scenarios.base import TRUTH_DIR, TRUTH_FILE

SPAN = {"start": "2021-10-01", "end": "2022-01-01"}
FREELIST = 'metric = "consul_raft_boltdb_freelistBytes"'


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).replace(tzinfo=None)


def _z(moment: datetime) -> str:
    return moment.isoformat() + "Z"


@pytest.fixture(scope="module", params=[1, 2, 3, 4, 5])
def run(request: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Rootsift, dict[str, Any]]:
    base = tmp_path_factory.mktemp(f"consul{request.param}")
    out = base / "consul"
    scenarios.generate("consul", out, seed=request.param)
    truth = json.loads((out / TRUTH_DIR / TRUTH_FILE).read_text())
    rs = Rootsift(base / "data")
    for summary in scenarios.ingest(rs, out):
        assert summary.rejects == 0, summary.first_rejects
    request.addfinalizer(rs.close)
    return rs, truth


def _write_p50(rs: Rootsift, start: datetime, end: datetime, leader: str | None = None) -> float:
    where = 'op != "get"' + (f' AND leader = "{leader}"' if leader else "")
    rows = query_rows(rs, "consul_kv_requests", "p50(duration_ms)", where=where, start=_z(start), end=_z(end))
    return float(rows[0][0])


def test_kv_write_p50_steps_from_hundreds_of_ms_to_seconds(run: tuple[Rootsift, dict[str, Any]]) -> None:
    rs, truth = run
    cp = _at(truth["changepoint"])
    change = _at(truth["culprit_change"]["timestamp"])
    assert timedelta(hours=4) < cp - change < timedelta(hours=30)
    before = _write_p50(rs, change - timedelta(hours=20), change)
    after = _write_p50(rs, cp, cp + timedelta(hours=4))
    assert before < 300 < 1500 < after
    # The leader's own summary says the same.
    q50 = 'metric = "consul_kvs_apply" AND quantile = "0.5"'
    pre = query_rows(
        rs, "consul_metrics", "p50(value)", where=q50, start=_z(change - timedelta(hours=20)), end=_z(change)
    )
    post = query_rows(rs, "consul_metrics", "p50(value)", where=q50, start=_z(cp), end=_z(cp + timedelta(hours=4)))
    assert pre[0][0] < 300 < 1500 < post[0][0]


def test_culprit_is_the_streaming_change_before_the_changepoint(run: tuple[Rootsift, dict[str, Any]]) -> None:
    rs, truth = run
    rows = query_rows(rs, "consul_changes", "count", breakdowns=["service", "change"], **SPAN)
    assert ["traffic-routing", "config_push", 1] in rows
    assert sum(r[2] for r in rows) >= 7  # the culprit among decoys
    cp = truth["changepoint"]
    culprit = query_rows(
        rs, "consul_changes", "count", where='service = "traffic-routing"', start=SPAN["start"], end=cp
    )
    assert culprit[0][0] == 1
    assert "streaming" in truth["culprit_change"]["description"]


def test_slow_leaders_have_growing_freelists_and_slower_writes(run: tuple[Rootsift, dict[str, Any]]) -> None:
    rs, truth = run
    slow, healthy = set(truth["slow_leader_hosts"]), set(truth["healthy_leader_hosts"])
    grow = query_rows(rs, "consul_metrics", "min(value)", "max(value)", breakdowns=["host"], where=FREELIST, **SPAN)
    growth = {h: (lo, hi) for h, lo, hi in grow}
    for host in slow:
        assert growth[host][1] > 5e6 and growth[host][1] > 2 * growth[host][0]
    for host in healthy:
        assert growth[host][1] < 5e5
    # Before streaming contends, writes are slow only while a slow host leads.
    cp = _at(truth["culprit_change"]["timestamp"])
    start = cp - timedelta(days=2)
    rows = query_rows(
        rs,
        "consul_kv_requests",
        "count",
        "p50(duration_ms)",
        breakdowns=["leader"],
        where='op != "get"',
        start=_z(start),
        end=_z(cp),
    )
    by_leader = {leader: p50 for leader, n, p50 in rows if n >= 200}
    led_slow = [by_leader[h] for h in slow if h in by_leader]
    led_healthy = [by_leader[h] for h in healthy if h in by_leader]
    assert led_slow and led_healthy
    assert min(led_slow) > 1.5 * max(led_healthy)
    assert truth["freelist_p50_correlation_before_change"] > 0.5


def test_only_the_leader_reports_apply_latency(run: tuple[Rootsift, dict[str, Any]]) -> None:
    rs, truth = run
    leaders = query_rows(
        rs, "consul_metrics", "count", breakdowns=["host"], where='metric = "consul_kvs_apply_count"', **SPAN
    )
    voters = set(truth["slow_leader_hosts"]) | set(truth["healthy_leader_hosts"])
    assert {h for h, _ in leaders} <= voters
    assert not set(truth["pathological_non_voters"]) & {h for h, _ in leaders}


def test_generation_records_where_it_wrote(tmp_path: Path) -> None:
    manifest = scenarios.generate("consul", tmp_path / "c", seed=7)
    assert len([s for s in manifest.sources if s.format == "prometheus"]) == 10
    assert all(s.options.get("host") for s in manifest.sources if s.format == "prometheus")
