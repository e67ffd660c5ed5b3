"""canary: compare re-run on a schedule, its false alarm rate held over the whole watch.

Looking again and again at a growing comparison and stopping at the first significant
look inflates the false alarm rate: 30 looks at 5 % each raise a false alarm on over a quarter
of A/A rollouts. The watch's ``alpha`` is spent over its looks by a **group-sequential
boundary**, the nominal level each look is tested at:

- ``pocock`` (default): the same level at every look, the largest one for which the
  chance that *any* look crosses stays ``alpha``. Looks at one growing sample are
  strongly correlated (look 20 holds all of look 19's events), so that level is far above
  ``alpha / looks``: 30 looks get 0.0064 each, not 0.0017. A regression is caught as soon
  as it is clear.
- ``obrien-fleming``: very strict early, close to ``alpha`` at the end: no early stop on a
  handful of events, the most power at the last look.
- ``bonferroni``: ``alpha / looks`` each, valid whatever the correlation, the most
  conservative.

The two group-sequential boundaries rest on the standard model of a statistic computed
on accumulating data (Jennison & Turnbull, ch. 3): its z-scores at the looks behave like
a Brownian motion sampled at the looks' information, taken here as equally spaced (one
look per interval, traffic steady). They are found by simulating that motion (a fixed
seed, so the same watch gets the same levels). Each look is a ``compare`` at its level,
which splits it over the metrics by Bonferroni, so the gate holds ``alpha`` over the
looks and the metrics together.

Live or replayed, the looks follow one ``schedule``: look k at ``from + k × every``, the
last at ``from + for``, each comparing the events up to its time. Live, a look waits for
its time; a replay does not wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from rootsift.analysis import distributions as dist
from rootsift.analysis.compare import Comparison
from rootsift.analysis.defaults import BOUNDARIES
from rootsift.errors import StoreLockedError, UsageError

PATHS = 100_000
"""Simulated paths for a boundary: its level is within ±0.0015 of ``alpha`` (2 SE at 5 %)."""
DRAWS = 40_000_000
"""At most this many normal draws per boundary (fewer paths for very many looks)."""
SEED = 20261121
RETRY = 1.0
"""Seconds between attempts to read a store another process is writing."""


def levels(looks: int, alpha: float, boundary: str = "pocock") -> list[float]:
    """The nominal two-sided level of each of ``looks`` looks, so that the chance that any
    crosses under no change is ``alpha`` (see the module docstring)."""
    if boundary not in BOUNDARIES:
        raise UsageError(f"--boundary {boundary!r}: say one of {', '.join(BOUNDARIES)}")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha}: must be between 0 and 1")
    if looks < 1:
        raise UsageError("a watch needs at least one look")
    if boundary == "bonferroni":
        return [alpha / looks] * looks
    if looks == 1:
        return [alpha]
    k = np.arange(1, looks + 1, dtype=np.float64)
    # the boundary is c / w_k in z: pocock a constant, O'Brien-Fleming c * sqrt(looks / k)
    w = np.ones(looks) if boundary == "pocock" else np.sqrt(k / looks)
    c = float(np.quantile(_max_statistic(looks, w), 1 - alpha))
    return [float(2 * dist.norm_sf(c / wk)) for wk in w]


def _max_statistic(looks: int, w: np.ndarray) -> np.ndarray:
    """max over the looks of |Z_k| w_k for simulated Brownian paths (unit information per look)."""
    rng = np.random.default_rng(SEED)
    paths = int(min(PATHS, max(20_000, DRAWS // looks)))
    scale = (w / np.sqrt(np.arange(1, looks + 1))).astype(np.float32)
    out = np.empty(paths)
    chunk = max(1, 4_000_000 // looks)
    for lo in range(0, paths, chunk):
        hi = min(paths, lo + chunk)
        steps = rng.standard_normal((hi - lo, looks), dtype=np.float32)
        out[lo:hi] = np.abs(np.cumsum(steps, axis=1) * scale).max(axis=1)
    return out


@dataclass
class Look:
    """One evaluation of the watch: its comparison, or why there was none."""

    look: int
    of: int
    level: float
    upto: datetime
    """The end of the events it saw: the look's time."""
    result: Comparison | None = None
    skipped: str | None = None
    waited: int = 0
    """Attempts that met another process writing the store."""

    @property
    def regressed(self) -> bool:
        return self.result is not None and self.result.verdict == "regression"

    def as_dict(self) -> dict[str, Any]:
        head: dict[str, Any] = {"look": self.look, "of": self.of, "level": float(f"{self.level:.4g}")}
        head["upto"] = self.upto.isoformat().replace("+00:00", "Z")
        if self.waited:
            head["busy_attempts"] = self.waited
        if self.skipped is not None:
            return head | {"skipped": self.skipped}
        assert self.result is not None
        return head | self.result.as_dict()


Compare = Callable[[float, datetime], Comparison]
"""Run the comparison at a level, over the events up to a time."""


def schedule(start: datetime, every: timedelta, total: timedelta) -> list[datetime]:
    """The looks' times, live or replayed: look k at ``start + k * every`` for k = 1, 2, …,
    the last at ``start + total`` (sooner than a whole interval after the one before when
    ``total`` is not a multiple of ``every``). Each look sees the events up to its time,
    so the first covers one interval and the last the whole watch.

    >>> [t.minute for t in schedule(datetime(2024, 3, 1), timedelta(minutes=4), timedelta(minutes=10))]
    [4, 8, 10]
    """
    if every <= timedelta(0) or total < every:
        raise UsageError(f"--every {every} must be positive and no longer than --for {total}")
    looks = -(-total // every)  # the ceiling
    return [min(start + k * every, start + total) for k in range(1, looks + 1)]


def watch(
    run: Compare,
    *,
    start: datetime,
    every: timedelta,
    total: timedelta,
    alpha: float,
    boundary: str = "pocock",
    replay: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Iterator[Look]:
    """Evaluate at each of ``schedule(start, every, total)``'s times, stopping after the
    first regression; each look compares the events up to its time.

    Live, a look whose time is still to come is waited for (one whose time has passed,
    when ``start`` is in the past, runs at once, as a replay would); when another process
    is writing the store, the look retries every ``RETRY`` seconds for up to one interval
    after its time, and is then skipped (its share of ``alpha`` unspent, so the gate
    stays valid). A replay never waits, and skips a look the store refuses.
    """
    times = schedule(start, every, total)
    tested = levels(len(times), alpha, boundary)
    for k, at in enumerate(times, 1):
        if not replay:
            sleep(max(0.0, (at - now()).total_seconds()))
        look = Look(k, len(times), tested[k - 1], at)
        while True:
            try:
                look.result = run(tested[k - 1], at)
                break
            except StoreLockedError as exc:
                look.waited += 1
                if replay or (now() - at).total_seconds() + RETRY > every.total_seconds():
                    look.skipped = f"the store stayed busy for the whole interval: {exc}"
                    break
                sleep(RETRY)
        yield look
        if look.regressed:
            return


def began_now() -> datetime:
    """The start of a live watch with no ``--from``: now, to the second."""
    return datetime.now(UTC).replace(microsecond=0)
