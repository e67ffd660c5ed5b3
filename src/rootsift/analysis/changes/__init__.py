"""``changes``: when each series shifted, and which change came right before (docs/changes.md).

One module per job: ``series`` (the measure per bucket through the query model),
``detect`` (change points and their significance on one series), ``suspects`` (change
events ranked against a change point), ``result`` (findings and JSON), and here the run
that ties them together (false discoveries controlled over every group's change points).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from rootsift.analysis.changes import detect as det
from rootsift.analysis.changes import regimes as reg
from rootsift.analysis.changes import related as rel
from rootsift.analysis.changes import series as ser
from rootsift.analysis.changes import suspects as sus
from rootsift.analysis.changes.result import Changes, SeriesView, Shift
from rootsift.analysis.stats import q_values
from rootsift.errors import RootsiftError
from rootsift.store.duckdb import DuckDBBackend

__all__ = ["Changes", "changes"]

SERIES_SHOWN = 5


def changes(
    backend: DuckDBBackend,
    dataset: str,
    *,
    measure: str = "count",
    by: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
    granularity: str | None = None,
    events: str | None = None,
    related: str | None = None,
    alpha: float = 0.05,
) -> Changes:
    """Change points of ``measure`` per bucket (per ``by`` group) of ``dataset`` in
    [start, end), significant at false discovery rate ``alpha`` over every group's, each
    with the change events of dataset ``events`` ranked as suspects, and the change points
    of dataset ``related``'s series near the largest shift."""
    m = ser.parse_measure(measure)
    if events is not None and events not in {d.name for d in backend.datasets()}:
        raise_unknown(backend, events)
    made = ser.build(backend, dataset, m, by=by, start=start, end=end, where=where, granularity=granularity)
    width = made.granularity
    per_day = int(timedelta(days=1) / width) if timedelta(days=1) % width == timedelta(0) else None
    found: list[tuple[ser.Series, str, det.Point]] = []
    periods = [
        per_day if len(s.times) >= 2 and (s.times[-1] - s.times[0]) / width == len(s.times) - 1 else None
        for s in made.series
    ]
    detections = det.detect_many([s.values for s in made.series], periods)
    for s, d in zip(made.series, detections, strict=True):
        found += [
            (s, aspect, p) for aspect, ps in (("level", d.points), ("slope", d.slope), ("spread", d.spread)) for p in ps
        ]
    q = q_values(np.array([p.p_value for _, _, p in found])) if found else np.zeros(0)
    shifts: list = []
    for (s, aspect, p), qv in zip(found, q, strict=True):
        if qv >= alpha:
            continue
        # a slope's before/after are increments per bucket: measured against the increments
        v = np.diff(s.values) if aspect == "slope" else np.asarray(s.values)
        spread = float(np.subtract(*np.percentile(v, [75, 25]))) or float(np.std(v)) or 1.0
        mid = float(np.median(v))
        departure = (abs(p.after - mid) - abs(p.before - mid)) / spread
        if aspect == "spread":
            spread = max(p.before, p.after, 1e-12)
            departure = (p.after - p.before) / spread
        size = abs(p.after - p.before) / spread
        shift = Shift(s.group, s.times[p.index], s.times[p.index - 1], p, float(qv), size, aspect=aspect)
        shifts.append((departure, shift))
    # level, then slope, then spread; into an unusual regime first (away from the series'
    # median), recoveries last
    order = {"level": 0, "slope": 1, "spread": 2}
    shifts = [x for _, x in sorted(shifts, key=lambda ds: (order[ds[1].aspect], -ds[0], -ds[1].size))]
    out_events: list[datetime] = []
    regime_info: dict[str, object] | None = None
    warnings = list(made.warnings)
    if events is not None:
        lo = start - timedelta(days=sus.MAX_LAG_DAYS) if start else None
        evs, more = sus.load_events(backend, events, lo, end)
        warnings += more
        out_events = [e.time for e in evs]
        by_group = {s.group: s for s in made.series}
        level = [x for x in shifts if x.aspect == "level"]
        regimes: dict[object, reg.Regime] = {}
        try:
            if level:
                groups = {x.group for x in level}
                regimes = reg.find(backend, dataset, made, groups, level[0].time, start=start, end=end, where=where)
        except RootsiftError as exc:  # the ranking stands without it
            warnings.append(f"regime fields not looked for: {exc}")
        for shift in (x for x in shifts if x.aspect in ("level", "slope")):
            s = by_group[shift.group]
            # a change of slope is a step of the increments
            times, values = _read(s, shift.aspect)
            at = times.index(shift.time)
            group = (by, shift.group) if by else None
            onsets = creep(shift, shifts)
            others = [_read(o, shift.aspect) for o in made.series if o.group != shift.group] if by else None
            early, around = onsets[:-1], None
            regime = regimes.get(shift.group) if shift.aspect == "level" else None
            if regime is not None:  # judged on the series stitched at the hand-overs, around each event
                around = regime.stitcher(s.values, reg.day_window(width), at)
                early = [o for o in early if not regime.at_switch(s.times.index(o))]
            shift.suspects = sus.rank(evs, times, values, at, shift.direction, group, early, others, around)
            for x in shift.suspects:
                x.regime = regime.field if regime is not None else None
            shift.onset = onsets[0]
        main_regime = regimes.get(shifts[0].group) if shifts else None
        if main_regime is not None:
            regime_info = {
                "field": main_regime.field,
                "switches": main_regime.switches,
                "p_value": float(f"{main_regime.p_value:.4g}"),
            }
    near: list[rel.Related] = []
    if related is not None:
        if related not in {d.name for d in backend.datasets()}:
            raise_unknown(backend, related, "--related")
        if shifts and shifts[0].aspect == "level":
            main = shifts[0]
            onset = creep(main, shifts)[0]
            near, more = rel.related(backend, related, onset, main.time, width, start=start, end=end, alpha=alpha)
            warnings += more
            # what else moved at an event weighs into its ranking
            main.suspects = sus.corroborate(main.suspects, [(r.series, r.time, r.point.p_value) for r in near], width)
    if not made.series:
        warnings.append(f"no events with {m.label} in the range: nothing to look at")
    shown = sorted(made.series, key=lambda s: -sum(1 for x in shifts if x.group == s.group))[:SERIES_SHOWN]
    return Changes(
        dataset=dataset,
        measure=m.label,
        by=by,
        granularity=width,
        resolution_seconds=made.resolution_seconds,
        alpha=alpha,
        shifts=shifts,
        series=[SeriesView(s.group, s.times, [float(v) for v in s.values]) for s in shown],
        events=out_events,
        changes_dataset=events,
        related=near,
        related_dataset=related,
        warnings=warnings,
        method={
            "detector": (
                "each series read as levels, levels around a Theil-Sen trend, or increments (changes of slope),"
                " the reading chosen by BIC; binary segmentation (l2) on its rank normal scores, penalised"
                " best subset of its first 30 cuts"
            ),
            "readings": {m: sum(d.model == m for d in detections) for m in ("level", "trend", "integrated")},
            "penalty": f"{det.BETA} x long-run variance x log n",
            "false_alarm_rate": det.FALSE_ALARM_RATE,
            "groups": len(made.series),
            "deseasoned_groups": sum(d.seasonal for d in detections),
            "noise": [{"sigma": round(d.sigma, 4), "rho": round(d.rho, 4)} for d in detections[:SERIES_SHOWN]],
            "regime": regime_info,
        },
    )


def _read(s: ser.Series, aspect: str) -> tuple[list[datetime], np.ndarray]:
    """(times, values) of a series as a shift of ``aspect`` is judged on: the increments
    (at the later bucket's time) for a change of slope, else the values."""
    return (s.times[1:], np.diff(s.values)) if aspect == "slope" else (s.times, np.asarray(s.values))


def creep(shift: Shift, shifts: list[Shift]) -> list[datetime]:
    """The times of the run of significant shifts of the same group, each going the same
    way and each starting where the one before ended, that leads to ``shift`` (its own
    time last): a shift often creeps in by steps before its largest jump."""
    own = sorted((s for s in shifts if s.group == shift.group and s.aspect == shift.aspect), key=lambda s: s.time)
    i = own.index(shift)
    while i > 0 and own[i - 1].direction == shift.direction and own[i - 1].point.segment_after[1] == own[i].point.index:
        i -= 1
    return [s.time for s in own[i : own.index(shift) + 1]]


def raise_unknown(backend: DuckDBBackend, name: str, flag: str = "--changes") -> None:
    import difflib

    from rootsift.errors import UsageError

    names = [d.name for d in backend.datasets()]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; datasets: {', '.join(names) or 'none'}"
    raise UsageError(f"{flag} {name!r}: no such dataset{hint}")
