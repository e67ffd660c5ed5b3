"""Level shifts at every time scale: the binomial scan of ``anomaly.py`` from seconds to days.

- **Fine counts, one pass.** Events and bad events (one column per line) are counted
  once per *fine* bucket: the range over ``BUCKETS`` × 4^``FINER`` (6,400 buckets), made
  whole units of the time field's resolution.
- **Scales.** The coarsest scale sums them into at most ``BUCKETS`` (400) buckets and is
  scanned exactly over every interval; each finer one, a quarter as wide down to the fine
  buckets, over runs of 1 to ``MAX_LENGTH`` of its buckets only (longer runs are a coarser
  scale's). A 20 s shift in a day is six 13.5 s buckets there, not a tenth of a 216 s
  bucket diluted by the rest of it.
- **The best interval** over every scale is the one with the highest LLR (every scale
  shares one Bonferroni correction, so the LLRs compare as they are). Its LLR is then
  divided by the overdispersion (``anomaly.dispersion``, read on the coarsest scale, where
  a daily cycle shows, with the interval widened to its buckets), and its p-value is
  Bonferroni over every interval tried at every scale.
- **Its edges** are then placed to the fine bucket: within one bucket of its scale on
  either side, the start and end of highest LLR.
- **Several regions**: the scan is run again with the regions found emptied.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import distributions as dist
from rootsift.analysis import sql as q
from rootsift.analysis import weighted
from rootsift.analysis.anomaly import BUCKETS, Series, binomial_llr, dispersion
from rootsift.analysis.frame import Frame
from rootsift.analysis.timescale import whole_units
from rootsift.store.base import TIME_COLUMN

FINER = 2
"""Scales finer than the coarsest (each a quarter of the one above)."""
SCALE_STEP = 4
MAX_LENGTH = 32
"""Longest run tried at a scale finer than the coarsest, in its buckets; the shortest is 1
at the finest scale and ``MAX_LENGTH // SCALE_STEP + 1`` above it (shorter runs are the
finer scale's, more precisely placed)."""
SHORTEST = timedelta(milliseconds=1)


@dataclass
class Fine:
    """Events, and bad events per line, per fine bucket from ``first`` (since the epoch)."""

    first: int
    width: timedelta
    events: np.ndarray
    bad: np.ndarray
    """One row per line."""

    def at(self, i: int) -> datetime:
        """The start of fine bucket ``i``."""
        return datetime(1970, 1, 1) + (self.first + i) * self.width


@dataclass
class Shift:
    """A region of one line: fine buckets [first, end), its LLR (over the dispersion), its
    p-value bound, and the width of the buckets it was found in."""

    first: int
    end: int
    llr: float
    p_value: float
    scale: timedelta


def widths(start: datetime, end: datetime, unit_s: float) -> tuple[timedelta, timedelta]:
    """(the coarsest scale's bucket width, the fine width), whole units of the resolution."""
    coarse = whole_units(max((end - start) / BUCKETS, SHORTEST), unit_s)
    fine = whole_units(max((end - start) / (BUCKETS * SCALE_STEP**FINER), SHORTEST), unit_s)
    return coarse, fine


def fine_counts(
    frame: Frame, bads: Sequence[tuple[exp.Expr, list[Any]]], width: timedelta, time: str = TIME_COLUMN
) -> Fine:
    """Events and bad events (one per definition: a condition and the values it binds, in
    order) per
    bucket of ``width``, in one pass; a row with a count stands for that many events."""
    us = max(1, int(width / timedelta(microseconds=1)))
    n = weighted.count_of(frame)
    total = q.count_rows() if frame.count is None else exp.Sum(this=n)
    bucket = q.floor_int(exp.Div(this=exp.UnixMicros(this=q.col(time)), expression=q.num(us)))
    items, params = [q.alias(bucket, "b"), q.alias(total.copy(), "c0")], []
    for k, (cond, bound) in enumerate(bads):
        tree = cond.copy()
        items.append(q.alias(q.where(total.copy(), tree), f"c{k + 1}"))
        params += bound
    per_bucket, scope = frame.rows(items, q.not_null(q.col(time)))
    lists = [exp.ArrayAgg(this=exp.column("b"))]
    lists += [
        exp.ArrayAgg(this=exp.Coalesce(this=exp.column(f"c{k}"), expressions=[q.num(0)])) for k in range(len(items) - 1)
    ]
    # lists in one row: far cheaper to bring into numpy than a row per bucket
    row = frame.backend.execute(q.select(lists, per_bucket.group_by(q.num(1), copy=False)), [*params, *scope]).rows[0]
    if not row[0]:
        return Fine(0, width, np.zeros(0), np.zeros((len(bads), 0)))
    at = np.asarray(row[0], dtype=np.int64)
    first = int(at.min())
    grid = np.zeros((len(items) - 1, int(at.max()) - first + 1))
    grid[:, at - first] = np.asarray(row[1:], dtype=np.float64)
    return Fine(first, width, grid[0], grid[1:])


def regions(counts: Fine, line: int, most: int, alpha: float = 1.0) -> list[Shift]:
    """Up to ``most`` regions of line ``line``, the strongest first, each found with the
    ones before it emptied; the search stops at the first whose p-value is ``alpha`` or
    more (returned all the same: the caller reads its p-value)."""
    events, bad = counts.events.copy(), counts.bad[line].copy()
    out: list[Shift] = []
    for _ in range(most):
        hit = scan(events, bad, counts.width)
        if hit is None:
            break
        out.append(hit)
        if hit.p_value >= alpha:
            break
        events[hit.first : hit.end] = 0
        bad[hit.first : hit.end] = 0
    return out


def step_at(above: list[bool]) -> int | None:
    """Where a series of buckets steps from below a line to above it: the split with the
    fewest buckets on the wrong side (above before it, below from it on; the first such
    split), or None when splitting nowhere does as well (no step: what is above is
    excursions). A sign CUSUM: a short excursion before the step (a slow turn that ends)
    or a dip after it costs only its own buckets, where a rule such as "the first bucket
    that stays above for the next few" is set off early or held back by either."""
    up = np.asarray(above, dtype=bool)
    wrong = np.concatenate(([0], np.cumsum(up))) + np.concatenate((np.cumsum(~up[::-1])[::-1], [0]))
    k = int(np.argmin(wrong))
    return k if k < len(up) else None


def scan(events: np.ndarray, bad: np.ndarray, width: timedelta) -> Shift | None:
    """The interval of fine buckets whose bad share is most surprising against the rest,
    over every scale (see the module docstring); None when nothing stands out."""
    m = len(events)
    n_all, k_all = float(events.sum()), float(bad.sum())
    if m < 3 or k_all == 0 or k_all == n_all:
        return None
    scales = _scales(m)
    top = scales[0]
    coarse = Series([], width * top, _sum(events, top), _sum(bad, top))
    tests = 0
    best: tuple[float, int, int, int] | None = None  # (LLR, first, end, scale)
    for k in scales:
        n, b = _sum(events, k), _sum(bad, k)
        shortest = 1 if k == scales[-1] else MAX_LENGTH // SCALE_STEP + 1
        i, j = _intervals(len(n)) if k == top else _runs(len(n), shortest, MAX_LENGTH)
        tests += len(i)
        cn, cb = _cumsum(n), _cumsum(b)
        llr = binomial_llr(cn[j + 1] - cn[i], cb[j + 1] - cb[i], n_all, k_all)
        at = int(np.argmax(llr))
        if llr[at] > 0 and (best is None or llr[at] > best[0]):
            best = (float(llr[at]), int(i[at]) * k, min(m, (int(j[at]) + 1) * k), k)
    if best is None:
        return None
    _, first, end, k = best
    first, end, raw = _place(events, bad, first, end, k)
    value = raw / dispersion(coarse, first // top, (end - 1) // top)
    p = min(1.0, float(dist.chi2_sf(2 * value, 1)) * tests)
    return Shift(first, end, value, p, width * k)


def _place(events: np.ndarray, bad: np.ndarray, first: int, end: int, k: int) -> tuple[int, int, float]:
    """(first, end, LLR) of the fine interval of highest LLR whose edges lie within ``k``
    fine buckets of ``first`` and ``end``."""
    m = len(events)
    cn, cb = _cumsum(events), _cumsum(bad)
    starts = np.arange(max(0, first - k), min(m - 1, first + k) + 1)
    ends = np.arange(max(1, end - k), min(m, end + k) + 1)
    s, e = np.meshgrid(starts, ends, indexing="ij")
    s, e = s[s < e], e[s < e]
    llr = binomial_llr(cn[e] - cn[s], cb[e] - cb[s], float(events.sum()), float(bad.sum()))
    at = int(np.argmax(llr))
    return int(s[at]), int(e[at]), float(llr[at])


def _scales(m: int) -> list[int]:
    """Fine buckets per bucket at each scale, coarsest (at most ``BUCKETS`` across) first."""
    out = [max(1, math.ceil(m / BUCKETS))]
    while len(out) <= FINER and out[-1] > 1:
        out.append(max(1, out[-1] // SCALE_STEP))
    return sorted(set(out), reverse=True)


def _sum(x: np.ndarray, k: int) -> np.ndarray:
    """Sums of ``k`` consecutive values (the last group padded with zeros)."""
    if k == 1:
        return x
    padded = np.concatenate([x, np.zeros(-len(x) % k)])
    return np.asarray(padded.reshape(-1, k).sum(axis=1))


def _cumsum(x: np.ndarray) -> np.ndarray:
    return np.concatenate([[0.0], np.cumsum(x)])


@functools.lru_cache(maxsize=8)
def _intervals(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Every interval [i, j] of ``m`` buckets, as two index arrays (shared: not to be written)."""
    return np.triu_indices(m)


@functools.lru_cache(maxsize=8)
def _runs(m: int, shortest: int, longest: int) -> tuple[np.ndarray, np.ndarray]:
    """Every interval [i, j] of ``m`` buckets ``shortest`` to ``longest`` long (shared: not
    to be written)."""
    lengths = range(shortest, min(longest, m) + 1)
    i = np.concatenate([np.arange(m - length + 1) for length in lengths] or [np.zeros(0, dtype=np.int64)])
    j = np.concatenate([np.arange(length - 1, m) for length in lengths] or [np.zeros(0, dtype=np.int64)])
    return i, j
