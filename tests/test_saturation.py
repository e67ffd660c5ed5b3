"""Saturation on planted queues: hosts serving requests with a bounded worker pool (FIFO),
one of them slowed down for ten minutes. With a bound, its busy workers hold at the bound
and the extra time is waiting; without one, nothing holds and the extra time is service."""

from __future__ import annotations

import heapq
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.analysis.saturation import _plateau
from rootsift.cli import main
from test_explain import write_events

START = datetime(2024, 6, 1, tzinfo=UTC)
SLOW_FROM, SLOW_TO = 1500.0, 2100.0


def served(seed: int, workers: int | None, stamp: str = "start", minutes: int = 60) -> list[dict[str, Any]]:
    """Three hosts, 3 requests/s each, FIFO over ``workers`` (None: unbounded); h2's
    service is 80 times slower from ``SLOW_FROM`` to ``SLOW_TO``. ``stamp`` says whether
    an event's timestamp is its arrival or its completion."""
    rng = np.random.default_rng(seed)
    rows = []
    for host in ("h1", "h2", "h3"):
        n = int(minutes * 60 * 3)
        arrivals = np.sort(rng.random(n)) * minutes * 60
        free: list[float] = [0.0] * (workers or 0)
        for t in arrivals:
            service = float(rng.lognormal(np.log(0.05), 0.4))
            if host == "h2" and SLOW_FROM <= t < SLOW_TO:
                service *= 80
            begin = max(float(t), heapq.heappop(free)) if workers else float(t)
            end = begin + service
            if workers:
                heapq.heappush(free, end)
            when = float(t) if stamp == "start" else end
            rows.append(
                {
                    "timestamp": (START + timedelta(seconds=when)).isoformat(),
                    "host": host,
                    "endpoint": str(rng.choice(["/a", "/b", "/c"])),
                    "queue_wait_ms": round((begin - float(t)) * 1000, 3),
                    "service_ms": round(service * 1000, 3),
                    "duration_ms": round((end - float(t)) * 1000, 3),
                }
            )
    rows.sort(key=lambda r: r["timestamp"])
    return rows


def kinds(result: Any, kind: str) -> list[Any]:
    return [f for f in result.findings if f.kind == kind]


@pytest.mark.parametrize("seed", [1, 2])
def test_bounded_pool_holds_at_its_size(rs: Rootsift, tmp_path: Path, seed: int) -> None:
    rs.ingest(write_events(tmp_path / "r.jsonl", served(seed, workers=8)), "api")
    result = rs.investigate("api")
    assert result.anomaly is not None and result.anomaly.kind == "latency"
    held = kinds(result, "saturation")
    assert [f.value for f in held] == ["h2"]
    f = held[0]
    assert f.field == "host" and f.detail["duration"] == "service_ms"
    assert 7 <= f.detail["in_flight_ceiling"] <= 8
    assert f.detail["share_at_ceiling"] > 0.5
    assert f.detail["in_flight_mean"] > 2 * f.detail["in_flight_mean_outside"]
    split = kinds(result, "decomposition")[0]
    assert split.detail["dominated_by"] == "wait" and split.field == "queue_wait_ms"


def test_unbounded_service_rises_without_a_ceiling(rs: Rootsift, tmp_path: Path) -> None:
    """Without a bound the slow host's in-flight count rises (significantly) but holds at no
    level: it is reported with no ceiling, and the hosts beside it are not."""
    rs.ingest(write_events(tmp_path / "r.jsonl", served(3, workers=None)), "api")
    result = rs.investigate("api")
    assert result.anomaly is not None and result.anomaly.kind == "latency"
    held = kinds(result, "saturation")
    assert [f.value for f in held] == ["h2"]
    assert held[0].detail["in_flight_ceiling"] is None and held[0].q_value < 0.05
    from rootsift.ui.findings import sides, what

    assert what(held[0]) == f"host = h2: in flight rose ({held[0].detail['duration']})"
    region, outside = sides(held[0])
    assert region.startswith("mean ") and outside.startswith("mean ")
    split = kinds(result, "decomposition")[0]
    assert split.detail["dominated_by"] == "service" and split.field == "service_ms"


def test_timestamp_at_end(tmp_path: Path) -> None:
    """An access log stamps completions: placed from the end, the pool is found the same."""
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_events(tmp_path / "r.jsonl", served(4, workers=8, stamp="end")), "api")
    out = CliRunner().invoke(
        main, ["investigate", "api", "--timestamp-at", "end", "--json", "--data", str(tmp_path / "data")]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    held = [f for f in doc["findings"] if f["kind"] == "saturation"]
    assert [f["value"] for f in held] == ["h2"] and held[0]["timestamp_at"] == "end"
    assert 7 <= held[0]["in_flight_ceiling"] <= 8
    # the onset: the bad requests that started first, not those logged first
    assert doc["selection"]["time"] == "start: timestamp - duration_ms"
    first = min(datetime.fromisoformat(f["first_at_ceiling"].replace("Z", "+00:00")) for f in held)
    assert SLOW_FROM <= (first - START).total_seconds() < SLOW_TO


def test_bad_timestamp_at(tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["investigate", "api", "--timestamp-at", "middle", "--data", str(tmp_path)])
    assert out.exit_code == 2 and "--timestamp-at" in out.output


def test_plateau_rule() -> None:
    """Clipped counts pile up at the bound; Poisson counts and a ramp thin out at their top."""
    rng = np.random.default_rng(0)
    quiet = rng.poisson(3, 500).astype(float)
    clipped = np.minimum(rng.poisson(30, 500), 12).astype(float)
    assert _plateau(np.r_[quiet, clipped, quiet], 500, 1000) is not None
    for busy in (rng.poisson(30, 500).astype(float), np.linspace(3, 40, 500).round()):
        assert _plateau(np.r_[quiet, busy, quiet], 500, 1000) is None


def timed(seed: int, nested: bool) -> list[dict[str, Any]]:
    """An hour of requests, 4/s; from ``SLOW_FROM`` to ``SLOW_TO`` the slow part takes
    ten times longer. ``nested``: nginx's upstream timings, each measured from the same
    start (header ⊂ response ⊂ request time). Else additive parts: a pool wait, then the
    query (the wait stays below the query time, yet the two fit side by side)."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in np.sort(rng.random(3600 * 4)) * 3600:
        slow = 10.0 if SLOW_FROM <= t < SLOW_TO else 1.0
        if nested:
            header = float(rng.lognormal(np.log(30), 0.3)) * slow
            response = header + float(rng.lognormal(np.log(2), 0.3))
            parts = {"upstream_header_ms": header, "upstream_response_ms": response}
            total = response + float(rng.lognormal(np.log(1), 0.3))
        else:
            query = float(rng.lognormal(np.log(200), 0.2))
            wait = float(rng.lognormal(np.log(1), 0.3)) * (12.0 if slow > 1 else 1.0)
            parts = {"pool_wait_ms": wait, "db_time_ms": query}
            total = wait + query + float(rng.lognormal(np.log(1), 0.3))
        rows.append(
            {
                "timestamp": (START + timedelta(seconds=float(t))).isoformat(),
                "duration_ms": round(total, 3),
                **{k: round(v, 3) for k, v in parts.items()},
            }
        )
    return rows


def test_nested_timings_are_a_tree_not_a_sum(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(write_events(tmp_path / "r.jsonl", timed(5, nested=True)), "nginx")
    split = kinds(rs.investigate("nginx"), "decomposition")[0]
    parts = {p["field"]: p for p in split.detail["parts"]}
    assert split.detail["nested"] is True
    assert [p["field"] for p in split.detail["parts"]] == ["upstream_response_ms", "upstream_header_ms"]
    assert parts["upstream_response_ms"]["parent"] is None and parts["upstream_response_ms"]["depth"] == 0
    assert parts["upstream_header_ms"]["parent"] == "upstream_response_ms" and parts["upstream_header_ms"]["depth"] == 1
    # each carries nearly all of the rise: added up they would claim ~200 %; among siblings they add up
    assert all(p["share_of_rise"] > 0.9 for p in parts.values())
    top_level = sum(p["share_of_rise"] for p in parts.values() if p["parent"] is None)
    assert 0.9 < top_level <= 1.05 and 0.9 < parts["upstream_header_ms"]["share_of_parent"] <= 1.05
    from rootsift.ui.findings import what

    assert what(split).endswith(": upstream_response_ms 100 % (of which upstream_header_ms 100 %)")
    from rootsift.ui.report_html import render

    page = render(rs.investigate("nginx"), None, ["rootsift", "investigate", "nginx"])
    assert "└ upstream_header_ms" in page and "100 % of upstream_response_ms" in page


def test_additive_parts_stay_siblings(rs: Rootsift, tmp_path: Path) -> None:
    """The pool wait is below the query time on nearly every event, but the two fit side by
    side in the request: siblings, whose shares add up to the whole rise."""
    rs.ingest(write_events(tmp_path / "r.jsonl", timed(6, nested=False)), "api")
    split = kinds(rs.investigate("api"), "decomposition")[0]
    assert split.detail["nested"] is False and split.field == "pool_wait_ms"
    assert all(p["parent"] is None and p["depth"] == 0 for p in split.detail["parts"])
    assert 0.9 < sum(p["share_of_rise"] for p in split.detail["parts"]) < 1.1


def fleet(seed: int) -> list[dict[str, Any]]:
    """Four hosts, 3 requests/s each, no bound. From ``SLOW_FROM`` to ``SLOW_TO``: h2's
    service is 40 times slower, and h4 takes twice its traffic (fast). h3 is slow all along
    (20 times h1's service, its in-flight count high before, during and after)."""
    rng = np.random.default_rng(seed)
    rows = []
    for host in ("h1", "h2", "h3", "h4"):
        arrivals = list(rng.random(3600 * 3) * 3600)
        if host == "h4":
            arrivals += list(SLOW_FROM + rng.random(int((SLOW_TO - SLOW_FROM) * 3)) * (SLOW_TO - SLOW_FROM))
        for t in sorted(arrivals):
            service = float(rng.lognormal(np.log(0.05), 0.4)) * (20 if host == "h3" else 1)
            if host == "h2" and SLOW_FROM <= t < SLOW_TO:
                service *= 40
            rows.append(
                {
                    "timestamp": (START + timedelta(seconds=float(t))).isoformat(),
                    "host": host,
                    "duration_ms": round(service * 1000, 3),
                }
            )
    rows.sort(key=lambda r: r["timestamp"])
    return rows


@pytest.mark.parametrize("seed", [7, 8])
def test_only_the_host_that_rose_and_carries_the_slow_requests(rs: Rootsift, tmp_path: Path, seed: int) -> None:
    """h2 rose and carries the slow requests; h3 carries slow requests but held its level
    all along; h4 rose (it took traffic over) but its requests stayed fast."""
    rs.ingest(write_events(tmp_path / "r.jsonl", fleet(seed)), "api")
    result = rs.investigate("api")
    assert result.anomaly is not None
    assert abs((result.anomaly.start - START.replace(tzinfo=None)).total_seconds() - SLOW_FROM) < 60
    held = kinds(result, "saturation")
    assert [f.value for f in held] == ["h2"]
    assert held[0].detail["in_flight_mean"] > 5 * held[0].detail["in_flight_mean_outside"]


def test_rise_is_calibrated_on_dependent_counts() -> None:
    """A count that rises nowhere but whose samples depend on each other (an AR(1) with
    coefficient 0.95: a count now and a moment later share their events) is called a rise
    about as often as the level says, not half of the time as independent samples would."""
    from rootsift.analysis.saturation import _rise, effective_samples

    rng = np.random.default_rng(11)
    calls, naive = 0, 0
    for _ in range(200):
        x = np.zeros(1000)
        for i in range(1, 1000):
            x[i] = 0.95 * x[i - 1] + rng.normal()
        rise = _rise(x + 10, 300, 700)
        calls += rise is not None and rise.p_value < 0.05
        inside, outside = x[300:700], np.r_[x[:300], x[700:]]
        z = (inside.mean() - outside.mean()) / np.sqrt(inside.var() / 400 + outside.var() / 600)
        naive += z > 1.645
    assert calls <= 0.05 * 200 * 2 and naive > 0.25 * 200
    assert 10 < effective_samples(x) < 100  # 1000 samples worth about (1 - 0.95) / (1 + 0.95) of them
