"""trends: what is leaking, where, and when it runs out (docs/trends.md).

One package, one module per job::

    series.py      the bucketed series per group, the groups' labels (one query each)
    fitting.py     one series' slope (Theil–Sen) and significance (cycles removed;
                   Mann–Kendall on block means; a drift test when the level may wander)
    exhaustion.py  time until the trend reaches a limit, with an interval
    components.py  which part drives a total's trend
    cohorts.py     which label value separates the trending groups from the rest
    result.py      the result and its JSON form

``trends`` runs them: fit every group's series of the measure (or of every numeric
field when no measure is given), flag the groups whose trend is significant at the
false discovery rate ``alpha`` (Benjamini–Hochberg over the groups), then rank the
parts, the labels and the times to the limit.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import stats
from rootsift.analysis.defaults import ALPHA
from rootsift.analysis.frame import Frame
from rootsift.analysis.trends import cohorts, components, series
from rootsift.analysis.trends.exhaustion import time_to_limit
from rootsift.analysis.trends.fitting import Fit, fit
from rootsift.analysis.trends.result import Trends, exhaustion_numbers, trend_numbers
from rootsift.errors import QuerySpecError
from rootsift.query.spec import Calculation
from rootsift.timeutil import format_duration

HORIZON_HOURS = 90 * 24.0
LABEL_FIELDS_SKIPPED = {"timestamp"}

__all__ = ["Trends", "trends", "parse_measure", "HORIZON_HOURS"]


def parse_measure(text: str) -> Calculation:
    """``avg(field)``, ``max(field)``, ``p99(field)``, ``count``… or a bare field (its average)."""
    text = text.strip()
    if "(" not in text and text.lower() != "count":
        return Calculation("avg", text)
    return Calculation.parse(text)


def trends(
    backend: Any,
    dataset: str,
    *,
    measure: str | None = None,
    by: str | None = "auto",
    limit: float | str | None = None,
    parts: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
    horizon_hours: float = HORIZON_HOURS,
    alpha: float = ALPHA,
) -> Trends:
    """The trend of ``measure`` (every numeric field when None) per group of ``by``
    (``auto``: ``host`` when the dataset has it; None: one series), with the parts that
    drive it, the labels that separate the trending groups, and the time to ``limit``
    (a number, or a field whose per-group median is the limit)."""
    frame = Frame(backend, dataset, start, end, where)
    group = _group(frame, by)
    calc = parse_measure(measure) if measure else None
    if calc is not None and calc.field is not None:
        series.check_fields(frame, [calc.field], "--measure")
    total = calc.label if calc else _default_total(frame)
    part_names = list(parts) if parts else list(_default_parts(frame, total, calc))
    if parts and total is None:
        raise QuerySpecError("--parts needs --measure: the total whose trend the parts share")
    series.check_fields(frame, part_names, "--parts")
    limit_field = limit if isinstance(limit, str) else None
    if limit_field:
        series.check_fields(frame, [limit_field], "--limit")
    measures: dict[str, exp.Expr] = {}
    if calc is not None:
        measures[calc.label] = series.measure(calc)
    else:
        skip = {group} if group else set()
        measures.update({n: series.measure(Calculation("avg", n)) for n in series.numeric_fields(frame, skip)})
    for name in [*part_names, *([limit_field] if limit_field else [])]:
        measures.setdefault(name, series.measure(Calculation("avg", name)))
    result = Trends(dataset, calc.label if calc else None, group, None)
    bucket = series.bucket_for(frame)
    if bucket is None:
        result.warnings.append("no events in the range (and --where): nothing to fit")
        return result
    if not measures:
        result.warnings.append("no numeric field varies in the range: nothing to fit")
        return result
    result.bucket = format_duration(bucket)
    loaded = series.load(frame, measures, group, bucket)
    fits = {name: {s.group: fit(s.t, s.values[name]) for s in loaded} for name in measures}
    flagged = {name: _flagged(f, alpha) for name, f in fits.items()}
    if total is not None and total in fits:
        _total_findings(result, fits, flagged, total, part_names, alpha)
        if group:
            labelled = series.labels(frame, group, LABEL_FIELDS_SKIPPED)
            top = _top_part(result.findings, alpha)
            # the hosts whose driving part grows are the leakers too, when the total is held up (by a scheduler)
            trending = {total: flagged[total], **({top: flagged[top]} if top else {})}
            _cohort_findings(result, labelled, trending, alpha)
        if limit is not None:
            _exhaustion_findings(result, fits[total], loaded, limit, limit_field, total, horizon_hours, flagged[total])
        result.series = _series_table(fits[total], flagged[total], group)
        result.chart = _chart(loaded, fits[total], flagged[total], total, limit, limit_field)
    if calc is None:
        others = [n for n in fits if n != total and n not in part_names]
        result.findings += _field_findings(fits, flagged, others)
    if not result.findings:
        result.warnings.append(f"no significant trend at alpha {alpha} in any series")
    return result


def _group(frame: Frame, by: str | None) -> str | None:
    if by == "auto":
        return "host" if "host" in frame.fields else None
    if by is None or by.strip() in ("", "none"):
        return None
    if by not in frame.fields:
        import difflib

        close = difflib.get_close_matches(by, list(frame.fields), n=3)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        raise QuerySpecError(f"--by: unknown field {by!r}{hint}; give a field of the dataset, or none")
    return by


def _field(name: str) -> str:
    """The field of a measure's label: ``avg(mem_available_bytes)`` → ``mem_available_bytes``."""
    inner = name[name.index("(") + 1 : -1] if name.endswith(")") and "(" in name else name
    return inner.split(",")[0].strip()


def _default_total(frame: Frame) -> str | None:
    return next((t for t in components.DEFAULT_PARTS if t in frame.fields), None)


def _default_parts(frame: Frame, total: str | None, calc: Calculation | None) -> list[str]:
    name = calc.field if calc is not None and calc.op == "avg" else total
    return [p for p in components.DEFAULT_PARTS.get(str(name), ()) if p in frame.fields]


def _flagged(fits: dict[Any, Fit], alpha: float) -> dict[Any, float]:
    """The q-value of each group whose trend is significant at false discovery rate
    ``alpha`` and visible (``Fit.visible``: it moves the series by at least its noise)."""
    groups = list(fits)
    q = stats.q_values(np.array([fits[g].p_value for g in groups], dtype=np.float64))
    return {g: float(qi) for g, qi in zip(groups, q, strict=True) if qi <= alpha and fits[g].visible}


def _trend(name: str, group: Any, f: Fit, q: float) -> dict[str, Any]:
    return {
        "kind": "trend",
        "field": _field(name),
        "measure": name,
        "series": group,
        "score": abs(f.relative_per_day),
        **trend_numbers(f),
        "q_value": q,
        "direction": "rising" if f.slope > 0 else "falling",
    }


def _total_findings(
    result: Trends,
    fits: dict[str, dict[Any, Fit]],
    flagged: dict[str, dict[Any, float]],
    total: str,
    part_names: list[str],
    alpha: float,
) -> None:
    found = [_trend(total, g, fits[total][g], q) for g, q in flagged[total].items()]
    found.sort(key=lambda f: -f["score"])
    result.findings += found
    if part_names:
        given = {p: fits[p] for p in part_names}
        consumers = _field(total) in components.DEFAULT_PARTS or components.consume(fits[total], given)
        ranked = components.shares(fits[total], given, list(flagged[total]), consumers)
        for c in ranked:
            result.findings.append({"kind": "component", "of": _field(total), "score": c["share"], **c})


def _top_part(findings: list[dict[str, Any]], alpha: float) -> str | None:
    """The part that drives the total's trend, when one does significantly."""
    parts = [f for f in findings if f["kind"] == "component"]
    if parts and parts[0]["share"] > 0 and parts[0]["p_value"] <= alpha:
        return str(parts[0]["field"])
    return None


def _cohort_findings(
    result: Trends, labelled: dict[Any, dict[str, Any]], trending: dict[str, dict[Any, float]], alpha: float
) -> None:
    """The label values that separate trending groups (of the total, or of its driving
    part) from the rest: the better-supported of the two for each value."""
    if not labelled:
        return
    best: dict[tuple[str, Any], dict[str, Any]] = {}
    for name, flagged in trending.items():
        if flagged and len(flagged) == len(labelled):
            result.warnings.append(f"every group's {_field(name)} trends: no cohort to tell apart")
        for c in cohorts.separating(labelled, set(flagged)) if flagged else []:
            key = (c["field"], c["value"])
            if key not in best or c["p_value"] < best[key]["p_value"]:
                best[key] = {"kind": "cohort", "of": _field(name), **c, "significant": c["q_value"] <= alpha}
    result.findings += sorted(best.values(), key=lambda c: (c["p_value"], -c["difference"]))


def _exhaustion_findings(
    result: Trends,
    fits: dict[Any, Fit],
    loaded: list[series.Series],
    limit: float | str,
    limit_field: str | None,
    total: str,
    horizon: float,
    flagged: dict[Any, float],
) -> None:
    found = []
    for s in loaded:
        f = fits[s.group]
        value = _limit_of(s, limit, limit_field)
        if value is None:
            continue
        x = time_to_limit(f, value, horizon)
        entry = {"kind": "exhaustion", "field": _field(total), "series": s.group, "limit_field": limit_field}
        entry.update(exhaustion_numbers(x, f), trending=s.group in flagged)
        order = x.hours if x.hours is not None else math.inf
        entry["score"] = 1.0 / (1.0 + order / 24) if s.group in flagged else 0.0
        found.append((order if s.group in flagged else math.inf, entry))
    found.sort(key=lambda e: e[0])
    soon = [e for o, e in found if not math.isinf(o)]
    if not soon and found:  # none trends toward it within the horizon: say so once, for the nearest
        nearest = min(found, key=lambda e: (e[1]["status"] != "reached", _days_or_inf(e[1])))
        soon = [nearest[1]]
    result.findings += soon


def _days_or_inf(entry: dict[str, Any]) -> float:
    low = entry["interval_days"][0]
    return float(low) if low is not None else math.inf


def _limit_of(s: series.Series, limit: float | str, limit_field: str | None) -> float | None:
    if limit_field is None:
        return float(limit)
    values = s.values[limit_field]
    values = values[np.isfinite(values)]
    return float(np.median(values)) if values.size else None


def _field_findings(
    fits: dict[str, dict[Any, Fit]], flagged: dict[str, dict[Any, float]], names: list[str]
) -> list[dict[str, Any]]:
    """One finding per field that trends in some group: the share of groups trending
    and the steepest of them, fields trending in more groups first."""
    out = []
    for name in names:
        if not flagged[name]:
            continue
        worst = max(flagged[name], key=lambda g: abs(fits[name][g].relative_per_day))
        entry = _trend(name, worst, fits[name][worst], flagged[name][worst])
        entry["groups_trending"] = len(flagged[name])
        entry["groups"] = len(fits[name])
        entry["score"] = len(flagged[name]) / len(fits[name])
        out.append(entry)
    out.sort(key=lambda e: (-e["score"], -abs(e["relative_per_day"])))
    return out


def _series_table(fits: dict[Any, Fit], flagged: dict[Any, float], group: str | None) -> list[dict[str, Any]]:
    rows = []
    for g, f in fits.items():
        rows.append({"series": g, "trending": g in flagged, "q_value": flagged.get(g), **trend_numbers(f)})
    rows.sort(key=lambda r: (not r["trending"], r["p_value"]))
    return rows


def _chart(
    loaded: list[series.Series],
    fits: dict[Any, Fit],
    flagged: dict[Any, float],
    total: str,
    limit: float | str | None,
    limit_field: str | None,
) -> dict[str, Any] | None:
    """The worst series (the steepest trending one, else the most nearly significant) with its line."""
    if not loaded:
        return None
    if flagged:
        worst = max(flagged, key=lambda g: abs(fits[g].relative_per_day))
    else:
        worst = min(fits, key=lambda g: fits[g].p_value)
    s = next(x for x in loaded if x.group == worst)
    f = fits[worst]
    y = s.values[total]
    return {
        "series": worst,
        "field": _field(total),
        "measure": total,
        "hours": [float(h) for h in s.t],
        "values": [float(v) for v in y],
        "fitted": [float(f.at(h)) for h in s.t],
        "limit": _limit_of(s, limit, limit_field) if limit is not None else None,
    }
