"""What ``changes`` returns: change points and suspects as findings (the JSON contract of
docs/changes.md), the series they were found on, and warnings."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from rootsift.analysis.changes.detect import Point
from rootsift.analysis.changes.related import Related
from rootsift.analysis.changes.suspects import Suspect, score
from rootsift.timeutil import format_duration, iso_z

SUSPECTS_SHOWN = 5
RELATED_SHOWN = 10


@dataclass
class Shift:
    """A significant change point of one group's series, with its suspects."""

    group: object
    time: datetime
    last_before: datetime
    """The last bucket of the regime before: the change happened after its start."""
    point: Point
    q_value: float
    size: float
    """|after − before| over the series' interquartile range: how big, in the data's own spread."""
    suspects: list[Suspect] = field(default_factory=list)
    onset: datetime | None = None
    """The first change point of the run of same-way shifts leading to this one."""
    aspect: str = "level"
    """``level`` (medians either side), ``slope`` (median increment per bucket either side:
    a series read as integrated, detect.py) or ``spread`` (median distance from the level)."""

    @property
    def direction(self) -> int:
        return 1 if self.point.after >= self.point.before else -1


@dataclass
class SeriesView:
    group: object
    times: list[datetime]
    values: list[float]


@dataclass
class Changes:
    dataset: str
    measure: str
    by: str | None
    granularity: timedelta
    resolution_seconds: float
    alpha: float
    shifts: list[Shift]
    series: list[SeriesView]
    events: list[datetime]
    changes_dataset: str | None = None
    related: list[Related] = field(default_factory=list)
    related_dataset: str | None = None
    warnings: list[str] = field(default_factory=list)
    method: dict[str, Any] = field(default_factory=dict)

    def findings(self) -> list[dict[str, Any]]:
        """Most explanatory first: the suspects of the largest shift (causes before the
        change point, strongest step first), then every change point, largest first."""
        out: list[dict[str, Any]] = []
        if self.shifts and self.shifts[0].aspect in ("level", "slope"):
            main = self.shifts[0]
            causes = [s for s in main.suspects if s.relation != "after"][:SUSPECTS_SHOWN]
            out += [self._suspect(main, s) for s in causes]
        out += [self._changepoint(s) for s in self.shifts]
        out += [self._related(r) for r in self.related[:RELATED_SHOWN]]
        return out

    def _related(self, r: Related) -> dict[str, Any]:
        p = r.point
        lead = timedelta(seconds=abs(round(r.lead_seconds)))
        return {
            "kind": "related",
            "series": r.series,
            "dataset": self.related_dataset,
            "time": iso_z(r.time),
            "lead": ("" if r.lead_seconds >= 0 else "-") + format_duration(lead),
            "lead_seconds": round(r.lead_seconds, 3),
            "aspect": r.aspect,
            "before": _r(p.before),
            "after": _r(p.after),
            "effect": _r(p.effect),
            "p_value": float(f"{p.p_value:.4g}"),
            "q_value": float(f"{r.q_value:.4g}"),
            "score": _r(abs(p.effect)),
        }

    def _series_name(self, shift: Shift) -> str:
        return f"{self.measure} {self.by}={shift.group}" if self.by else self.measure

    def _changepoint(self, s: Shift) -> dict[str, Any]:
        p = s.point
        found: dict[str, Any] = {
            "kind": "changepoint",
            "aspect": s.aspect,
            "series": self._series_name(s),
            "time": iso_z(s.time),
            "after_at_least": iso_z(s.last_before),
            "onset": iso_z(s.onset) if s.onset else None,
            "before": _r(p.before),
            "after": _r(p.after),
            "mean_before": _r(p.mean_before),
            "mean_after": _r(p.mean_after),
            "ratio": _r(p.after / p.before) if p.before and s.aspect != "slope" else None,
            "effect": _r(p.effect),
            "size": _r(s.size),
            "score": _r(s.size),
            "p_value": float(f"{p.p_value:.4g}"),
            "q_value": float(f"{s.q_value:.4g}"),
            "suspects": [x.event.name for x in s.suspects if x.relation != "after"][:3],
            "events_after": [x.event.name for x in s.suspects if x.relation == "after"][:3],
        }
        if self.by:
            found.update(field=self.by, value=s.group)
        return found

    def _suspect(self, shift: Shift, s: Suspect) -> dict[str, Any]:
        return suspect_finding(s, self._series_name(shift), shift.time, shift.onset)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "measure": self.measure,
            "by": self.by,
            "changes_dataset": self.changes_dataset,
            "related_dataset": self.related_dataset,
            "granularity": format_duration(self.granularity),
            "resolution_seconds": self.resolution_seconds,
            "alpha": self.alpha,
            "findings": self.findings(),
            "series": [
                {"group": v.group, "times": [iso_z(t) for t in v.times], "values": [_r(x) for x in v.values]}
                for v in self.series
            ],
            "events": [iso_z(t) for t in self.events],
            "method": self.method,
            "warnings": self.warnings,
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 6)


def suspect_finding(s: Suspect, series: str, changepoint: datetime, onset: datetime | None) -> dict[str, Any]:
    """A change event as a ``suspect`` finding of a shift of ``series`` at ``changepoint``
    (``changes``, and ``investigate --changes`` at its onset)."""
    e = s.event
    return {
        "kind": "suspect",
        "event": e.name,
        "time": iso_z(e.time),
        "change_kind": e.kind,
        "fields": {k: v for k, v in e.fields.items() if k != "description"},
        "relation": s.relation,
        "changepoint": iso_z(changepoint),
        "series": series,
        "lead": format_duration(timedelta(seconds=round(s.lead_seconds))),
        "lead_seconds": round(s.lead_seconds, 3),
        "step_z": _r(s.step_z),
        "p_value": float(f"{s.step_p:.4g}"),
        "compared": s.compared,
        "in_scope": s.in_scope,
        "coincides_with_onset": s.coincides,
        "exclusivity": _r(s.exclusivity),
        "exclusivity_z": _r(s.exclusivity_z),
        "regime": s.regime,
        "related": s.related,
        "related_z": _r(s.related_z),
        "onset": iso_z(onset) if onset else None,
        "score": score(s),
    }
