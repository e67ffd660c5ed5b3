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
from rootsift.analysis import anomaly as an
from rootsift.analysis import seasonal
from rootsift.analysis import shifts as sh
from rootsift.analysis import sql as q
from rootsift.analysis import timescale as ts
from rootsift.analysis.frame import Frame
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


def shifted_latency(seed: int, span: timedelta, events: int, at: float, length: timedelta) -> list[dict[str, Any]]:
    """``events`` requests over ``span`` at a steady rate, log-normal durations; those
    starting in [``at`` × span, + ``length``) take 8 times longer."""
    rng = np.random.default_rng(seed)
    seconds = span.total_seconds()
    times = np.sort(rng.random(events)) * seconds
    lo, hi = at * seconds, at * seconds + length.total_seconds()
    duration = rng.lognormal(3, 0.4, events) * np.where((times >= lo) & (times < hi), 8.0, 1.0)
    return [
        {"timestamp": (START + timedelta(seconds=float(t))).isoformat(), "duration_ms": round(float(d), 3)}
        for t, d in zip(times, duration, strict=True)
    ]


@pytest.mark.parametrize(
    ("span", "events", "length"),
    [
        (timedelta(minutes=30), 12_000, timedelta(seconds=20)),
        (timedelta(days=1), 20_000, timedelta(minutes=10)),
        (timedelta(days=60), 20_000, timedelta(days=2)),
    ],
    ids=["20s-in-30min", "10min-in-a-day", "2days-in-60days"],
)
def test_a_shift_at_its_own_scale(
    rs: Rootsift, tmp_path: Path, span: timedelta, events: int, length: timedelta
) -> None:
    """A latency shift of 1/90 to 1/30 of the range, starting between two of the coarsest
    scale's buckets: found with both edges within 5 % of its own length (a couple of
    buckets of the scale it spans), which 400 buckets across the range cannot give."""
    at = 0.4037
    rs.ingest(write_events(tmp_path / "r.jsonl", shifted_latency(11, span, events, at, length)), "api")
    result = rs.investigate("api")
    a = result.anomaly
    assert a is not None and a.kind == "latency" and a.detail["direction"] == "up", a
    onset = START.replace(tzinfo=None) + at * span
    slack = length * 0.05
    assert abs(a.start - onset) <= slack, (a.start, onset)
    assert abs(a.end - (onset + length)) <= slack, (a.end, onset + length)
    assert a.detail["bucket_seconds"] <= length.total_seconds() / 4  # found at a scale finer than itself
    assert result.method["shift_fine_bucket_seconds"] < result.method["shift_bucket_seconds"]


def test_shift_scan_picks_the_scale_of_the_shift() -> None:
    """On counts alone: a shift of 12 fine buckets in 6,400 is found at a fine scale with
    its exact edges; one of 2,000 at the coarsest, its edges placed to the fine bucket."""
    rng = np.random.default_rng(12)
    events = rng.poisson(20, 6400).astype(float)
    short = rng.binomial(events.astype(int), np.where((np.arange(6400) >= 3001) & (np.arange(6400) < 3013), 0.5, 0.01))
    hit = sh.scan(events, short.astype(float), timedelta(seconds=1))
    assert hit is not None and (hit.first, hit.end) == (3001, 3013) and hit.scale <= timedelta(seconds=4)
    long = rng.binomial(events.astype(int), np.where((np.arange(6400) >= 1003) & (np.arange(6400) < 3003), 0.05, 0.01))
    hit = sh.scan(events, long.astype(float), timedelta(seconds=1))
    assert (
        hit is not None and abs(hit.first - 1003) <= 2 and abs(hit.end - 3003) <= 2 and hit.scale.total_seconds() == 16
    )
    quiet = rng.binomial(events.astype(int), 0.01)
    hit = sh.scan(events, quiet.astype(float), timedelta(seconds=1))
    assert hit is None or hit.p_value > 0.05


def cyclic_gauge(seed: int, days: int, step_day: float | None, drop: float) -> list[dict[str, Any]]:
    """A gauge every 5 minutes: a daily cycle of ±10 around 100 (peaking at a different hour
    per seed) and noise; from ``step_day`` on it is ``drop`` lower."""
    rng = np.random.default_rng(seed)
    minutes = np.arange(0, days * 1440, 5)
    value = 100 + 10 * np.sin(2 * np.pi * minutes / 1440 + rng.random() * 2 * np.pi) + rng.normal(0, 2, len(minutes))
    if step_day is not None:
        value -= drop * (minutes >= step_day * 1440)
    return [
        {"timestamp": (START + timedelta(minutes=int(m))).isoformat(), "free_gb": round(float(v), 3)}
        for m, v in zip(minutes, value, strict=True)
    ]


def test_a_step_under_a_daily_cycle_is_found_at_its_onset(rs: Rootsift, tmp_path: Path) -> None:
    """60 days of a cyclic gauge that steps down by less than the cycle's swing on day 40:
    each value is read less its hour of the day's median, and the region starts within a
    few hours of day 40 (read as it is, the lower tail is every day's trough)."""
    rs.ingest(write_events(tmp_path / "g.jsonl", cyclic_gauge(21, 60, 40.0, 8.0)), "mem")
    result = rs.investigate("mem", measure="free_gb")
    a = result.anomaly
    assert a is not None and a.kind == "latency" and a.detail["direction"] == "down", a
    assert result.method["deseasonalised"]["period"] == "1 day"
    onset = START.replace(tzinfo=None) + timedelta(days=40)
    assert abs(a.start - onset) <= timedelta(hours=3), a.start
    assert a.end >= START.replace(tzinfo=None) + timedelta(days=59.5)


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_a_daily_cycle_over_60_days_is_no_anomaly(rs: Rootsift, tmp_path: Path, seed: int) -> None:
    rs.ingest(write_events(tmp_path / "g.jsonl", cyclic_gauge(seed, 60, None, 0.0)), "mem")
    result = rs.investigate("mem", measure="free_gb")
    assert result.anomaly is None, result.anomaly


def test_hourly_medians_of_a_rollup_are_those_of_its_events(rs: Rootsift, tmp_path: Path) -> None:
    """A row with a count is that many events for the daily cycle taken out too: the
    rollup's hour-of-day medians are the expanded events' (lower medians)."""
    rng = np.random.default_rng(41)
    rolled, expanded = [], []
    for hour in range(4 * 24):
        for value in np.round(rng.normal(100 + 10 * np.sin(hour / 24 * 2 * np.pi), 3, 5), 1):
            n = int(rng.integers(1, 6))
            stamp = (START + timedelta(hours=hour, minutes=int(rng.integers(0, 60)))).isoformat()
            rolled.append({"timestamp": stamp, "load": float(value), "event_count": n})
            expanded += [{"timestamp": stamp, "load": float(value)}] * n
    rs.ingest(write_events(tmp_path / "r.jsonl", rolled), "rolled")
    rs.ingest(write_events(tmp_path / "e.jsonl", expanded), "expanded")
    frames = [Frame(rs.backend, name, None, None) for name in ("rolled", "expanded")]
    assert frames[0].count == "event_count" and frames[1].count is None
    by_hour: dict[int, list[float]] = {}
    for row in expanded:
        by_hour.setdefault(datetime.fromisoformat(row["timestamp"]).hour, []).append(row["load"])
    lower = [sorted(by_hour[h])[(len(by_hour[h]) - 1) // 2] for h in range(24)]
    assert seasonal.hourly_medians(frames[0], "load") == seasonal.hourly_medians(frames[1], "load") == lower


@pytest.mark.parametrize("seed", [51, 52])
def test_the_lines_from_the_tails_are_the_exact_quantiles(rs: Rootsift, tmp_path: Path, seed: int) -> None:
    """The shift scan's lines (p95… p0.1) read from the two tails the sample points at are
    ``quantile_cont`` over every value, ties and all (to the last bit: the interpolation
    between the same two order statistics), and mark the same events bad."""
    rng = np.random.default_rng(seed)
    rows = [
        {
            "timestamp": (START + timedelta(seconds=i * 0.05)).isoformat(),
            "duration_ms": float(np.round(rng.lognormal(3, 1), 1 if i % 2 else 3)),
        }
        for i in range(200_000)
    ]
    rs.ingest(write_events(tmp_path / "r.jsonl", rows), "api")
    frame = Frame(rs.backend, "api", None, None)
    qs = [*an.BAD_QUANTILES, *an.LOW_QUANTILES]
    condition, params = frame.range_where()
    where = condition.sql(dialect="duckdb")  # the oracle writes DuckDB text by hand
    exact = rs.backend.execute_sql(
        f"SELECT quantile_cont(duration_ms, {qs}) FROM {frame.relation_sql} WHERE {where}", params
    ).rows[0][0]
    # the same order statistics; the interpolation between two of them may differ in the last bit
    assert an.tail_quantiles(frame, q.col("duration_ms"), qs) == pytest.approx(exact, rel=1e-12, abs=0)
    upper, lower = an.bad_thresholds(frame, "duration_ms")
    assert upper == pytest.approx(sorted(set(exact[:3])), rel=1e-12, abs=0)
    assert lower == pytest.approx(sorted(set(exact[3:])), rel=1e-12, abs=0)
    values = np.array([r["duration_ms"] for r in rows])
    for line, other in zip([*upper, *lower], [*sorted(set(exact[:3])), *sorted(set(exact[3:]))], strict=True):
        assert (values > line).sum() == (values > other).sum()  # the same events are bad
