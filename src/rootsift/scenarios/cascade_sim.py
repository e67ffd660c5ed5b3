"""The moving parts of the cascade scenario: a MySQL that stalls while ``flush logs`` holds
its lock, per-server connection pools that serve waiters in random order, and a TTL
cache without a refresh callback whose expired ``Get`` deletes the key in a deferred task.

Everything runs on the shared event loop (``sim.Loop``); times are seconds since the start.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rootsift.scenarios.sim import Loop


@dataclass
class Statement:
    """One statement as the slow log records it."""

    user: str
    host: str
    ip: str
    conn_id: int
    db: str
    text: str
    start: float
    end: float = 0.0
    lock_time: float = 0.0
    rows_sent: int = 0
    rows_examined: int = 0


class MySQL:
    """Statements run concurrently (one thread per connection); ``flush logs`` holds a global
    lock for its duration, so nothing in flight or arriving during it completes until it
    has: it finishes first, the rest after it with whatever work they had left."""

    def __init__(self, loop: Loop, rng: random.Random) -> None:
        self.loop = loop
        self.rng = rng
        self.inflight: dict[int, tuple[Statement, Callable[[Statement], Any] | None]] = {}
        self.lock_until = 0.0  # end of the current flush, if any
        self.next_conn_id = rng.randrange(1000, 90000)
        self.log: list[Statement] = []

    def connect(self) -> int:
        self.next_conn_id += 1
        return self.next_conn_id

    def execute(self, stmt: Statement, service: float, done: Callable[[Statement], Any]) -> None:
        """Run ``stmt`` needing ``service`` seconds of work; call ``done`` when it completes."""
        now = self.loop.now
        # contention: execution slows a little with the number of statements running
        work = service * (1.0 + 0.04 * len(self.inflight))
        stmt.start, stmt.end = now, now + work
        if now < self.lock_until:
            stmt.end = self.lock_until + work + self.rng.uniform(20e-6, 400e-6)
        self.inflight[id(stmt)] = (stmt, done)
        self.loop.at(stmt.end, self._finish, stmt, stmt.end)

    def flush_logs(self, stmt: Statement, hold: float) -> None:
        """``flush logs``: rotate the binary log while holding the lock for ``hold`` seconds.

        Statements already running cannot commit either: their end moves past the flush's."""
        now = self.loop.now
        self.lock_until = now + hold
        for other, _ in self.inflight.values():
            other.end = self.lock_until + (other.end - now) + self.rng.uniform(20e-6, 400e-6)
            self.loop.at(other.end, self._finish, other, other.end)
        stmt.start, stmt.end = now, self.lock_until
        self.inflight[id(stmt)] = (stmt, None)
        self.loop.at(stmt.end, self._finish, stmt, stmt.end)

    def _finish(self, stmt: Statement, when: float) -> None:
        if when != stmt.end or id(stmt) not in self.inflight:
            return  # rescheduled by a flush
        _, done = self.inflight.pop(id(stmt))
        self.log.append(stmt)
        if done is not None:
            done(stmt)


class Pool:
    """Go's database/sql pool: at most ``max_open`` connections, ``max_idle`` kept idle;
    a released connection goes to a waiter picked at random (the map iteration order of
    ``connRequests``), not the one that waited longest."""

    def __init__(self, loop: Loop, rng: random.Random, db: MySQL, host: str, ip: str, max_open: int) -> None:
        self.loop, self.rng, self.db = loop, rng, db
        self.host, self.ip = host, ip
        self.max_open = max_open
        self.max_idle = max(1, max_open // 2)  # Go keeps 2 idle of many; scaled down with the pool
        self.open = 0
        self.idle: list[int] = []
        self.waiters: list[Callable[[int], Any]] = []

    def acquire(self, callback: Callable[[int], Any]) -> None:
        """Call ``callback(conn)`` with a connection: idle, new, or when one is released."""
        if self.idle:
            callback(self.idle.pop())
        elif self.open < self.max_open:
            self.open += 1
            self._connect(callback)
        else:
            self.waiters.append(callback)

    def release(self, conn: int) -> None:
        if self.waiters:
            self.waiters.pop(self.rng.randrange(len(self.waiters)))(conn)
        elif len(self.idle) < self.max_idle:
            self.idle.append(conn)
        else:
            self.open -= 1  # closed: the next burst opens new connections

    def _connect(self, callback: Callable[[int], Any]) -> None:
        """A new connection: handshake, then the driver's ``select @@max_allowed_packet``."""
        conn = self.db.connect()
        stmt = Statement("api", self.host, self.ip, conn, "", "select @@max_allowed_packet", 0.0, rows_sent=1)
        handshake = self.rng.uniform(0.8e-3, 2.5e-3)
        self.loop.after(
            handshake,
            self.db.execute,
            stmt,
            self.rng.uniform(40e-6, 120e-6),
            lambda _s: callback(conn),
        )


@dataclass
class Entry:
    value: int
    expires: float


@dataclass
class Cache:
    """A TTL cache with no refresh callback: an expired ``Get`` returns a miss and deletes
    the key in a deferred goroutine, which may run after the caller refilled it."""

    loop: Loop
    rng: random.Random
    ttl: float
    store: dict[str, Entry] = field(default_factory=dict)
    pending_deletes: int = 0
    late_deletes: int = 0

    def get(self, key: str, inflight: int) -> bool:
        entry = self.store.get(key)
        if entry is None:
            return False
        if entry.expires > self.loop.now:
            return True
        # goroutine start and the global write lock: slower with more goroutines around
        mean = 50e-6 + 2e-3 * (inflight - 1) + 5e-3 * self.pending_deletes
        self.pending_deletes += 1
        self.loop.after(self.rng.expovariate(1 / mean), self._delete, key, entry)
        return False

    def set(self, key: str, value: int) -> None:
        self.store[key] = Entry(value, self.loop.now + self.ttl)

    def _delete(self, key: str, seen: Entry) -> None:
        self.pending_deletes -= 1
        current = self.store.pop(key, None)
        if current is not None and current is not seen:
            self.late_deletes += 1  # a refill, deleted well before its TTL
