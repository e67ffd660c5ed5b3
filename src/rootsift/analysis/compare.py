"""compare: cohort A against cohort B, metric by metric, with a verdict a rollout can gate on.

A cohort is a filter (``version = "1.4"``) and/or a time range (before a deploy). Each
metric gets A's and B's values, the change (absolute and relative), a confidence
interval, a test suited to it, and a verdict against a tolerance:

- ``pNN(field)``: quantiles of the events. The estimate is exact (DuckDB's
  ``quantile_cont``). The interval and the p-value are normal on the log of the ratio,
  with the standard error of a bootstrap of both cohorts (multinomial resampling of their
  counts in log-spaced bins of 0.5 %, so the cost does not grow with the events). A quantile field also gets the whole **curve**, p50 to
  p99.9, with a band per quantile: "p85 and up regressed, p50 did not" is visible.
- ``shift(field)``: the whole distribution, as Kayenta compares it: Mann–Whitney, and
  the Hodges–Lehmann estimate of the B/A ratio with Moses' interval (binned).
- ``avg(field)``: the difference of means, Welch's interval and test.
- ``rate(FILTER)``: the share of events matching the filter. Fisher's exact test and
  Newcombe's interval for the difference; when A has none and B has some, the relative
  change is infinite and the test decides alone (errors in B, none in A).
- ``slope(field)``: a per-unit growth, the least-squares slope per hour of each host's
  series (a leak grows; a full cache does not).
- ``max(field)``, ``min(field)``: a per-unit statistic (a host's peak memory). The unit
  is the events' host (``--per``), so several hosts per cohort are not pseudo-replicated:
  Welch's t on the logarithms of the units' values (the ratio of geometric means), or a
  paired t when both cohorts hold the same units (the same hosts before and after a
  deploy). ``--per FIELD`` compares any metric per unit (an ``avg`` per host).

Verdicts, with ``tolerance`` the relative change that does not matter (defaults in
``TOLERANCE``). Larger is worse (latency, memory, errors), unless the field's name says
larger is better (``HIGHER_IS_BETTER``: available or free memory, throughput, hits) or
``better`` says so for the metric:

- **regression** / **improvement**: significant (after Bonferroni over the metrics) and
  the estimated change beyond the tolerance;
- **no change**: the whole interval within the tolerance, or significant but within it;
- **not enough data**: neither (the interval reaches past the tolerance on a side
  without the change being significant).

The overall verdict is a regression if any metric regressed, else an improvement if any
improved, else no change when all are unchanged, else not enough data.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from scipy import stats as sps

from rootsift.analysis import stats
from rootsift.analysis.defaults import ALPHA
from rootsift.analysis.explain import explain
from rootsift.analysis.findings import iso
from rootsift.analysis.frame import Frame
from rootsift.analysis.investigate import ERROR_FIELDS, MEASURES
from rootsift.analysis.saturation import unit_field
from rootsift.analysis.timeouts import ident_text
from rootsift.errors import QuerySpecError, UsageError
from rootsift.store.duckdb import DuckDBBackend, weight_sql
from rootsift.store.sqltext import ident

TOLERANCE = {"quantile": 0.05, "shift": 0.05, "slope": 0.05, "avg": 0.05, "max": 0.05, "min": 0.05, "rate": 0.10}
"""Relative changes that do not matter, per metric kind (``--tolerance`` overrides)."""
BOOTSTRAP = 2000
STEPS = 128
"""Log-spaced bins per doubling for the quantile bootstrap: 0.54 % wide."""
CURVE = (0.5, 0.75, 0.85, 0.9, 0.95, 0.99, 0.999)
SPREAD = (0.1, 0.9)
"""The spread of a quantile field is log(p90 / p10): its width on a log scale."""
SEED = 20261121
"""The bootstrap's seed: the same data give the same intervals."""
HIGHER_IS_BETTER = ("available", "free", "throughput", "success", "hit", "rps", "qps", "goodput")
_METRIC = re.compile(r"^(?:p(?P<q>\d+(?:\.\d+)?)|(?P<agg>avg|mean|max|min|rate|shift|slope))\((?P<arg>.*)\)$", re.S)


@dataclass
class Metric:
    text: str
    kind: str  # quantile | avg | max | min | rate
    field: str | None = None
    q: float | None = None
    filter: str | None = None


@dataclass
class Comparison:
    dataset: str
    a: dict[str, Any]
    b: dict[str, Any]
    verdict: str
    metrics: list[dict[str, Any]]
    findings: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    method: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    """Kayenta's view: the percentage of the metrics' weight without a regression."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "verdict": self.verdict,
            "score": self.score,
            "a": self.a,
            "b": self.b,
            "metrics": self.metrics,
            "findings": self.findings,
            "warnings": self.warnings,
            "method": self.method,
        }


def parse_metrics(text: str) -> list[Metric]:
    """``p50(duration_ms),avg(rss_bytes),rate(status >= 500)`` as metrics (commas inside
    parentheses belong to the argument)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            if text[start:i].strip():
                items.append(text[start:i].strip())
            start = i + 1
    out = []
    for item in items:
        m = _METRIC.match(item)
        if m is None or not m.group("arg").strip():
            raise UsageError(
                f"--metrics: {item!r} is not pNN(field), shift(field), avg(field), max(field), min(field), "
                "slope(field) or rate(filter)"
            )
        arg = m.group("arg").strip()
        if m.group("q") is not None:
            q = round(float(m.group("q")) / 100, 9)
            if not 0 < q < 1:
                raise UsageError(f"--metrics: {item!r}: the quantile must be between p0 and p100")
            out.append(Metric(item, "quantile", arg, q=q))
        elif m.group("agg") == "rate":
            out.append(Metric(item, "rate", filter=arg))
        elif m.group("agg") in ("shift", "slope"):
            out.append(Metric(item, str(m.group("agg")), arg))
        else:
            out.append(Metric(item, "avg" if m.group("agg") == "mean" else str(m.group("agg")), arg))
    if not out:
        raise UsageError("--metrics: no metric given")
    return out


def compare(
    backend: DuckDBBackend,
    dataset: str,
    *,
    a: str | None = None,
    b: str | None = None,
    a_range: tuple[datetime | None, datetime | None] = (None, None),
    b_range: tuple[datetime | None, datetime | None] = (None, None),
    where: str | None = None,
    metrics: list[Metric] | None = None,
    tolerance: dict[str, float] | None = None,
    better: dict[str, str] | None = None,
    weights: dict[str, float] | None = None,
    per: str | None = None,
    alpha: float = ALPHA,
) -> Comparison:
    """Compare cohort A with cohort B on each metric (see the module docstring)."""
    if not (a or b or any(a_range) or any(b_range)):
        raise UsageError("say what the cohorts are: --a/--b filters and/or --a-from/--a-to, --b-from/--b-to")
    frames = {
        name: _cohort(backend, dataset, where, text, rng) for name, text, rng in (("a", a, a_range), ("b", b, b_range))
    }
    chosen = metrics or _default_metrics(frames["a"])
    names = [m.text for m in chosen]
    for flag, given in (("--tolerance", tolerance), ("--better", better), ("--weight", weights)):
        for name in given or {}:
            if name not in names:
                raise UsageError(f"{flag} {name}: not one of the metrics compared ({', '.join(names)})")
    out = Comparison(dataset, _describe(frames["a"], a), _describe(frames["b"], b), "no change", [])
    level = alpha / len(chosen)  # Bonferroni over the metrics: the verdict gates on any of them
    out.method = {
        "alpha": alpha,
        "per_metric_level": level,
        "correction": f"Bonferroni over {len(chosen)} metrics; intervals at {1 - level:.4g}",
        "bootstrap": f"{BOOTSTRAP} multinomial resamples of log-spaced bins ({STEPS} per doubling), seed {SEED}",
    }
    fields = _Fields(frames["a"], frames["b"], chosen)
    for name, group in (("a", out.a), ("b", out.b)):
        n, w, eff = fields.totals[name]
        group["events"] = n
        if frames[name].weight:
            group.update(weighted_events=_r(w), effective_events=_r(eff))
        if n == 0:
            out.warnings.append(f"cohort {name.upper()} has no events: check its filter and time range")
    if frames["a"].weight:
        out.method["weights"] = (
            f"each event counts as its sample rate ({frames['a'].weight!r}); the tests use Kish's effective sizes"
        )
    for metric in chosen:
        tol = (tolerance or {}).get(metric.text, TOLERANCE[metric.kind])
        unit = per or (unit_field(frames["a"]) if metric.kind in ("max", "min", "slope") else None)
        direction = (better or {}).get(metric.text) or ("higher" if higher_is_better(metric) else "lower")
        if direction not in ("higher", "lower"):
            raise UsageError(f"--better {metric.text}={direction}: say higher or lower")
        if frames["a"].weight and unit and metric.kind == "quantile":
            out.warnings.append(
                f"{metric.text} per {unit}: each host's quantile counts stored events, not sample rates"
            )
        out.metrics.append(_one(fields, metric, tol, unit, level, direction))
        out.metrics[-1]["weight"] = (weights or {}).get(metric.text, 1.0)
    out.verdict = overall([m["verdict"] for m in out.metrics])
    out.score = score(out.metrics)
    out.method["score"] = (
        "the percentage of the metrics' weight without a regression, over the metrics with enough data "
        "(Kayenta's canary score); the verdict does not depend on it"
    )
    regressed = next((m for m in out.metrics if m["verdict"] == "regression" and m["unit"] == "event"), None)
    if regressed is not None and regressed["kind"] in ("quantile", "rate"):
        out.findings, note = _concentrates(frames["a"], frames["b"], a, b, where, regressed, alpha)
        out.method["findings"] = note
    return out


def _concentrates(
    fa: Frame, fb: Frame, a: str | None, b: str | None, where: str | None, m: dict[str, Any], alpha: float
) -> tuple[list[dict[str, Any]], str]:
    """Where the first regressed metric's regression concentrates: explain (its statistics,
    its corrections) on B's regressed part against A's events of the same kind."""
    if m["kind"] == "quantile":
        line = f"{ident_text(str(m['field']))} > {float(m['a'])!r}"
        what = f"B's events above A's {m['metric']} ({m['a']}) against A's events above it"
    else:
        line = str(m["filter"])
        what = f"B's events matching {m['filter']} against A's" + (
            "" if m.get("count_a") else " (all of A's: A has none)"
        )
    a_part = _and(a, _time_text(fa), line if m["kind"] == "quantile" or m.get("count_a") else None)
    starts = [t for t in (fa.start, fb.start) if t is not None]
    ends = [t for t in (fa.end, fb.end) if t is not None]
    result = explain(
        fb.backend,
        fb.dataset,
        start=min(starts) if len(starts) == 2 else None,
        end=max(ends) if len(ends) == 2 else None,
        where=where,
        select=_and(b, line),
        select_from=fb.start,
        select_to=fb.end,
        baseline=a_part or "true",
        alpha=alpha,
    )
    found = [f.as_dict() | {"explains": m["metric"]} for f in result.findings[:10]]
    return found, f"explain: {what} ({result.selection['events']:,} against {result.baseline['events']:,} events)"


def _and(*parts: str | None) -> str | None:
    kept = [f"({p})" for p in parts if p and p.strip()]
    return " and ".join(kept) or None


def _time_text(frame: Frame) -> str | None:
    """A cohort's time range as a filter (explain's baseline is a filter)."""
    bits = []
    if frame.start is not None:
        bits.append(f'timestamp >= "{iso(frame.start)}"')
    if frame.end is not None:
        bits.append(f'timestamp < "{iso(frame.end)}"')
    return " and ".join(bits) or None


def overall(verdicts: list[str]) -> str:
    for v in ("regression", "improvement"):
        if v in verdicts:
            return v
    return "no change" if verdicts and all(v == "no change" for v in verdicts) else "not enough data"


def score(metrics: list[dict[str, Any]]) -> float | None:
    """The percentage of the metrics' weight without a regression, over the metrics that
    had enough data to say (None when none had)."""
    judged = [m for m in metrics if m["verdict"] != "not enough data"]
    total = sum(float(m["weight"]) for m in judged)
    if not judged or total <= 0:
        return None
    return round(100 * sum(float(m["weight"]) for m in judged if m["verdict"] != "regression") / total, 1)


def verdict(change: float, lo: float, hi: float, p: float, tol: float, level: float) -> str:
    """The verdict for a relative change ``change`` with interval [lo, hi] and p-value ``p``."""
    if math.isnan(lo) or math.isnan(hi):
        return "not enough data"
    if -tol < lo and hi < tol:
        return "no change"
    if p < level:
        if change > tol:
            return "regression"
        if change < -tol:
            return "improvement"
        return "no change"
    return "not enough data"


# --- cohorts -----------------------------------------------------------------------------


def _cohort(
    backend: DuckDBBackend,
    dataset: str,
    where: str | None,
    text: str | None,
    rng: tuple[datetime | None, datetime | None],
) -> Frame:
    return Frame(backend, dataset, rng[0], rng[1], _and(where, text))


def _describe(frame: Frame, text: str | None) -> dict[str, Any]:
    return {"where": text, "from": iso(frame.start), "to": iso(frame.end)}


def _totals(frame: Frame) -> tuple[int, float, float]:
    """(stored events, weighted events, Kish's effective size) of the cohort: the last two
    are the count when events carry no sample rate."""
    w = _weight(frame)
    sql, params = _values(frame, f"count(*), sum({w}), sum({w} * {w})")
    n, total, squares = frame.backend.execute_sql(sql, params).rows[0]
    return int(n), float(total or 0), stats.effective_size(float(total or 0), float(squares or 0))


def _weight(frame: Frame) -> str:
    """SQL for an event's weight: its sample rate, or 1."""
    return weight_sql(frame.weight) if frame.weight else "1"


def _default_metrics(frame: Frame) -> list[Metric]:
    numeric = {n for n, f in frame.fields.items() if f.type in ("DOUBLE", "BIGINT")}
    out = []
    measure = next((m for m in MEASURES if m in numeric), None)
    if measure:
        out += [Metric(f"p{int(q * 100)}({measure})", "quantile", measure, q=q) for q in (0.5, 0.9, 0.99)]
    status = next((s for s in ERROR_FIELDS if s in numeric), None)
    if status:
        out.append(Metric(f"rate({status} >= 500)", "rate", filter=f"{status} >= 500"))
    if not out:
        raise UsageError("no duration or status field to compare by default: name the metrics with --metrics")
    return out


# --- one metric --------------------------------------------------------------------------


def _one(fields: _Fields, metric: Metric, tol: float, unit: str | None, level: float, better: str) -> dict[str, Any]:
    fa, fb = fields.fa, fields.fb
    if metric.field is not None and metric.field not in fa.fields:
        raise QuerySpecError(f"--metrics {metric.text}: no field {metric.field!r} in {fa.dataset}")
    if unit is not None and unit not in fa.fields:
        raise QuerySpecError(f"--per {unit}: no field {unit!r} in {fa.dataset}")
    if metric.kind == "slope" and unit is None:
        raise UsageError(f"--metrics {metric.text}: a slope is per series: name the unit with --per FIELD")
    if unit is not None and metric.kind != "rate":
        got = _per_unit(fa, fb, metric, unit, level)
    elif metric.kind == "quantile":
        got = _quantile(fields, metric, level)
    elif metric.kind == "rate":
        got = _rate(fields, metric, level)
    elif metric.kind == "avg":
        got = _mean(fa, fb, metric, level)
    elif metric.kind == "shift":
        got = _shift(fields, metric, level)
    else:  # an extreme over events: one value per cohort, nothing to test
        got = _extreme(fa, fb, metric)
    change, lo, hi, p = got["relative_change"], got["ci"][0], got["ci"][1], got["p_value"]
    got["tolerance"] = tol
    got["better"] = better
    signed = (-change, -hi, -lo) if better == "higher" else (change, lo, hi)  # worse is positive
    enough = bool(got.get("n_a") and got.get("n_b"))
    got["verdict"] = verdict(*signed, p, tol, level) if enough else "not enough data"
    got["metric"] = metric.text
    if math.isinf(change):  # JSON has no infinity: null, and said in words
        got["note"] = "A has none: the relative change is infinite"
    got["ci"] = [_finite(lo), _finite(hi)]
    got["relative_change"] = _finite(change)
    got["p_value"] = float(f"{p:.4g}")
    return {"metric": got.pop("metric"), "verdict": got.pop("verdict"), **got}


def higher_is_better(metric: Metric) -> bool:
    """A field named like available/free memory, throughput or hits: larger is better."""
    name = (metric.field or metric.filter or "").lower()
    return any(w in name for w in HIGHER_IS_BETTER)


def _values(frame: Frame, expr: str) -> tuple[str, list[Any]]:
    where, params = frame.range_filter()
    return f"SELECT {expr} FROM {frame.relation_sql} WHERE ({where})", params


class _Fields:
    """What the metrics of one field share, read once per comparison: its binned counts
    in each cohort, its exact quantiles (every one asked for, the curve's and the
    spread's), and one bootstrap of them. p50, p85 and p99 of a field cost one pass."""

    def __init__(self, fa: Frame, fb: Frame, metrics: list[Metric]) -> None:
        self.fa, self.fb = fa, fb
        self.qs: dict[str, list[float]] = {}
        for m in metrics:
            if m.kind == "quantile" and m.field is not None:
                self.qs[m.field] = sorted({*self.qs.get(m.field, [*CURVE, *SPREAD]), float(m.q or 0.5)})
        self.totals = {"a": _totals(fa), "b": _totals(fb)}
        """Each cohort's (stored, weighted, effective) events."""
        self._binned: dict[str, tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {}
        self._quantiles: dict[str, Any] = {}

    def binned(self, field: str) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        if field not in self._binned:
            col = ident(field)
            self._binned[field] = (_binned(self.fa, col), _binned(self.fb, col))
        return self._binned[field]

    def quantiles(self, field: str) -> Any:
        """(qs, (n_a, A's quantiles), (n_b, B's), A's draws, B's draws); draws None when
        a cohort has no values."""
        if field not in self._quantiles:
            col, qs = ident(field), self.qs[field]
            exact: list[tuple[int, dict[float, float | None]]] = []
            for frame in (self.fa, self.fb):
                n, values = _weighted_quantiles(frame, col, qs) if frame.weight else _exact_quantiles(frame, col, qs)
                got: list[float | None] = list(values) if values else [None] * len(qs)
                exact.append((int(n), dict(zip(qs, got, strict=True))))
            a, b = self.binned(field)
            draws = _bootstrap(a, b, qs) if exact[0][0] and exact[1][0] else (None, None)
            self._quantiles[field] = (qs, exact[0], exact[1], *draws)
        return self._quantiles[field]


def _exact_quantiles(frame: Frame, col: str, qs: list[float]) -> tuple[int, list[float] | None]:
    sql, params = _values(frame, f"count({col}), quantile_cont({col}, {qs!r})")
    n, values = frame.backend.execute_sql(sql, params).rows[0]
    return int(n), values


def _weighted_quantiles(frame: Frame, col: str, qs: list[float]) -> tuple[int, list[float] | None]:
    """Quantiles of the events each counted as its sample rate: the smallest value whose
    cumulative weight reaches q of the total (a sort of the cohort's values)."""
    sql, params = _values(frame, f"{col} AS v, {_weight(frame)} AS w")
    picks = ", ".join(f"min(v) FILTER (WHERE cw >= {q!r} * tw)" for q in qs)
    rows = frame.backend.execute_sql(
        f"SELECT count(*), [{picks}] FROM (SELECT v, sum(w) OVER (ORDER BY v ROWS UNBOUNDED PRECEDING) AS cw, "
        f"sum(w) OVER () AS tw FROM ({sql} AND {col} IS NOT NULL))",
        params,
    ).rows[0]
    return int(rows[0]), (rows[1] if rows[0] else None)


def _quantile(fields: _Fields, metric: Metric, level: float) -> dict[str, Any]:
    qs, (n_a, q_a), (n_b, q_b), draws_a, draws_b = fields.quantiles(str(metric.field))
    binned = dict(zip("ab", fields.binned(str(metric.field)), strict=True))
    q = float(metric.q or 0.5)
    out: dict[str, Any] = {"kind": "quantile", "field": metric.field, "q": q, "unit": "event", "n_a": n_a, "n_b": n_b}
    a_value, b_value = q_a.get(q), q_b.get(q)
    out.update(a=_r(a_value), b=_r(b_value))
    if not n_a or not n_b or a_value is None or b_value is None or draws_a is None:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(draws_a > 0, draws_b / draws_a, np.nan)
    curve = []
    for k, qq in enumerate(qs):
        if qq not in CURVE and qq != q:
            continue
        av, bv = q_a[qq], q_b[qq]
        change = _rel(av, bv)
        lo, hi, p = _log_interval(bv / av if av and bv and av > 0 and bv > 0 else math.nan, ratios[:, k], level)
        curve.append(
            {"q": qq, "a": _r(av), "b": _r(bv), "relative_change": _r(change), "ci": [_r(lo), _r(hi)], "p_value": p}
        )
        if qq == q:
            out.update(absolute_change=_r(bv - av), relative_change=change, ci=[float(lo), float(hi)], p_value=p)
    out["test"] = "ratio of quantiles, normal on the log scale with a bootstrap standard error"
    out["curve"] = curve
    out["spread"] = _spread(q_a, q_b, draws_a, draws_b, qs, level)
    out["shape"] = _shape(binned["a"], binned["b"])
    return out


def _spread(
    q_a: dict[float, Any], q_b: dict[float, Any], da: np.ndarray, db: np.ndarray, qs: list[float], level: float
) -> dict[str, Any] | None:
    """The width of the distribution, log(p90 / p10), B's against A's, with a bootstrap
    interval: a change in variance that the median does not show."""
    lo_q, hi_q = SPREAD
    if not all(v and v > 0 for v in (q_a[lo_q], q_a[hi_q], q_b[lo_q], q_b[hi_q])):
        return None
    i, j = qs.index(lo_q), qs.index(hi_q)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.log(db[:, j] / db[:, i]) / np.log(da[:, j] / da[:, i])
    width_a, width_b = math.log(q_a[hi_q] / q_a[lo_q]), math.log(q_b[hi_q] / q_b[lo_q])
    if width_a <= 0 or width_b <= 0:
        return None
    lo, hi, p = _log_interval(width_b / width_a, boot, level)
    return {
        "measure": "log(p90 / p10)",
        "a": _r(width_a),
        "b": _r(width_b),
        "relative_change": _r(width_b / width_a - 1),
        "ci": [_r(lo), _r(hi)],
        "p_value": p,
    }


def _shape(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> dict[str, Any]:
    """Kolmogorov–Smirnov between the two binned distributions: any difference in shape
    (bins of 0.54 % make it slightly conservative)."""
    keys = np.union1d(a[0], b[0])
    cdf = []
    for k, c in (a, b):
        counts = np.zeros(keys.size)
        counts[np.searchsorted(keys, k)] = c
        cdf.append(np.cumsum(counts) / counts.sum())
    d = float(np.abs(cdf[0] - cdf[1]).max())
    n_a, n_b = float(a[1].sum()), float(b[1].sum())
    p = float(sps.kstwobign.sf(d * math.sqrt(n_a * n_b / (n_a + n_b))))
    return {"test": "Kolmogorov-Smirnov (binned)", "statistic": _r(d), "p_value": float(f"{p:.4g}")}


def _binned(frame: Frame, col: str) -> tuple[np.ndarray, np.ndarray]:
    """(bin keys, counts) of a field's values in the cohort (``_bin``). With sample rates
    the counts are effective: each bin's weight, scaled so that they add up to Kish's
    effective size (the shares are the weighted ones, the total what the tests may trust)."""
    w = _weight(frame)
    sql, params = _values(frame, f"{_bin(col)} AS k, count(*), sum({w}), sum({w} * {w})")
    rows = frame.backend.execute_sql(f"{sql} AND {col} IS NOT NULL GROUP BY 1", params).rows
    keys = np.array([r[0] for r in rows], dtype=np.int64)
    if not frame.weight:
        return keys, np.array([r[1] for r in rows], dtype=np.int64)
    weights = np.array([float(r[2]) for r in rows])
    eff = stats.effective_size(float(weights.sum()), sum(float(r[3]) for r in rows))
    return keys, weights * (eff / weights.sum()) if weights.sum() > 0 else weights


def _shift(fields: _Fields, metric: Metric, level: float) -> dict[str, Any]:
    """The whole distribution's shift, as Kayenta measures it: Mann–Whitney, and the
    Hodges–Lehmann estimate (the median of every B/A ratio) with Moses' interval, on the
    log scale: a ratio. From the binned counts: the distribution of pairwise differences
    of bins is the convolution of the two histograms, so nothing is enumerated."""
    (ka, ca), (kb, cb) = fields.binned(str(metric.field))
    out: dict[str, Any] = {"kind": "shift", "field": metric.field, "unit": "event"}
    pa, pb = ka > 0, kb > 0  # positive values (the log scale); zeros are left out
    ka, ca, kb, cb = ka[pa], ca[pa], kb[pb], cb[pb]
    n_a, n_b = round(float(ca.sum())), round(float(cb.sum()))
    out.update(n_a=n_a, n_b=n_b)
    if n_a < 2 or n_b < 2:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    lo_k = int(min(ka.min(), kb.min()))
    size = int(max(ka.max(), kb.max())) - lo_k + 1
    ha, hb = np.zeros(size), np.zeros(size)
    ha[ka - lo_k], hb[kb - lo_k] = ca, cb
    _, p, _ = stats.binned_rank_test(hb, ha)
    diffs = np.convolve(hb, ha[::-1])  # index i: a difference of i - (size - 1) bins
    cum = np.cumsum(diffs)
    total = float(cum[-1])

    def at(count: float) -> float:  # the difference, in bins, at this rank
        return float(np.searchsorted(cum, min(max(count, 1.0), total)) - (size - 1))

    z = float(sps.norm.ppf(1 - level / 2))
    k = n_a * n_b / 2 - z * math.sqrt(n_a * n_b * (n_a + n_b + 1) / 12)
    middle, low, high = at(total / 2), at(k), at(total - k + 1)
    ratio = lambda bins: math.exp2(bins / STEPS) - 1  # noqa: E731
    return out | {
        "a": _r(float(np.exp2(((ka - 1_000_000 + 0.5) / STEPS) @ ca / ca.sum()))),
        "b": _r(float(np.exp2(((kb - 1_000_000 + 0.5) / STEPS) @ cb / cb.sum()))),
        "relative_change": ratio(middle),
        "ci": [ratio(low), ratio(high)] if k >= 1 else [math.nan, math.nan],
        "p_value": p,
        "test": "Mann-Whitney; Hodges-Lehmann ratio with Moses' interval (bins of 0.54 %)",
    }


def _bootstrap(
    a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray], qs: list[float]
) -> tuple[np.ndarray, np.ndarray]:
    """(BOOTSTRAP × len(qs)) resampled quantiles of A and of B, from binned counts."""
    rng = np.random.default_rng(SEED)
    draws = []
    for keys, counts in (a, b):
        centers = _centers(keys)
        order = np.argsort(centers)
        centers, counts = centers[order], counts[order]
        n = max(1, round(float(counts.sum())))  # effective counts need not be whole
        sample = rng.multinomial(n, counts / counts.sum(), size=BOOTSTRAP)
        cum = np.cumsum(sample, axis=1)
        at = np.stack([(cum >= q * n).argmax(axis=1) for q in qs], axis=1)
        draws.append(centers[at])
    return draws[0], draws[1]


def _bin(col: str) -> str:
    """Log-spaced bins, ``STEPS`` per doubling: keys ordered, 0 for zero and below."""
    return f"(CASE WHEN {col} > 0 THEN CAST(floor(log2({col}) * {STEPS}) AS BIGINT) + 1000000 ELSE 0 END)"


def _centers(keys: np.ndarray) -> np.ndarray:
    mag = keys.astype(np.float64) - 1_000_000
    return np.where(keys > 0, np.exp2((mag + 0.5) / STEPS), 0.0)


def _log_interval(ratio: float, boot: np.ndarray, level: float) -> tuple[float, float, float]:
    """(low, high, p) for a ratio estimated exactly, its spread from bootstrap ratios: a
    normal interval on the log scale. The bootstrap's standard error gets the bins'
    rounding added (a uniform error of one bin, for each cohort), so it never claims more
    precision than the bins hold; the normal form reaches the small levels a gate
    watched many times needs, which 2,000 resamples' percentiles cannot."""
    logs = np.log(boot[np.isfinite(boot) & (boot > 0)])
    if not ratio > 0 or logs.size < 10:
        return math.nan, math.nan, 1.0
    rounding = 2 * (math.log(2) / STEPS) ** 2 / 12
    se = math.sqrt(float(logs.var(ddof=1)) + rounding)
    x = math.log(ratio)
    z = float(sps.norm.ppf(1 - level / 2))
    p = float(2 * sps.norm.sf(abs(x) / se))
    return math.expm1(x - z * se), math.expm1(x + z * se), float(f"{p:.4g}")


def _mean(fa: Frame, fb: Frame, metric: Metric, level: float) -> dict[str, Any]:
    """Welch on the difference of means, each cohort's size discounted for serial
    correlation: consecutive samples of one series (a gauge scraped every 15 s) say
    nearly the same thing. With lag-1 autocorrelation r within each unit's series (or
    the whole cohort's, in time order, without a unit field), n events count as
    n (1 − r) / (1 + r), the AR(1) effective size, and never fewer than the series."""
    col = ident(str(metric.field))
    unit = unit_field(fa)
    part = f"PARTITION BY {ident(unit)} " if unit else ""
    got = {}
    for name, frame in (("a", fa), ("b", fb)):
        sql, params = _values(
            frame,
            f"{col} AS v, {_weight(frame)} AS w, lag({col}) OVER ({part}ORDER BY {ident('timestamp')}) AS pv"
            + (f", {ident(unit)} AS u" if unit else ", 1 AS u"),
        )
        # the mean (each event counting as its sample rate) and Kish's size
        n, total, squares, mean, var, r, units = frame.backend.execute_sql(
            f"SELECT count(v), sum(w), sum(w * w), sum(w * v) / sum(w), var_samp(v), corr(v, pv), count(DISTINCT u) "
            f"FROM ({sql} AND {col} IS NOT NULL)",
            params,
        ).rows[0]
        eff = stats.effective_size(float(total or 0), float(squares or 0))
        if frame.weight and n and eff > 1:  # the weighted variance: a second pass, about the weighted mean
            spread = frame.backend.execute_sql(
                f"SELECT sum(w * (v - ?) * (v - ?)) / sum(w) FROM ({sql} AND {col} IS NOT NULL)",
                [mean, mean, *params],
            ).rows[0][0]
            var = float(spread) * eff / (eff - 1)
        elif frame.weight:
            var = None
        got[name] = (n, mean, var, r, units, eff)
    (n_a, m_a, v_a, r_a, u_a, k_a), (n_b, m_b, v_b, r_b, u_b, k_b) = got["a"], got["b"]
    out: dict[str, Any] = {"kind": "avg", "field": metric.field, "unit": "event", "n_a": n_a, "n_b": n_b}
    out.update(a=_r(m_a), b=_r(m_b))
    if not n_a or not n_b or n_a < 2 or n_b < 2 or not m_a:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    e_a, e_b = _effective(k_a, r_a, u_a), _effective(k_b, r_b, u_b)
    out.update(effective_n_a=_r(e_a), effective_n_b=_r(e_b), autocorrelation_a=_r(r_a), autocorrelation_b=_r(r_b))
    se, df = stats.welch(v_a or 0.0, e_a, v_b or 0.0, e_b)
    diff = float(m_b) - float(m_a)
    base = abs(float(m_a))
    p, lo, hi = stats.t_interval(diff, se, df, level)
    return out | {
        "absolute_change": _r(diff),
        "relative_change": diff / base,
        "ci": [lo / base, hi / base],
        "p_value": p,
        "test": "Welch (difference of means), sizes discounted for serial correlation",
    }


def _effective(n: float, r: float | None, series: int) -> float:
    """The AR(1) effective size of n samples with lag-1 autocorrelation r, at least the
    number of series (and 2)."""
    if r is None or math.isnan(r) or r <= 0:
        return float(n)
    return float(min(n, max(n * (1 - r) / (1 + r), series, 2)))


def _rate(fields: _Fields, metric: Metric, level: float) -> dict[str, Any]:
    """The share of events matching a filter. With sample rates the shares are weighted and
    the counts tested are effective: the share of Kish's effective size, rounded for
    Fisher's test."""
    got = {}
    fa = fields.fa
    for name, frame in (("a", fa), ("b", fields.fb)):
        hit = Frame(frame.backend, frame.dataset, frame.start, frame.end, _and(frame.where, metric.filter))
        (k, k_w, _), (n, n_w, n_eff) = _totals(hit), fields.totals[name]
        got[name] = (k, n, k_w / n_w if n_w else 0.0, n_eff)
    (k_a, n_a, p_a, e_a), (k_b, n_b, p_b, e_b) = got["a"], got["b"]
    out: dict[str, Any] = {"kind": "rate", "filter": metric.filter, "unit": "event", "n_a": n_a, "n_b": n_b}
    out.update(a=_r(p_a) if n_a else None, b=_r(p_b) if n_b else None, count_a=k_a, count_b=k_b)
    if not n_a or not n_b:
        return out | {"relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    if fa.weight:  # effective counts: the weighted share of the effective size
        ka_e, na_e, kb_e, nb_e = round(p_a * e_a), max(1, round(e_a)), round(p_b * e_b), max(1, round(e_b))
        out.update(effective_n_a=_r(e_a), effective_n_b=_r(e_b))
    else:
        ka_e, na_e, kb_e, nb_e = k_a, n_a, k_b, n_b
    p = float(sps.fisher_exact([[kb_e, nb_e - kb_e], [ka_e, na_e - ka_e]])[1])
    lo, hi = _newcombe(p_a * na_e, na_e, p_b * nb_e, nb_e, level)
    if p_a > 0:
        change, ci = (p_b - p_a) / p_a, [lo / p_a, hi / p_a]
    else:  # none in A: any significant rate in B is beyond every tolerance
        change = math.inf if p_b > 0 else 0.0
        ci = [math.inf if lo > 0 else (0.0 if hi <= 0 else -math.inf), math.inf if hi > 0 else 0.0]
    return out | {
        "absolute_change": _r(p_b - p_a),
        "absolute_ci": [_r(lo), _r(hi)],
        "relative_change": change,
        "ci": ci,
        "p_value": p,
        "test": "Fisher's exact (two proportions); Newcombe's interval for the difference",
    }


def _newcombe(k_a: float, n_a: float, k_b: float, n_b: float, level: float) -> tuple[float, float]:
    """Newcombe's hybrid score interval for p_b − p_a (Wilson intervals of each)."""
    z = float(sps.norm.ppf(1 - level / 2))

    def wilson(k: float, n: float) -> tuple[float, float]:
        p = k / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
        return centre - half, centre + half

    (la, ua), (lb, ub) = wilson(k_a, n_a), wilson(k_b, n_b)
    pa, pb = k_a / n_a, k_b / n_b
    d = pb - pa
    return d - math.sqrt((pb - lb) ** 2 + (ua - pa) ** 2), d + math.sqrt((ub - pb) ** 2 + (pa - la) ** 2)


def _extreme(fa: Frame, fb: Frame, metric: Metric) -> dict[str, Any]:
    col = ident(str(metric.field))
    vals = []
    for frame in (fa, fb):
        sql, params = _values(frame, f"count({col}), {metric.kind}({col})")
        vals.append(frame.backend.execute_sql(sql, params).rows[0])
    (n_a, a), (n_b, b) = vals
    return {
        "kind": metric.kind,
        "field": metric.field,
        "unit": "event",
        "n_a": n_a,
        "n_b": n_b,
        "a": _r(a),
        "b": _r(b),
        "relative_change": _rel(a, b) if a is not None and b is not None else math.nan,
        "ci": [math.nan, math.nan],
        "p_value": 1.0,
        "test": "none: one extreme per cohort cannot be tested (give --per FIELD to compare units)",
    }


def _per_unit(fa: Frame, fb: Frame, metric: Metric, unit: str, level: float) -> dict[str, Any]:
    """The metric per unit (host), then the units compared. Positive quantities (memory,
    latency) vary across hosts by factors, so the test is Welch's on the logarithms: the
    change is the ratio of geometric means, with its interval. With a few hosts per
    cohort a rank test cannot reach significance at all (4 against 4: p ≥ 0.029)."""
    col, u = ident(str(metric.field)), ident(unit)
    per_hour = f"regr_slope({col}, epoch({ident('timestamp')}) / 3600.0)"
    w = _weight(fa)
    mean = f"sum({w} * {col}) / sum({w})"  # each event counts as its sample rate
    agg = {"quantile": f"quantile_cont({col}, {metric.q})", "avg": mean, "slope": per_hour}.get(
        metric.kind, f"{metric.kind}({col})"
    )
    values = {}
    for name, frame in (("a", fa), ("b", fb)):
        sql, params = _values(frame, f"{u} AS u, {agg} AS v")
        rows = frame.backend.execute_sql(f"{sql} AND {col} IS NOT NULL GROUP BY 1", params).rows
        values[name] = {r[0]: float(r[1]) for r in rows if r[1] is not None}
    xa, xb = np.array(list(values["a"].values())), np.array(list(values["b"].values()))
    out: dict[str, Any] = {
        "kind": metric.kind,
        "field": metric.field,
        "unit": unit,
        "n_a": int(xa.size),
        "n_b": int(xb.size),
        "units_a": {str(k): _r(v) for k, v in sorted(values["a"].items(), key=lambda kv: str(kv[0]))},
        "units_b": {str(k): _r(v) for k, v in sorted(values["b"].items(), key=lambda kv: str(kv[0]))},
    }
    if xa.size < 2 or xb.size < 2:
        return out | {"a": None, "b": None, "relative_change": math.nan, "ci": [math.nan, math.nan], "p_value": 1.0}
    logs = bool((xa > 0).all() and (xb > 0).all())
    paired = set(values["a"]) == set(values["b"])  # the same hosts before and after
    if paired:
        keys = sorted(values["a"], key=str)
        xa = np.array([values["a"][k] for k in keys])
        xb = np.array([values["b"][k] for k in keys])
    ya, yb = (np.log(xa), np.log(xb)) if logs else (xa, xb)
    diff = float(yb.mean() - ya.mean())
    if paired:  # each host against itself: the hosts' own levels drop out
        d = yb - ya
        se, df = float(d.std(ddof=1)) / math.sqrt(d.size), float(d.size - 1)
    else:
        se, df = stats.welch(float(ya.var(ddof=1)), xa.size, float(yb.var(ddof=1)), xb.size)
    p, lo, hi = stats.t_interval(diff, se, df, level)
    how = f"paired t (the same {unit}s in both)" if paired else "Welch's t"
    if logs:
        a, b = float(np.exp(ya.mean())), float(np.exp(yb.mean()))
        change, ci = math.expm1(diff), [math.expm1(lo), math.expm1(hi)]
        test = f"{how} on the logarithms of one {metric.kind} per {unit} (ratio of geometric means)"
    else:
        a, b = float(ya.mean()), float(yb.mean())
        base = abs(a) or 1.0
        change, ci = diff / base, [lo / base, hi / base]
        test = f"{how} on one {metric.kind} per {unit} (difference of means)"
    return out | {
        "paired": paired,
        "a": _r(a),
        "b": _r(b),
        "absolute_change": _r(b - a),
        "relative_change": change,
        "ci": ci,
        "p_value": p,
        "test": test,
    }


def _finite(x: float | None) -> float | None:
    """A number for JSON: None for missing, NaN or infinite."""
    out = _r(x)
    return None if out is None or math.isinf(out) else out


def _rel(a: float | None, b: float | None) -> float:
    if a is None or b is None:
        return math.nan
    if a == 0:
        return 0.0 if b == 0 else math.copysign(math.inf, b)
    return (b - a) / abs(a)


def _r(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return x
    return float(f"{x:.6g}")
