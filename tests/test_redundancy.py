"""A finding implied by a higher-ranked one (it adds nothing given it) is listed after the
rest, marked ``implied_by``, never dropped; a proxy gives way to the value it stands for;
independent culprits both stay (analysis/redundancy.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.analysis import stats
from rootsift.analysis.explain import Explanation
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame
from rootsift.analysis.redundancy import demote_implied
from rootsift.analysis.singles import Scale
from rootsift.cli import main

START = datetime(2024, 5, 1, tzinfo=UTC)
SERVICE_LIB = {"s0": "apache", "s1": "apache", "s2": "okhttp", "s3": "okhttp", "s4": "grpc", "s5": "grpc"}


def requests(seed: int, n: int, slow: Callable[[dict[str, Any]], float]) -> list[dict[str, Any]]:
    """Requests over an hour: a host (h0-h9 mostly in zone a, h10-h19 in b, h20-h29 in c;
    one request in 20 lands in another zone: the host is not strictly nested), a service
    and the client library it uses; slow with probability ``slow(row)``."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        host = int(rng.integers(0, 30))
        zone = "abc"[host // 10] if rng.random() < 0.95 else str(rng.choice(list("abc")))
        service = str(rng.choice(list(SERVICE_LIB)))
        row: dict[str, Any] = {
            "timestamp": (START + timedelta(seconds=float(i) * 3600 / n)).isoformat(),
            "zone": zone,
            "host": f"h{host}",
            "service": service,
            "client_lib": SERVICE_LIB[service],
            "shard": f"sh{rng.integers(0, 4)}",
        }
        row["slow"] = "yes" if rng.random() < slow(row) else "no"
        rows.append(row)
    return rows


def explained(tmp_path: Path, rows: list[dict[str, Any]]) -> Explanation:
    (tmp_path / "e.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(tmp_path / "e.jsonl", "api")
        return rs.explain("api", select='slow = "yes"')


def values(result: Explanation) -> list[tuple[Any, Any]]:
    return [(f.field, f.value) for f in result.findings if f.kind == "dimension"]


def test_a_host_inside_the_slow_zone_is_implied_by_the_zone(tmp_path: Path) -> None:
    result = explained(tmp_path, requests(1, 30000, lambda r: 0.3 if r["zone"] == "a" else 0.03))
    first = result.findings[0]
    assert (first.field, first.value) == ("zone", "a")
    hosts = [f for f in result.findings if f.field == "host" and f.effect > 0]
    assert hosts, "the zone's hosts are still listed"
    assert all(f.detail.get("implied_by") == "zone = a" for f in hosts), [(f.value, f.detail) for f in hosts]
    assert all(0.05 <= f.detail["conditional_p"] <= 1 for f in hosts)
    # after every finding that is not implied, nested or a restatement
    order = [("implied_by" in f.detail) for f in result.findings]
    assert order == sorted(order)
    shown = result.as_dict()["findings"]
    assert any(f.get("implied_by") == "zone = a" for f in shown)
    # the cause set is still the first findings, and names no implied value
    assert result.findings[: len(result.cause_set)] == result.cause_set
    assert not any("cause_set" in f.detail for f in hosts)


def test_two_independent_culprits_both_stay(tmp_path: Path) -> None:
    rows = requests(2, 30000, lambda r: 0.3 if r["zone"] == "a" or r["host"] == "h15" else 0.03)
    result = explained(tmp_path, rows)
    found = {(f.field, f.value): f for f in result.findings if f.kind == "dimension"}
    for culprit in (("zone", "a"), ("host", "h15")):
        assert culprit in found and "implied_by" not in found[culprit].detail
    assert {values(result)[0], values(result)[1]} == {("zone", "a"), ("host", "h15")} or any(
        f.kind == "combination" for f in result.findings[:2]
    )
    implied = [f for f in result.findings if "implied_by" in f.detail]
    assert all(f.field == "host" and f.value != "h15" for f in implied)


def test_a_proxy_gives_way_to_the_value_it_stands_for(tmp_path: Path) -> None:
    """client_lib = apache is used by the slow service s0 and by s1, which is not slow:
    given the service it adds nothing, while the service adds given the library. Ranked
    first (as a noisy score may), it gives way."""
    rows = requests(3, 30000, lambda r: 0.3 if r["service"] == "s0" else 0.03)
    (tmp_path / "e.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(tmp_path / "e.jsonl", "api")
        result = rs.explain("api", select='slow = "yes"')
        found = {(f.field, f.value): f for f in result.findings if f.kind == "dimension"}
        culprit, proxy = found[("service", "s0")], found[("client_lib", "apache")]
        # as explain ranks it: the culprit first, the proxy implied by it
        assert values(result)[0] == ("service", "s0")
        assert proxy.detail["implied_by"] == "service = s0"
        # and when the proxy is ranked above it
        for f in (culprit, proxy):
            f.detail.pop("implied_by", None)
        frame = Frame(rs.backend, "api", None, None, None, 'slow = "yes"')
        sel = float(result.selection["events"])
        base = float(result.baseline["events"])
        other = Finding("measure", 0.1, 0.001, field="latency")
        listed = [proxy, other, culprit]
        shown = demote_implied(
            frame,
            listed,
            Scale(sel, base, sel, base),
            0.05,
            eligible=lambda f: f.kind == "dimension",
            tail=lambda f: False,
        )
    assert shown == [culprit, other, proxy]
    assert proxy.detail["implied_by"] == "service = s0" and "implied_by" not in culprit.detail


def test_the_stratified_test_is_one_sided_and_says_nothing_without_strata() -> None:
    # a value twice as common in the selection in both strata, and as common
    assert stats.stratified_share_test([40, 40], [100, 100], [1000, 1000], [240, 240]) < 1e-6
    assert stats.stratified_share_test([10, 10], [100, 100], [1000, 1000], [110, 110]) > 0.4
    # rarer in the selection: one-sided, no evidence of more
    assert stats.stratified_share_test([2, 2], [100, 100], [1000, 1000], [202, 202]) > 0.99
    # every event holds it in each stratum: nothing to tell
    assert stats.stratified_share_test([100], [100], [1000], [1100]) == 1.0


def test_the_terminal_and_json_say_what_implies_a_finding(tmp_path: Path) -> None:
    rows = requests(4, 20000, lambda r: 0.3 if r["zone"] == "a" else 0.03)
    (tmp_path / "e.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(tmp_path / "e.jsonl", "api")
    args = ["explain", "api", "--select", 'slow = "yes"', "--data", str(data)]
    shown = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    implied = [f for f in shown["findings"] if "implied_by" in f]
    assert implied and all(f["implied_by"] == "zone = a" and f["field"] == "host" for f in implied)
    assert "implied" in shown["method"]
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0 and "(implied by zone = a)" in text.output
