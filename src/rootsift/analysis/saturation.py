"""Saturation: the resources held that rose with the region (where the extra time went
is decomposition.py).

**In flight.** From each event's start and end, the number of events in progress at
``SAMPLES`` instants over a window around the region, per unit (the events' ``host``,
``instance``, ``server``…: a worker or connection pool is a per-process resource). A unit
is reported when its in-flight count **rose** in the region against the window outside
it, significantly (``_rise``: Welch's test on the two sides' means, each side's samples
counted at their effective number, since a count now and a count a moment later hold
the same events), and when it **carries the region's slow events** (more than its share
of them: a unit that only took over traffic from a slow one rose too, and is not where
the time went). Units are ranked by the rise. When the count also held at a ceiling in
the region, the limit is named (a *flat top*: ``_plateau``): a pool that filled.

An event's interval is ``[timestamp, end_time]`` when it has a completion field, else the
timestamp and a duration: ``timestamp`` is the start by default (spans, wide events, the
MySQL slow log) or the end (``timestamp_at="end"``: an nginx access log writes
``$time_local`` when the request completes). The intervals tried are the whole event's and
each of its parts' (below): what a pool holds is often a part (the upstream call, the
database connection), while the whole also counts the wait for it. A waiting part is
placed at the event's start, any other at its end (``event_interval``).
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
from rootsift.analysis.anomaly import COMPLETION, Anomaly
from rootsift.analysis.findings import Finding, iso
from rootsift.analysis.frame import Frame, micros_per_unit
from rootsift.store.base import TIME_COLUMN

UNITS = ("instance", "host", "hostname", "host.name", "server", "pod", "node", "container", "service.instance.id")
"""Fields naming the process a limit belongs to, in order of preference."""
MAX_UNITS = 200
SAMPLES = 1000
"""Instants at which in-flight counts are taken across the window."""
CEILING_TOLERANCE = 0.05
MIN_CEILING = 2
MIN_SHARE_AT_CEILING = 0.10
MIN_RUN = 5
ABOVE_MAX = 0.05
PILE_UP = 1.5
SHOWN_UNITS = 5
MIN_EFFECTIVE = 3
"""A side of the window worth fewer independent samples than this is no baseline."""
WAIT_WORDS = ("wait", "queue", "pending", "blocked", "acquire", "connect")


def unit_field(frame: Frame) -> str | None:
    """The field naming each event's process (the first of ``UNITS`` the dataset has as text)."""
    return next((u for u in UNITS if u in frame.fields and frame.fields[u].type == "VARCHAR"), None)


def role(part: str) -> str:
    """``wait`` for a part named like waiting, else ``service``."""
    return "wait" if any(w in part.lower() for w in WAIT_WORDS) else "service"


def event_interval(
    frame: Frame, measure: str | None, part: str | None, timestamp_at: str
) -> tuple[exp.Expr, exp.Expr] | None:
    """The (start, end) of each event, or of its ``part``, in epoch microseconds (two
    expressions); None when it cannot be placed (no duration, or a unit the name does not give).

    A waiting part sits at the event's start, any other at its end: waiting comes before
    the work waited for (the pool wait before the query, the queue before the upstream
    call), and the work is what a pool or worker holds."""
    ts = q.epoch_us(q.col(TIME_COLUMN))
    done = next((c for c in COMPLETION if c in frame.fields and frame.fields[c].type == "TIMESTAMP"), None)
    start: exp.Expr
    end: exp.Expr
    if done is not None:
        start, end = ts, q.epoch_us(q.col(done))
    elif measure is not None and (scale := micros_per_unit(measure)) is not None:
        length = _micros(measure, scale)
        if timestamp_at == "start":
            start, end = ts, exp.Add(this=ts.copy(), expression=length)
        else:
            start, end = exp.Sub(this=ts, expression=length), ts.copy()
    else:
        return None
    if part is None or part == measure:
        return start, end
    if (part_scale := micros_per_unit(part)) is None:
        return None
    held = _micros(part, part_scale)
    if role(part) == "wait":
        return start, exp.Add(this=start.copy(), expression=held)
    return exp.Sub(this=end, expression=held), end.copy()


def _micros(name: str, scale: float) -> exp.Expr:
    """``CAST(name * scale AS BIGINT)``: a duration field in microseconds."""
    return exp.cast(exp.Mul(this=q.col(name), expression=q.num(scale)), "BIGINT", copy=False)


def in_flight(
    frame: Frame, a: Anomaly, measure: str | None, parts: list[str], timestamp_at: str, alpha: float = 0.05
) -> list[Finding]:
    """Units that carry the region's slow events and whose in-flight count rose in it
    (significantly, or up to a ceiling it held), the largest rise first: of whole events,
    or of one of their ``parts`` (see the module docstring). Per unit, the interval that
    held at a ceiling when one did (a pool that filled), else the one that rose most."""
    spans = {
        d or "(whole event)": s
        for d in [measure, *parts]
        if (s := event_interval(frame, measure, d, timestamp_at)) is not None
    }
    if not spans or frame.start is None or frame.end is None:
        return []
    window = around(frame, a)
    lo, hi = window.start, window.end
    assert lo is not None and hi is not None
    unit = unit_field(frame)
    width = timedelta(microseconds=max(1, int((hi - lo) / timedelta(microseconds=1) / SAMPLES)))
    counts = _start_end_counts(window, unit, list(spans.values()), lo, width)
    i0 = int((a.start - lo) / width)
    i1 = min(SAMPLES, max(i0 + 1, int(math.ceil((a.end - lo) / width))))
    carriers = _carriers(frame, a, unit)
    tests = {key: _rise(level, i0, i1) for key, level in counts.items() if carriers is None or key[1] in carriers}
    tried = max(1, len(tests))  # Bonferroni over every unit and interval tested
    found = []
    for (k, name), rise in tests.items():
        level = counts[(k, name)]
        held = _plateau(level, i0, i1)
        if rise is None or (held is None and rise.p_value * tried >= alpha):
            continue
        ceiling: dict[str, Any] = {"in_flight_ceiling": None}
        if held is not None:
            share_in, share_out, top, run, first = held
            ceiling = {
                "in_flight_ceiling": top,
                "share_at_ceiling": round(share_in, 4),
                "share_at_ceiling_outside": round(share_out, 4),
                "first_at_ceiling": iso(lo + first * width),
                "longest_at_ceiling_seconds": round(run * width.total_seconds(), 3),
            }
        found.append(
            Finding(
                "saturation",
                rise.relative,
                rise.p_value,
                q_value=min(1.0, rise.p_value * tried),
                field=unit,
                value=name,
                effect=rise.mean_in - rise.mean_out,
                detail={
                    "duration": list(spans)[k],
                    "in_flight_mean": round(rise.mean_in, 3),
                    "in_flight_mean_outside": round(rise.mean_out, 3),
                    "in_flight_p90": float(np.quantile(level[i0:i1], 0.9)),
                    "in_flight_max": float(level[i0:i1].max()),
                    "effective_samples": [round(float(rise.n_in), 1), round(float(rise.n_out), 1)],
                    **ceiling,
                    "sample_seconds": round(width.total_seconds(), 6),
                    "timestamp_at": timestamp_at,
                },
            )
        )
    # one finding per unit: the interval that held at a ceiling, else the one that rose most
    best: dict[Any, Finding] = {}
    for f in sorted(found, key=lambda f: (f.detail["in_flight_ceiling"] is None, -f.effect, str(f.detail["duration"]))):
        best.setdefault(f.value, f)
    shown = sorted(best.values(), key=lambda f: (-f.effect, str(f.value)))
    for f in shown:
        f.detail["units_rose"] = len(shown)
    return shown[:SHOWN_UNITS]


@dataclass
class Rise:
    """A count's mean in the region and outside it, each side's effective number of
    samples, and the one-sided p-value of the rise."""

    mean_in: float
    mean_out: float
    n_in: float
    n_out: float
    p_value: float

    @property
    def relative(self) -> float:
        """The share of the region's mean that is the rise (0 to 1)."""
        return (self.mean_in - self.mean_out) / self.mean_in if self.mean_in > 0 else 0.0


def _rise(level: np.ndarray, i0: int, i1: int) -> Rise | None:
    """Welch's one-sided test that the count's mean is higher in ``[i0, i1)`` than outside
    it, each side's samples counted at their effective number (``effective_samples``):
    an in-flight count now and a moment later hold the same events. None when a side has
    fewer than ``MIN_EFFECTIVE`` effective samples, or the count did not rise."""
    inside = level[i0:i1].astype(np.float64)
    outside = np.concatenate([level[:i0], level[i1:]]).astype(np.float64)
    if inside.size < MIN_RUN or outside.size < MIN_RUN:
        return None
    n_in, n_out = effective_samples(inside), effective_samples(outside)
    if n_in < MIN_EFFECTIVE or n_out < MIN_EFFECTIVE:
        return None
    m_in, m_out = float(inside.mean()), float(outside.mean())
    if m_in <= m_out:
        return None
    v_in, v_out = float(inside.var(ddof=1)) / n_in, float(outside.var(ddof=1)) / n_out
    se = math.sqrt(v_in + v_out)
    if se == 0:
        return Rise(m_in, m_out, n_in, n_out, 0.0)
    df = (v_in + v_out) ** 2 / ((v_in**2 / (n_in - 1) if v_in else 0.0) + (v_out**2 / (n_out - 1) if v_out else 0.0))
    return Rise(m_in, m_out, n_in, n_out, float(dist.t_sf((m_in - m_out) / se, df)))


def effective_samples(x: np.ndarray) -> float:
    """How many independent samples ``x`` is worth: its length over its integrated
    autocorrelation time, 1 + 2 Σ ρ_k, summed over Geyer's initial positive sequence (pairs
    of lags while their sum stays positive). A constant series is worth its length."""
    n = x.size
    d = x - x.mean()
    var = float(d @ d)
    if n < 3 or var == 0:
        return float(n)
    acf = np.correlate(d, d, mode="full")[n - 1 :] / var
    tau = -1.0  # 1 + 2 Σ_{k≥1} ρ_k = -1 + 2 Σ_{m≥0} (ρ_2m + ρ_2m+1)
    for m in range(n // 2):
        pair = acf[2 * m] + acf[2 * m + 1]
        if pair <= 0:
            break
        tau += 2 * pair
    return n / max(1.0, tau)


def _carriers(frame: Frame, a: Anomaly, unit: str | None) -> set[Any] | None:
    """The units with more than their share of the region's bad events (slower than its
    line, or an error); None when every unit is tried (no unit, or a stall: every event
    of a stall waited)."""
    if unit is None or a.kind not in ("latency", "errors") or a.measure is None:
        return None
    column = q.col(a.measure)
    bound: list[Any] = []
    if a.kind == "latency":
        line = q.bind(bound, a.threshold)
        bad: exp.Expr = column < line if a.detail.get("direction") == "down" else column > line
    else:
        bad = column >= q.num(500)
    n = weighted.count_of(frame)  # a row with a count is that many events
    items = [q.col(unit), exp.Sum(this=n), q.where(exp.Sum(this=n.copy()), bad)]
    region: list[Any] = []
    query, params = frame.rows(items, q.within(q.col(TIME_COLUMN), region, a.start, a.end))
    rows = frame.backend.execute(query.group_by(q.num(1), copy=False), [*bound, *params, *region]).rows
    events, slow = sum(float(r[1] or 0) for r in rows), sum(float(r[2] or 0) for r in rows)
    if not events or not slow:
        return set()
    return {name for name, m, k in rows if float(k or 0) * events > slow * float(m or 0)}


def around(frame: Frame, a: Anomaly) -> Frame:
    """The region and as long again on each side (within the frame's range): where its
    in-flight counts and its parts are compared with what came before and after."""
    length = a.end - a.start
    lo = a.start - length if frame.start is None else max(frame.start, a.start - length)
    hi = a.end + length if frame.end is None else min(frame.end, a.end + length)
    return Frame(frame.backend, frame.dataset, lo, hi, frame.where)


def _start_end_counts(
    window: Frame, unit: str | None, spans: list[tuple[exp.Expr, exp.Expr]], origin: datetime, width: timedelta
) -> dict[tuple[int, Any], np.ndarray]:
    """Per (interval, unit): the in-flight count at the start of each of ``SAMPLES``
    buckets: the events started before it and not yet ended."""
    o = int((origin - datetime(1970, 1, 1)) / timedelta(microseconds=1))
    us = int(width / timedelta(microseconds=1))
    if unit:
        query, params = window.rows([exp.ApproxDistinct(this=q.col(unit))])
        n = window.backend.execute(query, params).rows
        if n[0][0] is None or int(n[0][0]) > MAX_UNITS:
            return {}
    parts, params = [], []
    for k, (start, end) in enumerate(spans):
        for at_end, at in ((0, start), (1, end)):
            items = [
                q.alias(q.num(k), "i"),
                q.alias(q.col(unit) if unit else exp.Null(), "u"),
                q.alias(q.num(at_end), "side"),
            ]
            items.append(
                q.alias(q.clamp(q.bucket_index(at.copy(), us, o), -1, SAMPLES), "b")
            )  # -1 before, SAMPLES after
            part, bound = window.rows(items, q.not_null(start.copy()), q.not_null(end.copy()))
            parts.append(part)
            params += bound
    i, u, side, b, n_ = (exp.column(q.name(c)) for c in ("i", "u", "side", "b", "n"))
    per_bucket = q.select([i, u, side, b, q.alias(q.count_rows(), "n")], q.union_all(parts), group=4)
    # one row per interval, unit and side, its buckets as lists: far cheaper to bring into numpy
    lists = [i.copy(), u.copy(), side.copy(), q.listed(b.copy()), q.listed(n_)]
    rows = window.backend.execute(q.select(lists, per_bucket, group=3), params).rows
    grid: dict[tuple[int, Any], np.ndarray] = {}
    for k, name, at_end, buckets, counts in rows:
        g = grid.get((int(k), name))
        if g is None:
            g = grid[(int(k), name)] = np.zeros((2, SAMPLES + 2))
        np.add.at(g[int(at_end)], np.asarray(buckets, dtype=np.int64) + 1, np.asarray(counts, dtype=np.float64))
    # in flight at the start of bucket k: started in an earlier bucket, not ended before it
    return {key: (np.cumsum(g[0]) - np.cumsum(g[1]))[:SAMPLES] for key, g in grid.items()}


def _plateau(level: np.ndarray, i0: int, i1: int) -> tuple[float, float, float, int, int] | None:
    """(share of the region at the ceiling, share outside, the ceiling, longest run, its
    first sample) when the count was held at a ceiling in the region; None otherwise.

    The ceiling is the level whose band (± ``CEILING_TOLERANCE``, at least 1) holds the
    most of the region's time with at most ``ABOVE_MAX`` of it above the band: a limit,
    give or take timestamp jitter. It counts when the band holds ``MIN_SHARE_AT_CEILING``
    of the region, ``PILE_UP`` times as much as the band of the same width just below it
    (unlimited load thins out towards its top; a clipped one piles up there), at least
    twice its share outside the region, in a run of ``MIN_RUN`` samples."""
    inside = level[i0:i1]
    if inside.size < MIN_RUN or inside.max() < MIN_CEILING:
        return None
    values = np.sort(inside)
    n = float(values.size)
    best: tuple[float, float, int] | None = None
    for v in np.unique(values):
        tol = max(1, math.floor(CEILING_TOLERANCE * v))
        above = n - np.searchsorted(values, v + tol, side="right")
        if above > ABOVE_MAX * n:
            continue
        band = np.searchsorted(values, v + tol, side="right") - np.searchsorted(values, v - tol, side="left")
        if best is None or band > best[1]:
            best = (float(v), float(band), tol)
    if best is None or best[0] < MIN_CEILING:
        return None
    ceiling, band, tol = best
    below = np.searchsorted(values, ceiling - tol, side="left") - np.searchsorted(
        values, ceiling - 3 * tol - 1, side="left"
    )
    at = np.abs(level - ceiling) <= tol
    share_in = band / n
    outside = np.concatenate([at[:i0], at[i1:]])
    share_out = float(outside.mean()) if outside.size else 0.0
    run, longest, first = 0, 0, i0
    for k in range(i0, i1):
        run = run + 1 if at[k] else 0
        if run > longest:
            longest, first = run, k - run + 1
    if share_in < MIN_SHARE_AT_CEILING or band < PILE_UP * below or share_in < 2 * share_out or longest < MIN_RUN:
        return None
    return share_in, share_out, ceiling, longest, first
