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


def judge(got: dict[str, Any], tol: float, level: float, better: str) -> str:
    """A metric's verdict from what its test found (``relative_change``, ``ci``, ``p_value``),
    worse being larger unless ``better`` is ``higher``. A test that found too few events
    to be tested (``enough_events`` false) is not enough data. A rate whose cohort A has no matching
    event carries an ``absolute_tolerance``: a relative change from zero means nothing,
    so unless the change is significant (then infinite, beyond any tolerance) it is no
    change only when the whole interval of the difference (``absolute_ci``) lies within
    that many percentage points."""
    if got.get("enough_events") is False or not (got.get("n_a") and got.get("n_b")):
        return "not enough data"
    change, lo, hi, p = got["relative_change"], got["ci"][0], got["ci"][1], got["p_value"]
    bound = got.get("absolute_tolerance")
    if bound is not None and not p < level:
        a_lo, a_hi = got["absolute_ci"]
        return "no change" if -bound < a_lo and a_hi < bound else "not enough data"
    signed = (-change, -hi, -lo) if better == "higher" else (change, lo, hi)  # worse is positive
    return verdict(*signed, p, tol, level)
