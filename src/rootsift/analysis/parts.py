"""Fields that restate the selected measure: its parts and what is derived from it.

When the selection is a threshold on a measure ("slow requests": ``request_time_ms >
3000``), some fields differ in the selection by construction. They say *how* the
selected events were slow, not *where* or *why*:

- a **part** of the same duration: a duration field never larger than the measure on the
  same event (on ``PART_WITHIN`` of the events that have both, in the measure's unit;
  units come from the names, ``_ms``, ``_s``…): ``upstream_response_time_ms`` inside
  ``request_time_ms``, a pool wait and a query time inside a request's duration. Where
  the time went is the decomposition's answer (investigate), not a cause;
- a **derivative**: any numeric field whose ranks follow the measure's, a Spearman rank
  correlation of at least ``DERIVED_RHO`` in absolute value (a copy in seconds, a field
  computed from it, a size the duration is proportional to). A field that rises and
  falls with the measure on normal events is the same quantity seen again.

Both are read over the **baseline** events (the first ``SAMPLE_ROWS`` of them that hold
the measure): the relation holds when nothing is wrong, so it is not an effect of the
selection. A dimension (a text field, an upstream, a zone, a statement) is never a
restatement: a statement that is always slow is a culprit, even when it alone explains
every slow event. Explain lists a restating field's findings after every other finding,
marked ``part_of``, and keeps it out of the combinations and the cause set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.fields import NUMERIC
from rootsift.analysis.frame import Column, Frame, micros_per_unit
from rootsift.query.filters import fields as filter_fields
from rootsift.query.filters import parse_filter

PART_WITHIN = 0.99
DERIVED_RHO = 0.9
SAMPLE_ROWS = 20_000
MIN_ROWS = 50
"""Fewer baseline events holding both fields say nothing either way."""
PARTS_METHOD = (
    f"a numeric field restates a numeric field the selection is defined by when, over the first {SAMPLE_ROWS:,} "
    f"baseline events, it is a duration no larger than it on {PART_WITHIN:.0%} of the events holding both (a part), "
    f"or its Spearman rank correlation with it is at least {DERIVED_RHO} in absolute value (derived); its findings "
    "come after the others and it joins no combination or cause"
)


@dataclass(frozen=True)
class Restatement:
    """``field`` restates ``measure``: ``how`` is ``part`` or ``derived``."""

    field: str
    measure: str
    how: str
    within: float | None
    """The share of the baseline events holding both on which the field is no larger (parts)."""
    rank_correlation: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "measure": self.measure,
            "how": self.how,
            "within": None if self.within is None else round(self.within, 4),
            "rank_correlation": None if self.rank_correlation is None else round(self.rank_correlation, 4),
        }


def selected_measures(frame: Frame) -> list[str]:
    """The numeric fields the selection is defined by (``--select``, not the baseline)."""
    if not frame.select or not frame.select.strip():
        return []
    named = filter_fields(parse_filter(frame.select))
    return sorted(n for n in named if n in frame.fields and frame.fields[n].type in NUMERIC)


def restatements(frame: Frame, candidates: list[str]) -> dict[str, Restatement]:
    """The ``candidates`` (numeric fields) that restate a measure the selection is defined
    by, by field (see the module docstring); empty when the selection names no number."""
    measures = selected_measures(frame)
    names = [c for c in dict.fromkeys(candidates) if c not in measures and frame.fields[c].type in NUMERIC]
    if not measures or not names:
        return {}
    columns: list[Column] = [(q.col(n), f"__p{i}", []) for i, n in enumerate([*measures, *names])]
    # the baseline alone: no scan for the selection
    source, params = frame.baseline_sql([*columns, *frame.order_columns()])
    picked = frame.first(q.select([exp.column(q.name(a)) for _, a, _ in columns], source), SAMPLE_ROWS, True)
    rows = frame.backend.execute(picked, params)
    width = len(measures) + len(names)
    table = np.array(
        [[np.nan if v is None else float(v) for v in r[:width]] for r in rows.rows], dtype=np.float64
    ).reshape(len(rows.rows), width)
    found: dict[str, Restatement] = {}
    for i, measure in enumerate(measures):
        m = table[:, i]
        for j, name in enumerate(names):
            if name in found:
                continue
            x = table[:, len(measures) + j]
            both = ~np.isnan(m) & ~np.isnan(x)
            if int(both.sum()) < MIN_ROWS:
                continue
            got = _restates(name, measure, x[both], m[both])
            if got is not None:
                found[name] = got
    return found


def _restates(name: str, measure: str, x: np.ndarray, m: np.ndarray) -> Restatement | None:
    rho = _spearman(x, m)
    within = None
    scale, unit = micros_per_unit(name), micros_per_unit(measure)
    if scale is not None and unit is not None:
        scaled = x * (scale / unit)
        within = float(np.mean(scaled <= m * 1.01 + 1e-9))
        if within >= PART_WITHIN and np.any(scaled > 0):
            return Restatement(name, measure, "part", within, rho)
    if rho is not None and abs(rho) >= DERIVED_RHO:
        return Restatement(name, measure, "derived", within, rho)
    return None


def _spearman(x: np.ndarray, m: np.ndarray) -> float | None:
    """Spearman's rank correlation (ties at their mean rank); None when either is constant."""
    from rootsift.analysis.distributions import rankdata  # scipy.stats' numbers, not its import

    if np.all(x == x[0]) or np.all(m == m[0]):
        return None
    rx, rm = rankdata(x), rankdata(m)
    return float(np.corrcoef(rx, rm)[0, 1])
