"""The series ``changes`` looks at: a calculation per time bucket (and per group), made by
the query model (``QuerySpec``), never by hand-written SQL.

A measure is a calculation of the query model (``count``, ``p50(duration_ms)``,
``avg(gauge)``, ``max(x)`` …), ``rate(FILTER)`` (the share of the bucket's events matching
the filter: two counts of the query model), or a bare field name, read as ``p50(field)``.
The bucket width is ``granularity`` or the range over ``TARGET_BUCKETS`` on a human
ladder, never finer than the time field's resolution (timescale): no change is placed
more finely than the data was stamped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from rootsift.analysis import timescale
from rootsift.analysis.frame import Frame
from rootsift.errors import QuerySpecError
from rootsift.query.engine import run_query
from rootsift.query.spec import Calculation, QuerySpec
from rootsift.store.duckdb import DuckDBBackend
from rootsift.timeutil import format_duration, nice_granularity, parse_duration

TARGET_BUCKETS = 720
"""Default buckets over the range (12 a day over two months, one a minute over 12 hours)."""
MAX_GROUPS = 1000
"""Groups (``--by``) looked at: those with the most events."""
MAX_ROWS = 5_000_000
MIN_EVENTS = 5
"""A count or rate series has at least this many events per bucket on average (busiest group)."""
_RATE = re.compile(r"^\s*rate\s*\((.*)\)\s*$", re.I | re.S)
_WORD = re.compile(r"^\s*`?[A-Za-z_][A-Za-z0-9_.\-]*`?\s*$")


@dataclass(frozen=True)
class Measure:
    """What is computed per bucket: a calculation, or the share of events matching ``rate``."""

    text: str
    calc: Calculation | None
    rate: str | None = None

    @property
    def label(self) -> str:
        return f"rate({self.rate})" if self.rate is not None else (self.calc.label if self.calc else self.text)


def parse_measure(text: str) -> Measure:
    """``p50(duration_ms)``, ``count``, ``avg(x)``, ``rate(status >= 500)``, or a bare field
    (its p50). Raises QuerySpecError naming ``--measure`` when it cannot be read."""
    from rootsift.query.filters import parse_filter

    if not text or not text.strip():
        raise QuerySpecError("--measure is empty: write e.g. 'p50(duration_ms)', 'count' or 'rate(status >= 500)'")
    rate = _RATE.match(text)
    if rate:
        cond = rate.group(1).strip()
        if not cond:
            raise QuerySpecError("--measure rate(...) needs a filter, e.g. rate(status >= 500)")
        parse_filter(cond)
        return Measure(text, None, cond)
    if _WORD.match(text) and text.strip().lower() != "count":
        name = text.strip().strip("`")
        return Measure(text, Calculation("percentile", name, 0.5))
    try:
        calc = Calculation.parse(text)
    except QuerySpecError as exc:
        raise QuerySpecError(f"--measure: {exc}") from None
    if calc.op == "heatmap":
        raise QuerySpecError("--measure heatmap(...) is not one number per bucket; use e.g. p50(x) or p99(x)")
    return Measure(text, calc)


@dataclass
class Series:
    """One group's values per bucket, over the buckets where it has events (gaps left out)."""

    group: object
    times: list[datetime]
    values: np.ndarray
    events: np.ndarray


@dataclass
class SeriesSet:
    """Every group's series, the bucket width and what was left out."""

    measure: Measure
    by: str | None
    granularity: timedelta
    resolution_seconds: float
    series: list[Series] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def bucket_width(
    backend: DuckDBBackend, dataset: str, start: datetime | None, end: datetime | None, granularity: str | None
) -> tuple[timedelta, float]:
    """(bucket width, the time field's resolution in seconds): ``granularity`` when given,
    else the range over ``TARGET_BUCKETS``; a whole number of resolution units either way."""
    frame = Frame(backend, dataset, start, end)
    unit = timescale.resolution(frame)
    if granularity:
        width = parse_duration(granularity)
        if width.total_seconds() <= 0:
            raise QuerySpecError(f"--granularity must be positive, not {granularity!r}")
        if width.total_seconds() < unit * (1 - 1e-9):
            raise QuerySpecError(
                f"--granularity {granularity}: the time field is stamped every {timescale.describe(unit)}; "
                f"no bucket finer than that has data of its own (use at least {timescale.describe(unit)})"
            )
        return width, unit
    first, last = backend.span(dataset)
    lo, hi = start or first, end or last
    if lo is None or hi is None or hi <= lo:
        return timedelta(minutes=1), unit
    width = nice_granularity(hi - lo + timedelta(microseconds=1), TARGET_BUCKETS)
    return timescale.whole_units(max(width, timedelta(seconds=unit)), unit), unit


def build(
    backend: DuckDBBackend,
    dataset: str,
    measure: Measure,
    *,
    by: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
    granularity: str | None = None,
    labels: list[str] | None = None,
    max_groups: int = MAX_GROUPS,
) -> SeriesSet:
    """The measure per bucket (per ``by`` group) through the query model; ``labels``:
    more fields to split by (a group is then the tuple of ``by`` and their values).
    A count or a rate whose buckets hold fewer than ``MIN_EVENTS`` events on average (in
    the busiest group) is made again with buckets wide enough for that, unless
    ``granularity`` was given (then a warning says so): counts of 0 and 1 are no level."""
    out = _build(backend, dataset, measure, by, start, end, where, granularity, labels, max_groups)
    if measure.rate is None and (measure.calc is None or measure.calc.op != "count"):
        return out
    busiest = max((float(s.events.sum()) / max(1, _buckets(s, out.granularity)) for s in out.series), default=0.0)
    if not out.series or busiest >= MIN_EVENTS:
        return out
    if granularity:
        out.warnings.append(
            f"--granularity {granularity}: buckets hold {busiest:.2g} events on average; a count or rate this "
            f"sparse has no level to shift (use buckets of at least {MIN_EVENTS} events)"
        )
        return out
    span = max(s.times[-1] for s in out.series) - min(s.times[0] for s in out.series) + out.granularity
    wider = nice_granularity(span, max(1, int(busiest * (span / out.granularity) / MIN_EVENTS)))
    wider = timescale.whole_units(max(wider, out.granularity), out.resolution_seconds)
    return _build(backend, dataset, measure, by, start, end, where, format_duration(wider), labels, max_groups)


def _buckets(s: Series, width: timedelta) -> int:
    return int((s.times[-1] - s.times[0]) / width) + 1 if s.times else 0


def _build(
    backend: DuckDBBackend,
    dataset: str,
    measure: Measure,
    by: str | None,
    start: datetime | None,
    end: datetime | None,
    where: str | None,
    granularity: str | None,
    labels: list[str] | None,
    max_groups: int,
) -> SeriesSet:
    width, unit = bucket_width(backend, dataset, start, end, granularity)
    keys = ([by] if by else []) + list(labels or [])
    g = format_duration(width)
    out = SeriesSet(measure, by, width, unit)
    s, e = (start.isoformat() if start else None), (end.isoformat() if end else None)

    def spec(calcs: list[Calculation], filt: str | None) -> QuerySpec:
        return QuerySpec(dataset, s, e, filt, keys, calcs, granularity=g, order=["time asc"], limit=MAX_ROWS)

    count = Calculation("count")
    if measure.rate is not None:
        total = run_query(backend, spec([count], where))
        cond = f"({where}) and ({measure.rate})" if where else measure.rate
        hits = {tuple(r[:-1]): r[-1] for r in run_query(backend, spec([count], cond)).rows}
        rows = [[*r[:-1], (hits.get(tuple(r[:-1])) or 0) / r[-1] if r[-1] else None, r[-1]] for r in total.rows]
    else:
        assert measure.calc is not None
        calcs = [measure.calc] if measure.calc.op == "count" else [measure.calc, count]
        rows = run_query(backend, spec(calcs, where)).rows
        if measure.calc.op == "count":
            rows = [[*r, r[-1]] for r in rows]
    # the query orders rows by time: each group's buckets are appended in order
    groups: dict[object, tuple[list[datetime], list[float], list[float]]] = {}
    nk = len(keys)
    for r in rows:
        value = r[-2]
        if value is None:
            continue
        key = (r[1] if nk == 1 else tuple(r[1 : 1 + nk])) if nk else None
        into = groups.get(key)
        if into is None:
            into = groups[key] = ([], [], [])
        into[0].append(r[0])
        into[1].append(value)
        into[2].append(r[-1] or 0)
    ranked = sorted(groups.items(), key=lambda kv: -sum(kv[1][2]))
    if len(ranked) > max_groups:
        out.warnings.append(
            f"{dataset} by {', '.join(keys)}: {len(ranked)} groups; the {max_groups} with the most events are looked at"
        )
    grid = _grid(rows, width) if measure.calc is not None and measure.calc.op == "count" else None
    for key, (times, values, counts) in ranked[:max_groups]:
        if grid is not None or any(b < a for a, b in zip(times, times[1:], strict=False)):
            # a count's bucket without events counts 0; rows out of time order are sorted
            have = set(times)
            zeros = [(t, 0.0, 0.0) for t in grid or [] if t not in have]
            points = sorted(
                [*zip(times, values, counts, strict=True), *zeros],
                key=lambda p: p[0],
            )
            times, values, counts = [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]
        out.series.append(Series(key, times, np.array(values, dtype=np.float64), np.array(counts, dtype=np.float64)))
    return out


def _grid(rows: list[list[object]], width: timedelta) -> list[datetime]:
    """Every bucket from the first to the last one any group has."""
    times = [r[0] for r in rows if isinstance(r[0], datetime)]
    if not times:
        return []
    first, last = min(times), max(times)
    return [first + i * width for i in range(int((last - first) / width) + 1)]
