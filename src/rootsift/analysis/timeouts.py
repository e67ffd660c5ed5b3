"""Timeouts that were not respected: a duration that should stop at a configured limit
but sometimes runs past it.

The limit is given (``--timeout FIELD=30s``) or inferred from a **pile-up at a ceiling**:
events stopped by a timeout all end at about the same value, so one log-spaced bin in the
upper tail holds many times the events of the bins below it. Events well past the
ceiling (``SLACK`` above it) ran longer than the timeout allows; explain says what they
have in common (which upstream, which client; status fields are left out: they are what
the timeout produced, not where it happened).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.counts import BIN_OFFSET, BIN_STEPS, bin_key
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame

if TYPE_CHECKING:
    from rootsift.analysis.explain import Explanation

SLACK = 1.05
PILE_UP = 5.0
"""A ceiling bin holds at least this many times the mean of the four bins below it…"""
PILE_MIN = 20
"""…and at least this many events."""
MIN_PAST = 5


@dataclass
class Ceiling:
    field: str
    value: float
    events_at: int
    inferred: bool


def duration_fields(frame: Frame) -> list[str]:
    """Numeric fields that look like durations (``*_ms``, ``*_seconds``, ``duration``...)."""
    out = []
    for name, info in frame.fields.items():
        low = name.lower()
        if info.type in ("DOUBLE", "BIGINT") and (
            low.endswith(("_ms", "_us", "_s", "_sec", "_seconds")) or "duration" in low or "latency" in low
        ):
            out.append(name)
    return sorted(out)


def inferred_ceilings(frame: Frame, fields: list[str]) -> list[Ceiling]:
    """Pile-ups at the top of each field's distribution (see the module docstring).

    Only the upper tail is read bin by bin: the store's uniform sample gives each field's
    ``TAIL_FROM`` quantile, and two cheap passes over the field count its events below
    that and its events above it per bin; the mode is read in the pile-up's bin alone. The counts are exact, and so is the answer: a field whose test would need a
    bin below the tail read (the sample far off) is counted over every bin, as is every
    field when the store holds no sample."""
    out = []
    lows = _tail_starts(frame, fields)
    tails = _tail_bins(frame, {n: lo for n, lo in lows.items() if lo is not None})
    for name in fields:
        at = _pile_up(*tails[name]) if name in tails else UNKNOWN
        if at is UNKNOWN:
            at = _pile_up(*_all_bins(frame, name), None)
        if at is not None and at is not UNKNOWN:
            key, n = at
            out.append(Ceiling(name, _mode_in_bin(frame, name, key), n, True))
    return out


UNKNOWN = (0, -1)
"""The tail read cannot decide: its bins say nothing of what the test needs below it."""
TAIL_FROM = 0.8
"""The sample's quantile from which a field's values are read bin by bin (the test reads
bins above the 90th percentile and the four below each)."""
TAIL_MIN_SAMPLED = 200
"""A sample with fewer values than this places the quantile too loosely: every bin is read."""


def _pile_up(keys: np.ndarray, counts: np.ndarray, below: float | None) -> tuple[int, int] | None:
    """(bin key, events in it) of the highest bin of the upper tail (above the 90th
    percentile) that holds ``PILE_UP`` times the mean of the four near bins below it and
    at least ``PILE_MIN`` events; None when none does. ``below``: events under the bins
    given (None: the bins are all of them); ``UNKNOWN`` when the answer needs those."""
    total = counts.sum() + (below or 0.0)
    if total <= 0 or (below is None and len(keys) < 6):
        return None
    cum = ((below or 0.0) + np.cumsum(counts)) / total
    for i in range(len(keys) - 1, -1, -1):
        if (cum[i - 1] if i > 0 else (below or 0.0) / total) < 0.9:  # only the upper tail
            return None
        if i < 4:  # the four bins below are not all here
            return UNKNOWN if below else None
        below_mean = counts[i - 4 : i].mean()
        adjacent = keys[i] - keys[i - 4] <= 4 + BIN_STEPS  # the four bins below are near
        if counts[i] >= PILE_MIN and adjacent and counts[i] >= PILE_UP * max(below_mean, 1.0):
            return int(keys[i]), int(counts[i])
    return None


def _tail_starts(frame: Frame, fields: list[str]) -> dict[str, int | None]:
    """Per field, the key of the bin four below its ``TAIL_FROM`` quantile in the store's
    sample; None without a sample or with too few sampled values."""
    sample = frame.backend.sample_relation(frame.dataset, frame.start, frame.end)
    if sample is None or not fields:
        return {}
    where, params = frame.range_where()
    aggs: list[exp.Expr] = []
    for n in fields:
        aggs += [
            q.where(q.count_rows(), q.col(n) > q.num(0)),
            q.where(q.quantile_cont(q.col(n), TAIL_FROM), q.col(n) > q.num(0)),
        ]
    row = frame.backend.execute(q.select(aggs, sample, where), params).rows[0]
    out: dict[str, int | None] = {}
    for i, name in enumerate(fields):
        n, at = row[2 * i], row[2 * i + 1]
        ok = n is not None and n >= TAIL_MIN_SAMPLED and at is not None and float(at) > 0
        out[name] = math.floor(math.log2(float(at)) * BIN_STEPS) - 4 + BIN_OFFSET if ok else None
    return out


def _tail_bins(frame: Frame, lows: dict[str, int]) -> dict[str, tuple[np.ndarray, np.ndarray, float]]:
    """Per field, (bin keys, events per bin) of its bins from ``lows[field]`` up and the
    events with positive values below them. Only values near or above the lowest bin are
    binned (a comparison is cheaper than a logarithm; a grouping with a filter in front of
    it cheaper than a ``histogram`` with one, by half); binned values below it join the
    count below."""
    out = {}
    for name, lowest in lows.items():
        col, near = q.col(name), 0.99 * 2.0 ** ((lowest - BIN_OFFSET) / BIN_STEPS)
        binned, params = frame.rows([q.alias(bin_key(col), "k"), q.count_rows()], col.copy() >= q.num(near))
        rows = frame.backend.execute(q.order_by(binned.group_by(q.num(1), copy=False), q.num(1)), params).rows
        above_zero = exp.and_(col.copy() > q.num(0), col.copy() < q.num(near))
        counted, params = frame.rows([q.count_rows()], above_zero)
        under = frame.backend.execute(counted, params).rows[0][0]
        keys = np.array([k for k, _ in rows if k >= lowest], dtype=np.float64)
        counts = np.array([n for k, n in rows if k >= lowest], dtype=np.float64)
        below = float(under or 0) + sum(float(n) for k, n in rows if k < lowest)
        out[name] = (keys, counts, below)
    return out


def _all_bins(frame: Frame, name: str) -> tuple[np.ndarray, np.ndarray]:
    """(bin keys, events per bin) of a field's positive values, every bin."""
    col = q.col(name)
    binned, params = frame.rows([q.alias(bin_key(col), "k"), q.count_rows()], col.copy() > q.num(0))
    rows = frame.backend.execute(q.order_by(binned.group_by(q.num(1), copy=False), q.num(1)), params).rows
    return np.array([r[0] for r in rows], dtype=np.float64), np.array([r[1] for r in rows], dtype=np.float64)


def _mode_in_bin(frame: Frame, name: str, key: int) -> float:
    """The most common value of a field in bin ``key`` (of equally common ones, the
    smallest): the ceiling itself."""
    col = q.col(name)
    lo, hi = 2.0 ** ((key - BIN_OFFSET) / BIN_STEPS), 2.0 ** ((key - BIN_OFFSET + 1) / BIN_STEPS)
    # the value range first (cheap), the bin's own rule after it (exact)
    in_bin = exp.and_(
        col.copy() >= q.num(lo * 0.999),
        col.copy() <= q.num(hi * 1.001),
        exp.EQ(this=bin_key(col.copy()), expression=q.num(key)),
    )
    # the most common value, the smallest of equally common ones: the same on every engine
    # (DuckDB's mode() breaks ties its own way; ClickHouse has no exact mode)
    query, params = frame.rows([col.copy(), q.alias(q.count_rows(), "n")], in_bin)
    query = q.order_by(query.group_by(q.num(1), copy=False), q.desc(exp.column(q.name("n"))), q.num(1))
    row = frame.backend.execute(query.limit(1, copy=False), params).rows[0]
    return float(row[0])


def given_ceilings(frame: Frame, limits: dict[str, float]) -> list[Ceiling]:
    return [Ceiling(name, value, 0, False) for name, value in limits.items() if name in frame.fields]


def past_ceiling(frame: Frame, ceiling: Ceiling, explain: Any) -> Finding | None:
    """A finding for the events that ran past ``ceiling``, with what they have in common."""
    limit = ceiling.value * SLACK
    result: Explanation = explain(
        select=f"{ident_text(ceiling.field)} > {limit!r}", baseline=f"{ident_text(ceiling.field)} <= {limit!r}"
    )
    past = result.selection["events"]
    if past < MIN_PAST:
        return None
    # explain lists its cause set first, and a set has no order: the strongest single
    # finding is what the timed-out events have most in common
    shared = [f for f in result.findings if f.kind in ("dimension", "combination") and not outcome(f)]
    # a part of the timed-out duration itself (its value `missing`, say) restates the ceiling
    top = min(shared, key=lambda f: ("restates" in f.detail, "within" in f.detail, -f.score, f.p_value), default=None)
    detail: dict[str, Any] = {
        "ceiling": ceiling.value,
        "inferred": ceiling.inferred,
        "events_past": past,
        "events_within": result.baseline["events"],
    }
    if ceiling.inferred:
        detail["events_at_ceiling"] = ceiling.events_at
    finding = Finding(
        "timeout",
        top.score if top else 0.0,
        top.p_value if top else 1.0,
        q_value=top.q_value if top else 1.0,
        field=ceiling.field,
        value=ceiling.value,
        selection_fraction=top.selection_fraction if top else None,
        baseline_fraction=top.baseline_fraction if top else None,
        selection_count=float(past),
        baseline_count=float(result.baseline["events"]),
        detail=detail,
    )
    if top is not None:
        finding.conditions = top.conditions or [{"field": top.field, "value": top.value}]
        finding.detail["field"] = ceiling.field
        finding.detail["value"] = ceiling.value
    return finding


def outcome(finding: Finding) -> bool:
    """A status says what a timeout produced, not where it happened: not an explanation of it."""
    names = [c["field"] for c in finding.conditions or []] or [str(finding.field)]
    return any("status" in str(n).lower() for n in names)


def ident_text(name: str) -> str:
    """A field name as the filter language writes it: backquoted, so any name reads as a field."""
    return "`" + name.replace("`", "``") + "`"
