"""``investigate --changes DATASET``: the change events ranked as suspects of the onset
investigate found, with the evidence ``changes`` measures (``changes/suspects.py``): an
event after the onset's bucket is listed as ``after`` and never as a cause. Before it,
an event with evidence of its own (the measure stepped at it, one-sided p < ``alpha``,
or it falls within a few buckets of the onset) ranks first, by that evidence; the rest
rank by how close before the onset they came: with no step to tell them apart, the
nearest preceding change is the likelier cause (an effect that ramps up after a deploy
shows no step at the deploy itself). The series is the measure's p50 per bucket (a
stall or a drop: the event count), over the range investigate looked at; when a text field
of the dataset is a regime of it (a leader handed on in turns, ``changes/regimes.py``), the
steps are measured on the series stitched at its hand-overs around each event, as
``changes`` does, and an onset within a bucket of a hand-over gives no event the
coincidence bonus.
"""

from __future__ import annotations

import bisect
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from rootsift.analysis import anomaly as an
from rootsift.analysis.changes import regimes as reg
from rootsift.analysis.changes import series as ser
from rootsift.analysis.changes import suspects as sus
from rootsift.analysis.changes.result import suspect_finding
from rootsift.analysis.findings import Finding
from rootsift.errors import RootsiftError

if TYPE_CHECKING:
    from rootsift.store.duckdb import DuckDBBackend

SHOWN = 5
"""Suspects listed (causes first), plus every event right after the onset, up to this many."""


def onset_suspects(
    backend: DuckDBBackend,
    dataset: str,
    events_dataset: str,
    found: an.Anomaly,
    *,
    start: datetime,
    end: datetime,
    where: str | None,
    alpha: float = 0.05,
) -> tuple[list[Finding], list[str]]:
    """The change events of ``events_dataset`` as ``suspect`` findings of ``found``'s onset."""
    counting = found.kind in ("stall", "throughput") or found.measure is None
    measure = ser.parse_measure("count" if counting else f"p50({found.measure})")
    made = ser.build(backend, dataset, measure, start=start, end=end, where=where)
    warnings = list(made.warnings)
    if not made.series or len(made.series[0].times) < 2:
        return [], [*warnings, f"--changes {events_dataset}: too few buckets to rank change events against"]
    s = made.series[0]
    at = max(0, bisect.bisect_right(s.times, found.start) - 1)  # the bucket holding the onset
    up = found.detail.get("direction", "up") != "down" and found.kind != "stall"
    events, more = sus.load_events(backend, events_dataset, start - timedelta(days=sus.MAX_LAG_DAYS), end)
    warnings += more
    values, early = s.values, [s.times[at]]
    regime = None
    try:
        found_regimes = reg.find(backend, dataset, made, [s.group], s.times[at], start=start, end=end, where=where)
        regime = found_regimes.get(s.group)
    except RootsiftError as exc:  # the ranking stands without it
        warnings.append(f"regime fields not looked for: {exc}")
    around = None
    if regime is not None:  # judged on the series stitched at the hand-overs, around each event
        window = reg.day_window(made.granularity)
        around = regime.stitcher(s.values, window, at)
        early = [t for t in early if not regime.at_switch(s.times.index(t))]
    ranked = sus.rank(events, s.times, values, at, 1 if up else -1, None, early, None, around)
    for x in ranked:
        x.regime = regime.field if regime is not None else None
    causes = sorted(
        (x for x in ranked if x.relation != "after"),
        key=lambda x: (
            not (x.coincides or x.step_p < alpha),
            -sus.evidence(x) if x.coincides or x.step_p < alpha else x.lead_seconds,
        ),
    )[:SHOWN]
    later = [x for x in ranked if x.relation == "after"][: max(0, SHOWN - len(causes))]
    findings = []
    for x in causes + later:
        d: dict[str, Any] = suspect_finding(x, measure.label, s.times[at], found.start)
        findings.append(Finding("suspect", float(d["score"]), float(d["p_value"]), detail=d))
    return findings, warnings
