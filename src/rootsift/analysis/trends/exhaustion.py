"""Time until a series' trend reaches a limit, with an interval.

The time is where the fitted line meets the limit; its interval is the set of times
where the limit lies within the line's confidence band (inverse regression, Fieller's
interval): ``|line(τ) − limit| ≤ z · s(τ)``, ``s(τ)² = k σ² (1/n + (τ − t̄)²/Sxx)``, with
σ the residual standard deviation and ``k`` the inflation of the variance by the
residuals' autocorrelation (``Fit.inflation``). When the slope is not clearly away from
zero the band never leaves the limit on one side: the interval is unbounded, and the
limit is "not within the horizon" unless the line itself reaches it sooner.

It is the time the *trend* reaches the limit; single samples touch it earlier by about
the noise (``resid_sd`` tells how much).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rootsift.analysis import distributions as dist
from rootsift.analysis.trends.fitting import Fit

LEVEL = 0.95


@dataclass
class Exhaustion:
    """Hours from the last sample until the trend reaches ``limit`` (None: not within the
    horizon), with the interval's bounds (``high`` None: unbounded)."""

    limit: float
    hours: float | None
    low: float | None
    high: float | None
    horizon_hours: float
    status: str
    """reached (the line is past the limit now), within (the horizon), beyond (the horizon), away (moving away or flat)."""

    def as_dict(self) -> dict[str, Any]:
        def days(h: float | None) -> float | None:
            return None if h is None or math.isinf(h) else round(h / 24, 3)

        return {
            "limit": self.limit,
            "status": self.status,
            "days": days(self.hours),
            "interval_days": [days(self.low), days(self.high)],
            "level": LEVEL,
            "horizon_days": days(self.horizon_hours),
        }


def time_to_limit(f: Fit, limit: float, horizon_hours: float, level: float = LEVEL) -> Exhaustion:
    """When ``f``'s line reaches ``limit``, in hours from the series' last sample. The side
    of the limit the line starts on is the safe side: a series that starts below the limit
    runs into it from below (used memory against MemTotal), one that starts above it from
    above (available memory against 0); a line that has crossed it within the range has
    ``reached`` it."""
    if f.n < 3 or f.sxx <= 0:
        return Exhaustion(limit, None, None, None, horizon_hours, "away")
    start, now = float(f.at(f.t_first)), float(f.at(f.t_last))
    side = 1.0 if start > limit else -1.0
    if (now - limit) * side <= 0:
        return Exhaustion(limit, 0.0, 0.0, 0.0, horizon_hours, "reached")
    if f.slope * side >= 0:  # flat, or moving away from the limit
        return Exhaustion(limit, None, None, None, horizon_hours, "away")
    hours = (limit - now) / f.slope
    low, high = _band_crossings(f, limit, hours, level)
    status = "within" if hours <= horizon_hours else "beyond"
    return Exhaustion(limit, hours if status == "within" else None, low, high, horizon_hours, status)


def _band_crossings(f: Fit, limit: float, hours: float, level: float) -> tuple[float, float]:
    """The times (hours after the last sample) where the limit enters and leaves the
    line's band: the roots of ``(D + b u)² = z² k σ² (1/n + u²/Sxx)`` in ``u = τ − t̄``.
    A slope not clearly away from zero leaves the band open: the high end is infinite."""
    df = max(2.0, f.n / f.inflation - 2)  # the effective number of independent samples, less the line's two
    z = float(dist.t_ppf(0.5 + level / 2, df))
    var = z * z * f.inflation * f.resid_sd**2
    d = float(f.at(f.t_mean)) - limit
    a = f.slope**2 - var / f.sxx
    b = 2 * d * f.slope
    c = d * d - var / f.n
    shift = f.t_mean - f.t_last
    disc = b * b - 4 * a * c
    if a > 0:
        r = math.sqrt(max(0.0, disc))
        lo, hi = sorted(((-b - r) / (2 * a), (-b + r) / (2 * a)))
        return max(0.0, lo + shift), max(0.0, hi + shift)
    if a == 0 or disc < 0:
        return 0.0, math.inf
    r = math.sqrt(disc)
    lo, hi = sorted(((-b - r) / (2 * a), (-b + r) / (2 * a)))
    return (max(0.0, hi + shift) if hours + 0 >= hi + shift else 0.0), math.inf
