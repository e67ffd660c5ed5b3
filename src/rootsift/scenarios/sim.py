"""A small discrete-event loop for the generators: callbacks run in time order.

    loop = Loop()
    loop.at(0.5, lambda: ...)          # absolute time (seconds of simulated time)
    loop.after(0.1, fn, arg)           # relative to now
    loop.run(until=3600.0)

Ties run in the order they were scheduled, so a seeded run is deterministic.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any


class Loop:
    """Simulated time and a queue of callbacks."""

    def __init__(self) -> None:
        self.now = 0.0
        self._queue: list[tuple[float, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()

    def at(self, when: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at simulated time ``when`` (not before now)."""
        heapq.heappush(self._queue, (max(when, self.now), next(self._seq), fn, args))

    def after(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` ``delay`` seconds from now."""
        self.at(self.now + max(0.0, delay), fn, *args)

    def run(self, until: float) -> None:
        """Run callbacks in time order until the queue is empty or the next is after ``until``."""
        while self._queue and self._queue[0][0] <= until:
            self.now, _, fn, args = heapq.heappop(self._queue)
            fn(*args)
        self.now = max(self.now, until)
