"""cascade: a ``flush logs`` stall of MySQL turned into a cache stampede and pool queueing.

The mechanism of cascading-failure-2019.txt, on the event loop:

- API servers look each request's dataset (``team/slug``) up in a TTL cache with no
  refresh callback: once the entry has expired every request that misses queries MySQL
  for the same key (``FindDatasetByTeamAndSlug``), so while fills are slow the popular
  key is fetched over and over;
- an expired ``Get`` deletes the key in a deferred task whose delay grows with the
  goroutines around; under load it lands after the refill and clears the cache again;
- each server's connection pool (``database/sql``) opens at most two connections (the
  CI-sized fleet), keeps one idle, and hands a released connection to a waiter chosen
  at random; every new connection runs ``select @@max_allowed_packet``;
- RDS runs ``flush logs`` now and then; while it holds its lock (~1.5 s) no statement
  completes, and when it ends ``flush logs`` finishes first and the backlog after it.

Decoys: a periodic, slow reporting query (not a stall), RDS heartbeats and health checks
as ``rdsadmin``. Telemetry: API request events (JSON lines) and the MySQL 8 slow log with
``long_query_time=0`` (``cascade_slowlog``). Most flushes are harmless; a draw is kept
when one of its stalls caught a key expiring and one server fetched it over and over (the
day the write-up is about), other draws of the same seed's generator are discarded.
"""

from __future__ import annotations

import statistics
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from rootsift.ingest.fingerprint import mysql as fingerprint
from rootsift.scenarios import register
from rootsift.scenarios.base import Manifest, Scenario, Source
from rootsift.scenarios.cascade_api import ApiServer, Dataset
from rootsift.scenarios.cascade_sim import MySQL, Statement
from rootsift.scenarios.cascade_slowlog import write_slow_log
from rootsift.scenarios.sim import Loop

TEAMS = ["acme", "globex", "initech", "umbrella", "hooli", "stark", "wayne", "tyrell", "cyberdyne", "wonka"]
SLUGS = ["prod-api", "web", "ingest", "billing", "k8s-events", "mobile", "search", "edge", "checkout", "jobs"]
ENDPOINTS = [("/1/batch", 0.7), ("/1/events", 0.22), ("/1/markers", 0.08)]
STAMPEDE_WINDOW = 1.0  # seconds after a stall's end in which its fills are counted
MIN_STAMPEDE = 6


@register
class Cascade(Scenario):
    name = "cascade"
    summary = "API fleet on MySQL: a 1.5 s flush-logs stall, a cache stampede on one key, random-order pool waits"

    def generate(self, out: Path) -> tuple[Manifest, dict[str, Any]]:
        origin = datetime(2019, 4, 24, 14, 0, tzinfo=UTC) + timedelta(minutes=self.rng.randrange(0, 240))
        world, attempt = self._simulate(), 1
        while world["incident"] is None:  # most flushes are harmless: keep the day one was not
            if attempt == 40:
                raise RuntimeError(f"cascade seed {self.seed}: no stall caught a popular key expiring in 40 draws")
            world, attempt = self._simulate(), attempt + 1
        truth = self._truth(world, origin)
        api_path, slow_path = out / "api.jsonl", out / "mysql-slow.log"
        with open(api_path, "wb") as fh:
            for ev in sorted(world["events"], key=lambda e: (e["t"], e["span_id"])):
                stamp = (origin + timedelta(seconds=ev.pop("t"))).isoformat(timespec="microseconds")
                fh.write(orjson.dumps({"timestamp": stamp.replace("+00:00", "Z"), **ev}) + b"\n")
        n_db = write_slow_log(slow_path, world["statements"], origin)
        sources = [Source("cascade_api", "api.jsonl", "jsonl"), Source("cascade_mysql", "mysql-slow.log", "mysql-slow")]
        notes = f"{world['n_servers']} API servers, {len(world['events'])} requests, {n_db} statements, draw {attempt}"
        analyses = [["investigate", "cascade_api"], ["investigate", "cascade_mysql"]]
        return Manifest(self.name, self.seed, self.scale, sources, notes, analyses), truth

    def _simulate(self) -> dict[str, Any]:
        rng = self.rng
        loop = Loop()
        db = MySQL(loop, rng)
        duration = rng.uniform(10, 14) * 60
        n_servers = max(2, round(rng.randint(3, 4) * self.scale))
        rate = rng.uniform(45, 70) * self.scale
        ttl = rng.uniform(6, 12)  # 60 s in the write-up; shortened with the run
        servers = [
            ApiServer(loop, rng, db, f"api-{rng.randrange(10, 99)}{i}", f"10.0.{rng.randrange(1, 9)}.{20 + i}", 2, ttl)
            for i in range(n_servers)
        ]
        datasets = self._datasets()
        hot = datasets[0]
        hot_share = rng.uniform(0.5, 0.65)
        tail = [1 / (i + 1) ** 1.1 for i in range(len(datasets) - 1)]
        weights = [hot_share] + [(1 - hot_share) * w / sum(tail) for w in tail]
        names, shares = [e for e, _ in ENDPOINTS], [s for _, s in ENDPOINTS]

        def arrive() -> None:
            rng.choice(servers).handle(rng.choices(names, shares)[0], rng.choices(datasets, weights)[0])
            loop.after(rng.expovariate(rate), arrive)

        loop.at(rng.uniform(0, 0.05), arrive)
        stalls = self._schedule_background(loop, db, duration)
        world: dict[str, Any] = {
            "n_servers": n_servers,
            "hot": hot,
            "ttl": ttl,
            "stalls": stalls,
            "servers": servers,
            "datasets": datasets,
            "incident": None,
        }
        for i, stall in enumerate(stalls):  # stop early when no stall turns into the incident
            loop.run(until=stall.end + STAMPEDE_WINDOW + 0.5)
            stampede = self._stampede(db.log, stall)
            if stampede is not None:
                world["incident"], world["stampede"] = i, stampede
                break
        else:
            return world
        loop.run(until=duration + 30)
        world["events"] = [ev for s in servers for ev in s.events() if ev["t"] <= duration]
        world["statements"] = [st for st in db.log if st.start <= duration]
        return world

    def _datasets(self) -> list[Dataset]:
        rng = self.rng
        keys = sorted({f"{rng.choice(TEAMS)}/{rng.choice(SLUGS)}" for _ in range(40)})
        rng.shuffle(keys)
        teams = {t: rng.randrange(100, 9000) for t in TEAMS}
        return [Dataset(k, teams[k.split("/")[0]], rng.randrange(10_000, 900_000)) for k in keys]

    def _schedule_background(self, loop: Loop, db: MySQL, duration: float) -> list[Statement]:
        """``flush logs`` stalls, heartbeats, health checks and the periodic report (decoy)."""
        rng = self.rng
        admin = db.connect()
        stalls: list[Statement] = []
        n = rng.randint(4, 6)  # binlog rotation every couple of minutes
        for i in range(n):
            when = duration * (0.15 + 0.75 * (i + rng.uniform(0.1, 0.9)) / n)
            stmt = Statement("rdsadmin", "localhost", "", admin, "mysql", "flush logs", when)
            stalls.append(stmt)
            hold = rng.uniform(1.2, 1.9)
            stmt.end = when + hold  # as planned; flush_logs sets the same
            loop.at(when, db.flush_logs, stmt, hold)
        t = rng.uniform(0, 60)
        while t < duration:
            ms = int(t * 1000)
            sql = f"INSERT INTO mysql.rds_heartbeat2(id, value) values (1,{ms}) ON DUPLICATE KEY UPDATE value = {ms}"
            loop.at(t, db.execute, Statement("rdsadmin", "localhost", "", admin, "mysql", sql, t), 0.4e-3, _noop)
            t += 60 + rng.uniform(-0.5, 0.5)
        t = rng.uniform(0, 5)
        while t < duration:
            check = Statement("rdsadmin", "localhost", "", admin, "mysql", "SELECT 1", t, rows_sent=1)
            loop.at(t, db.execute, check, 60e-6, _noop)
            t += 5
        t = rng.uniform(60, 180)
        report_host = f"reports-{rng.randrange(1, 9)}"
        while t < duration:
            sql = (
                "SELECT team_id, COUNT(*) AS events, SUM(bytes) AS bytes FROM usage_rollups "
                f"WHERE day >= '2019-04-{rng.randrange(1, 20):02d}' GROUP BY team_id ORDER BY bytes DESC"
            )
            rows = rng.randrange(2_000_000, 9_000_000)
            stmt = Statement(
                "reports",
                report_host,
                "10.0.9.4",
                db.connect(),
                "honeycomb",
                sql,
                t,
                0.0,
                0.00002,
                rng.randrange(300, 900),
                rows,
            )
            loop.at(t, db.execute, stmt, rng.uniform(2.0, 7.0), _noop)
            t += rng.uniform(150, 330)
        return stalls

    @staticmethod
    def _stampede(log: list[Statement], stall: Statement) -> str | None:
        """The fill statement one server ran over and over in the seconds after ``stall``, if any."""
        counts: dict[tuple[str, str], int] = {}
        for st in log:
            if stall.start <= st.start <= stall.end + STAMPEDE_WINDOW and st.text.startswith("SELECT id, team_id"):
                counts[st.text, st.host] = counts.get((st.text, st.host), 0) + 1
        top = max(counts, key=lambda k: (counts[k], k), default=("", ""))
        same_key = sum(n for (text, _), n in counts.items() if text == top[0])
        # the write-up's picture: one server fetching it over and over, most fills for that key
        if counts.get(top, 0) >= MIN_STAMPEDE and same_key * 2 > sum(counts.values()):
            return top[0]
        return None

    def _truth(self, world: dict[str, Any], origin: datetime) -> dict[str, Any]:
        def at(t: float) -> str:
            return (origin + timedelta(seconds=t)).isoformat(timespec="microseconds")

        key: Dataset = next(d for d in world["datasets"] if d.fill_sql() == world["stampede"])
        stall = world["stalls"][world["incident"]]
        lo, hi = stall.start, stall.end + STAMPEDE_WINDOW
        misses = [e for e in world["events"] if lo <= e["t"] <= hi and e["cache"] == "miss" and e["key"] == key.key]
        fills = [s for s in world["statements"] if lo <= s.start <= hi and s.text == key.fill_sql()]
        pool = statistics.fmean(e["pool_wait_ms"] for e in misses)
        db = statistics.fmean(e["db_time_ms"] for e in misses)
        return {
            "stalls": [
                {"start": at(s.start), "end": at(s.end), "seconds": round(s.end - s.start, 6)} for s in world["stalls"]
            ],
            "incident_stall": world["incident"],
            "stall_statement": "flush logs",
            "stall_fingerprint": fingerprint("flush logs"),
            "stall_user": "rdsadmin",
            "popular_key": world["hot"].key,
            "stampede_key": key.key,
            "stampede_statement": key.fill_sql(),
            "stampede_fingerprint": fingerprint(key.fill_sql()),
            "window_start": at(lo),
            "window_end": at(hi),
            "stampede_fill_queries": len(fills),
            "stampede_servers": sorted({e["server"] for e in misses}),
            "stampede_miss_requests": len(misses),
            "mean_pool_wait_ms": round(pool, 3),
            "mean_db_time_ms": round(db, 3),
            "latency_dominated_by": "pool_wait_ms" if pool >= db else "db_time_ms",
            "late_deletes": sum(s.cache.late_deletes for s in world["servers"]),
            "cache_ttl_s": round(world["ttl"], 3),
            "pool_max_open": 2,
            "decoys": ["report query on usage_rollups (2-7 s, not a stall)", "rdsadmin heartbeat and SELECT 1"],
        }


def _noop(_stmt: Statement) -> None:
    return None
