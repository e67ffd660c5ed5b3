"""A measure's daily cycle, taken out before the shift scan looks for its region.

A gauge, a temperature, a request rate rise and fall each day. Read against one line for
the whole range, its high values fall in the same hours every day, and the most surprising
run of them is the weeks where the cycle happens to sit highest: a 50–80-day region on a
60-day series, or a fall seen from the next trough only. When the range covers at least
``MIN_PERIODS`` days, the scan reads each value less the median of its hour of the day
(UTC) over the whole range. The median, not the mean: an incident of a few hours moves it
little, and a step that lasts days moves every hour's median alike, so the step stays.

Assumed: the cycle is daily and the same every day (a weekly cycle, or hours that drift
with daylight saving, are not taken out); with fewer than three days the cycle cannot be
told from the incident and the values are read as they are.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import weighted
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN

PERIOD = timedelta(days=1)
MIN_PERIODS = 3
SLOTS = 24
"""The hours of the day: each value less its hour's median."""


def deseasonal_value(
    frame: Frame, measure: str, start: datetime, end: datetime
) -> tuple[exp.Expr, dict[str, Any] | None]:
    """(the measure as the scan reads it, what was taken out or None): the column itself
    over fewer than ``MIN_PERIODS`` days, else the column less its hour's median."""
    col = q.col(measure)
    if end - start < MIN_PERIODS * PERIOD:
        return col, None
    medians = hourly_medians(frame, measure)
    known = [m for m in medians if m is not None]
    if not known:
        return col, None
    fill = sorted(known)[len(known) // 2]  # an hour with no value has nothing to subtract from
    values = [float(fill if m is None else m) for m in medians]
    expr = exp.paren(exp.Sub(this=col, expression=q.lookup(values, q.hour_of_day(q.col(TIME_COLUMN)))))
    spread = max(known) - min(known)
    return expr, {"period": "1 day", "by": "hour of day (UTC) median", "hourly_median_spread": round(spread, 6)}


def hourly_medians(frame: Frame, measure: str) -> list[float | None]:
    """The measure's median in each hour of the day (UTC) over the frame's range, hour 0
    first; None for an hour without values: the lower median (of an even number of values,
    the smaller middle one), a row with a count being that many events."""
    col, hour = q.col(measure), q.hour_of_day(q.col(TIME_COLUMN))
    if frame.count is None:
        query, params = frame.rows([q.alias(hour, "h"), q.quantile_disc(col, 0.5)], q.not_null(col.copy()))
        query = query.group_by(q.num(1), copy=False)
    else:
        rows, params = frame.rows(
            [q.alias(hour, "h"), q.alias(col, "v"), q.alias(weighted.count_of(frame), "w")], q.not_null(col.copy())
        )
        h, v, w = exp.column("h"), exp.column("v"), exp.column("w")
        ranked = q.select(
            [
                h,
                v,
                q.alias(q.running_sum(w, v.copy(), [h.copy()]), "cw"),
                q.alias(q.over(exp.Sum(this=w.copy()), [h.copy()]), "tw"),
            ],
            rows,
            w.copy() > q.num(0),
        )
        half = exp.Div(this=exp.column("tw"), expression=q.num(2))
        query = q.select([h.copy(), q.where(exp.Min(this=v.copy()), exp.column("cw") >= half)], ranked, group=1)
    out: list[float | None] = [None] * SLOTS
    for at, m in frame.backend.execute(query, params).rows:
        if at is not None and m is not None and math.isfinite(float(m)):
            out[int(at)] = float(m)
    return out
