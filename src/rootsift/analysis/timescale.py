"""Time scales: the resolution of a time field, and the stall scan at every scale from
sub-second to days.

- **Resolution.** Logs stamp whole seconds (nginx, Apache, PostgreSQL ``%t``), whole
  minutes (per-minute aggregates) or finer. The resolution is the largest of ``UNITS_S``
  that 99 % of the stamps are a multiple of (read from the first ``RESOLUTION_ROWS``
  stamps of the range, in one query). No pattern finer than it is reported: buckets are
  whole multiples of it, and a stall lasts at least ``MIN_UNITS`` of it. Between two
  identical stamps there is no gap to read.
- **Stalls at every scale.** Completions are counted once at the finest width (0.25 s,
  the resolution, or the range over ``MAX_BUCKETS``, whichever is widest); coarser scales
  sum 4, 16, 64… of those buckets. At each scale every run of 2–8 buckets is a
  candidate gap, scored against the *local* rate (the ``LOCAL`` buckets either side, so a
  daily cycle is not a stall), and must be followed by a burst (a stall ends in
  completions piled up; a quiet spell does not). The p-value is the gap's Poisson tail
  times the burst's, Bonferroni-corrected over every start, length and scale tried. The
  best gap is then placed to the finest bucket: it ends where the burst peaks and begins
  where the shortfall of completions before that end is largest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import distributions as dist
from rootsift.analysis import sql as q
from rootsift.analysis import weighted
from rootsift.analysis.anomaly import Anomaly, completion_column
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN

UNITS_S = (0.001, 0.01, 0.1, 1.0, 5.0, 10.0, 15.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 86400.0)
"""Candidate resolutions of a time field, in seconds."""
RESOLUTION_ROWS = 100_000
RESOLUTION_SHARE = 0.99
MIN_STAMPS = 20
"""Fewer stamps than this say nothing about the resolution (taken as 1 µs)."""
MICROSECOND = 1e-6
WHOLE_BELOW = 100
"""Buckets narrower than this many resolution units are made a whole number of them."""

FINEST_S = 0.25
MAX_BUCKETS = 1_000_000
SCALE_STEP = 4
MIN_SCALE_BUCKETS = 10
MAX_LENGTH = 8
"""Longest gap tried at one scale, in its buckets (the next scale, 4 times wider, takes over)."""
MIN_UNITS = 3
"""A stall lasts at least this many units of the time field's resolution."""
MIN_EXPECTED = 3.0
"""A gap where fewer than this many completions were expected cannot be told from chance."""
LOCAL = 64
"""Buckets on each side of a candidate gap that give its expected rate."""
KEEP = 5


def resolution(frame: Frame, time: str = TIME_COLUMN) -> float:
    """The resolution of ``time`` in seconds: the largest of ``UNITS_S`` that 99 % of the
    range's first ``RESOLUTION_ROWS`` stamps are a multiple of; 1e-6 when none is."""
    ts = q.col(time)
    stamps, params = frame.rows([q.alias(q.epoch_us(ts), "us")], q.not_null(ts.copy()))
    us = exp.column(q.name("us"))
    checks = [
        q.where(
            q.count_rows(), exp.EQ(this=exp.Mod(this=us.copy(), expression=q.num(round(u * 1e6))), expression=q.num(0))
        )
        for u in UNITS_S
    ]
    query = q.select([q.count_rows(), *checks], frame.first(stamps, RESOLUTION_ROWS))
    n, *hits = frame.backend.execute(query, params).rows[0]
    if not n or n < MIN_STAMPS:
        return MICROSECOND
    return max((u for u, h in zip(UNITS_S, hits, strict=True) if h >= RESOLUTION_SHARE * n), default=MICROSECOND)


def whole_units(width: timedelta, unit_s: float) -> timedelta:
    """``width`` rounded up to a whole number of ``unit_s`` (at least one) when it spans
    fewer than ``WHOLE_BELOW`` of them: a bucket of 2.5 units holds 2 or 3 units' stamps
    in turn, one of 647.98 holds 647 or 648, a difference lost in the counts' noise."""
    unit = timedelta(seconds=unit_s)
    if unit_s <= MICROSECOND or width >= unit * WHOLE_BELOW:
        return width
    return unit * max(1, math.ceil(width / unit - 1e-9))


def describe(unit_s: float) -> str:
    """A resolution in words: ``1 s``, ``1 min``, ``1 ms``, ``1 µs``."""
    for size, name in ((86400, "day"), (3600, "h"), (60, "min"), (1, "s"), (1e-3, "ms")):
        if unit_s >= size:
            return f"{unit_s / size:g} {name}"
    return f"{unit_s * 1e6:g} µs"


@dataclass
class Stall:
    start: datetime
    end: datetime
    llr: float
    p_value: float
    burst: float
    """Completions right after the gap over the local rate."""
    scale_seconds: float
    """The width of the buckets at which the gap was widest (its extent's scale)."""
    bucket_seconds: float
    """The finest bucket width (its boundaries' precision)."""


def stall_region(frame: Frame, start: datetime, end: datetime, alpha: float, method: dict[str, Any]) -> Anomaly | None:
    """investigate's stall: the most significant one in [start, end) over every time scale,
    at the completion field's resolution (found once and noted in ``method``)."""
    time = completion_column(frame)
    unit = method.get("stall_resolution_seconds")
    if unit is None:
        unit = resolution(frame, time) if time != TIME_COLUMN else method["resolution_seconds"]
        method.update(
            stall_time_field=time,
            stall_resolution_seconds=unit,
            stall_min_seconds=max(MIN_UNITS * unit, 2 * FINEST_S),
        )
    hit = find_stall(frame, time, start, end, unit)
    if hit is None or hit.p_value >= alpha:
        return None
    a = Anomaly("stall", hit.start, hit.end, None, None, hit.llr, hit.p_value)
    a.detail.update(bucket_seconds=hit.bucket_seconds, scale_seconds=hit.scale_seconds, burst_ratio=round(hit.burst, 2))
    return a


def find_stall(frame: Frame, time: str, start: datetime, end: datetime, unit_s: float) -> Stall | None:
    """The most improbable gap in completions (by ``time``) followed by a burst, over every
    scale, in [start, end); None when there is too little data."""
    fine = whole_units(max(timedelta(seconds=FINEST_S), (end - start) / MAX_BUCKETS), unit_s)
    first, counts = _counts(Frame(frame.backend, frame.dataset, start, end, frame.where), time, fine)
    hit = scan(counts, fine.total_seconds(), unit_s)
    if hit is None:
        return None
    i, j, llr, p, burst, scale = hit
    epoch = datetime(1970, 1, 1)
    return Stall(epoch + (first + i) * fine, epoch + (first + j) * fine, llr, p, burst, scale, fine.total_seconds())


def _counts(frame: Frame, time: str, width: timedelta) -> tuple[int, np.ndarray]:
    """(index of the first bucket since the epoch, events per bucket of ``width`` from it;
    a row with a count is that many events)."""
    us = max(1, int(width / timedelta(microseconds=1)))
    ts = q.col(time)
    items = [q.alias(q.bucket_index(q.epoch_us(ts), us), "b"), q.alias(q.event_count(weighted.count_of(frame)), "n")]
    per_bucket, params = frame.rows(items, q.not_null(ts.copy()))
    per_bucket = per_bucket.group_by(q.num(1), copy=False)
    # two lists in one row: far cheaper to bring into numpy than a row per bucket
    lists = [q.listed(exp.column(q.name("b"))), q.listed(exp.column(q.name("n")))]
    buckets, n = frame.backend.execute(q.select(lists, per_bucket), params).rows[0]
    if not buckets:
        return 0, np.zeros(0)
    at = np.asarray(buckets, dtype=np.int64)
    first = int(at.min())
    counts = np.zeros(int(at.max()) - first + 1)
    counts[at - first] = np.asarray(n, dtype=np.float64)
    return first, counts


def scan(fine: np.ndarray, width_s: float, unit_s: float) -> tuple[int, int, float, float, float, float] | None:
    """(first fine bucket, end fine bucket (exclusive), LLR, p-value, burst ratio, scale in
    seconds) of the best stall over every scale; None when none has a burst after it."""
    found = []
    tests = 0
    k = 1
    while len(fine) // k >= MIN_SCALE_BUCKETS:
        counts = fine[: len(fine) // k * k].reshape(-1, k).sum(axis=1)
        shortest = max(2, math.ceil(MIN_UNITS * unit_s / (width_s * k) - 1e-9))
        around = _around(counts)
        for length in range(shortest, min(MAX_LENGTH, len(counts) - 1) + 1):
            tests += len(counts) - length
            found.append(_gaps(counts, length, k, around))
        k *= SCALE_STEP
    c = np.concatenate(found) if found else np.zeros((0, len(COLUMNS)))
    if len(c) == 0:
        return None
    col = {name: c[:, i] for i, name in enumerate(COLUMNS)}
    log_burst = math.log(2) + np.minimum(
        dist.poisson_logsf(col["b1"] - 1, col["rate"]), dist.poisson_logsf(col["b2"] - 1, 2 * col["rate"])
    )
    log_p = dist.poisson_logcdf(col["obs"], col["expected"]) + np.minimum(0.0, log_burst)
    best = int(np.lexsort((-col["score"], log_p))[0])
    k, length = int(col["k"][best]), int(col["length"][best])
    # The burst's significance says a stall happened, not how long it lasted: the gap ends
    # where the burst peaks (to the finest bucket), and its extent is that of the candidate
    # ending at the same burst whose shortfall of completions is largest, at any scale.
    hi = (int(col["start"][best]) + length) * k
    end = max(0, hi - k) + int(np.argmax(fine[max(0, hi - k) : min(len(fine), hi + k)]))
    same = np.abs((col["start"] + col["length"]) * col["k"] - hi) <= col["k"] + k
    widest = int(np.flatnonzero(same)[np.argmax(col["gap"][same])])
    wk, wstart = int(col["k"][widest]), int(col["start"][widest])
    shortest = max(2, math.ceil(MIN_UNITS * unit_s / width_s - 1e-9))
    begin = _extent(fine, end, (wstart - 1) * wk, (wstart + 1) * wk, shortest)
    p = math.exp(min(0.0, float(log_p[best]) + math.log(tests)))
    return begin, end, float(col["score"][best]), p, float(col["burst"][best]), width_s * wk


COLUMNS = ("k", "start", "length", "score", "gap", "obs", "expected", "b1", "b2", "rate", "burst")
"""A candidate gap: its scale (fine buckets per bucket), start and length (in its buckets),
score (the gap's and the burst's LLR), the gap's own LLR, the completions in it and
expected, in the one and two buckets after it, the rate around it and the burst ratio."""


def _gaps(counts: np.ndarray, length: int, k: int, around: tuple[np.ndarray, ...]) -> np.ndarray:
    """The ``KEEP`` best gaps of ``length`` buckets followed by a burst, as rows of ``COLUMNS``."""
    m = len(counts)
    cs, left, n_left, right, n_right = around
    starts = np.arange(0, m - length)
    after = starts + length
    obs = cs[after] - cs[starts]
    spread = n_left[starts] + n_right[after]
    rate = np.where(spread >= 8, (left[starts] + right[after]) / np.maximum(spread, 1), cs[-1] / m)
    expected = rate * length
    idx = np.flatnonzero((expected >= MIN_EXPECTED) & (obs < expected / 2))
    after, rate = after[idx], rate[idx]
    b1 = counts[after]
    b2 = b1 + np.where(after + 1 < m, counts[np.minimum(after + 1, m - 1)], 0.0)
    burst = np.maximum(b1 / np.maximum(rate, 1e-12), b2 / np.maximum(2 * rate, 1e-12))
    keep = burst >= 2
    idx, rate, b1, b2, burst = idx[keep], rate[keep], b1[keep], b2[keep], burst[keep]
    piled = np.maximum(
        np.where(b1 > rate, _poisson_llr(b1, rate), 0.0),
        np.where(b2 > 2 * rate, _poisson_llr(b2, 2 * rate), 0.0),
    )
    gap = _poisson_llr(obs[idx], expected[idx])
    order = np.argsort(-(gap + piled))[:KEEP]
    s = idx[order]
    rows = [np.full(len(s), k), s, np.full(len(s), length), (gap + piled)[order], gap[order], obs[s], expected[s]]
    return np.column_stack([*rows, b1[order], b2[order], rate[order], burst[order]])


def _around(counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """Cumulative counts, and for each bucket i the completions (and buckets) in the
    ``LOCAL`` buckets before i and in the ``LOCAL`` from i + 2 (after a gap ending at i,
    past its burst): the rate around a gap."""
    m = len(counts)
    cs = np.concatenate([[0.0], np.cumsum(counts)])
    i = np.arange(m + 1)
    lo = np.maximum(i - LOCAL, 0)
    a0, a1 = np.minimum(i + 2, m), np.minimum(i + 2 + LOCAL, m)
    return cs, cs[i] - cs[lo], i - lo, cs[a1] - cs[a0], a1 - a0


def _extent(fine: np.ndarray, end: int, first: int, last: int, shortest: int) -> int:
    """Where the gap ending at fine bucket ``end`` begins, between ``first`` and ``last``:
    the start whose run up to ``end`` falls furthest below the rate before it (over as
    long a stretch as the run, at least ``LOCAL`` buckets), by the Poisson likelihood ratio."""
    cs = np.concatenate([[0.0], np.cumsum(fine)])
    starts = np.arange(max(0, first), min(last, end - shortest) + 1)
    if len(starts) == 0:
        return max(0, end - shortest)
    lengths = end - starts
    obs = cs[end] - cs[starts]
    lo = np.maximum(starts - np.maximum(lengths, LOCAL), 0)
    before = starts - lo
    expected = np.where(before > 0, (cs[starts] - cs[lo]) / np.maximum(before, 1), 0.0) * lengths
    deficit = np.where((obs < expected) & (before > 0), _poisson_llr(obs, expected), -np.inf)
    return int(starts[int(np.argmax(deficit))]) if np.isfinite(deficit.max()) else max(0, end - shortest)


def _poisson_llr(obs: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """The Poisson log-likelihood ratio of ``obs`` against ``expected`` (0 where obs is 0 and
    expected is 0)."""
    obs = np.asarray(obs, dtype=np.float64)
    expected = np.maximum(np.asarray(expected, dtype=np.float64), 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = np.where(obs > 0, obs * np.log(np.where(obs > 0, obs, 1.0) / expected), 0.0)
    return np.asarray(term - (obs - expected), dtype=np.float64)
