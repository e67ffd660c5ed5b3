"""investigate's median shift (``analysis/median_shift.py``) on a measure that mixes a
population that shifted with one that did not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rootsift import Rootsift
from test_explain import write_events

START = datetime(2024, 6, 1, tzinfo=UTC)
STEP_S = 4 * 3600


def reads_and_writes(seed: int) -> list[dict[str, Any]]:
    """Six hours of requests, 3/s: half reads at ~5 ms that never move, half writes at
    ~100 ms. From 2 h one write in ten takes 2 s (the tail rises first, the region
    begins); from 4 h every write is 16 times slower (the writes' median steps). The
    median of all events sits in the gap between reads and writes throughout. A key
    prefix field is spread over both populations (no split)."""
    rng = np.random.default_rng(seed)
    times = np.sort(rng.random(6 * 3600 * 3)) * 6 * 3600
    write = rng.random(times.size) < 0.5
    duration = np.where(write, rng.lognormal(np.log(100), 0.4, times.size), rng.lognormal(np.log(5), 0.4, times.size))
    duration = np.where(write & (times >= 7200) & (rng.random(times.size) < 0.1), 2000 + duration, duration)
    duration = np.where(write & (times >= STEP_S), 16 * duration, duration)
    prefixes = rng.choice(["service/", "locks/", "config/"], times.size)
    return [
        {
            "timestamp": (START + timedelta(seconds=float(t))).isoformat(),
            "op": "put" if w else "get",
            "key_prefix": str(p),
            "duration_ms": round(float(d), 3),
        }
        for t, w, p, d in zip(times, write, prefixes, duration, strict=True)
    ]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_median_of_the_population_that_shifted(rs: Rootsift, tmp_path: Path, seed: int) -> None:
    """The step is placed where the writes' median stepped, read on the writes alone (the
    field that splits them off is named), not on every event's median in the gap."""
    rs.ingest(write_events(tmp_path / "r.jsonl", reads_and_writes(seed)), "kv")
    a = rs.investigate("kv", measure="duration_ms").as_dict()["anomaly"]
    assert a is not None and a["kind"] == "latency"
    assert a.get("median_population") == {"field": "op", "values": ["put"]}, a
    shift = datetime.fromisoformat(a["median_shift_at"].replace("Z", "+00:00"))
    assert abs((shift - START).total_seconds() - STEP_S) <= 300, a
    assert a["median_before"] < 150 and a["median_after"] > 1000  # the writes' levels, not the gap's


def test_no_split_when_every_value_shifted(rs: Rootsift, tmp_path: Path) -> None:
    """A field whose every value moved alike (here the key prefix, when reads and writes
    both slow down) splits nothing off: every event is read."""
    rows = reads_and_writes(4)
    for r in rows:
        if (datetime.fromisoformat(r["timestamp"]) - START).total_seconds() >= STEP_S and r["op"] == "get":
            r["duration_ms"] = round(r["duration_ms"] * 16, 3)
    rs.ingest(write_events(tmp_path / "r.jsonl", rows), "kv")
    a = rs.investigate("kv", measure="duration_ms").as_dict()["anomaly"]
    assert a is not None and "median_population" not in a, a
    shift = datetime.fromisoformat(a["median_shift_at"].replace("Z", "+00:00"))
    assert abs((shift - START).total_seconds() - STEP_S) <= 300, a
