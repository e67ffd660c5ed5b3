"""The upgrade scenario: v2 leaner in memory and CPU, its write tail (not its median) slower,
one function growing in the CPU-profile diff, and reads finding data on one replica of three
only around the rolling upgrade, all as rootsift reads the telemetry back."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.store import query_rows
from rootsift import Rootsift, scenarios
from rootsift.scenarios.base import MANIFEST_FILE, TRUTH_DIR, TRUTH_FILE


def _leaf_counts(path: Path) -> Counter[str]:
    """Samples per leaf function of a folded-stacks file."""
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        counts[stack.rsplit(";", 1)[-1]] += int(n)
    return counts


def _rate(rows: list[list[Any]], seconds: float) -> float:
    """Cores from a per-host min/max of a CPU-seconds counter over a window without restarts."""
    return sum(hi - lo for _, lo, hi in rows) / seconds


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_upgrade_tail_regresses_memory_improves_and_reads_lose_replicas(seed: int, tmp_path: Path) -> None:
    out = tmp_path / "upgrade"
    manifest = scenarios.generate("upgrade", out, seed=seed)
    truth = json.loads((out / TRUTH_DIR / TRUTH_FILE).read_text())
    old, new = truth["versions"]["old"], truth["versions"]["new"]
    up, base, after = truth["upgrade_window"], truth["baseline_window"], truth["after_window"]
    assert json.loads((out / MANIFEST_FILE).read_text())["scenario"] == "upgrade"
    assert all(p in manifest.notes for p in truth["cpu_profiles"])
    assert sorted(s.path for s in manifest.sources if s.format == "folded") == sorted(truth["cpu_profiles"])
    span = {"start": base["start"], "end": after["end"]}
    with Rootsift(tmp_path / "data") as rs:
        for summary in scenarios.ingest(rs, out):
            assert summary.rejects == 0, summary.first_rejects
        lat = {
            v: (p50, p85, p99)
            for v, p50, p85, p99 in query_rows(
                rs,
                "upgrade_requests",
                "p50(duration_ms)",
                "p85(duration_ms)",
                "p99(duration_ms)",
                breakdowns=["version"],
                where='op = "write" and status = "ok"',
                **span,
            )
        }
        mem = {}
        cores = {}
        for name, window in (("old", base), ("new", after)):
            where_rss = 'metric = "process_resident_memory_bytes"'
            mem[name] = query_rows(rs, "upgrade_hosts", "avg(value)", where=where_rss, **window)[0][0]
            cpu = query_rows(
                rs,
                "upgrade_hosts",
                "min(value)",
                "max(value)",
                breakdowns=["host"],
                where='metric = "process_cpu_seconds_total"',
                # from 1 min in: a restarted process's counter starts over at the window's edge
                start=_shift(window["start"], 60),
                end=window["end"],
            )
            cores[name] = _rate(cpu, _seconds(_shift(window["start"], 60), window["end"]))
        lost = {
            n: count
            for n, count in query_rows(rs, "upgrade_read_quorum", "count", breakdowns=["replicas_with_data"], **span)
        }
        one_before = query_rows(rs, "upgrade_read_quorum", "count", where="replicas_with_data <= 1", **base)
        one_during = query_rows(rs, "upgrade_read_quorum", "count", where="replicas_with_data <= 1", **up)
        one_after = query_rows(rs, "upgrade_read_quorum", "count", where="replicas_with_data <= 1", **after)
        all_during = query_rows(rs, "upgrade_read_quorum", "count", **up)[0][0]
        all_after = query_rows(rs, "upgrade_read_quorum", "count", **after)[0][0]
        stored = query_rows(rs, "upgrade_profiles", "sum(samples)", breakdowns=["version", "function"], limit=1000)

    # write latency: the median is not worse on v2, the tail from p85 up is much worse
    assert lat[new][0] < 1.1 * lat[old][0]
    assert lat[new][1] > 1.25 * lat[old][1] and lat[new][2] > 1.5 * lat[old][2]
    assert truth["write_latency_regressed_from_quantile"] in ("p80", "p85", "p90")
    assert truth["write_latency_ratio_new_over_old"]["p50"] < 1.1
    # memory and CPU improve by roughly a fifth
    assert 0.7 < mem["new"] / mem["old"] < 0.9
    assert 0.65 < cores["new"] / cores["old"] < 0.9
    assert abs(mem["new"] / mem["old"] - truth["memory_ratio_new_over_old"]) < 0.05
    # the profile diff: the regressed function is the leaf that grew the most
    before, now = (_leaf_counts(out / p) for p in truth["cpu_profiles"])
    assert {(v, f): n for v, f, n in stored} == {
        **{(old, f): n for f, n in before.items()},
        **{(new, f): n for f, n in now.items()},
    }
    growth = {leaf: now[leaf] - before.get(leaf, 0) for leaf in now}
    assert max(growth, key=lambda k: growth[k]) == truth["regressed_function"]
    assert sum(now.values()) < 0.95 * sum(before.values())
    # one replica of three: never before the upgrade, mostly during it, rarer afterwards
    assert one_before == [[0]] or one_before == []
    assert lost.get(1, 0) + lost.get(0, 0) == truth["under_replicated_reads"]["at_most_one_replica"] > 30
    during, later = one_during[0][0], one_after[0][0]
    assert during / all_during > 2 * later / all_after


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _shift(stamp: str, seconds: float) -> str:
    return (_time(stamp) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _seconds(start: str, end: str) -> float:
    return (_time(end) - _time(start)).total_seconds()
