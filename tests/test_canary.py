"""canary: the group-sequential levels against published constants, replays of a watch,
a store another process is writing, and a live watch while an ingest runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sps

from rootsift import Rootsift
from rootsift.analysis.canary import levels, schedule, watch
from rootsift.cli import main
from rootsift.errors import StoreLockedError, UsageError
from test_explain import write_events

START = datetime(2024, 3, 1, tzinfo=UTC)


def stream(
    seed: int, minutes: float, tail: float, start: datetime = START, per_second: int = 10
) -> list[dict[str, Any]]:
    """``per_second`` requests a second for ``minutes``, alternately v1 and v2; v2's
    requests above the p85 take ``tail`` times longer."""
    rng = np.random.default_rng(seed)
    n = round(minutes * 60 * per_second)
    d = rng.lognormal(3, 0.5, n)
    line = float(np.exp(3 + 0.5 * 1.0364))
    version = np.where(np.arange(n) % 2, "v1", "v2")
    d = np.where((version == "v2") & (d > line), d * tail, d)
    return [
        {
            "timestamp": (start + timedelta(seconds=i / per_second)).isoformat(),
            "version": str(version[i]),
            "duration_ms": round(float(d[i]), 3),
        }
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("looks", "pocock", "obrien_fleming"),
    # Jennison & Turnbull (2000), tables 2.1 and 2.3: two-sided alpha 0.05
    [(2, 2.178, 1.977), (5, 2.413, 2.040), (10, 2.555, 2.087), (20, 2.672, 2.121)],
)
def test_levels_match_the_published_boundaries(looks: int, pocock: float, obrien_fleming: float) -> None:
    z = sps.norm.isf(np.array(levels(looks, 0.05, "pocock")) / 2)
    assert np.allclose(z, pocock, atol=0.015)
    z_of = sps.norm.isf(np.array(levels(looks, 0.05, "obrien-fleming")) / 2)
    assert z_of[-1] == pytest.approx(obrien_fleming, abs=0.015)
    assert z_of[0] == pytest.approx(obrien_fleming * np.sqrt(looks), abs=0.05)
    assert levels(looks, 0.05, "bonferroni") == [0.05 / looks] * looks
    assert levels(1, 0.05) == [0.05]


def test_levels_hold_alpha_over_the_looks() -> None:
    """Independently of the boundary's own simulation: z-scores of a growing sample
    (new seed, exact cumulative means) cross a look's level at 5 % of watches, where
    testing every look at 5 % crosses at far more."""
    rng = np.random.default_rng(7)
    looks, paths = 10, 20000
    z = np.cumsum(rng.standard_normal((paths, looks)), axis=1) / np.sqrt(np.arange(1, looks + 1))
    p = 2 * sps.norm.sf(np.abs(z))
    crossed = (p < np.array(levels(looks, 0.05))).any(axis=1).mean()
    naive = (p < 0.05).any(axis=1).mean()
    assert 0.04 < crossed < 0.06 and naive > 0.15


def test_replay_stops_at_the_first_certain_regression(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "bad.jsonl", stream(1, 30, tail=1.5)), "bad")
        rs.ingest(write_events(tmp_path / "aa.jsonl", stream(2, 30, tail=1.0)), "aa")
    args = ["--baseline", 'version = "v1"', "--canary", 'version = "v2"', "--from", START.isoformat()]
    args += ["--every", "3m", "--for", "30m", "--replay", "--metrics", "p50(duration_ms),p99(duration_ms)"]
    args += ["--data", str(data), "--json"]
    bad = CliRunner().invoke(main, ["canary", "bad", *args])
    assert bad.exit_code == 1, bad.output
    seen = [json.loads(line) for line in bad.stdout.splitlines()]
    assert seen[-1]["verdict"] == "regression" and len(seen) < 10
    assert [s["upto"] for s in seen] == [
        (START + timedelta(minutes=3 * k)).isoformat().replace("+00:00", "Z") for k in range(1, len(seen) + 1)
    ]
    events = [s["b"]["events"] for s in seen]
    assert events == sorted(events) and events[0] == 3 * 60 * 5  # look k sees k intervals of v2
    calm = CliRunner().invoke(main, ["canary", "aa", *args])
    assert calm.exit_code == 0, calm.output
    assert [json.loads(line)["look"] for line in calm.stdout.splitlines()] == list(range(1, 11))
    no_start = CliRunner().invoke(main, ["canary", "aa", "--baseline", "a", "--canary", "b", "--replay"])
    assert no_start.exit_code == 2 and "--from" in no_start.output


def test_one_schedule_for_live_and_replay() -> None:
    """Look k at from + k × every, the last at from + for: the first look covers one
    interval, the last the whole watch, and a --for that is not a multiple of --every
    ends on time."""
    minute = timedelta(minutes=1)
    times = schedule(START, minute, 30 * minute)
    assert len(times) == 30 and times[0] == START + minute and times[-1] == START + 30 * minute
    assert schedule(START, 4 * minute, 10 * minute) == [START + 4 * minute, START + 8 * minute, START + 10 * minute]
    assert schedule(START, minute, minute) == [START + minute]
    with pytest.raises(UsageError, match="--every"):
        schedule(START, 2 * minute, minute)


class Clock:
    """A fake wall clock for ``watch``: ``sleep`` moves it on."""

    def __init__(self, at: datetime) -> None:
        self.at = at
        self.slept: list[float] = []

    def now(self) -> datetime:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += timedelta(seconds=seconds)


def test_live_looks_wait_for_their_time_and_see_up_to_it() -> None:
    """Live, from now: the first look waits one whole interval (it covered 0 s before),
    each look compares the events up to its time, and the last is at from + for (the
    watch ended one interval early before). A watch from the past catches up at once,
    on the same schedule as a replay."""
    seen: list[tuple[datetime, datetime]] = []
    clock = Clock(START)

    def run(level: float, upto: datetime) -> Any:
        seen.append((clock.now(), upto))
        return type("Result", (), {"verdict": "no change"})()

    every = timedelta(seconds=10)
    looks = list(watch(run, start=START, every=every, total=3 * every, alpha=0.05, sleep=clock.sleep, now=clock.now))
    expected = [START + k * every for k in (1, 2, 3)]
    assert seen == [(t, t) for t in expected] and [lk.upto for lk in looks] == expected
    assert clock.slept == [10.0, 10.0, 10.0]
    late = Clock(START + 5 * every)  # --from two intervals before the watch ended
    seen.clear()
    list(watch(run, start=START, every=every, total=3 * every, alpha=0.05, sleep=late.sleep, now=late.now))
    assert [upto for _, upto in seen] == expected and late.slept == [0.0, 0.0, 0.0]
    replayed = list(watch(run, start=START, every=every, total=3 * every, alpha=0.05, replay=True))
    assert [lk.upto for lk in replayed] == expected


def test_a_busy_store_is_retried_then_skipped() -> None:
    """A look retries while another process writes the store; one that stays busy for
    the whole interval after its time is skipped (its alpha unspent), and the watch goes on."""
    clock = Clock(START)

    def run(level: float, upto: datetime) -> Any:
        t = (clock.now() - START).total_seconds()
        if t < 12 or 20 <= t < 30.5:  # the writer holds the store
            raise StoreLockedError("the store is open for writing by another process")
        return type("Result", (), {"verdict": "no change"})()

    every = timedelta(seconds=10)
    looks = list(watch(run, start=START, every=every, total=3 * every, alpha=0.05, sleep=clock.sleep, now=clock.now))
    assert [lk.skipped is None for lk in looks] == [True, False, True]
    assert "busy" in str(looks[1].skipped) and looks[1].result is None
    assert [lk.waited for lk in looks] == [2, 11, 1]  # at 10, 11; 20 to 30; 30
    assert clock.now() == START + timedelta(
        seconds=31
    )  # look 1 read at 12 s; look 2 gave up at 30 s; look 3 read at 31 s


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
def test_live_watch_while_an_ingest_writes(tmp_path: Path) -> None:
    """A live canary (its own process) on the one schedule: look k at --from + k × --every,
    seeing the events up to its time. Calm traffic in the first interval; then a writer
    holds the store across look 2 (it must wait and then read, not fail) and adds a
    regressed canary; then other ingest processes add an interval at a time. It exits 1
    once the regression is certain."""
    data = tmp_path / "data"
    every = timedelta(seconds=5)
    began = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=5)  # time for the gate to start
    rootsift = [sys.executable, "-m", "rootsift"]
    env = os.environ | {"PYTHONUNBUFFERED": "1"}

    def interval(seed: int, k: int, tail: float) -> list[dict[str, Any]]:  # the k-th interval's traffic
        return stream(seed, every.total_seconds() / 60, tail, start=began + k * every, per_second=200)

    with Rootsift(data) as rs:
        rs.ingest(write_events(tmp_path / "calm.jsonl", interval(3, 0, tail=1.0)), "api")
    command = [*rootsift, "canary", "api", "--baseline", 'version = "v1"', "--canary", 'version = "v2"']
    command += ["--from", began.isoformat(), "--every", "5s", "--for", "50s", "--metrics", "p95(duration_ms)"]
    looks: list[dict[str, Any]] = []
    with subprocess.Popen(
        [*command, "--data", str(data), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env | {"ROOTSIFT_LOCK_WAIT": "1"},  # give up on the writer within the look, and retry
    ) as gate:
        assert gate.stdout is not None and gate.stderr is not None
        try:
            looks.append(json.loads(gate.stdout.readline()))  # the calm first look
            with Rootsift(data) as writer:  # holds the store for writing across look 2
                writer.ingest(write_events(tmp_path / "b.jsonl", interval(10, 1, tail=2.0)), "api")
                time.sleep(max(0.0, (began + 2 * every - datetime.now(UTC)).total_seconds() + 1.0))
            for k in range(8):  # then a regressed interval at a time, by other processes, until the gate closes
                line = gate.stdout.readline()
                if not line:
                    break
                looks.append(json.loads(line))
                if looks[-1].get("verdict") == "regression":
                    break
                batch = write_events(tmp_path / f"b{k}.jsonl", interval(11 + k, len(looks), tail=2.0))
                subprocess.run([*rootsift, "ingest", str(batch), "--dataset", "api", "--data", str(data)], env=env)
            gate.wait(timeout=90)
        finally:
            if gate.poll() is None:
                gate.kill()
        assert gate.returncode == 1, gate.stderr.read()
    stamp = lambda k: (began + k * every).isoformat().replace("+00:00", "Z")  # noqa: E731
    assert [lk["upto"] for lk in looks] == [stamp(k) for k in range(1, len(looks) + 1)]
    assert looks[0]["of"] == 10 and looks[0]["verdict"] != "regression"
    assert looks[0]["b"]["events"] == 500  # the first look covers the first interval, not 0 s
    assert looks[1].get("busy_attempts", 0) >= 1  # it met the writer, waited, and read
    assert looks[1]["b"]["events"] == 1000  # the writer's interval, committed before it read
    assert looks[-1]["verdict"] == "regression" and looks[-1]["b"]["events"] > 500


def test_an_ingest_waits_for_a_reader(tmp_path: Path) -> None:
    """A canary's look holds the store for reading for a moment: an ingest that starts
    then waits for it instead of failing; past ``ROOTSIFT_LOCK_WAIT`` it fails, saying why."""
    data = tmp_path / "data"
    first = write_events(tmp_path / "a.jsonl", stream(4, 1, tail=1.0))
    second = write_events(tmp_path / "b.jsonl", stream(5, 1, tail=1.0, start=START + timedelta(minutes=1)))
    with Rootsift(data) as rs:
        rs.ingest(first, "api")
    ingest = [sys.executable, "-m", "rootsift", "ingest", str(second), "--dataset", "api", "--data", str(data)]
    reader = Rootsift(data, read_only=True)
    reader.backend.state("api")  # the segments attached: their files locked for reading
    try:
        waiting = subprocess.Popen(ingest, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1.5)
        assert waiting.poll() is None  # still waiting for the reader
    finally:
        reader.close()
    out, err = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, err
    with Rootsift(data, read_only=True) as rs:
        assert rs.datasets()[0].events == 1200
        impatient = subprocess.run(ingest, env=os.environ | {"ROOTSIFT_LOCK_WAIT": "0"}, capture_output=True, text=True)
    assert impatient.returncode != 0 and "another process holds the store" in " ".join(impatient.stderr.split())
