"""investigate at any time scale: the time field's resolution bounds what is reported
(steady traffic stamped to the second or the minute is no stall), and a 2 s stall is
found in half an hour and in a day of MySQL slow log, with its first completer."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.analysis import timescale as ts
from rootsift.cli import main
from rootsift.scenarios.cascade_sim import Statement
from rootsift.scenarios.cascade_slowlog import write_slow_log
from test_explain import write_events

START = datetime(2024, 6, 1, tzinfo=UTC)
ORIGIN = datetime(2019, 4, 24, 14, 0, tzinfo=UTC)


def steady(seed: int, seconds: float, per_second: float, unit_s: float) -> list[dict[str, Any]]:
    """Poisson arrivals at a steady rate, stamped down to whole ``unit_s``."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.random(int(seconds * per_second))) * seconds
    return [
        {
            "timestamp": (START + timedelta(seconds=float(t // unit_s * unit_s))).isoformat(),
            "endpoint": str(rng.choice(["/a", "/b", "/c"])),
            "duration_ms": float(np.round(rng.lognormal(3, 0.5), 3)),
            "status": 200,
        }
        for t in times
    ]


def test_resolution_read_from_the_stamps(rs: Rootsift, tmp_path: Path) -> None:
    for name, unit in (("fine", 1e-6), ("ms", 0.001), ("sec", 1.0), ("min", 60.0)):
        rows = steady(1, 3600, 0.5, unit)
        rs.ingest(write_events(tmp_path / f"{name}.jsonl", rows), name)
        method = rs.investigate(name).as_dict()["method"]
        assert method["resolution_seconds"] == unit, name
        units = method["shift_bucket_seconds"] / unit
        assert units >= 1 and (units >= ts.WHOLE_BELOW or abs(units - round(units)) < 1e-6), name


def test_whole_second_stamps_are_no_stall(rs: Rootsift, tmp_path: Path) -> None:
    """Steady traffic stamped to the second: every 0.25 s bucket but one in four is empty,
    which read as a gap followed by a burst is a confident false stall."""
    rs.ingest(write_events(tmp_path / "s.jsonl", steady(2, 3600, 20, 1.0)), "nginx")
    result = rs.investigate("nginx")
    assert result.anomaly is None or result.anomaly.kind != "stall", result.anomaly
    assert result.method["resolution"] == "1 s" and result.method["stall_min_seconds"] == 3.0


def test_resolution_in_the_text(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(write_events(tmp_path / "s.jsonl", steady(6, 600, 5, 1.0)), "nginx")
    data = str(rs.data_dir)
    rs.close()
    text = CliRunner().invoke(main, ["investigate", "nginx", "--data", data])
    assert text.exit_code == 0 and "time resolution 1 s: no stall shorter than 3 s" in text.output
    out = json.loads(CliRunner().invoke(main, ["investigate", "nginx", "--data", data, "--json"]).stdout)
    assert out["method"]["resolution"] == "1 s" and out["method"]["time_field"] == "timestamp"


def test_whole_minute_aggregates_are_no_stall(rs: Rootsift, tmp_path: Path) -> None:
    """Per-minute rows (one per endpoint and host with any traffic) over a day."""
    rng = np.random.default_rng(3)
    rows = []
    for minute in range(24 * 60):
        for endpoint in ("/a", "/b", "/c", "/d"):
            for host in range(12):
                n = int(rng.poisson(3))
                if n:
                    stamp = (START + timedelta(minutes=minute)).isoformat()
                    rows.append({"timestamp": stamp, "endpoint": endpoint, "host": f"h{host}", "requests": n})
    rs.ingest(write_events(tmp_path / "m.jsonl", rows), "cdn")
    result = rs.investigate("cdn")
    assert result.anomaly is None or result.anomaly.kind != "stall", result.anomaly
    assert result.method["resolution_seconds"] == 60.0


def slow_log(path: Path, seconds: float, per_second: float, stall_at: float, hold: float = 2.0) -> None:
    """A MySQL 8 slow log (``long_query_time=0``) of steady statements; from ``stall_at``
    ``flush logs`` holds its lock for ``hold`` seconds: nothing completes, then it does,
    then everything that waited."""
    rng = np.random.default_rng(4)
    starts = np.sort(rng.random(int(rng.poisson(seconds * per_second)))) * seconds
    texts = ["select a from t where id = 1", "select b from u where k = 2", "update c set x = 1 where id = 3"]
    statements = []
    for i, start in enumerate(starts):
        end = float(start + rng.lognormal(-6, 0.5))
        if stall_at <= end and start < stall_at + hold:
            end = stall_at + hold + 0.0005 + float(rng.random()) * 0.02
        statements.append(Statement("app", "api1", "10.0.0.1", 10 + i % 20, "db", str(rng.choice(texts)), start, end))
    statements.append(Statement("rdsadmin", "localhost", "", 5, "mysql", "flush logs", stall_at, stall_at + hold))
    write_slow_log(path, statements, ORIGIN)


def check_stall(rs: Rootsift, stall_at: float) -> None:
    result = rs.investigate("db")
    a = result.anomaly
    assert a is not None and a.kind == "stall", a
    at = ORIGIN.replace(tzinfo=None) + timedelta(seconds=stall_at)
    assert at - timedelta(seconds=2) <= a.start <= at + timedelta(seconds=0.5)
    assert abs((a.end - (at + timedelta(seconds=2))).total_seconds()) <= 0.5
    first = next(f for f in result.findings if f.kind == "stall")
    assert first.value == "flush logs" and first.detail["only_in_stall"]


def test_two_second_stall_in_half_an_hour(rs: Rootsift, tmp_path: Path) -> None:
    """Three statements a second: under one per 0.25 s bucket, too sparse for one scale."""
    slow_log(tmp_path / "slow.log", 1800, 3, 900)
    rs.ingest(tmp_path / "slow.log", "db")
    check_stall(rs, 900)


@pytest.mark.slow
def test_two_second_stall_in_a_day(rs: Rootsift, tmp_path: Path) -> None:
    slow_log(tmp_path / "slow.log", 86400, 3, 50_000)
    rs.ingest(tmp_path / "slow.log", "db")
    check_stall(rs, 50_000)


def test_scan_at_every_scale() -> None:
    """Gaps of 1 s and of 40 min in per-0.25 s counts, each found at its own scale and
    refined to its bucket; a daily cycle alone is no stall."""
    rng = np.random.default_rng(5)
    day = 4 * 86400
    rate = 4 * (1 + 0.8 * np.sin(np.arange(day) * 2 * np.pi / day))  # per 0.25 s, a daily cycle
    counts = rng.poisson(rate).astype(float)
    assert ts.scan(counts, 0.25, 1e-6) is None or ts.scan(counts, 0.25, 1e-6)[3] > 0.05
    short = counts.copy()
    short[1000:1004] = 0
    short[1004] += 4 * rate[1000]
    hit = ts.scan(short, 0.25, 1e-6)
    assert hit is not None and hit[:2] == (1000, 1004) and hit[3] < 1e-6
    long = counts.copy()
    long[200_000:209_600] = 0  # 40 min
    long[209_600] += rate[200_000:209_600].sum()
    hit = ts.scan(long, 0.25, 1e-6)
    assert hit is not None and hit[5] > 60 and abs(hit[0] - 200_000) <= 4 and abs(hit[1] - 209_600) <= 4


def gauge(days: int, onset_day: float | None, drop: float) -> list[dict[str, Any]]:
    """Three hosts' available memory once a minute, a daily cycle of ±10 around 100 and
    noise; from ``onset_day`` it is ``drop`` lower."""
    rng = np.random.default_rng(7)
    minutes = np.arange(days * 1440)
    rows = []
    for host in ("a", "b", "c"):
        value = 100 + 10 * np.sin(2 * np.pi * minutes / 1440) + rng.normal(0, 2, len(minutes))
        if onset_day is not None:
            value -= drop * (minutes >= onset_day * 1440)
        for m, v in zip(minutes, value, strict=True):
            stamp = (START + timedelta(minutes=int(m))).isoformat()
            rows.append({"timestamp": stamp, "host": host, "available_gb": round(float(v), 3)})
    return rows


def test_a_daily_cycle_alone_is_no_anomaly(rs: Rootsift, tmp_path: Path) -> None:
    """The cycle puts all the day's high values in a few buckets: far more variation between
    buckets than independent events would show, which the scan discounts."""
    rs.ingest(write_events(tmp_path / "g.jsonl", gauge(20, None, 0)), "mem")
    assert rs.investigate("mem", measure="available_gb").anomaly is None


def test_a_falling_gauge_onset(rs: Rootsift, tmp_path: Path) -> None:
    """Available memory falls by 30 on day 14.3 and stays down: the region is the lower
    tail from the onset to the end (not the weeks before it, where the high values are)."""
    rs.ingest(write_events(tmp_path / "g.jsonl", gauge(20, 14.3, 30)), "mem")
    a = rs.investigate("mem", measure="available_gb").anomaly
    assert a is not None and a.kind == "latency" and a.detail["direction"] == "down"
    onset = START.replace(tzinfo=None) + timedelta(days=14.3)
    # within the daily cycle's quarter: the new level leaves the old range at its trough
    assert onset - timedelta(hours=2) <= a.start <= onset + timedelta(hours=6)
    assert a.end >= START.replace(tzinfo=None) + timedelta(days=19.5)  # to the last trough
    assert a.detail["median_after"] < a.detail["median_before"] - 20
