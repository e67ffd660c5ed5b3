"""Finding the anomalous region of a dataset by itself: when a latency (or error-rate)
shift starts and how long it lasts, or a stall.

- **Shift**: each time bucket counts its events and its *bad* events (the measure above
  the range's 95th percentile, or a status ≥ 500). The region is the run of buckets
  whose bad share is most surprising against the rest: the interval maximising the
  binomial likelihood ratio (Kulldorff's scan statistic, ``binomial_llr``), at several
  time scales (``shifts.py``; the measure less its daily cycle over 3 days or more,
  ``seasonal.py``). Its LLR is divided by the buckets' overdispersion (``dispersion``)
  and its p-value bounded by Bonferroni over the intervals tried.
- **Stall**: a run of buckets with far fewer completions than the rate around it,
  followed by a burst: work stopped, then completed all at once. Scanned at every time
  scale in ``timescale.py``, in completion times (``end_time`` when events have one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from scipy.special import xlog1py, xlogy
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import weighted
from rootsift.analysis.findings import iso
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN

BUCKETS = 400
"""Time buckets across the range for the shift scan."""
STALL_MAX_S = 30.0
"""A shift no longer than this may be a stall: it is looked for in and around it."""
BAD_QUANTILES = (0.95, 0.99, 0.999)
"""A latency shift is scanned for with each of these as the line above which an event is bad
(a broad slowdown shows at p95, a short spike only above p99), Bonferroni over the three."""
CHI2_1_MEDIAN = 0.4549364
LOW_QUANTILES = (0.05, 0.01, 0.001)
"""The same lines in the lower tail: a gauge, a throughput or a latency that falls is a region
of more events below them (Bonferroni over all six lines)."""


@dataclass
class Series:
    """Per time bucket: events and bad events (and the bucket starts)."""

    starts: list[datetime]
    width: timedelta
    events: np.ndarray
    bad: np.ndarray


@dataclass
class Anomaly:
    kind: str  # latency | errors | stall
    start: datetime
    end: datetime
    measure: str | None
    threshold: float | None
    score: float
    """The scan's log-likelihood ratio."""
    p_value: float
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "from": iso(self.start),
            "to": iso(self.end),
            "measure": self.measure,
            "threshold": self.threshold,
            "llr": round(self.score, 3),
            "p_value": float(f"{self.p_value:.4g}"),
            **self.detail,
        }


def bad_thresholds(frame: Frame, measure: str, value: exp.Expr | None = None) -> tuple[list[float], list[float]]:
    """The measure's ``BAD_QUANTILES`` and ``LOW_QUANTILES`` over the range (distinct values
    of each); of ``value`` (an expression over the measure: its deseasonalised values) when
    given. Exact: from the two tails alone when the store's sample says where they are
    (``tail_quantiles``), else from every value."""
    value = q.col(measure) if value is None else value
    qs = [*BAD_QUANTILES, *LOW_QUANTILES]
    got: list[Any] | None
    if frame.count is not None:  # each row as the events it stands for
        rows, params = frame.rows([q.alias(value.copy(), "v"), q.alias(weighted.count_of(frame), "w")])
        got = weighted.quantiles(frame.backend, rows, params, qs)[1]
    elif (got := tail_quantiles(frame, value, qs)) is None:
        query, params = frame.rows([q.quantile_cont(value.copy(), qs)])
        got = frame.backend.execute(query, params).rows[0][0]
    values = [None if v is None else float(v) for v in got or []]
    upper, lower = values[: len(BAD_QUANTILES)], values[len(BAD_QUANTILES) :]
    return sorted({v for v in upper if v is not None}), sorted({v for v in lower if v is not None})


TAIL_SHARE = 0.06
"""The tails read for the lines: below the sample's 6th percentile, above its 94th."""
TAIL_MIN_SAMPLED = 2000
"""A sample with fewer values than this places the tails too loosely: every value is read."""


def tail_quantiles(frame: Frame, value: exp.Expr, qs: list[float]) -> list[float | None] | None:
    """``quantile_cont`` of ``value`` at each of ``qs`` (all beyond ``TAIL_SHARE`` of either
    end) over the range, exactly, from the values of the two tails alone: the store's
    sample says where the tails start, a count places each quantile's two order statistics
    in them, and only the tails are sorted. The interpolation between the same two order
    statistics may differ from the engine's in the last bit (never in which values lie
    above the line). None when there is no sample, or a quantile's order statistics lie
    outside the tails read (the sample far off)."""
    sample = frame.backend.sample_relation(frame.dataset, frame.start, frame.end)
    if sample is None:
        return None
    where, params = frame.range_where()
    cuts = [exp.Count(this=value.copy()), *(q.quantile_cont(value.copy(), s) for s in (TAIL_SHARE, 1 - TAIL_SHARE))]
    got = frame.backend.execute(q.select(cuts, sample, where), params).rows[0]
    if got[0] < TAIL_MIN_SAMPLED or got[1] is None or got[2] is None:
        return None
    low_cut, high_cut = float(got[1]), float(got[2])
    bound: list[Any] = []
    counts = [
        exp.Count(this=value.copy()),
        exp.CountIf(this=value.copy() < q.bind(bound, high_cut)),
        exp.CountIf(this=value.copy() <= q.bind(bound, low_cut)),
    ]
    query, params = frame.rows(counts)
    n, under_high, low_n = frame.backend.execute(query, bound + params).rows[0]
    if not n:
        return None
    wanted: dict[str, set[int]] = {"low": set(), "high": set()}
    for at_q in qs:
        h = at_q * (n - 1)
        for i in {math.floor(h), math.ceil(h)}:
            if at_q >= 0.5 and i >= under_high:
                wanted["high"].add(i - under_high)
            elif at_q < 0.5 and i < low_n:
                wanted["low"].add(i)
            else:
                return None
    at: dict[int, float] = {}
    for side, ranks, offset in (("low", wanted["low"], 0), ("high", wanted["high"], under_high)):
        if ranks:
            at |= {int(r) + offset: float(v) for r, v in _ranked(frame, value, side, low_cut, high_cut, ranks)}
    out: list[float | None] = []
    for at_q in qs:
        h = at_q * (n - 1)
        lo, hi = math.floor(h), math.ceil(h)
        if lo not in at or hi not in at:
            return None
        out.append(at[lo] if lo == hi else at[lo] + (h - lo) * (at[hi] - at[lo]))
    return out


def _ranked(
    frame: Frame, value: exp.Expr, side: str, low_cut: float, high_cut: float, ranks: set[int]
) -> list[tuple[Any, ...]]:
    """(rank from 0, value) of the ``ranks`` among the values of one tail (``low``: at or
    below ``low_cut``; ``high``: at or above ``high_cut``), in ascending order."""
    tail = value.copy() <= exp.Placeholder() if side == "low" else value.copy() >= exp.Placeholder()
    values, params = frame.rows([q.alias(value.copy(), "v")], tail)
    v, r = exp.column(q.name("v")), exp.column(q.name("r"))
    rank = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=[exp.Ordered(this=v)]))
    numbered = q.select([v, q.alias(exp.Sub(this=rank, expression=q.num(1)), "r")], values)
    query = q.select([r, v.copy()], numbered, r.copy().isin(*(q.num(i) for i in sorted(ranks))))
    return frame.backend.execute(query, [*params, low_cut if side == "low" else high_cut]).rows


COMPLETION = ("end_time", "end", "completed_at", "end_timestamp", "finished_at")
"""Fields holding when an event completed, when its ``timestamp`` is its start."""


def completion_column(frame: Frame) -> str:
    """The field an event completed at (a stall shows in completions), else ``timestamp``."""
    return next((c for c in COMPLETION if c in frame.fields and frame.fields[c].type == "TIMESTAMP"), TIME_COLUMN)


Bad = tuple[exp.Expr, list[Any]]
"""A definition of a bad event: a condition over the dataset's columns, and the values its
placeholders bind, in order."""


def series(
    frame: Frame,
    bad: exp.Expr,
    bad_params: list[Any],
    width: timedelta,
    time: str = TIME_COLUMN,
    origin: datetime | None = None,
) -> Series:
    """Events and bad events per bucket of ``width`` (by the ``time`` field) over the frame's
    range; ``origin`` is a bucket boundary when given (no bucket straddles it)."""
    return series_of(frame, [(bad, bad_params)], width, time, origin)[0]


def series_of(
    frame: Frame,
    bads: list[Bad],
    width: timedelta,
    time: str | exp.Expr = TIME_COLUMN,
    origin: datetime | None = None,
) -> list[Series]:
    """One ``Series`` per definition of a bad event (``Bad``), all from one pass over the
    data. A row with a count stands for that many events of its bucket."""
    us = max(1, int(width / timedelta(microseconds=1)))
    epoch = datetime(1970, 1, 1)
    offset = 0 if origin is None else int((origin - epoch) / timedelta(microseconds=1)) % us
    ts = q.col(time) if isinstance(time, str) else time
    total = q.event_count(weighted.count_of(frame))
    items = [q.alias(q.bucket_index(q.epoch_us(ts), us, offset), "b"), total]
    items += [q.where(total.copy(), bad.copy()) for bad, _ in bads]
    query, params = frame.rows(items, q.not_null(ts.copy()))
    query = q.order_by(query.group_by(q.num(1), copy=False), q.num(1))
    rows = frame.backend.execute(query, [*(p for _, bound in bads for p in bound), *params]).rows
    if not rows:
        return [Series([], width, np.zeros(0), np.zeros(0)) for _ in bads]
    first, last = int(rows[0][0]), int(rows[-1][0])
    grid = np.zeros((last - first + 1, 1 + len(bads)))
    for row in rows:
        grid[int(row[0]) - first] = [v or 0 for v in row[1:]]
    starts = [epoch + timedelta(microseconds=(first + i) * us + offset) for i in range(len(grid))]
    return [Series(starts, width, grid[:, 0], grid[:, 1 + k]) for k in range(len(bads))]


def binomial_llr(n_in: np.ndarray, k_in: np.ndarray, n_all: float, k_all: float) -> np.ndarray:
    """The binomial likelihood ratio (log) of two rates, inside and outside each interval
    (``n_in`` events, ``k_in`` bad), against one rate over all: Kulldorff's scan statistic.
    0 for an interval with no events on one side or whose bad share is not the higher."""
    n_in = np.asarray(n_in, dtype=np.float64)
    k_in = np.asarray(k_in, dtype=np.float64)
    n_out, k_out = n_all - n_in, k_all - k_in
    keep = (n_in > 0) & (n_out > 0) & (k_in * n_out > k_out * n_in)
    out = np.zeros(len(n_in))
    if not keep.any() or k_all <= 0 or k_all >= n_all:
        return out
    idx = np.flatnonzero(keep)
    n_in, k_in, n_out, k_out = n_in[idx], k_in[idx], n_out[idx], k_out[idx]
    p_in, p_out, p0 = k_in / n_in, k_out / n_out, k_all / n_all
    llr = xlogy(k_in, p_in) + xlog1py(n_in - k_in, -p_in) + xlogy(k_out, p_out) + xlog1py(n_out - k_out, -p_out)
    llr -= k_all * math.log(p0) + (n_all - k_all) * math.log1p(-p0)
    out[idx] = llr
    return out


def dispersion(s: Series, first: int, last: int) -> float:
    """How much more the buckets' bad counts vary than binomially, once the region's rate
    and the rest's are fitted: the median squared Pearson residual of the buckets outside
    the region over the median of χ² with one degree of freedom (0.455), at least 1.
    Events of one series are not independent draws: a gauge's daily cycle puts all its
    high values in a few buckets a day. The scan's LLR is divided by it (quasi-likelihood),
    so such a cycle is not an anomaly while a shift that stands far above it still is.
    The median, not the mean: a few buckets of other incidents (each stall of a series of
    them) do not discount the worst one. Outside the region, where behaviour is normal:
    an incident that varies within itself and covers half the range would otherwise set
    the median, and a start one bucket earlier or later swung it tenfold (all buckets
    are used when fewer than three lie outside). A rate of 0 fits its buckets exactly:
    their residual is 0."""
    n, k = s.events, s.bad
    inside = np.zeros(len(n), dtype=bool)
    inside[first : last + 1] = True
    rate = np.where(inside, k[inside].sum() / max(n[inside].sum(), 1), k[~inside].sum() / max(n[~inside].sum(), 1))
    var = n * rate * (1 - rate)
    # a rate of 0 (or 1) fits its buckets exactly: their residual is 0, not unknown
    residual = np.where(var > 0, (k - n * rate) ** 2 / np.where(var > 0, var, 1.0), 0.0)
    used = (n > 0) & ~inside
    if used.sum() <= 2:
        used = n > 0
    if used.sum() <= 2:
        return 1.0
    return max(1.0, float(np.median(residual[used])) / CHI2_1_MEDIAN)
