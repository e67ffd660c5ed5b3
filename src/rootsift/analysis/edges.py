"""A latency region's edges moved to where its excess begins and ends, on normal
behaviour's lines (investigate's ``_normal_line``: the p99 and p99.9 of the events
outside the region).

The scan keys on the interval whose bad share is most surprising: the jump. A shift often
creeps in before it (the cause shows in that creep) and trails off after it (a pool
drains, a queue empties, requests that waited less are still slow). Both belong to the
region: the headline is what is explained, and its complement is the explanation's
baseline and the time the decomposition and saturation compare the region with. A region
cut before the incident ends leaves the incident's own slow events in all three (a
1.5 s stall found as its first half second: the requests that waited for the pool in the
rest of it were the "normal" time around it, and the wait's rise was not significant).

On each line, from each edge outward:

- **Bucket by bucket**: over buckets of the scale the region was found at (one of them
  ending, or starting, at the edge), each already past the line on its own (one-sided
  binomial against the rate outside the region).
- **At the finest scale**: a creep too thin for any one bucket (four slow requests in half
  a minute against 0.3 expected) is still significant over its length. The stretches
  next to where the walk stopped, 1, 2, 4… fine buckets long (up to the region's length),
  are tested against the outside rate (the binomial likelihood ratio over the buckets'
  overdispersion, ``anomaly.dispersion``; one-sided; Bonferroni over the lengths and
  lines). The most significant one, when it is, moves the edge to the fine bucket
  (between half and twice its length away) up to which the excess is most likely.

The farthest edge over the lines is taken. Each test is at ``EDGE_LEVEL`` over the lines.
An edge is only ever moved outward.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
from scipy.special import xlogy
from sqlglot import exp

from rootsift.analysis import distributions as dist
from rootsift.analysis.anomaly import Anomaly, Series, dispersion, series_of
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN

EDGE_LEVEL = 0.01
"""Each bucket an edge walks over is past the line at this level (one-sided binomial),
Bonferroni over the lines walked."""


def earlier_onset(s: Series, first: int, last: int, level: float = EDGE_LEVEL) -> int:
    """The first bucket of the region once its start has walked back over the buckets whose
    bad share is still above the rate outside the region (one-sided binomial at ``level``)."""
    rate = _outside_rate(s, first, last)
    if rate is None:
        return first
    k = first - 1
    while k >= 0 and _past(s, k, rate, level):
        k -= 1
    return k + 1


def later_end(s: Series, first: int, last: int, level: float = EDGE_LEVEL) -> int:
    """The last bucket of the region once its end has walked forward over the buckets whose
    bad share is still above the rate outside the region (as ``earlier_onset``)."""
    rate = _outside_rate(s, first, last)
    if rate is None:
        return last
    k = last + 1
    while k < len(s.events) and _past(s, k, rate, level):
        k += 1
    return k - 1


def walked_onset(
    frame: Frame,
    a: Anomaly,
    bad_if: exp.Expr,
    lines: list[float],
    width: timedelta,
    fine: timedelta,
    began: exp.Expr | None = None,
) -> datetime:
    """The region's start moved earlier to where its creep began, on each of ``lines``
    (``bad_if``, a condition with one placeholder, takes each as its parameter), the
    earliest of them (module docstring). ``began``: when each event started, when its
    timestamp is its end: the events are then placed at their start (the first slow
    requests began before they were logged)."""
    return _walked(frame, a, bad_if, lines, width, fine, forward=False, began=began)


def walked_end(
    frame: Frame, a: Anomaly, bad_if: exp.Expr, lines: list[float], width: timedelta, fine: timedelta
) -> datetime:
    """The region's end moved later to where its excess trailed off, on each of ``lines``,
    the latest of them (module docstring)."""
    return _walked(frame, a, bad_if, lines, width, fine, forward=True)


def _outside_rate(s: Series, first: int, last: int) -> float | None:
    n = float(s.events.sum() - s.events[first : last + 1].sum())
    k = float(s.bad.sum() - s.bad[first : last + 1].sum())
    return max(k / n, 1e-9) if n > 0 else None


def _past(s: Series, k: int, rate: float, level: float) -> bool:
    return bool(s.events[k] > 0 and dist.binom_sf(s.bad[k] - 1, s.events[k], rate) < level)


def _walked(
    frame: Frame,
    a: Anomaly,
    bad_if: exp.Expr,
    lines: list[float],
    width: timedelta,
    fine: timedelta,
    forward: bool,
    began: exp.Expr | None = None,
) -> datetime:
    lines = sorted(set(lines))
    edge = a.end if forward else a.start
    if not lines:
        return edge
    level = EDGE_LEVEL / len(lines)
    walked = edge
    outside: list[tuple[float, float] | None] = []  # per line: its rate outside the region, the dispersion
    when: str | exp.Expr = TIME_COLUMN if began is None else began
    for s in series_of(frame, [(bad_if, [t]) for t in lines], width, when, origin=edge):
        first = next((k for k, t in enumerate(s.starts) if t >= a.start), None)
        last = next((k for k in range(len(s.starts) - 1, -1, -1) if s.starts[k] < a.end), None)
        if first is None or last is None or first > last:
            outside.append(None)
            continue
        if forward:
            walked = max(walked, s.starts[later_end(s, first, last, level)] + width)
        else:
            walked = min(walked, s.starts[earlier_onset(s, first, last, level)])
        n = float(s.events.sum() - s.events[first : last + 1].sum())
        k = float(s.bad.sum() - s.bad[first : last + 1].sum())
        outside.append((min(max(k / n, 1e-9), 1 - 1e-9), dispersion(s, first, last)) if n > 0 else None)
    if frame.end is not None and forward:
        walked = min(walked, frame.end)
    if walked != edge:
        walked = _placed(frame, bad_if, lines, outside, edge, walked, width, fine, when, began is not None)
    length = a.end - a.start
    lo, hi = (walked, walked + length) if forward else (walked - length, walked)
    if frame.start is not None:
        lo = max(lo, frame.start)
    if frame.end is not None:
        hi = min(hi, frame.end)
    m = int((hi - lo) / fine)
    if m <= 0:
        return walked
    # events that began in [lo, hi) may be logged up to the range's end
    logged = hi if began is None else frame.end
    near = Frame(frame.backend, frame.dataset, lo, logged, frame.where, count_field=frame.count)
    thin = series_of(near, [(bad_if, [t]) for t in lines], fine, when, origin=walked)
    lengths = [2**j for j in range(int(math.log2(m)) + 1)]
    best: tuple[float, int] | None = None  # (p, fine buckets from the edge to the new one)
    for f, rate_phi in zip(thin, outside, strict=True):
        if rate_phi is None or not f.starts:
            continue
        rate, phi = rate_phi
        events, bad = _from_edge(f, walked, fine, m, forward)
        # events and bad events of the stretches from the edge outward, 1, 2, … buckets long
        events, bad = np.cumsum(events), np.cumsum(bad)
        share = np.clip(bad / np.maximum(events, 1.0), 1e-12, 1 - 1e-12)
        llr = np.where(
            (events > 0) & (share > rate),
            xlogy(bad, share / rate) + xlogy(events - bad, (1 - share) / (1 - rate)),
            0.0,
        )
        tested = np.asarray(lengths) - 1
        p = 0.5 * dist.chi2_sf(2 * llr[tested] / phi, 1)
        j = int(np.argmin(p))
        if llr[tested[j]] <= 0 or p[j] * len(lengths) >= level or (best is not None and p[j] >= best[0]):
            continue
        near_end, far_end = max(1, lengths[j] // 2), min(m, 2 * lengths[j])
        best = (float(p[j]), near_end + int(np.argmax(llr[near_end - 1 : far_end])))
    if best is None:
        return walked
    moved = fine * best[1]
    return walked + moved if forward else walked - moved


def _placed(
    frame: Frame,
    bad_if: exp.Expr,
    lines: list[float],
    outside: list[tuple[float, float] | None],
    edge: datetime,
    walked: datetime,
    width: timedelta,
    fine: timedelta,
    when: str | exp.Expr,
    logged_later: bool,
) -> datetime:
    """The walked edge placed to the fine bucket within the outermost bucket it walked
    over: where the stretch from it to the region's edge has the highest likelihood
    ratio against the rate outside (over the buckets' overdispersion, on any line). A
    bucket only partly in the incident is past the line as a whole, and the walk took all
    of it: up to a bucket of the time before, and its events, joined the region (gateway
    seed 714: 11 s of normal traffic whose slow tail, on another service, went into the
    onset's selection). The scan places its own edges so."""
    forward = walked > edge
    lo, hi = (edge, walked) if forward else (walked, edge)
    m, outer = round((hi - lo) / fine), max(1, round(width / fine))
    if m <= 1:
        return walked
    span = Frame(
        frame.backend, frame.dataset, lo, frame.end if logged_later else hi, frame.where, count_field=frame.count
    )
    best: tuple[float, datetime] | None = None
    for f, rate_phi in zip(
        series_of(span, [(bad_if, [t]) for t in lines], fine, when, origin=edge), outside, strict=True
    ):
        if rate_phi is None or not f.starts:
            continue
        rate, phi = rate_phi
        events, bad = _from_edge(f, edge, fine, m, forward)
        events, bad = np.cumsum(events), np.cumsum(bad)  # the stretch from the edge, 1, 2, … buckets out
        share = np.clip(bad / np.maximum(events, 1.0), 1e-12, 1 - 1e-12)
        llr = np.where(
            (events > 0) & (share > rate),
            xlogy(bad, share / rate) + xlogy(events - bad, (1 - share) / (1 - rate)),
            0.0,
        )
        candidates = range(max(0, m - outer), m)  # stretches ending in the outermost bucket walked
        j = max(candidates, key=lambda i: llr[i])
        if llr[j] > 0 and (best is None or llr[j] / phi > best[0]):
            best = (float(llr[j] / phi), edge + fine * (j + 1) if forward else edge - fine * (j + 1))
    return best[1] if best is not None else walked


def _from_edge(f: Series, edge: datetime, fine: timedelta, m: int, forward: bool) -> tuple[np.ndarray, np.ndarray]:
    """Events and bad events of ``m`` fine buckets ordered outward from ``edge`` (the first
    is the bucket next to it), empty buckets included."""
    events, bad = np.zeros(m), np.zeros(m)
    for t, n, k in zip(f.starts, f.events, f.bad, strict=True):
        i = round((t - edge) / fine) if forward else round((edge - t) / fine) - 1
        if 0 <= i < m:
            events[i], bad[i] = n, k
    return events, bad
