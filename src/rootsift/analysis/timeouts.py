"""Timeouts that were not respected: a duration that should stop at a configured limit
but sometimes runs past it.

The limit is given (``--timeout FIELD=30s``) or inferred from a **pile-up at a ceiling**:
events stopped by a timeout all end at about the same value, so one log-spaced bin in the
upper tail holds many times the events of the bins below it. Events well past the
ceiling (``SLACK`` above it) ran longer than the timeout allows; explain says what they
have in common (which upstream, which client; status fields are left out: they are what
the timeout produced, not where it happened).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rootsift.analysis.counts import BIN_STEPS, bin_sql
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame
from rootsift.store.sqltext import ident

if TYPE_CHECKING:
    from rootsift.analysis.explain import Explanation

SLACK = 1.05
PILE_UP = 5.0
"""A ceiling bin holds at least this many times the mean of the four bins below it…"""
PILE_MIN = 20
"""…and at least this many events."""
MIN_PAST = 5


@dataclass
class Ceiling:
    field: str
    value: float
    events_at: int
    inferred: bool


def duration_fields(frame: Frame) -> list[str]:
    """Numeric fields that look like durations (``*_ms``, ``*_seconds``, ``duration``...)."""
    out = []
    for name, info in frame.fields.items():
        low = name.lower()
        if info.type in ("DOUBLE", "BIGINT") and (
            low.endswith(("_ms", "_us", "_s", "_sec", "_seconds")) or "duration" in low or "latency" in low
        ):
            out.append(name)
    return sorted(out)


def inferred_ceilings(frame: Frame, fields: list[str]) -> list[Ceiling]:
    """Pile-ups at the top of each field's distribution (see the module docstring)."""
    out = []
    rel = frame.relation_sql
    where, params = frame.range_filter()
    for name in fields:
        col = ident(name)
        rows = frame.backend.execute_sql(
            f"SELECT {bin_sql(col)} AS k, count(*), mode({col}) FROM {rel} WHERE ({where}) AND {col} > 0 "
            "GROUP BY 1 ORDER BY 1",
            params,
        ).rows
        if len(rows) < 6:
            continue
        keys = np.array([r[0] for r in rows], dtype=np.float64)
        counts = np.array([r[1] for r in rows], dtype=np.float64)
        cum = np.cumsum(counts) / counts.sum()
        for i in range(len(rows) - 1, 3, -1):
            if cum[i - 1] < 0.9:  # only the upper tail
                break
            below = counts[i - 4 : i].mean()
            adjacent = keys[i] - keys[i - 4] <= 4 + BIN_STEPS  # the four bins below are near
            if counts[i] >= PILE_MIN and adjacent and counts[i] >= PILE_UP * max(below, 1.0):
                out.append(Ceiling(name, float(rows[i][2]), int(counts[i]), True))
                break
    return out


def given_ceilings(frame: Frame, limits: dict[str, float]) -> list[Ceiling]:
    return [Ceiling(name, value, 0, False) for name, value in limits.items() if name in frame.fields]


def past_ceiling(frame: Frame, ceiling: Ceiling, explain: Any) -> Finding | None:
    """A finding for the events that ran past ``ceiling``, with what they have in common."""
    limit = ceiling.value * SLACK
    result: Explanation = explain(
        select=f"{ident_text(ceiling.field)} > {limit!r}", baseline=f"{ident_text(ceiling.field)} <= {limit!r}"
    )
    past = result.selection["events"]
    if past < MIN_PAST:
        return None
    # explain lists its cause set first, and a set has no order: the strongest single
    # finding is what the timed-out events have most in common
    shared = [f for f in result.findings if f.kind in ("dimension", "combination") and not outcome(f)]
    top = min(shared, key=lambda f: ("within" in f.detail, -f.score, f.p_value), default=None)
    detail: dict[str, Any] = {
        "ceiling": ceiling.value,
        "inferred": ceiling.inferred,
        "events_past": past,
        "events_within": result.baseline["events"],
    }
    if ceiling.inferred:
        detail["events_at_ceiling"] = ceiling.events_at
    finding = Finding(
        "timeout",
        top.score if top else 0.0,
        top.p_value if top else 1.0,
        q_value=top.q_value if top else 1.0,
        field=ceiling.field,
        value=ceiling.value,
        selection_fraction=top.selection_fraction if top else None,
        baseline_fraction=top.baseline_fraction if top else None,
        selection_count=float(past),
        baseline_count=float(result.baseline["events"]),
        detail=detail,
    )
    if top is not None:
        finding.conditions = top.conditions or [{"field": top.field, "value": top.value}]
        finding.detail["field"] = ceiling.field
        finding.detail["value"] = ceiling.value
    return finding


def outcome(finding: Finding) -> bool:
    """A status says what a timeout produced, not where it happened: not an explanation of it."""
    names = [c["field"] for c in finding.conditions or []] or [str(finding.field)]
    return any("status" in str(n).lower() for n in names)


def ident_text(name: str) -> str:
    """A field name as the filter language writes it: backquoted, so any name reads as a field."""
    return "`" + name.replace("`", "``") + "`"
