"""An API server of the cascade scenario: each request looks its dataset up in the TTL
cache, fills it from MySQL on a miss (``FindDatasetByTeamAndSlug``) and, for markers,
inserts a row; database calls wait for a connection from the server's pool."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from rootsift.scenarios.cascade_sim import Cache, MySQL, Pool, Statement
from rootsift.scenarios.sim import Loop


@dataclass(frozen=True)
class Dataset:
    """A cache key (``team/slug``) and the row behind it."""

    key: str
    team_id: int
    dataset_id: int

    @property
    def slug(self) -> str:
        return self.key.split("/", 1)[1]

    def fill_sql(self) -> str:
        return f"SELECT id, team_id, name FROM datasets WHERE team_id = {self.team_id} AND slug = '{self.slug}'"


@dataclass
class Request:
    """One request's progress and the numbers it reports."""

    server: str
    endpoint: str
    dataset: Dataset
    start: float
    trace_id: str
    span_id: str
    hit: bool = True
    pool_wait: float = 0.0
    db_time: float = 0.0
    fills: int = 0


class ApiServer:
    """One API process: its cache, its pool, the requests in flight and those finished."""

    def __init__(
        self, loop: Loop, rng: random.Random, db: MySQL, name: str, ip: str, pool_size: int, ttl: float
    ) -> None:
        self.loop, self.rng, self.db = loop, rng, db
        self.name, self.ip = name, ip
        self.pool = Pool(loop, rng, db, name, ip, pool_size)
        self.cache = Cache(loop, rng, ttl)
        self.inflight = 0
        self.done: list[tuple[Request, float]] = []

    def handle(self, endpoint: str, dataset: Dataset) -> None:
        rng = self.rng
        req = Request(
            self.name, endpoint, dataset, self.loop.now, f"{rng.getrandbits(128):032x}", f"{rng.getrandbits(64):016x}"
        )
        self.inflight += 1
        req.hit = self.cache.get(dataset.key, self.inflight)
        steps: list[tuple[str, int, int]] = []
        if not req.hit:
            steps.append((dataset.fill_sql(), 1, 1))
        if endpoint == "/1/markers":
            steps.append(self._marker_sql(dataset))
        self.loop.after(rng.uniform(0.2e-3, 0.8e-3), self._next, req, steps)

    def _marker_sql(self, dataset: Dataset) -> tuple[str, int, int]:
        msg = self.rng.choice(["deploy", "config push", "feature flag", "scale up", "migration"])
        stamp = int(self.loop.now * 1000)
        return (
            f"INSERT INTO markers (dataset_id, message, type, created_at) VALUES "
            f"({dataset.dataset_id}, '{msg} {stamp % 9973}', 'deploy', NOW())",
            0,
            0,
        )

    def _next(self, req: Request, steps: list[tuple[str, int, int]]) -> None:
        if not steps:
            self.loop.after(self.rng.uniform(0.3e-3, 2.0e-3), self._finish, req)
            return
        text, rows_sent, rows_examined = steps.pop(0)
        asked = self.loop.now

        def got(conn: int) -> None:
            req.pool_wait += self.loop.now - asked
            stmt = Statement("api", self.name, self.ip, conn, "honeycomb", text, 0.0)
            stmt.rows_sent, stmt.rows_examined = rows_sent, rows_examined
            stmt.lock_time = self.rng.uniform(2e-6, 12e-6)
            service = self.rng.lognormvariate(-7.2, 0.45)  # ~0.75 ms

            def ran(done: Statement) -> None:
                req.db_time += done.end - done.start
                self.pool.release(conn)
                if rows_sent:  # the cache fill: Set, even if a deferred Delete is on its way
                    req.fills += 1
                    self.cache.set(req.dataset.key, req.dataset.dataset_id)
                self._next(req, steps)

            self.db.execute(stmt, service, ran)

        self.pool.acquire(got)

    def _finish(self, req: Request) -> None:
        self.inflight -= 1
        self.done.append((req, self.loop.now))

    def events(self) -> list[dict[str, Any]]:
        """The requests as wide events (times relative to the start; the caller adds the origin)."""
        return [
            {
                "t": req.start,
                "trace_id": req.trace_id,
                "span_id": req.span_id,
                "server": req.server,
                "endpoint": req.endpoint,
                "key": req.dataset.key,
                "cache": "hit" if req.hit else "miss",
                "pool_wait_ms": round(req.pool_wait * 1000, 3),
                "db_time_ms": round(req.db_time * 1000, 3),
                "duration_ms": round((end - req.start) * 1000, 3),
                "status": 200,
            }
            for req, end in self.done
        ]
