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

from rootsift.analysis import weighted
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN
from rootsift.store.sqltext import ident

PERIOD = timedelta(days=1)
MIN_PERIODS = 3
SLOTS = 24
"""The hours of the day: each value less its hour's median."""


def deseasonalised(frame: Frame, measure: str, start: datetime, end: datetime) -> tuple[str, dict[str, Any] | None]:
    """(SQL for the measure as the scan reads it, what was taken out or None): the column
    itself over fewer than ``MIN_PERIODS`` days, else the column less its hour's median."""
    col = ident(measure)
    if end - start < MIN_PERIODS * PERIOD:
        return col, None
    medians = hourly_medians(frame, measure)
    known = [m for m in medians if m is not None]
    if not known:
        return col, None
    fill = sorted(known)[len(known) // 2]  # an hour with no value has nothing to subtract from
    values = ", ".join(repr(float(fill if m is None else m)) for m in medians)
    expr = f"({col} - CAST([{values}] AS DOUBLE[])[CAST(hour({ident(TIME_COLUMN)}) AS BIGINT) + 1])"
    spread = max(known) - min(known)
    return expr, {"period": "1 day", "by": "hour of day (UTC) median", "hourly_median_spread": round(spread, 6)}


def hourly_medians(frame: Frame, measure: str) -> list[float | None]:
    """The measure's median in each hour of the day (UTC) over the frame's range, hour 0
    first; None for an hour without values: the lower median (of an even number of values,
    the smaller middle one), a row with a count being that many events."""
    where, params = frame.range_filter()
    col, hour = ident(measure), f"CAST(hour({ident(TIME_COLUMN)}) AS BIGINT)"
    rows_in = f"FROM {frame.relation_sql} WHERE ({where}) AND {col} IS NOT NULL"
    if frame.count is None:
        sql = f"SELECT {hour} AS h, quantile_disc({col}, 0.5) {rows_in} GROUP BY 1"
    else:
        w = weighted.count_sql(frame)
        sql = (
            "SELECT h, min(v) FILTER (WHERE cw >= tw / 2) FROM (SELECT h, v, "
            "sum(w) OVER (PARTITION BY h ORDER BY v ROWS UNBOUNDED PRECEDING) AS cw, sum(w) OVER (PARTITION BY h) AS tw "
            f"FROM (SELECT {hour} AS h, {col} AS v, {w} AS w {rows_in}) WHERE w > 0) GROUP BY 1"
        )
    out: list[float | None] = [None] * SLOTS
    for h, m in frame.backend.execute_sql(sql, params).rows:
        if h is not None and m is not None and math.isfinite(float(m)):
            out[int(h)] = float(m)
    return out
