"""The cascade scenario: what rootsift reads back shows the flush-logs stall, the stampede of
identical cache fills for one key, and API latency made of pool wait rather than DB time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers.store import query_rows, stored_rows
from rootsift import Rootsift, scenarios
from rootsift.scenarios.base import TRUTH_DIR, TRUTH_FILE


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).replace(tzinfo=None)


def _z(moment: datetime) -> str:
    return moment.isoformat() + "Z"


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_cascade_stall_stampede_and_pool_wait_are_in_the_data(seed: int, tmp_path: Path) -> None:
    out = tmp_path / "cascade"
    scenarios.generate("cascade", out, seed=seed)
    truth = json.loads((out / TRUTH_DIR / TRUTH_FILE).read_text())
    stalls = [(_t(s["start"]), _t(s["end"])) for s in truth["stalls"]]
    lo, hi = _t(truth["window_start"]), _t(truth["window_end"])
    span = {"start": "2019-04-24T00:00:00Z", "end": "2019-04-26T00:00:00Z"}
    with Rootsift(tmp_path / "data") as rs:
        for summary in scenarios.ingest(rs, out):
            assert summary.rejects == 0, summary.first_rejects
        flushes = query_rows(
            rs,
            "cascade_mysql",
            "count",
            "max(query_time_ms)",
            breakdowns=["user"],
            where=f'fingerprint = "{truth["stall_fingerprint"]}"',
            **span,
        )
        statements = stored_rows(rs, "cascade_mysql")
        fills = query_rows(
            rs,
            "cascade_mysql",
            "count",
            breakdowns=["statement", "host"],
            where=f'fingerprint = "{truth["stampede_fingerprint"]}"',
            start=_z(lo),
            end=_z(hi),
        )
        before = query_rows(
            rs,
            "cascade_mysql",
            "count",
            where=f'statement = "{truth["stampede_statement"]}"',
            start=_z(lo - (hi - lo) * 4),
            end=_z(lo),
        )
        key = f'key = "{truth["stampede_key"]}" and cache = "miss"'
        during = query_rows(
            rs,
            "cascade_api",
            "count",
            "avg(pool_wait_ms)",
            "avg(db_time_ms)",
            "max(duration_ms)",
            where=key,
            start=_z(lo),
            end=_z(hi),
        )
        calm = query_rows(
            rs,
            "cascade_api",
            "p99(pool_wait_ms)",
            "p99(duration_ms)",
            start=_z(stalls[0][0] - timedelta(seconds=90)),
            end=_z(stalls[0][0] - timedelta(seconds=5)),
        )

    # `flush logs` runs only as the stalls, by rdsadmin, each as long as its stall
    assert flushes == [
        ["rdsadmin", len(stalls), pytest.approx(max((e - s).total_seconds() for s, e in stalls) * 1000, rel=1e-3)]
    ]
    # nothing that was running or arrived during a stall completes before `flush logs` does
    for start, end in stalls:
        for row in statements:
            began = _t(row["timestamp"])
            finished = began + timedelta(milliseconds=row["query_time_ms"])
            if row["statement"] != "flush logs" and began <= end and finished >= start:
                assert finished > end, row
    # one server ran the same fill for one key over and over; that statement was rare before
    top_statement, _host, top_count = max(fills, key=lambda r: r[2])
    assert top_statement == truth["stampede_statement"] and top_count >= 6
    assert before[0][0] / 4 * 2 < top_count
    # API latency of those misses is mostly waiting for a pool connection, not database time
    count, pool_wait, db_time, worst = during[0]
    assert count >= 6 and pool_wait > db_time and worst > 300
    assert calm[0][0] < 20 and calm[0][1] < 50
    # the decoy: a slow reporting query that is not the stall
    reports = [r for r in statements if r["user"] == "reports"]
    assert reports and min(r["query_time_ms"] for r in reports) > 1000
