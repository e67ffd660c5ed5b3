"""Regimes: a text field that holds one value per bucket and hands it on in turns (a Raft
leader, the active primary of a database, the live colour of a blue/green pair), and by
which the series' level jumps at each hand-over.

A shift that follows a host into its turn is a property of the host, not of a change made
at that time (the consul case: writes are slow while a server with a large BoltDB freelist
leads, and a change made at the start of such a term shows a large step at its time).
Before a change event is judged, the series is **stitched** at every switch: from each
switch on, the jump there (the median of up to ``STITCH`` buckets of the new turn less
that of the old one's last) is taken out, each jump read on one side of the event's
bucket only (``Regime.stitched_around``): a jump read across the event would hold the
event's own step too and take it out with the hand-over's (a change made minutes after a
slow leader hands over). With the event in the switch's own bucket (or the last of the
old turn's), the jump is the difference of the two holders' own levels read over their
turns before the shift being explained (``holder_levels``): a holder that led through the
shift would otherwise count the shift as its own level.
What remains is the level the series would have kept had the role not moved: steps that
show across turns (a change to the whole system), drift within them, and the daily cycle.

A field is a regime of a series when, over its buckets:

- **it holds each bucket**: one value has at least ``DOMINANT`` of the bucket's events in
  at least ``COVERAGE`` of the buckets (a per-event attribute, such as the server a request
  went to, is spread over every bucket);
- **turns recur**: at least ``MIN_SWITCHES`` switches, and some value comes back after
  another held (a version rolled out once is not a turn: it is a change, and its step must
  stay);
- **the level jumps at its switches**: the jumps at the switches are larger than the same
  jumps measured inside turns (one-sided Mann–Whitney, p < ``P_JUMP``).

Of several fields that qualify, the one whose switches jump most clearly (smallest p) is
used. Only the events of the groups with a level shift are read, and a text field (the
first ``MAX_FIELDS``) is counted over the whole range only when it passes a cheap screen:
at most ``SCREEN_DISTINCT`` distinct values in the median bucket of the ``SCREEN`` buckets
before the largest shift.

Assumption: a change that itself moves the role (an election it forces) is judged on what
it did besides moving the role.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from rootsift.analysis.changes import series as ser
from rootsift.analysis.mannwhitney import mannwhitneyu_p
from rootsift.query.engine import run_query
from rootsift.query.spec import Calculation, QuerySpec
from rootsift.store.duckdb import DuckDBBackend
from rootsift.timeutil import format_duration

DOMINANT = 0.8
COVERAGE = 0.9
SCREEN = 36
"""Buckets before the shift whose distinct values per field screen the candidates."""
SCREEN_DISTINCT = 2
"""A candidate has at most this many distinct values in the median bucket of the screen."""
MAX_FIELDS = 20
STITCH = 6
"""Buckets either side of a switch whose medians give its jump (fewer when a turn is shorter)."""
MIN_SWITCHES = 5
P_JUMP = 0.01


@dataclass
class Regime:
    """One group's regime: the field, its value per bucket of the group's series, and the
    evidence that the level jumps at its switches."""

    field: str
    modes: list[object]
    switches: int
    p_value: float

    def stitched_around(self, values: np.ndarray, event: int, window: int, until: int | None = None) -> np.ndarray:
        """``values`` less, from each switch on, the jump there, measured on one side of the
        bucket ``event`` (the one a change event fell in) only: a jump measured across the
        event holds the event's own step too, and would take it out with the hand-over's.
        Each side of a switch reads up to ``STITCH`` buckets of its turn, those before the
        event when both sides have some, else those after it; with neither (the event in
        the switch's own bucket, or in the last of the old turn's), the jump is the
        difference of the two holders' own levels (``HolderLevels``, over ``window``
        buckets), read on the buckets before ``until`` (the shift being explained) when
        both held some of them: a holder that led through the shift would otherwise take
        the shift's rise for its own level (the consul case: the leader of the incident's
        peak read 1,450 ms "by itself", a slow leader of 300 ms below one of 100 ms). On the
        log scale when every value is positive."""
        return self.stitcher(values, window, until)(event)

    def stitcher(self, values: np.ndarray, window: int, until: int | None = None) -> Callable[[int], np.ndarray]:
        """``stitched_around`` for each event bucket it is called with, the holders' levels
        fitted once for all of them."""
        x, positive = _scale(values)
        spans = runs(self.modes)
        levels = HolderLevels(x, self.modes, window, until)

        def stitched(event: int) -> np.ndarray:
            out = x.copy()
            for (a0, a1), (b0, b1) in zip(spans, spans[1:], strict=False):
                old, new = (max(a0, a1 - STITCH), a1), (b0, min(b1, b0 + STITCH))
                sides = [((old[0], min(old[1], event)), (new[0], min(new[1], event)))]
                sides.append(((max(old[0], event + 1), old[1]), (max(new[0], event + 1), new[1])))
                usable = [(o, n) for o, n in sides if o[1] > o[0] and n[1] > n[0]]
                if usable:
                    (o0, o1), (n0, n1) = usable[0]
                    jump = float(np.median(x[n0:n1]) - np.median(x[o0:o1]))
                else:
                    jump = levels.jump(a1 - 1, b0)
                out[b0:] -= jump
            return np.exp(out) if positive else out

        return stitched

    def at_switch(self, index: int) -> bool:
        """Whether bucket ``index`` is within a bucket of a switch (a change point there may be
        placed a bucket off the hand-over)."""
        near = self.modes[max(0, index - 2) : index + 2]
        return len({str(m) for m in near}) > 1


class HolderLevels:
    """The holders' own levels (``holder_levels``), each fit made when first needed: on the
    buckets before ``until`` (the shift being explained), and over every bucket for a
    holder that held none of those (or with no ``until``)."""

    def __init__(self, x: np.ndarray, modes: list[object], window: int, until: int | None) -> None:
        self.x, self.modes, self.window = x, modes, window
        self.until = until if until is not None and until >= 2 * STITCH else None
        self._before: dict[str, float] | None = None
        self._whole: np.ndarray | None = None

    def jump(self, old: int, new: int) -> float:
        """The level of the holder of bucket ``new`` less that of bucket ``old``'s."""
        if self.until is not None:
            if self._before is None:
                modes = self.modes[: self.until]
                fitted = holder_levels(self.x[: self.until], modes, self.window)
                self._before = {str(m): float(v) for m, v in zip(modes, fitted, strict=True)}
            a, b = self._before.get(str(self.modes[old])), self._before.get(str(self.modes[new]))
            if a is not None and b is not None:
                return b - a
        if self._whole is None:
            self._whole = holder_levels(self.x, self.modes, self.window)
        return float(self._whole[new] - self._whole[old])


def runs(modes: list[object]) -> list[tuple[int, int]]:
    """[start, end) of each run of equal values."""
    out, s = [], 0
    for i in range(1, len(modes) + 1):
        if i == len(modes) or modes[i] != modes[s]:
            out.append((s, i))
            s = i
    return out


def _scale(values: np.ndarray) -> tuple[np.ndarray, bool]:
    x = np.asarray(values, dtype=np.float64)
    positive = bool(len(x)) and bool(np.all(x > 0))
    return (np.log(x) if positive else x.copy()), positive


def _jumps(x: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    return np.array(
        [
            float(np.median(x[b0 : min(b1, b0 + STITCH)]) - np.median(x[max(a0, a1 - STITCH) : a1]))
            for (a0, a1), (b0, b1) in zip(spans, spans[1:], strict=False)
        ]
    )


BACKFIT_ROUNDS = 5


def day_window(width: timedelta) -> int:
    """Buckets of ``width`` in a day (the common level's running window), at least a turn's
    worth either side of a bucket."""
    return max(2 * STITCH + 1, round(timedelta(days=1) / width))


def holder_levels(x: np.ndarray, modes: list[object], window: int) -> np.ndarray:
    """Each bucket's holder's own level, estimated over all of its turns: x = b(t) +
    L(holder), b a running median over ``window`` buckets, fitted by backfitting (b from
    the series less the levels, each level the median of its holder's buckets less b; the
    levels centred on the median bucket). The fallback of ``Regime.stitched_around`` for a
    switch in the event's own bucket: the slow leaders' drift makes it rough, so it is not
    used where a jump can be read beside the event, and it is fitted on the buckets before
    the shift where it can be (``HolderLevels``)."""
    keys = np.array([str(m) for m in modes])
    holders, index = np.unique(keys, return_inverse=True)
    levels = np.zeros(len(holders))
    half = max(1, window // 2)
    for _ in range(BACKFIT_ROUNDS):
        r = x - levels[index]
        padded = np.pad(r, half, mode="edge")
        base = np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * half + 1), axis=1)[: len(x)]
        levels = np.array([float(np.median((x - base)[index == h])) for h in range(len(holders))])
        levels -= float(np.median(levels[index]))
    return np.asarray(levels[index])


def judge(field: str, values: np.ndarray, modes: list[object], shares: np.ndarray) -> Regime | None:
    """The regime ``field`` makes of one series (its value and that value's share per
    bucket), or None when it is not one (module doc)."""
    if len(values) < 2 * STITCH or float(np.mean(shares >= DOMINANT)) < COVERAGE:
        return None
    spans = runs(modes)
    switches = len(spans) - 1
    if switches < MIN_SWITCHES or len(spans) <= len({str(m) for m in modes}):
        return None
    x, _ = _scale(values)
    at = np.abs(_jumps(x, spans))
    # the same jump measured inside turns, every STITCH buckets (not overlapping)
    inside = [
        float(np.median(x[i : i + STITCH]) - np.median(x[i - STITCH : i]))
        for a, b in spans
        for i in range(a + STITCH, b - STITCH + 1, STITCH)
    ]
    if len(inside) < MIN_SWITCHES:
        return None
    p = mannwhitneyu_p(at, np.abs(inside), "greater")
    return Regime(field, modes, switches, p) if p < P_JUMP else None


def find(
    backend: DuckDBBackend,
    dataset: str,
    made: ser.SeriesSet,
    groups: Iterable[object],
    around: datetime,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
) -> dict[object, Regime]:
    """The regime of each of ``groups`` (series of ``made``) that has one. Through the query
    model, restricted to those groups: first the distinct values of every text field per
    bucket over the ``SCREEN`` buckets before ``around`` (a regime has one or two in most of
    them: a cheap screen), then, for each field that passes, its values counted per bucket
    (per group) over the range, judged on each series."""
    wanted = {s.group: s for s in made.series if s.group in set(groups)}
    if not wanted:
        return {}
    by = made.by
    texty = [
        n
        for n, f in backend.fields(dataset).items()
        if f.type == "VARCHAR" and n != by and not n.endswith("#raw") and not n.startswith("_")
    ][:MAX_FIELDS]
    if not texty:
        return {}
    only = _only(by, list(wanted))
    filt = " and ".join(f"({x})" for x in (where, only) if x) or None
    g = format_duration(made.granularity)
    keys = [by] if by else []
    s, e = (start.isoformat() if start else None), (end.isoformat() if end else None)
    lo = around - SCREEN * made.granularity
    screen = QuerySpec(
        dataset,
        max(lo, start).isoformat() if start else lo.isoformat(),
        around.isoformat(),
        filt,
        keys,
        [Calculation("count_distinct", n) for n in texty],
        granularity=g,
        limit=ser.MAX_ROWS,
    )
    rows = run_query(backend, screen).rows
    per_bucket = np.array([[float(v or 0) for v in r[1 + len(keys) :]] for r in rows]) if rows else None
    if per_bucket is None:
        return {}
    candidates = [n for n, d in zip(texty, np.median(per_bucket, axis=0), strict=True) if d <= SCREEN_DISTINCT]
    found: dict[object, Regime] = {}
    for name in candidates:
        spec = QuerySpec(
            dataset,
            s,
            e,
            filt,
            [*keys, name],
            [Calculation("count")],
            granularity=g,
            order=["time asc"],
            limit=ser.MAX_ROWS,
        )
        tops: dict[object, dict[datetime, dict[Any, float]]] = {}
        for r in run_query(backend, spec).rows:
            group = r[1] if by else None
            if group in wanted and r[-2] is not None:
                tops.setdefault(group, {}).setdefault(r[0], {})[r[-2]] = float(r[-1] or 0)
        for group, counted in tops.items():
            series = wanted[group]
            modes, shares = [], []
            for t in series.times:
                at = counted.get(t) or {None: 1.0}
                top = max(at, key=lambda v: at[v])
                modes.append(top)
                shares.append(at[top] / (sum(at.values()) or 1.0))
            regime = judge(name, series.values, modes, np.array(shares))
            if regime is not None and (group not in found or regime.p_value < found[group].p_value):
                found[group] = regime
    return found


def _only(by: str | None, groups: list[object]) -> str | None:
    """A filter keeping the events of ``groups`` (text values of ``by``), or None (no ``by``,
    or a value that is not text: every event is read)."""
    if not by or not all(isinstance(v, str) for v in groups):
        return None
    name = "`" + by.replace("`", "``") + "`"
    quoted = [
        '"' + str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"'
        for v in groups
    ]
    return f"{name} in ({', '.join(quoted)})"
