"""The gateway scenario: slow requests explained by one upstream in one AZ, connects that
ran past their configured timeout on the client path that ignores it, and pool saturation
and failing health checks that begin only later."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers.store import query_rows
from rootsift import Rootsift, scenarios
from rootsift.scenarios.base import TRUTH_DIR, TRUTH_FILE

SPAN = {"start": "2016-03-01", "end": "2016-06-01"}


def _t(text: str, seconds: float = 0) -> str:
    return (datetime.fromisoformat(text) + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_gateway_one_upstream_one_az_connect_timeout_ignored_saturation_later(seed: int, tmp_path: Path) -> None:
    out = tmp_path / "gateway"
    scenarios.generate("gateway", out, seed=seed)
    truth = json.loads((out / TRUTH_DIR / TRUTH_FILE).read_text())
    slow, az, onset = truth["slow_upstream"], truth["slow_az"], truth["onset"]
    after = {"start": _t(onset), "end": SPAN["end"]}
    before = {"start": SPAN["start"], "end": _t(onset)}
    with Rootsift(tmp_path / "data") as rs:
        for summary in scenarios.ingest(rs, out):
            assert summary.rejects == 0, summary.first_rejects
        # 1. After the onset the slowest (service, az) is the slow upstream in the slow AZ,
        #    far slower than the same upstream elsewhere; before it, nothing stands out.
        p99 = {
            (s, z): v
            for s, z, v in query_rows(
                rs,
                "gateway_access",
                "p99(request_time_ms)",
                breakdowns=["service", "az"],
                where="exists service",
                **after,
            )
        }
        assert max(p99, key=lambda k: p99[k]) == (slow, az)
        elsewhere = max(v for (s, z), v in p99.items() if s == slow and z != az)
        assert p99[(slow, az)] > 10 * elsewhere and p99[(slow, az)] > 3000
        long_connects_before = query_rows(
            rs, "gateway_access", "count", where="upstream_connect_time_ms > 2500", **before
        )
        assert long_connects_before == [] or long_connects_before[0][0] <= 1
        # 2. The configured connect timeout (from the exported config) is exceeded only on
        #    the client path that ignores it; the others give up at the timeout (504).
        config = {
            s: (c, ms)
            for s, c, ms, _ in query_rows(
                rs, "gateway_config", "count", breakdowns=["service", "client_lib", "connect_timeout_ms"], **SPAN
            )
        }
        client, timeout_ms = config[slow]
        assert client == truth["client_ignoring_connect_timeout"] and timeout_ms == truth["connect_timeout_s"] * 1000
        worst = {
            c: m
            for c, m in query_rows(
                rs,
                "gateway_access",
                "max(upstream_connect_time_ms)",
                breakdowns=["client_lib"],
                where="exists client_lib",
                **SPAN,
            )
        }
        assert worst[client] > 3 * timeout_ms
        assert all(m <= timeout_ms for c, m in worst.items() if c != client)
        past = query_rows(
            rs,
            "gateway_access",
            "count",
            breakdowns=["az"],
            where=f'service = "{slow}" and upstream_connect_time_ms > {timeout_ms}',
            **after,
        )
        by_az = dict((z, n) for z, n in past)
        assert by_az[az] > 100 and all(n < by_az[az] / 20 for z, n in by_az.items() if z != az)

        # 3. Saturation and failing health checks: none before the onset, none in the other
        #    AZs, and in the slow AZ only after the first connects ran past the timeout.
        def metric(family: str, where: str = "", **span: str) -> dict[str, float]:
            cond = f'family = "{family}"' + (f" and {where}" if where else "")
            rows = query_rows(rs, "gateway_metrics", "max(value)", breakdowns=["az"], where=cond, **span)
            return {z: v for z, v in rows}

        workers = metric("gateway_workers_max", **SPAN)[az]
        assert max(metric("gateway_workers_busy", **before).values()) < workers
        assert metric("gateway_workers_busy", **after)[az] == workers
        assert max(metric("gateway_health_check_failures_total", **before).values()) == 0
        failures = metric("gateway_health_check_failures_total", **SPAN)
        assert failures[az] > 0 and all(v == 0 for z, v in failures.items() if z != az)
        first_fail = truth["first_health_check_failure"]
        assert first_fail > truth["first_syn_dropped_by_limit"] >= onset and truth["first_saturation"] > onset
        early = {"start": _t(onset), "end": _t(first_fail)}
        assert metric("gateway_health_check_failures_total", **early).get(az, 0) == 0
        early_past = query_rows(
            rs,
            "gateway_access",
            "count",
            where=f'service = "{slow}" and upstream_connect_time_ms > {timeout_ms} and az = "{az}"',
            **early,
        )
        assert early_past and early_past[0][0] > 0
        # Sockets: connects stuck in SYN_SENT and clients that hung up (CLOSE_WAIT) pile up
        # only in the slow AZ.
        for state in ("syn_sent", "close_wait"):
            held = metric("node_tcp_connections", f'state = "{state}"', **after)
            assert held[az] > 10 and held[az] > 5 * max(v for z, v in held.items() if z != az)
