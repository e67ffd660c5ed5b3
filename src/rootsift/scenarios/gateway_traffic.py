"""Traffic on the gateway's network: the egress rate limiter that drops SYNs and the
clients' Poisson arrivals."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from rootsift.scenarios.sim import Loop


@dataclass
class Limiter:
    """A token bucket on new connections (SYNs) from one egress IP to one upstream."""

    rate: float
    burst: float
    active_from: float
    tokens: float = 0.0
    last: float = 0.0
    dropped: int = 0
    first_drop: float | None = None

    def take(self, now: float) -> bool:
        if now < self.active_from:
            return True
        self.tokens = min(self.burst, self.tokens + (now - max(self.last, self.active_from)) * self.rate)
        self.last = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        self.dropped += 1
        if self.first_drop is None:
            self.first_drop = now
        return False


def poisson_arrivals(
    loop: Loop, rng: random.Random, rate: Callable[[float], float], peak: float, until: float, emit: Callable[[], None]
) -> None:
    """Schedule a non-homogeneous Poisson process by thinning: ``emit`` at each arrival."""

    def tick() -> None:
        if rng.random() * peak <= rate(loop.now):
            emit()
        nxt = loop.now + rng.expovariate(peak)
        if nxt < until:
            loop.at(nxt, tick)

    loop.at(rng.expovariate(peak), tick)
