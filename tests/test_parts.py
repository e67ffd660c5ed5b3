"""The cause first, not a restatement of the selection (analysis/parts.py): when the
selection is "slow requests", parts of the same duration and fields derived from it
come after the dimension culprit; investigate's headline region is the one explained."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

from rootsift import Rootsift
from rootsift.analysis.explain import explain
from rootsift.ui.findings import investigation
from test_explain import write_events

START = datetime(2024, 6, 1, tzinfo=UTC)
PARTS = ("upstream_response_time_ms", "upstream_connect_time_ms")


def proxied(seed: int, minutes: int = 120, per_second: float = 4.0) -> list[dict[str, Any]]:
    """A proxy's access log: the request's time is the upstream's response time (itself
    holding the connect time) plus the proxy's own; ``cost_units`` is derived from the
    request's time. From minute 60 to 80 upstream ``match`` in zone ``z1`` is slow: its
    connects are retried (1 s, 3 s, 7 s) and its responses take 40 times longer."""
    rng = np.random.default_rng(seed)
    n = int(minutes * 60 * per_second)
    rows = []
    for t in np.sort(rng.random(n)) * minutes * 60:
        upstream = str(rng.choice(["match", "league", "store", "chat", "login"]))
        zone = str(rng.choice(["z1", "z2", "z3"]))
        connect = float(rng.choice([1.0, 2.0]))
        response = connect + float(rng.lognormal(3, 0.6))
        if 3600 <= t < 4800 and upstream == "match" and zone == "z1":
            connect = float(rng.choice([1001.0, 3001.0, 7001.0]))
            response = connect + 40 * float(rng.lognormal(3, 0.6))
        request = response + float(rng.exponential(2))
        rows.append(
            {
                "timestamp": (START + timedelta(seconds=float(t))).isoformat(),
                "upstream": upstream,
                "zone": zone,
                "host": f"{zone}-h{rng.integers(1, 3)}",
                "request_time_ms": round(request, 3),
                "upstream_response_time_ms": round(response, 3),
                "upstream_connect_time_ms": connect,
                "cost_units": round(3 * request + float(rng.normal(0, 1)), 3),
            }
        )
    return rows


def is_culprit(f: Any) -> bool:
    named = {(c["field"], c["value"]) for c in f.conditions or []} | {(f.field, f.value)}
    return ("upstream", "match") in named


def test_explain_puts_the_culprit_before_parts_of_the_measure(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(write_events(tmp_path / "p.jsonl", proxied(1)), "edge")
    result = rs.explain("edge", select="request_time_ms > 1000")
    assert is_culprit(result.findings[0])
    restating = [i for i, f in enumerate(result.findings) if f.field in (*PARTS, "cost_units")]
    others = [i for i, f in enumerate(result.findings) if f.field not in (*PARTS, "cost_units")]
    assert restating and others and max(others) < min(restating)  # every part after every other finding
    for f in result.findings:
        assert not any(c["field"] in (*PARTS, "cost_units") for c in f.conditions or [])
    assert {f.field for f in result.findings if f.detail.get("restates")} == {*PARTS, "cost_units"}
    assert result.fields["upstream_response_time_ms"]["restates"]["how"] == "part"
    assert result.fields["upstream_connect_time_ms"]["restates"]["how"] == "part"
    derived = result.fields["cost_units"]["restates"]
    assert derived["how"] == "derived" and derived["rank_correlation"] > 0.9
    assert "restates" not in result.fields["zone"]


def test_no_restatement_without_a_threshold_on_a_number(rs: Rootsift, tmp_path: Path) -> None:
    """A time box selects no measure: a part that moved is an explanation there."""
    rs.ingest(write_events(tmp_path / "p.jsonl", proxied(2)), "edge")
    start = START.replace(tzinfo=None)
    result = rs.explain("edge", select_from=start + timedelta(minutes=60), select_to=start + timedelta(minutes=80))
    assert not any(f.detail.get("restates") for f in result.findings)
    assert not any("restates" in info for info in result.fields.values())


def test_investigate_culprit_first_and_parts_in_the_decomposition(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(write_events(tmp_path / "p.jsonl", proxied(3)), "edge")
    result = rs.investigate("edge")
    assert result.anomaly is not None and result.anomaly.measure == "request_time_ms"
    assert is_culprit(result.findings[0])
    (split,) = [f for f in result.findings if f.kind == "decomposition"]
    assert {p["field"] for p in split.detail["parts"]} >= set(PARTS)
    explained = [f for f in result.findings if f.kind in ("dimension", "combination", "measure")]
    first_part = min(i for i, f in enumerate(explained) if f.field in PARTS)
    assert all(f.detail.get("restates") for f in explained[first_part:] if f.field in PARTS)
    assert is_culprit(explained[0]) and first_part > 0


def stalled(seed: int) -> list[dict[str, Any]]:
    """Ten minutes of statements at 20 a second; nothing completes from 300 s to 302 s,
    then everything waiting completes at once."""
    rng = np.random.default_rng(seed)
    rows, t = [], 0.0
    while t < 600:
        t += float(rng.exponential(0.05))
        end = 302.0 + float(rng.random()) * 0.05 if 300 <= t < 302 else t + 0.002
        rows.append(
            {
                "timestamp": (START + timedelta(seconds=t)).isoformat(),
                "end_time": (START + timedelta(seconds=end)).isoformat(),
                "statement": str(rng.choice(["select a", "select b", "update c"])),
            }
        )
    return rows


def when(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def test_the_headline_region_is_the_one_explained(rs: Rootsift, tmp_path: Path) -> None:
    """anomaly.from/to (JSON and the first printed line) bound the events explained: the
    selection lies inside the region, the baseline is everything outside it."""
    rs.ingest(write_events(tmp_path / "edge.jsonl", proxied(4)), "edge")
    rs.ingest(write_events(tmp_path / "db.jsonl", stalled(4)), "db")
    for dataset, kind in (("edge", "latency"), ("db", "stall")):
        result = rs.investigate(dataset)
        out = result.as_dict()
        a = out["anomaly"]
        assert a["kind"] == kind
        assert (out["regions"][0]["from"], out["regions"][0]["to"]) == (a["from"], a["to"])
        assert when(out["selection"]["from"]) == when(a["from"])
        assert when(a["from"]) < when(out["selection"]["to"]) <= when(a["to"])  # the onset, or the whole region
        assert out["baseline"]["where"] == f'timestamp < "{a["from"]}" or timestamp >= "{a["to"]}"'
        console = Console(file=StringIO(), width=200, no_color=True)
        investigation(console, result)
        first = console.file.getvalue().splitlines()[0]
        assert first.startswith(f"{kind} from {a['from']} to {a['to']}")


def test_a_quantity_s_value_is_no_cause(rs: Rootsift, tmp_path: Path) -> None:
    """Two cache-fill statements stampede in a window; both return 81 bytes, as a few
    other statements do. ``bytes_received = 81`` covers more of the window than either
    statement, but bytes are a quantity (compared as a distribution): the cause set names
    the statements."""
    rng = np.random.default_rng(5)
    rows = []
    for t in np.sort(rng.random(30000)) * 3600:
        statement = str(rng.choice(["select a", "select b", "update c", "insert d", "select e", "fill x", "fill y"]))
        if 1800 <= t < 1860 and rng.random() < 0.5:
            statement = str(rng.choice(["fill x", "fill y"]))
        size = 81 if statement in ("fill x", "fill y", "select e") else int(rng.integers(40, 400))
        rows.append(
            {
                "timestamp": (START + timedelta(seconds=float(t))).isoformat(),
                "statement": statement,
                "bytes_received": size,
                "query_time_ms": round(float(rng.lognormal(1, 0.5)), 3),
            }
        )
    rs.ingest(write_events(tmp_path / "q.jsonl", rows), "db")
    start = START.replace(tzinfo=None)
    result = rs.explain("db", select_from=start + timedelta(seconds=1800), select_to=start + timedelta(seconds=1860))
    assert result.fields["bytes_received"]["role"] == "both"
    named = {
        frozenset({(c["field"], c["value"]) for c in f.conditions or []} | {(f.field, f.value)})
        for f in result.cause_set
    }
    assert named == {frozenset({("statement", "fill x")}), frozenset({("statement", "fill y")})}
    assert result.findings[0].field == "statement"


def test_a_cause_never_gives_way_to_a_part_rarer_in_the_selection() -> None:
    """Noisy cells (a large relative noise) let a conjunction give way to a part of it;
    never to a part whose share of the selection is below its share of the baseline."""
    from rootsift.analysis.causes import Cells, Noise, _coarsen

    codes = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])  # (x, p) (x, q) (y, p) (y, q)
    cells = Cells(
        codes, np.array([5.0, 0, 0, 95]), np.array([100.0, 900, 500, 500]), ["f", "g"], [["x", "y"], ["p", "q"]], True
    )
    every = np.ones(4, dtype=bool)
    # x holds 5 of 100 selected and 1000 of 2000 baseline; p 5 and 600: both rarer in the
    # selection, though above the normal ratio 0.001
    assert _coarsen(cells, (0, 1), (0, 0), every, Noise(0.001, 1.0, 1e6), 3.84) == ((0, 1), (0, 0))
    # where a part is over-represented, the conjunction still gives way to it
    cells.sel[2] = 60.0
    assert _coarsen(cells, (0, 1), (0, 0), every, Noise(0.001, 1.0, 1e6), 3.84) == ((1,), (0,))


def test_a_status_the_slowness_produced_is_no_cause(rs: Rootsift, tmp_path: Path) -> None:
    """Clients give up on slow requests (499), wherever they are slow: the status covers
    more of the slow requests than the culprit does. Given as an outcome (investigate
    gives a latency region's status fields), it is reported but names no cause."""
    rows = proxied(6)
    rng = np.random.default_rng(6)
    for row in rows:
        t = (datetime.fromisoformat(row["timestamp"]) - START).total_seconds()
        if 3600 <= t < 4800 and row["request_time_ms"] < 1000 and rng.random() < 0.05:
            row["request_time_ms"] += 2000  # slow elsewhere too, now and then
        row["status"] = 499 if row["request_time_ms"] > 1000 and rng.random() < 0.95 else 200
    rs.ingest(write_events(tmp_path / "p.jsonl", rows), "edge")

    def causes(outcomes: tuple[str, ...]) -> list[set[str]]:
        result = explain(rs.backend, "edge", select="request_time_ms > 1000", outcomes=outcomes)
        return [{str(c["field"]) for c in f.conditions or [{"field": f.field}]} for f in result.cause_set]

    assert any("status" in named for named in causes(()))  # the status alone covers the most
    given = causes(("status",))
    assert given and given[0] == {"upstream", "zone"} and not any("status" in named for named in given)
