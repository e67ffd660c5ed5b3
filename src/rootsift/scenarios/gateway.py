"""gateway: an API gateway whose calls to one upstream stall in one availability zone.

The mechanism of api-gateway-capacity-2016.txt, on the event loop (``gateway_sim``):

- proxy instances, two per availability zone, each with a bounded worker pool and accept
  queue; a request waiting in the queue past the idle timeout is answered 503;
- per-upstream connect and read timeouts, where one HTTP client path ("apache") never
  applies the connect timeout (it waits for the kernel's SYN retransmits instead);
- from the onset, DDoS protection rate-limits new connections from one AZ's egress IP to
  the spectator service below the rate the gateway opens them: SYNs are dropped, connects
  take 1, 3, 7, 15… s and hold their workers far past the configured connect timeout;
- the load balancer's health checks go through the same worker pool: once the pool is
  full they time out, the instance is removed after N failures, its traffic drains, the
  limiter refills, the instance is re-added — and fills up again.

Other upstreams stay healthy (one is slow everywhere, a decoy). Every instance writes an
nginx access log with a custom ``log_format`` and is scraped (Prometheus text, sample
timestamps in ms) for its pool, queue, sockets by state and health-check failures.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rootsift.scenarios import register
from rootsift.scenarios.base import Manifest, Scenario, Source
from rootsift.scenarios.gateway_sim import Gateway, Instance, Request, Upstream
from rootsift.scenarios.gateway_traffic import Limiter, poisson_arrivals
from rootsift.scenarios.gateway_write import LOG_FORMAT, access_line, scrape_text
from rootsift.scenarios.sim import Loop

DURATION = 5400.0
DECOYS = {
    "summoner": ["/lol/summoner/v3/summoners/by-name/{name}", "/lol/summoner/v3/summoners/{id}"],
    "match": ["/lol/match/v3/matches/{id}", "/lol/match/v3/matchlists/by-account/{id}"],
    "league": ["/lol/league/v3/positions/by-summoner/{id}"],
    "champion-mastery": ["/lol/champion-mastery/v3/champion-masteries/by-summoner/{id}"],
    "static-data": ["/lol/static-data/v3/champions", "/lol/static-data/v3/items/{id}"],
    "status": ["/lol/status/v3/shard-data"],
}
SPECTATOR_PATHS = ["/lol/spectator/v3/active-games/by-summoner/{id}", "/lol/spectator/v3/featured-games"]


@register
class ApiGateway(Scenario):
    name = "gateway"
    summary = "API gateway: one upstream rate-limited from one AZ, connect timeout not applied, pool saturation and health checks failing later"

    def generate(self, out: Path) -> tuple[Manifest, dict[str, Any]]:
        rng = self.rng
        region = rng.choice(["us-west-1", "us-east-1", "eu-west-1"])
        azs = [region + z for z in "abc"[: rng.choice([2, 3])]]
        slow_az = rng.choice(azs)
        upstreams = self._upstreams()
        spectator = upstreams[0]
        workers = max(6, round(rng.choice([16, 24, 32]) * self.scale))
        prefix = rng.choice(["zuul", "edge", "gw"])
        instances = [Instance(f"{prefix}-{az[-2:]}{k}", az, workers, workers * 4) for az in azs for k in (1, 2)]
        rate = rng.uniform(9, 13) * self.scale
        onset = round(rng.uniform(0.3, 0.45) * DURATION)
        in_az = sum(1 for i in instances if i.az == slow_az) / len(instances)
        demand = rate * spectator.share * in_az
        limit = Limiter(rate=demand * rng.uniform(0.5, 0.7), burst=rng.choice([3.0, 5.0, 8.0]), active_from=onset)
        hc = (10.0, 5.0, rng.choice([2, 3]), rng.choice([2, 3, 5]))
        loop = Loop()
        gw = Gateway(loop, rng, instances, {(slow_az, spectator.name): limit}, 30.0, hc)
        clients = [
            f"{rng.choice([52, 54, 35, 104, 185, 198])}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
            for _ in range(300)
        ]
        weights = [u.share for u in upstreams]
        phase = rng.uniform(0, 2 * math.pi)

        def traffic(t: float) -> float:
            return rate * (1 + 0.12 * math.sin(phase + t / 2400))

        def arrive() -> None:
            up = rng.choices(upstreams, weights)[0]
            path = rng.choice(up.paths).format(id=rng.randrange(10**6, 10**8), name=f"player{rng.randrange(10**5)}")
            gw.route(Request("api", rng.choice(clients), path, up, loop.now, rng.uniform(15, 60)))

        poisson_arrivals(loop, rng, traffic, rate * 1.13, DURATION, arrive)
        lb_addrs = {
            az: f"10.{rng.randrange(16, 31)}.{k * 16 + rng.randrange(16)}.{rng.randrange(2, 250)}"
            for k, az in enumerate(azs)
        }
        for inst in instances:
            loop.at(rng.uniform(0, hc[0]), gw.health_check, inst, lb_addrs[inst.az])
        start = datetime(2016, 4, rng.randint(10, 20), rng.randint(8, 14), tzinfo=UTC)
        scrape_every = rng.choice([10.0, 15.0])
        scrapes: dict[str, list[str]] = {i.name: [] for i in instances}

        def scrape() -> None:
            for inst in instances:
                scrapes[inst.name].append(scrape_text(gw, inst, start, loop.now))
            loop.after(scrape_every, scrape)

        loop.at(rng.uniform(0, scrape_every), scrape)
        loop.run(DURATION)
        return self._write(out, instances, scrapes, start, upstreams), self._truth(
            instances, spectator, upstreams, slow_az, onset, start, limit, hc
        )

    def _upstreams(self) -> list[Upstream]:
        rng = self.rng
        timeout = rng.choice([0.5, 1.0, 2.0])

        def addrs() -> list[str]:
            net = rng.randrange(100, 200)
            return [
                f"10.{net}.{rng.randrange(256)}.{rng.randrange(2, 250)}:{rng.choice([80, 8080, 8443])}"
                for _ in range(rng.randint(2, 4))
            ]

        spectator = Upstream(
            rng.choice(["spectator", "spectator-v3", "spectator-games"]),
            "apache",
            timeout,
            rng.choice([5.0, 10.0]),
            rng.uniform(0.04, 0.12),
            0.5,
            rng.uniform(0.3, 0.4),
            addrs(),
            SPECTATOR_PATHS,
        )
        decoys = rng.sample(sorted(DECOYS), 4)
        slow_decoy = rng.choice(decoys)
        clients = ["apache", "netty", "urlconnection", rng.choice(["apache", "netty"])]
        rng.shuffle(clients)
        others = [
            Upstream(
                name,
                client,
                timeout,
                rng.choice([5.0, 10.0]),
                rng.uniform(0.35, 0.7) if name == slow_decoy else rng.uniform(0.01, 0.08),
                0.6,
                rng.uniform(0.1, 0.25),
                addrs(),
                DECOYS[name],
            )
            for name, client in zip(decoys, clients, strict=True)
        ]
        return [spectator, *others]

    def _write(
        self,
        out: Path,
        instances: list[Instance],
        scrapes: dict[str, list[str]],
        start: datetime,
        upstreams: list[Upstream],
    ) -> Manifest:
        (out / "nginx").mkdir(parents=True, exist_ok=True)
        (out / "metrics").mkdir(parents=True, exist_ok=True)
        sources = []
        for inst in instances:
            lines = [access_line(r, inst, start) for r in sorted(inst.finished, key=lambda r: r.end)]
            (out / "nginx" / f"{inst.name}.access.log").write_text("\n".join(lines) + "\n")
            (out / "metrics" / f"{inst.name}.prom").write_text("".join(scrapes[inst.name]))
            sources.append(
                Source(
                    "gateway_access",
                    f"nginx/{inst.name}.access.log",
                    "nginx",
                    {"log_format": LOG_FORMAT, "labels": {"host": inst.name}},
                )
            )
            sources.append(Source("gateway_metrics", f"metrics/{inst.name}.prom", "prometheus", {"host": inst.name}))
        # The per-service client settings as the configuration service exported them at the
        # deploy earlier that week: what each call was configured to wait, not what it did.
        deployed = (start - timedelta(days=self.rng.randint(1, 5), minutes=self.rng.randrange(600))).isoformat()
        config = [
            {
                "timestamp": deployed,
                "service": u.name,
                "client_lib": u.client,
                "connect_timeout_ms": round(u.connect_timeout * 1000),
                "read_timeout_ms": round(u.read_timeout * 1000),
                "endpoints": ",".join(u.addrs),
            }
            for u in upstreams
        ]
        (out / "config").mkdir(exist_ok=True)
        (out / "config" / "upstreams.jsonl").write_text("".join(json.dumps(c) + "\n" for c in config))
        sources.append(Source("gateway_config", "config/upstreams.jsonl", "jsonl"))
        notes = f"{len(instances)} instances over {DURATION / 3600:.0f} h from {start.isoformat()}"
        return Manifest(
            self.name,
            self.seed,
            self.scale,
            sources,
            notes,
            [["investigate", "gateway_access", "--timestamp-at", "end"]],
        )

    def _truth(
        self,
        instances: list[Instance],
        spectator: Upstream,
        upstreams: list[Upstream],
        slow_az: str,
        onset: float,
        start: datetime,
        limit: Limiter,
        hc: tuple[float, float, int, int],
    ) -> dict[str, Any]:
        def at(t: float | None) -> str | None:
            return None if t is None else (start + timedelta(seconds=t)).isoformat()

        slow = [i for i in instances if i.az == slow_az]
        saturated = [i.first_saturated for i in slow if i.first_saturated is not None]
        removed = [i.removals[0][0] for i in slow if i.removals]
        failing = [i.first_hc_failure for i in slow if i.first_hc_failure is not None]
        return {
            "slow_upstream": spectator.name,
            "slow_az": slow_az,
            "slow_instances": sorted(i.name for i in slow),
            "healthy_instances": sorted(i.name for i in instances if i.az != slow_az),
            "upstream_field": "service",
            "az_field": "az",
            "connect_timeout_s": spectator.connect_timeout,
            "client_field": "client_lib",
            "client_ignoring_connect_timeout": "apache",
            "upstream_clients": {u.name: u.client for u in upstreams},
            "decoy_upstreams": sorted(u.name for u in upstreams[1:]),
            "slow_decoy": max(upstreams[1:], key=lambda u: u.median).name,
            "onset": at(onset),
            "first_syn_dropped_by_limit": at(limit.first_drop),
            "first_saturation": at(min(saturated) if saturated else None),
            "first_health_check_failure": at(min(failing) if failing else None),
            "first_lb_removal": at(min(removed) if removed else None),
            "lb_removals": {i.name: [[at(a), at(b)] for a, b in i.removals] for i in instances if i.removals},
            "rate_limit_conn_per_s": round(limit.rate, 3),
            "syns_dropped": limit.dropped,
            "health_check": {
                "interval_s": hc[0],
                "timeout_s": hc[1],
                "unhealthy_threshold": hc[2],
                "healthy_threshold": hc[3],
            },
        }
