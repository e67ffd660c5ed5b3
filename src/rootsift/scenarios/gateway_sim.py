"""The gateway's mechanism on the event loop: proxy instances with a bounded worker pool
and accept queue, upstream calls with connect/read timeouts, an egress rate limiter that
drops SYNs, and a load balancer that health-checks through the same worker pool.

A request that finds no free worker waits in the accept queue; one that waits longer
than ``idle_timeout`` is answered 503 without ever reaching an upstream. A connect that
loses its SYN to the limiter is retransmitted on the kernel's schedule (1, 3, 7, 15, 31,
63 s after the first SYN, giving up at 127 s); a client path that applies the configured
connect timeout gives up at that timeout (504), the path that does not waits for the
kernel — holding its worker the whole time.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field

from rootsift.scenarios.gateway_traffic import Limiter
from rootsift.scenarios.sim import Loop

SYN_SCHEDULE = (1.0, 3.0, 7.0, 15.0, 31.0, 63.0, 127.0)
"""Seconds after the first SYN at which Linux retransmits (tcp_syn_retries = 6); the last gives up."""
TIME_WAIT = 60.0
SYN_LOSS = 0.002


@dataclass
class Upstream:
    """A proxied service and how the gateway talks to it."""

    name: str
    client: str  # the HTTP client path; only "apache" ignores connect_timeout
    connect_timeout: float
    read_timeout: float
    median: float  # seconds to the response header
    sigma: float
    share: float
    addrs: list[str]
    paths: list[str]

    @property
    def applies_connect_timeout(self) -> bool:
        return self.client != "apache"


@dataclass
class Request:
    """One request through one gateway instance; times are seconds of simulated time."""

    kind: str  # "api" or "health"
    remote: str
    path: str
    upstream: Upstream | None
    arrive: float
    patience: float  # the client closes its socket after this long
    start: float = -1.0
    connect_start: float = 0.0
    connected: float = -1.0
    header: float = -1.0
    end: float = -1.0
    status: int = 0
    upstream_status: int = 0
    upstream_addr: str = ""
    body: int = 0
    done: bool = False
    key: int = 0


@dataclass
class Instance:
    """One proxy instance: its pool, queue, sockets and standing with the load balancer."""

    name: str
    az: str
    workers: int
    queue_max: int
    busy: int = 0
    queue: deque[Request] = field(default_factory=deque)
    queued: int = 0
    held: set[int] = field(default_factory=set)
    active: dict[int, Request] = field(default_factory=dict)
    closes: deque[float] = field(default_factory=deque)
    in_service: bool = True
    fail_streak: int = 0
    ok_streak: int = 0
    hc_failures: int = 0
    requests_total: int = 0
    rejected_total: int = 0
    removals: list[tuple[float, float | None]] = field(default_factory=list)
    first_saturated: float | None = None
    first_hc_failure: float | None = None
    finished: list[Request] = field(default_factory=list)


class Gateway:
    """Runs the instances, the upstream calls and the load balancer's health checks."""

    def __init__(
        self,
        loop: Loop,
        rng: random.Random,
        instances: list[Instance],
        limiters: dict[tuple[str, str], Limiter],
        idle_timeout: float,
        hc: tuple[float, float, int, int],
    ) -> None:
        self.loop, self.rng, self.instances, self.limiters = loop, rng, instances, limiters
        self.idle_timeout = idle_timeout
        self.hc_interval, self.hc_timeout, self.unhealthy_after, self.healthy_after = hc
        self._seq = 0

    # --- arrivals and the worker pool -------------------------------------------------
    def route(self, req: Request) -> None:
        """The load balancer: any in-service instance; all of them when none is (fail open)."""
        pool = [i for i in self.instances if i.in_service] or self.instances
        self.accept(self.rng.choice(pool), req)

    def accept(self, inst: Instance, req: Request) -> None:
        self._seq += 1
        key = req.key = self._seq
        inst.requests_total += 1
        inst.active[key] = req
        if inst.busy < inst.workers:
            self._start(inst, key, req)
        elif inst.queued < inst.queue_max:
            inst.queue.append(req)
            inst.queued += 1
            if inst.first_saturated is None:
                inst.first_saturated = self.loop.now
            self.loop.after(self.idle_timeout, self._queue_timeout, inst, key, req)
        else:
            inst.rejected_total += 1
            self._finish(inst, key, req, 503, worker=False)

    def _queue_timeout(self, inst: Instance, key: int, req: Request) -> None:
        if req.start < 0 and not req.done:
            inst.queued -= 1
            self._finish(inst, key, req, 503, worker=False)

    def _start(self, inst: Instance, key: int, req: Request) -> None:
        inst.busy += 1
        req.start = self.loop.now
        if req.upstream is None:
            self.loop.after(self.rng.uniform(0.0005, 0.003), self._finish, inst, key, req, 200)
            return
        up = req.upstream
        req.upstream_addr = self.rng.choice(up.addrs)
        req.connect_start = self.loop.now
        if up.applies_connect_timeout:
            self.loop.after(up.connect_timeout, self._connect_timeout, inst, key, req)
        self._syn(inst, key, req, 0)

    def _next_from_queue(self, inst: Instance) -> None:
        while inst.queue and inst.busy < inst.workers:
            req = inst.queue.popleft()
            if req.done:
                continue
            inst.queued -= 1
            self._start(inst, req.key, req)

    # --- the upstream call ------------------------------------------------------------
    def _syn(self, inst: Instance, key: int, req: Request, attempt: int) -> None:
        if req.done:
            return
        up = req.upstream
        assert up is not None
        limiter = self.limiters.get((inst.az, up.name))
        # Besides the limiter, a SYN is now and then lost anywhere (the background noise
        # that shows each client path's connect behaviour in every zone).
        lost = self.rng.random() < SYN_LOSS
        if not lost and (limiter is None or limiter.take(self.loop.now)):
            self.loop.after(self.rng.uniform(0.0004, 0.002), self._connected, inst, key, req)
        elif attempt + 1 < len(SYN_SCHEDULE):
            self.loop.at(req.connect_start + SYN_SCHEDULE[attempt], self._syn, inst, key, req, attempt + 1)
        else:
            self.loop.at(req.connect_start + SYN_SCHEDULE[-1], self._fail, inst, key, req, 502)

    def _connect_timeout(self, inst: Instance, key: int, req: Request) -> None:
        if not req.done and req.connected < 0:
            self._fail(inst, key, req, 504)

    def _fail(self, inst: Instance, key: int, req: Request, status: int) -> None:
        if not req.done:
            req.upstream_status = status
            self._finish(inst, key, req, status)

    def _connected(self, inst: Instance, key: int, req: Request) -> None:
        if req.done:
            return
        up = req.upstream
        assert up is not None
        req.connected = self.loop.now
        wait = self.rng.lognormvariate(math.log(up.median), up.sigma)
        if wait > up.read_timeout:
            self.loop.after(up.read_timeout, self._fail, inst, key, req, 504)
            return
        req.header = self.loop.now + wait
        req.upstream_status = 200 if self.rng.random() > 0.004 else 404
        req.body = self.rng.randint(300, 9000) if req.upstream_status == 200 else 152
        self.loop.at(req.header + self.rng.uniform(0.0002, 0.004), self._finish, inst, key, req, req.upstream_status)

    def _finish(self, inst: Instance, key: int, req: Request, status: int, worker: bool = True) -> None:
        now = self.loop.now
        req.done, req.end = True, now
        # The client (or the load balancer) hung up before the answer: nginx logs 499.
        req.status = 499 if now - req.arrive > req.patience else status
        if req.status in (503, 504, 502) and not req.body:
            req.body = 0 if status == 503 and req.start < 0 else 160
        inst.active.pop(key, None)
        if req.connected >= 0:
            inst.closes.append(now)
        inst.finished.append(req)
        if worker:
            inst.busy -= 1
            self._next_from_queue(inst)

    # --- the load balancer --------------------------------------------------------------
    def health_check(self, inst: Instance, lb_addr: str) -> None:
        req = Request("health", lb_addr, "/healthcheck", None, self.loop.now, self.hc_timeout)
        self.accept(inst, req)
        self.loop.after(self.hc_timeout, self._judge, inst, req)
        self.loop.after(self.hc_interval, self.health_check, inst, lb_addr)

    def _judge(self, inst: Instance, req: Request) -> None:
        ok = req.done and req.status == 200
        if ok:
            inst.fail_streak, inst.ok_streak = 0, inst.ok_streak + 1
            if not inst.in_service and inst.ok_streak >= self.healthy_after:
                inst.in_service = True
                inst.removals[-1] = (inst.removals[-1][0], self.loop.now)
            return
        inst.hc_failures += 1
        if inst.first_hc_failure is None:
            inst.first_hc_failure = self.loop.now
        inst.ok_streak, inst.fail_streak = 0, inst.fail_streak + 1
        if inst.in_service and inst.fail_streak >= self.unhealthy_after:
            inst.in_service = False
            inst.removals.append((self.loop.now, None))

    # --- sockets, for the metrics -------------------------------------------------------
    def sockets(self, inst: Instance) -> dict[str, int]:
        """TCP sockets by state: client sockets held (CLOSE_WAIT once the client hung up),
        upstream connects in flight (SYN_SENT), upstream connections, recent closes."""
        now = self.loop.now
        while inst.closes and inst.closes[0] < now - TIME_WAIT:
            inst.closes.popleft()
        states = {"established": 0, "close_wait": 0, "syn_sent": 0, "time_wait": len(inst.closes)}
        for req in inst.active.values():
            states["close_wait" if now - req.arrive > req.patience else "established"] += 1
            if req.start >= 0 and req.upstream is not None:
                states["established" if req.connected >= 0 else "syn_sent"] += 1
        return states
