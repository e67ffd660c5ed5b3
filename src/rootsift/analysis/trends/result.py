"""What ``trends`` returns: findings (trend, component, cohort, exhaustion), the per-group
series of the measure, the chart of the worst series, and warnings."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rootsift.analysis.trends.exhaustion import Exhaustion
from rootsift.analysis.trends.fitting import Fit


@dataclass
class Trends:
    """The result of ``trends``: ``findings`` most explanatory first (docs/trends.md)."""

    dataset: str
    measure: str | None
    by: str | None
    bucket: str | None
    findings: list[dict[str, Any]] = field(default_factory=list)
    series: list[dict[str, Any]] = field(default_factory=list)
    chart: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "measure": self.measure,
            "by": self.by,
            "bucket": self.bucket,
            "findings": [_clean(f) for f in self.findings],
            "series": [_clean(s) for s in self.series],
            "chart": _clean(self.chart) if self.chart else None,
            "warnings": self.warnings,
        }


def trend_numbers(f: Fit) -> dict[str, Any]:
    """A fit's numbers as a finding reports them (per day, relative to the level)."""
    return {
        "slope_per_day": f.per_day,
        "relative_per_day": f.relative_per_day,
        "level": f.level,
        "change": f.change,
        "noise": f.resid_sd,
        "points": f.n,
        "p_value": f.p_value,
        "p_stationary": f.p_stationary,
        "p_drift": f.p_drift if f.unit_root else None,
        "unit_root": f.unit_root,
        "deseasonalised": f.seasons,
        "from": hour_iso(f.t_first),
        "to": hour_iso(f.t_last),
    }


def exhaustion_numbers(x: Exhaustion, f: Fit) -> dict[str, Any]:
    """When the limit is reached, as a date too."""
    out = x.as_dict()
    out["at"] = hour_iso(f.t_last + x.hours) if x.hours is not None else None
    out["interval_at"] = [
        hour_iso(f.t_last + h) if h is not None and not math.isinf(h) else None for h in (x.low, x.high)
    ]
    return out


def hour_iso(hours: float) -> str:
    return datetime.fromtimestamp(hours * 3600, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clean(value: Any) -> Any:
    """Floats rounded to 6 significant digits, NaN and infinities as None (JSON has neither)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else float(f"{value:.6g}")
    return value
