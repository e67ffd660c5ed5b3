"""What an analysis returns: findings with their evidence, and warnings.

The JSON form is the contract other tools rely on (docs/explain.md): ``findings`` most
explanatory first, each naming the ``field`` and ``value`` (or ``conditions``) it points
at, its ``score`` and the numbers behind it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from rootsift.timeutil import iso_z

MISSING = None
"""A field absent from an event is a value of its own: ``None`` here, ``null`` in JSON."""


WHOLE_DETAIL = ("suspect",)
"""Kinds whose detail is the whole finding (a change event: no field, shares or counts)."""


@dataclass
class Finding:
    """One thing that differs between the selection and the baseline."""

    kind: str  # dimension | measure | combination
    score: float
    p_value: float
    q_value: float = 1.0
    field: str | None = None
    value: Any = None
    conditions: list[dict[str, Any]] | None = None
    selection_fraction: float | None = None
    baseline_fraction: float | None = None
    selection_count: float = 0.0
    baseline_count: float = 0.0
    effect: float = 0.0
    """Difference of shares (dimension, combination) or Cliff's delta (measure), signed."""
    detail: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        if self.kind in WHOLE_DETAIL:
            return {"kind": self.kind, **self.detail}
        out: dict[str, Any] = {"kind": self.kind}
        if self.conditions is not None:
            out["conditions"] = self.conditions
        else:
            out["field"] = self.field
            if self.kind != "measure":
                out["value"] = self.value
        out.update(
            selection_fraction=_round(self.selection_fraction),
            baseline_fraction=_round(self.baseline_fraction),
            effect=_round(self.effect),
            score=_round(self.score),
            p_value=_sig(self.p_value),
            q_value=_sig(self.q_value),
            counts={"selection": _num(self.selection_count), "baseline": _num(self.baseline_count)},
        )
        out.update(self.detail)
        return out

    def describe(self) -> str:
        """``field = value``, ``a = x and b = y`` or the field name of a measure."""
        if self.conditions is not None:
            return " and ".join(f"{c['field']} = {show(c['value'])}" for c in self.conditions)
        if self.kind == "measure":
            return str(self.field)
        return f"{self.field} = {show(self.value)}"


def show(value: Any) -> str:
    if value is MISSING:
        return "(missing)"
    if isinstance(value, str):
        return f'"{value}"' if value == "" or value.strip() != value or " " in value else value
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


iso = iso_z


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), digits)


def _sig(p: float) -> float:
    return float(f"{p:.4g}")


def _num(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(float(x), 3)
