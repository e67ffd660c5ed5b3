"""Change events as suspects of a change point: precedence, a step at the event's own time,
and scope.

- **Events** are a dataset's rows: ``timestamp``, the kind (``change.kind``, or ``change``
  or ``kind``), ``service``, ``host``, ``description`` and any other text fields (labels).
- **Precedence.** Only an event before the change point can have caused it; one at or
  after it is listed as ``after``, never as a cause. Events more than ``MAX_LAG_DAYS``
  before it are not looked at.
- **A step at the event.** If the event caused the shift, the series moves *at the
  event*, in the shift's direction, even when the big jump comes later (a change that
  only bites under the next peak's load). The step is a one-sided Mann–Whitney test of the
  buckets in a window after the event (up to the change point) against those in a window
  before it. With a day of history before the window, each bucket is first compared with
  the same bucket a day earlier (log ratio for positive values): a daily cycle does not
  make a step, and an event just before a daily peak is not blamed for the peak.
- **Scope.** An event whose service, host or labels name the group where the shift
  happened (``--by``) is marked ``in_scope``; scope orders suspects of equal evidence.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from rootsift.analysis import distributions as dist
from rootsift.analysis import sql as q
from rootsift.analysis.changes.detect import MIN_SIZE
from rootsift.analysis.mannwhitney import mannwhitneyu_p
from rootsift.store.base import TIME_COLUMN
from rootsift.store.duckdb import DuckDBBackend

KIND_FIELDS = ("change.kind", "change", "kind")
SCOPE_FIELDS = ("service", "host")
MAX_LAG_DAYS = 3.0
WINDOW = timedelta(hours=12)
"""The longest window either side of an event (a sixth of the series' span when shorter)."""
MIN_WINDOW_POINTS = 3
MIN_OTHERS = 2
"""Untouched groups needed for a difference in differences."""
MAX_EVENTS = 10_000


@dataclass
class Event:
    """One change event."""

    time: datetime
    kind: str | None
    description: str | None
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """How a finding names the event: its description, else its kind and service."""
        if self.description:
            return self.description
        parts = [self.kind, *(str(self.fields[f]) for f in SCOPE_FIELDS if self.fields.get(f))]
        return " ".join(p for p in parts if p) or self.time.isoformat()


def load_events(
    backend: DuckDBBackend, dataset: str, start: datetime | None, end: datetime | None
) -> tuple[list[Event], list[str]]:
    """The change events of ``dataset`` in [start, end), with warnings."""
    fields = backend.fields(dataset)
    texty = [n for n, f in fields.items() if f.type == "VARCHAR" and not n.endswith("#raw") and n != "_overflow"]
    query = q.select([q.col(n) for n in (TIME_COLUMN, *texty)], backend.relation(dataset, start, end))
    rows = backend.execute(q.order_by(query, q.num(1)).limit(q.num(MAX_EVENTS + 1), copy=False), []).rows
    warnings = []
    if len(rows) > MAX_EVENTS:
        warnings.append(f"--changes {dataset}: more than {MAX_EVENTS:,} events; the first {MAX_EVENTS:,} are used")
        rows = rows[:MAX_EVENTS]
    kind_field = next((k for k in KIND_FIELDS if k in texty), None)
    events = []
    for r in rows:
        values = {n: v for n, v in zip(texty, r[1:], strict=True) if v is not None}
        events.append(Event(r[0], values.get(kind_field) if kind_field else None, values.get("description"), values))
    return events, warnings


@dataclass
class Suspect:
    event: Event
    relation: str
    """``before`` (a possible cause), ``at`` (inside the change point's bucket: at the
    data's resolution, not after it) or ``after`` (a later bucket: never a cause)."""
    lead_seconds: float
    """How long before the change point the event happened (negative: after it)."""
    step_z: float
    step_p: float
    in_scope: bool
    compared: str
    """``day over day`` or ``level``: what the step at the event was measured on."""
    coincides: bool = False
    """Within ``MIN_SIZE`` buckets before the onset of the shift (or inside its bucket)."""
    exclusivity: float | None = None
    """In scope: the step here less the median step of the other groups (shift's direction)."""
    exclusivity_z: float | None = None
    related: list[str] = field(default_factory=list)
    """Series of ``--related`` with a significant change point at the event (``corroborate``)."""
    related_z: float | None = None
    """The strongest of those change points, as a z (its p-value, one-sided)."""
    regime: str | None = None
    """The field (a role handed on in turns) whose hand-overs were stitched out of the series
    (around the event) before the step was measured (``regimes``), or None."""


def deseasoned(times: list[datetime], values: np.ndarray) -> tuple[np.ndarray, bool]:
    """Each bucket against the same bucket a day before (log ratio when all values are
    positive, else the difference); NaN where there is none. (values, True) when at least
    one bucket had a day-old twin, else the values themselves and False."""
    positive = bool(np.all(values > 0))
    x = np.log(values) if positive else values.astype(np.float64)
    at = {t: i for i, t in enumerate(times)}
    out = np.full(len(values), np.nan)
    for i, t in enumerate(times):
        j = at.get(t - timedelta(days=1))
        if j is not None:
            out[i] = x[i] - x[j]
    return (out, True) if np.isfinite(out).sum() >= MIN_WINDOW_POINTS * 2 else (x, False)


def rank(
    events: list[Event],
    times: list[datetime],
    values: np.ndarray,
    at: int,
    direction: int,
    group: tuple[str, object] | None,
    onsets: list[datetime] | None = None,
    others: list[tuple[list[datetime], np.ndarray]] | None = None,
    around: Callable[[int], np.ndarray] | None = None,
) -> list[Suspect]:
    """The events around the change point at bucket ``at`` (shift ``direction`` +1 or −1),
    causes first, then the events after it. ``onsets``: the earlier change points of the
    run of shifts in the same direction that leads to this one (the creep); an event
    within ``MIN_SIZE`` buckets before one of them, or inside its bucket, *coincides* with
    the shift's onset and ranks first (its own step is small next to the later jumps);
    the rest rank by the step at the event, which for an event right before the jump is
    measured across it, plus (for an event in scope) its exclusivity: ``others`` are the
    other groups' series; the step at the event in this group less the median step at the
    same time in the others, over their spread (a difference in differences, with at
    least ``MIN_OTHERS`` untouched groups). ``around``: the series as the step at an event
    in a given bucket is to be measured on (a regime's hand-overs stitched out around it,
    ``regimes.py``), instead of ``values``."""
    change = times[at]
    span = times[-1] - times[0]
    window = min(WINDOW, span / 6) if span > timedelta(0) else WINDOW
    series, seasonal = deseasoned(times, values)
    how = "day over day" if seasonal else "level"
    t = np.array(times, dtype="datetime64[us]")
    step = (times[1] - times[0]) if len(times) > 1 else timedelta(0)
    rest = [deseasoned(ts, vs)[0] for ts, vs in others or []]
    rest_t = [np.array(ts, dtype="datetime64[us]") for ts, _ in others or []]
    out = []
    for e in events:
        lead = (change - e.time).total_seconds()
        if lead > MAX_LAG_DAYS * 86400:
            continue
        scoped = group is not None and _touches(e, group)
        if e.time >= change + step:  # after the change point's bucket: never a cause
            out.append(Suspect(e, "after", lead, 0.0, 1.0, scoped, how))
            continue
        near = any(o - MIN_SIZE * step <= e.time < o + step for o in onsets or [])
        et = np.datetime64(e.time, "us")
        if around is not None:  # the series as judged at this event
            series = deseasoned(times, around(max(0, bisect.bisect_right(times, e.time) - 1)))[0]
        # up to the next step of the shift (the change point, or an earlier step of its
        # creep), but never fewer than MIN_WINDOW_POINTS buckets: an event right before
        # the jump is measured across it
        end = min((o for o in [*(onsets or []), change] if o > e.time), default=change)
        reach = max(min(end, e.time + window), e.time + MIN_WINDOW_POINTS * step)
        lo, hi = np.datetime64(e.time - window, "us"), np.datetime64(reach, "us")
        before = series[(t >= lo) & (t < et)]
        after = series[(t >= et) & (t < hi)]
        before, after = before[np.isfinite(before)], after[np.isfinite(after)]
        z, p = 0.0, 1.0
        if len(before) >= MIN_WINDOW_POINTS and len(after) >= MIN_WINDOW_POINTS:
            alt = "greater" if direction > 0 else "less"
            p = mannwhitneyu_p(after, before, alt)
            z = float(dist.norm_isf(max(p, 1e-300)))
        relation = "before" if e.time < change else "at"
        # the onset's timing is evidence when the series moved at the event the shift's way
        found = Suspect(e, relation, lead, z, p, scoped, how, near and z > 0)
        if scoped and len(before) and len(after):
            measured = [_step(x, tt, lo, et, hi) for x, tt in zip(rest, rest_t, strict=True)]
            steps = [d for d in measured if d is not None]
            if len(steps) >= MIN_OTHERS:
                did = direction * (float(np.median(after) - np.median(before)) - float(np.median(steps)))
                spread = 1.4826 * float(np.median(np.abs(np.array(steps) - np.median(steps))))
                spread = spread or float(np.std(steps)) or 1e-12
                found.exclusivity, found.exclusivity_z = did, did / spread
        out.append(found)
    return ordered(out)


def ordered(suspects: list[Suspect]) -> list[Suspect]:
    """Causes first (coinciding with the onset, then by evidence, in scope, nearest before),
    then the events after the change point, earliest first."""
    causes = sorted(
        (s for s in suspects if s.relation != "after"),
        key=lambda s: (not s.coincides, -evidence(s), not s.in_scope, s.lead_seconds),
    )
    later = sorted((s for s in suspects if s.relation == "after"), key=lambda s: -s.lead_seconds)
    return causes + later


def corroborate(suspects: list[Suspect], points: list[tuple[str, datetime, float]], step: timedelta) -> list[Suspect]:
    """``suspects`` ranked again with what else moved at each event: a related series'
    significant change point (name, time, p-value) from a bucket before the event (where
    the detector may place it) to ``MIN_SIZE`` buckets after it is evidence that the event
    did something, independent of the step in the shifted series itself; ``evidence``
    combines the two (Stouffer)."""
    for s in suspects:
        if s.relation == "after":
            continue
        near = [(name, p) for name, at, p in points if s.event.time - step <= at <= s.event.time + MIN_SIZE * step]
        if near:
            s.related = sorted({name for name, _ in near})
            s.related_z = float(dist.norm_isf(max(min(p for _, p in near), 1e-300)))
    return ordered(suspects)


def _step(x: np.ndarray, t: np.ndarray, lo: Any, at: Any, hi: Any) -> float | None:
    """The median after ``at`` less the median before it, within [lo, hi); None when thin."""
    before, after = x[(t >= lo) & (t < at)], x[(t >= at) & (t < hi)]
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    if len(before) < MIN_WINDOW_POINTS or len(after) < MIN_WINDOW_POINTS:
        return None
    return float(np.median(after) - np.median(before))


def evidence(s: Suspect) -> float:
    """The step at the event (z), plus its exclusivity (z) when it is in scope and positive;
    with a related series' change point at the event, the two combined (Stouffer: the sum
    over √2)."""
    z = max(0.0, s.step_z) if math.isfinite(s.step_z) else 0.0
    z += max(0.0, s.exclusivity_z or 0.0)
    return (z + s.related_z) / math.sqrt(2) if s.related_z is not None else z


def _touches(e: Event, group: tuple[str, object]) -> bool:
    name, value = group
    if value is None:
        return False
    return str(e.fields.get(name)) == str(value) or any(str(v) == str(value) for v in e.fields.values())


COINCIDES = 10.0
"""Added to the score of an event that coincides with the shift's onset: such an event
ranks above any whose step was measured farther from it."""


def score(s: Suspect) -> float:
    """A suspect's score: ``evidence`` (the step's z, plus the exclusivity's in scope), plus
    ``COINCIDES`` when it coincides with the onset; 0 for an event after the change point."""
    if s.relation == "after":
        return 0.0
    return round(evidence(s) + (COINCIDES if s.coincides else 0.0), 3)
