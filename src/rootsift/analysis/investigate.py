"""investigate: find the anomalous region by itself, then explain it.

1. The measure (``--measure``, else the dataset's duration field) and the range (the
   whole dataset by default).
2. The region (``anomaly.py``): the latency or error-rate shift with the strongest scan
   statistic; a stall (a gap in completions followed by a burst) instead when it is
   more significant than the shift, or the shift begins with it.
3. The region is explained against the time outside it (``onset.py``): its **onset**,
   the region's earliest bad events (the cause comes before its consequences), with
   explain's statistics; findings on a status field (a 499, a 502: what the slowness
   produced) come after the others. For a stall, the events completing right after it,
   earliest first (``stalls.py``), then the stall's own events.
4. Saturation (``saturation.py``): where the region's extra time went (waiting vs
   service, when the measure has parts), and processes whose in-flight count held at a
   ceiling (a pool or worker limit) during it.
5. Timeouts not respected (``timeouts.py``): durations that pile up at a ceiling and the
   events that ran past it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlglot import exp

from rootsift.analysis import anomaly as an
from rootsift.analysis import edges
from rootsift.analysis import saturation as sat
from rootsift.analysis import seasonal as ss
from rootsift.analysis import shifts as sh
from rootsift.analysis import sql as q
from rootsift.analysis import timeouts as to
from rootsift.analysis import timescale as ts
from rootsift.analysis.decomposition import decomposition
from rootsift.analysis.explain import ALPHA, Explanation
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame
from rootsift.analysis.median_shift import median_shift
from rootsift.analysis.onset import OPERATOR, direction, explain_in, explain_region
from rootsift.errors import UsageError
from rootsift.store.base import TIME_COLUMN
from rootsift.store.duckdb import DuckDBBackend

MEASURES = ("duration_ms", "request_time_ms", "latency_ms", "response_time_ms", "query_time_ms", "elapsed_ms")
ERROR_FIELDS = ("status", "status_code", "http_status")
MAX_REGIONS = 3
NORMAL_QUANTILE = 0.99
NORMAL_QUANTILES = (NORMAL_QUANTILE, 0.999)
"""The onset walks back on both: normal behaviour's p99, and its p99.9 (``_normal_line``)."""
SAMPLED_FROM = 5_000_000
"""From this many events in range, explanations read their baseline from the stored sample
(explain --sampled: about 80,000 sampled events and more, shares within ±0.0035)."""


@dataclass
class Investigation:
    dataset: str
    anomaly: an.Anomaly | None
    findings: list[Finding]
    selection: dict[str, Any] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    explanation: Explanation | None = None
    method: dict[str, Any] = field(default_factory=dict)
    regions: list[an.Anomaly] = field(default_factory=list)
    """Up to ``MAX_REGIONS`` significant regions that do not overlap, the headline (``anomaly``) first."""
    """How the region was looked for: the time field's resolution, the scan's bucket widths."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "method": self.method,
            "anomaly": self.anomaly.as_dict() if self.anomaly else None,
            "regions": [r.as_dict() for r in self.regions],
            "selection": self.selection,
            "baseline": self.baseline,
            "findings": [f.as_dict() for f in self.findings],
            "warnings": self.warnings,
        }


def investigate(
    backend: DuckDBBackend,
    dataset: str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
    measure: str | None = None,
    timeouts: dict[str, float] | None = None,
    timestamp_at: str = "start",
    alpha: float = ALPHA,
    count_field: str | None = None,
    changes: str | None = None,
) -> Investigation:
    """Find the dataset's anomalous region and explain it (see the module docstring);
    ``count_field``: each row stands for that many identical events; ``changes``: a
    dataset of change events, ranked as suspects of the region's onset (onset_suspects.py)."""
    if timestamp_at not in ("start", "end"):
        raise UsageError(f"--timestamp-at must be start or end, not {timestamp_at!r}")
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha} must be between 0 and 1")
    first, last = backend.span(dataset)
    if first is None or last is None:
        return Investigation(dataset, None, [], warnings=["the dataset is empty"])
    start = start or first
    end = end or last + timedelta(microseconds=1)
    frame = Frame(backend, dataset, start, end, where, count_field=count_field)
    counted, params = frame.rows([q.count_rows()])
    events = int(backend.execute(counted, params).rows[0][0])
    sampled = events >= SAMPLED_FROM
    measure = measure or _default_measure(frame)
    if measure is not None and measure not in frame.fields:
        raise UsageError(f"--measure {measure!r} is not a field of {dataset}")
    out = Investigation(dataset, None, [])
    start_of = measure if timestamp_at == "end" else None
    found = _find(frame, measure, start, end, alpha, out.method, out.regions, start_of)
    out.anomaly = found
    if changes is not None and changes not in {d.name for d in backend.datasets()}:
        from rootsift.analysis.changes import raise_unknown

        raise_unknown(backend, changes)
    if found is not None:
        _explain_region(frame, found, alpha, sampled, start_of if found.kind != "stall" else None, out)
        _saturation(frame, found, measure, timestamp_at, alpha, out)
        if changes is not None:
            from rootsift.analysis.onset_suspects import onset_suspects

            suspects, notes = onset_suspects(
                backend, dataset, changes, found, start=start, end=end, where=where, alpha=alpha
            )
            out.findings.extend(suspects)
            out.warnings.extend(notes)
    past = []
    for ceiling in to.given_ceilings(frame, timeouts or {}) or to.inferred_ceilings(frame, to.duration_fields(frame)):
        finding = to.past_ceiling(frame, ceiling, lambda **kw: explain_in(frame, alpha, sampled, **kw))
        if finding is not None:
            past.append(finding)
    out.findings.extend(sorted(past, key=lambda f: -f.selection_count))  # the most violated first
    if found is None:
        out.warnings.append("no anomalous region stands out (no latency or error shift, no stall)")
    return out


def _saturation(
    frame: Frame, a: an.Anomaly, measure: str | None, timestamp_at: str, alpha: float, out: Investigation
) -> None:
    if measure is None:
        return
    split = decomposition(frame, a, measure, to.duration_fields(frame), alpha)
    parts = [str(p["field"]) for p in split.detail["parts"]] if split is not None else []
    if split is not None:
        out.findings.append(split)
    out.findings.extend(sat.in_flight(frame, a, measure, parts, timestamp_at, alpha))


def _default_measure(frame: Frame) -> str | None:
    numeric = {n for n, f in frame.fields.items() if f.type in ("DOUBLE", "BIGINT")}
    named = [m for m in MEASURES if m in numeric]
    if named:
        return named[0]
    durations = to.duration_fields(frame)
    return durations[0] if durations else None


def _find(
    frame: Frame,
    measure: str | None,
    start: datetime,
    end: datetime,
    alpha: float,
    method: dict[str, Any],
    regions: list[an.Anomaly],
    start_of: str | None = None,
) -> an.Anomaly | None:
    unit = ts.resolution(frame)
    # buckets are whole units of the time field's resolution: none falls between two stamps
    width, fine = sh.widths(start, end, unit)
    method.update(
        time_field="timestamp",
        resolution_seconds=unit,
        resolution=ts.describe(unit),
        shift_bucket_seconds=width.total_seconds(),
        shift_fine_bucket_seconds=fine.total_seconds(),
    )
    lines = []  # (direction, threshold): more events above the line, or below it
    bads: list[an.Bad] = []
    if measure is not None:
        value, seasonal = ss.deseasonal_value(frame, measure, start, end)
        upper, lower = an.bad_thresholds(frame, measure, value)
        lines += [("up", t) for t in upper] + [("down", t) for t in lower]
        if seasonal is not None:
            method["deseasonalised"] = seasonal
        bads += [(beyond(value, d), [t]) for d, t in lines]
    status = next((f for f in ERROR_FIELDS if f in frame.fields and frame.fields[f].type in ("DOUBLE", "BIGINT")), None)
    if status is not None:
        bads.append((q.col(status) >= q.num(500), []))
    counts = sh.fine_counts(frame, bads, fine)  # every line in one pass

    def region(k: int, hit: sh.Shift) -> an.Anomaly | None:
        p = hit.p_value
        if k < len(lines):  # a line of the measure: Bonferroni over the lines
            p = min(1.0, p * len(lines))
            kind, line, field_name = "latency", lines[k][1], measure
        else:
            kind, line, field_name = "errors", 500.0, status
        if p >= alpha:
            return None
        a = an.Anomaly(kind, counts.at(hit.first), counts.at(hit.end), field_name, line, hit.llr, p)
        if kind == "latency":
            a.detail.update(direction=lines[k][0], bucket_seconds=hit.scale.total_seconds())
            if "deseasonalised" in method:
                a.detail.update(deseasonalised=True)
        return a

    strongest, candidates = [], []
    for k in range(len(bads)):  # each line's regions, strongest first, while significant
        level = alpha / len(lines) if k < len(lines) else alpha
        for rank, hit in enumerate(sh.regions(counts, k, MAX_REGIONS, level)):
            if (a := region(k, hit)) is None:
                break
            candidates.append(a)
            if rank == 0:  # the headline is the strongest line's strongest region
                strongest.append(a)
    shift = min(strongest, key=lambda a: (a.p_value, -a.score)) if strongest else None
    stall = ts.stall_region(frame, start, end, alpha, method)
    found = _headline(frame, shift, stall, alpha, method, start_of)
    regions.extend(_ranked(found, [*candidates, *([stall] if stall is not None else [])]))
    return found


def _ranked(headline: an.Anomaly | None, candidates: list[an.Anomaly]) -> list[an.Anomaly]:
    """The headline region, then every other significant one that overlaps none before it,
    most significant first (one per stretch of time: the lines see the same region)."""
    kept = [headline] if headline is not None else []
    for a in sorted(candidates, key=lambda a: (a.p_value, -a.score)):
        if len(kept) < MAX_REGIONS and all(a.end <= b.start or a.start >= b.end for b in kept):
            kept.append(a)
    return kept


def _headline(
    frame: Frame,
    shift: an.Anomaly | None,
    stall: an.Anomaly | None,
    alpha: float,
    method: dict[str, Any],
    start_of: str | None = None,
) -> an.Anomaly | None:
    """The stall or the shift (see the module docstring); ``start_of``: the duration field
    that gives each event's start (its timestamp is its end)."""
    if shift is not None and shift.kind == "latency":
        own = timedelta(seconds=float(shift.detail["bucket_seconds"]))  # the scale it was found at
        median_shift(frame, shift, own)  # when the typical event changed (median_shift.py)
        _normal_line(frame, shift, own, timedelta(seconds=float(method["shift_fine_bucket_seconds"])), start_of)
    if stall is not None and (shift is None or _coincide(stall, shift) or stall.p_value < shift.p_value):
        return stall
    if shift is not None and shift.end - shift.start <= timedelta(seconds=an.STALL_MAX_S):
        # a short shift: is it a stall of its own (not the most significant one overall)?
        pad = timedelta(seconds=10)
        local = ts.stall_region(frame, shift.start - pad, shift.end + pad, alpha, method)
        if local is not None and _coincide(local, shift):
            return local
    return shift


def _normal_line(frame: Frame, a: an.Anomaly, width: timedelta, fine: timedelta, start_of: str | None) -> None:
    """Once the region is found, bad is redefined as slower than 99 % of the events outside
    it (normal behaviour's tail, not the incident's); the onset walks back over the
    buckets already above that line or above 99.9 % of them, and the end forward over
    those still above it (``edges.py``): the first slow requests count even when the worst
    come later, and the incident's trailing slow requests are no baseline."""
    ts, col = q.col(TIME_COLUMN), q.col(str(a.measure))
    down = direction(a) == "down"
    qs = [1 - at if down else at for at in NORMAL_QUANTILES]
    region: list[Any] = []
    query, params = frame.rows([q.quantile_cont(col, qs)], exp.Not(this=q.within(ts, region, a.start, a.end)))
    row = frame.backend.execute(query, params + region).rows[0]
    lines = [float(v) for v in row[0] or [] if v is not None]
    if not lines:
        return
    raw = a.detail.get("deseasonalised")  # the scan's line was on values less their hour's median
    if raw or (lines[0] > float(a.threshold or 0) if down else lines[0] < float(a.threshold or 0)):
        a.detail["scan_threshold"] = a.threshold
        a.threshold = lines[0]
    bad_if = beyond(col.copy(), direction(a))
    # the onset in start times when the timestamp is the end (--timestamp-at end): a
    # request stuck for a minute at the onset is logged a minute later
    began = Frame(frame.backend, frame.dataset, frame.start, frame.end, frame.where, select_start_of=start_of)
    a.start = edges.walked_onset(frame, a, bad_if, lines, width, fine, began.event_start() if start_of else None)
    a.end = edges.walked_end(frame, a, bad_if, lines, width, fine)


def beyond(value: exp.Expr, way: str) -> exp.Expr:
    """``value > ?`` (a shift ``up``: bad events lie above the line) or ``value < ?`` (``down``)."""
    compare = {">": exp.GT, "<": exp.LT}[OPERATOR[way]]
    return compare(this=value.copy(), expression=exp.Placeholder())


def _coincide(stall: an.Anomaly, shift: an.Anomaly) -> bool:
    """The stall is where the shift begins (within two of the shift's buckets)."""
    near = 2 * timedelta(seconds=float(shift.detail.get("bucket_seconds", 0)))
    return stall.start <= shift.start + near and stall.end + near >= shift.start


def _explain_region(
    frame: Frame, a: an.Anomaly, alpha: float, sampled: bool, start_of: str | None, out: Investigation
) -> None:
    """The region explained (``onset.py``): its findings, groups and warnings into ``out``."""
    result, findings = explain_region(frame, a, alpha, sampled, start_of)
    out.explanation = result
    out.selection, out.baseline = result.selection, result.baseline
    if "sampling" in result.method:
        out.warnings.append(
            f"sampled ({SAMPLED_FROM:,} events or more in range): {result.method['sampling']['statement']}"
        )
    out.findings.extend(findings)
    out.warnings.extend(result.warnings)
