"""consul: KV write latency jumps a day after streaming is enabled on traffic routing.

The mechanism of consul-outage-2021.txt, simulated in one-minute steps over three days
(see ``consul_sim``): 5 voters and 5 non-voters; a diurnal, growing population of KV and
health-check writers; streaming's single shared channel whose per-write demand scales
with its subscribers; health-check churn feeding back when writes are slow; BoltDB
freelists that grow on some servers with every snapshot truncation and are rewritten by
every append; leader elections (more likely while the leader's appends are slow).

Telemetry: ``metrics/<server>.prom`` (Prometheus text with ms timestamps, one file per
server, ingested with its host), ``changes.jsonl`` (deploys and config pushes, the
culprit among decoys) and ``kv_requests.jsonl`` (a sample of KV requests).
"""

from __future__ import annotations

import json
import math
import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rootsift.scenarios import register
from rootsift.scenarios.base import Manifest, Scenario, Source
from rootsift.scenarios.consul_changes import decoy_changes, streaming_change
from rootsift.scenarios.consul_sim import Load, Minute, Server, step
from rootsift.scenarios.consul_writer import Scrape, ServerMetrics

DAYS = 3
PREFIXES = ["service/", "vault/core/", "vault/sys/token/", "locks/", "config/routing/", "health/"]
CLIENT_TIMEOUT_MS = 10_000


@register
class ConsulOutage(Scenario):
    name = "consul"
    summary = "Consul KV writes: p50 300 ms -> 2 s a day after streaming on traffic routing; slow leaders with big BoltDB freelists"

    def generate(self, out: Path) -> tuple[Manifest, dict[str, Any]]:
        rng = self.rng
        start = datetime(2021, 10, 24, tzinfo=UTC) + timedelta(days=rng.randrange(0, 30))
        servers = self._servers()
        load = self._load()
        minutes = DAYS * 1440
        change_min = 1440 + round((load.peak_hour + rng.uniform(6.5, 8.5)) * 60)
        routing_before = rng.randrange(500, 800)
        other_subscribers = rng.randrange(250, 450)
        routing_after = round(routing_before * 1.5)
        scrape_every = max(1, round(5 / self.scale))
        per_minute = 16 * self.scale  # sampled KV requests per minute
        leader = rng.choice([s for s in servers if s.voter])
        terms: list[dict[str, Any]] = []
        term_start, churn = 0, 0.0
        metrics = {s.name: ServerMetrics() for s in servers}
        window: list[float] = []
        requests: list[str] = []
        series: list[Minute] = []
        freelists: list[int] = []  # the leader's, each minute
        for m in range(minutes):
            now = start + timedelta(minutes=m)
            subscribers = other_subscribers + (routing_after if m >= change_min else 0)
            minute, churn = step(rng, load, servers, leader, subscribers, m, churn)
            series.append(minute)
            freelists.append(leader.freelist_bytes)
            window.extend(minute.draw_write_ms(rng) for _ in range(6))
            self._requests(requests, now, minute, servers, leader, per_minute)
            if (m + 1) % scrape_every == 0:
                at = now + timedelta(minutes=1)
                for s in servers:
                    is_leader = s is leader
                    scrape = Scrape(at, s.freelist_bytes, is_leader)
                    if is_leader:
                        scrape.apply_ms, scrape.commit_ms = window, minute.commit_ms
                        scrape.last_contact_ms = minute.last_contact_ms
                    metrics[s.name].add(scrape)
                window = []
            # Followers call an election when heartbeats arrive late; otherwise leadership moves rarely.
            hazard = 1 / rng.uniform(150, 330) + max(0.0, minute.last_contact_ms - 150) / 20000
            if rng.random() < hazard:
                terms.append(self._term(leader, term_start, m, series, freelists))
                leader = rng.choice([s for s in servers if s.voter and s is not leader])
                term_start = m + 1
                window = []  # the new leader's summary starts empty
        if term_start < minutes:
            terms.append(self._term(leader, term_start, minutes - 1, series, freelists))
        (out / "metrics").mkdir(parents=True, exist_ok=True)
        for name, sink in metrics.items():
            (out / "metrics" / f"{name}.prom").write_text(sink.text())
        culprit = streaming_change(rng, start + timedelta(minutes=change_min), routing_before, routing_after)
        changes = sorted([culprit, *decoy_changes(rng, start, minutes)], key=lambda c: str(c["timestamp"]))
        (out / "changes.jsonl").write_text("".join(json.dumps(c) + "\n" for c in changes))
        (out / "kv_requests.jsonl").write_text("".join(requests))
        sources = [Source("consul_metrics", f"metrics/{s.name}.prom", "prometheus", {"host": s.name}) for s in servers]
        sources += [
            Source("consul_changes", "changes.jsonl", "jsonl"),
            Source("consul_kv_requests", "kv_requests.jsonl", "jsonl"),
        ]
        notes = f"10 servers, {DAYS} days, {len(requests)} sampled KV requests, {len(changes)} change events"
        subs = (other_subscribers, other_subscribers + routing_after)
        truth = self._truth(start, series, servers, terms, change_min, (culprit, changes), subs)
        analyses = [
            ["investigate", "consul_kv_requests", "--measure", "duration_ms"],
            [
                "changes",
                "consul_kv_requests",
                "--events",
                "consul_changes",
                "--measure",
                "p50(duration_ms)",
                "--where",
                "op != get",
            ],
        ]
        return Manifest(self.name, self.seed, self.scale, sources, notes, analyses), truth

    def _servers(self) -> list[Server]:
        rng = self.rng
        site = rng.choice(["ash", "sjc", "iad", "ord", "dfw"])
        voters = [True] * 5 + [False] * 5
        patho = [True, True] + [False] * 3
        rng.shuffle(patho)
        patho += [False] * 5
        patho[5 + rng.randrange(5)] = True  # one non-voter too: its freelist grows, but it never leads
        numbers = rng.sample(range(10, 99), len(voters))
        servers = []
        for i, voter in enumerate(voters):
            bad = patho[i]
            servers.append(
                Server(
                    name=f"{site}-consul{numbers[i]:02d}",
                    voter=voter,
                    pathological=bad,
                    freelist_pages=rng.randrange(150_000, 350_000) if bad else rng.randrange(500, 4000),
                    bw_bytes_per_ms=rng.uniform(30_000, 55_000),
                    base_append_ms=rng.uniform(2, 6),
                    reuse=rng.uniform(0.01, 0.05) if bad else 1.0,
                )
            )
        rng.shuffle(servers)
        return servers

    def _load(self) -> Load:
        rng = self.rng
        return Load(
            peak_writers=rng.uniform(125, 140),
            peak_hour=rng.uniform(14, 18),
            trough=rng.uniform(0.35, 0.5),
            growth_per_day=rng.uniform(1.06, 1.1),
            think_s=rng.uniform(1.8, 2.4),
            channel_cost_ms=rng.uniform(0.016, 0.019),
            churn_gain=rng.uniform(0.7, 1.0),
            churn_tau_min=rng.uniform(10, 30),
            hc_timeout_ms=rng.choice([750.0, 1000.0, 1500.0]),
            rtt_ms=rng.uniform(15, 40),
            entry_bytes=rng.randrange(250, 400),
        )

    def _requests(
        self, out: list[str], now: datetime, minute: Minute, servers: list[Server], leader: Server, rate: float
    ) -> None:
        rng = self.rng
        n = int(rate) + (1 if rng.random() < rate - int(rate) else 0)
        for at in sorted(rng.uniform(0, 60) for _ in range(n)):
            op = rng.choices(["get", "put", "cas", "delete"], [0.4, 0.4, 0.12, 0.08])[0]
            # Stale reads are served by whichever server the agent asked; writes go to the leader.
            ms = rng.lognormvariate(math.log(4), 0.5) if op == "get" else minute.draw_write_ms(rng)
            status = 200 if ms < CLIENT_TIMEOUT_MS else 504
            row = {
                "timestamp": (now + timedelta(seconds=at)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                "op": op,
                "key_prefix": rng.choice(PREFIXES),
                "server": rng.choice(servers).name,
                "leader": leader.name,
                "duration_ms": round(min(ms, CLIENT_TIMEOUT_MS), 2),
                "status": status,
            }
            out.append(json.dumps(row) + "\n")

    @staticmethod
    def _term(leader: Server, first: int, last: int, series: list[Minute], freelists: list[int]) -> dict[str, Any]:
        p50s = [series[m].p50_ms() for m in range(first, last + 1)]
        freelist = statistics.fmean(freelists[first : last + 1])
        return {
            "leader": leader.name,
            "first": first,
            "last": last,
            "p50_ms": statistics.median(p50s),
            "freelist": freelist,
        }

    def _truth(
        self,
        start: datetime,
        series: list[Minute],
        servers: list[Server],
        terms: list[dict[str, Any]],
        change_min: int,
        culprit_and_all: tuple[dict[str, Any], list[dict[str, Any]]],
        subscribers: tuple[int, int],
    ) -> dict[str, Any]:
        culprit, changes = culprit_and_all
        p50 = [m.p50_ms() for m in series]
        cp = next(
            (
                m
                for m in range(change_min, len(p50) - 120)
                if p50[m] >= 1000 and sum(v >= 1000 for v in p50[m : m + 120]) >= 96
            ),
            None,
        )

        def at(m: int) -> str:
            return (start + timedelta(minutes=m)).isoformat().replace("+00:00", "Z")

        slow = sorted(s.name for s in servers if s.voter and s.pathological)
        before = [t for t in terms if t["last"] < change_min and t["last"] - t["first"] >= 30]
        return {
            "changepoint": at(cp) if cp is not None else None,
            "changepoint_minute": cp,
            "changepoint_definition": "first minute after the change whose leader p50 >= 1 s, with >= 80 % of the next 2 h too",
            "p50_before_ms": round(statistics.median(p50[change_min - 1440 : change_min]), 1),
            "p50_after_ms": round(statistics.median(p50[cp:]), 1) if cp is not None else None,
            "culprit_change": culprit,
            "decoy_changes": [c for c in changes if c is not culprit],
            "streaming_subscribers": {"before": subscribers[0], "after": subscribers[1]},
            "slow_leader_hosts": slow,
            "healthy_leader_hosts": sorted(s.name for s in servers if s.voter and not s.pathological),
            "pathological_non_voters": sorted(s.name for s in servers if not s.voter and s.pathological),
            "freelist_metric": "consul_raft_boltdb_freelistBytes",
            "latency_metric": "consul_kvs_apply",
            "freelist_p50_correlation_before_change": _corr(before),
            "leader_terms": [
                {"leader": t["leader"], "start": at(t["first"]), "end": at(t["last"]), "p50_ms": round(t["p50_ms"], 1)}
                for t in terms
            ],
            "final_freelist_bytes": {s.name: s.freelist_bytes for s in servers},
        }


def _corr(terms: list[dict[str, Any]]) -> float | None:
    """Across leadership terms: the correlation of the leader's freelist bytes with its p50."""
    xs = [t["freelist"] for t in terms]
    ys = [t["p50_ms"] for t in terms]
    if len(terms) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    return round(statistics.correlation(xs, ys), 3)
