"""Verdicts: a metric's, against its tolerance; the comparison's, over its metrics; the score."""

from __future__ import annotations

import math
from typing import Any


def overall(verdicts: list[str]) -> str:
    for v in ("regression", "improvement"):
        if v in verdicts:
            return v
    return "no change" if verdicts and all(v == "no change" for v in verdicts) else "not enough data"


def score(metrics: list[dict[str, Any]]) -> float | None:
    """The percentage of the metrics' weight without a regression, over the metrics that
    had enough data to say (None when none had)."""
    judged = [m for m in metrics if m["verdict"] != "not enough data"]
    total = sum(float(m["weight"]) for m in judged)
    if not judged or total <= 0:
        return None
    return round(100 * sum(float(m["weight"]) for m in judged if m["verdict"] != "regression") / total, 1)


def verdict(change: float, lo: float, hi: float, p: float, tol: float, level: float) -> str:
    """The verdict for a relative change ``change`` with interval [lo, hi] and p-value ``p``."""
    if math.isnan(lo) or math.isnan(hi):
        return "not enough data"
    if -tol < lo and hi < tol:
        return "no change"
    if p < level:
        if change > tol:
            return "regression"
        if change < -tol:
            return "improvement"
        return "no change"
    return "not enough data"
