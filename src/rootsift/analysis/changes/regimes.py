"""Regimes: a text field that holds one value per bucket and hands it on in turns (a Raft
leader, the active primary of a database, the live colour of a blue/green pair), and by
which the series' level jumps at each hand-over.

A shift that follows a host into its turn is a property of the host, not of a change made
at that time (the consul case: writes are slow while a server with a large BoltDB freelist
leads, and a change made at the start of such a term shows a large step at its time).
Before change events are judged, the series is **stitched** at every switch: from each
switch on, the jump there (the median of up to ``STITCH`` buckets of the new turn less
that of the old one's last) is taken out. What remains is the level the series would have
kept had the role not moved: steps that show across turns (a change to the whole system),
drift within them, and the daily cycle.

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
used. Assumption: a change that itself moves the role (an election it forces) is judged on
what it did besides moving the role.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from scipy import stats as sps

from rootsift.analysis.changes import series as ser
from rootsift.query.engine import run_query
from rootsift.query.spec import Calculation, QuerySpec
from rootsift.store.duckdb import DuckDBBackend
from rootsift.timeutil import format_duration

DOMINANT = 0.8
COVERAGE = 0.9
MAX_VALUES = 50
"""Fields with more distinct values than this are not looked at as regimes."""
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

    def stitched(self, values: np.ndarray) -> np.ndarray:
        """``values`` with the jump at every switch taken out from the switch on (on the log
        scale when every value is positive)."""
        return stitch(values, self.modes)

    def at_switch(self, index: int) -> bool:
        """Whether bucket ``index`` is within a bucket of a switch (a change point there may be
        placed a bucket off the hand-over)."""
        near = self.modes[max(0, index - 2) : index + 2]
        return len({str(m) for m in near}) > 1


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


def stitch(values: np.ndarray, modes: list[object]) -> np.ndarray:
    """``values`` less, from each switch of ``modes`` on, the jump at that switch."""
    x, positive = _scale(values)
    spans = runs(modes)
    out = x.copy()
    for (b0, _), jump in zip(spans[1:], _jumps(x, spans), strict=True):
        out[b0:] -= jump
    return np.exp(out) if positive else out


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
    p = float(sps.mannwhitneyu(at, np.abs(inside), alternative="greater").pvalue)
    return Regime(field, modes, switches, p) if p < P_JUMP else None


def find(
    backend: DuckDBBackend,
    dataset: str,
    made: ser.SeriesSet,
    groups: Iterable[object],
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
) -> dict[object, Regime]:
    """The regime of each of ``groups`` (series of ``made``) that has one: the text fields
    of ``dataset`` with 2 to ``MAX_VALUES`` values, counted per bucket (per group) through
    the query model, judged on each series."""
    wanted = {g: s for s in made.series for g in [s.group] if g in set(groups)}
    if not wanted:
        return {}
    by = made.by
    fields = backend.fields(dataset)
    texty = [
        n
        for n, f in fields.items()
        if f.type == "VARCHAR" and n != by and not n.endswith("#raw") and not n.startswith("_")
    ][:MAX_FIELDS]
    if not texty:
        return {}
    s, e = (start.isoformat() if start else None), (end.isoformat() if end else None)
    distinct = run_query(
        backend, QuerySpec(dataset, s, e, where, [], [Calculation("count_distinct", n) for n in texty])
    ).rows
    counts = distinct[0] if distinct else [0] * len(texty)
    candidates = [n for n, c in zip(texty, counts, strict=True) if 2 <= int(c or 0) <= MAX_VALUES]
    g = format_duration(made.granularity)
    found: dict[object, Regime] = {}
    for name in candidates:
        keys = ([by] if by else []) + [name]
        spec = QuerySpec(
            dataset, s, e, where, keys, [Calculation("count")], granularity=g, order=["time asc"], limit=ser.MAX_ROWS
        )
        tops: dict[object, dict[datetime, dict[Any, float]]] = {}
        for r in run_query(backend, spec).rows:
            group = r[1] if by else None
            if group in wanted and r[-2] is not None:
                tops.setdefault(group, {}).setdefault(r[0], {})[r[-2]] = float(r[-1] or 0)
        for group, per_bucket in tops.items():
            series = wanted[group]
            modes, shares = [], []
            for t in series.times:
                counts_at = per_bucket.get(t) or {None: 1.0}
                top = max(counts_at, key=lambda v: counts_at[v])
                modes.append(top)
                shares.append(counts_at[top] / (sum(counts_at.values()) or 1.0))
            regime = judge(name, series.values, modes, np.array(shares))
            if regime is not None and (group not in found or regime.p_value < found[group].p_value):
                found[group] = regime
    return found
