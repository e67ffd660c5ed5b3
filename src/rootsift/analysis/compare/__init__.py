"""compare: cohort A against cohort B, metric by metric, with a verdict a rollout can gate on.

A cohort is a filter (``version = "1.4"``) and/or a time range (before a deploy). Each
metric gets A's and B's values, the change (absolute and relative), a confidence
interval, a test suited to it, and a verdict against a tolerance:

- ``pNN(field)``: quantiles of the events. The estimate is exact (DuckDB's
  ``quantile_cont``). The interval and the p-value are normal on the log of the ratio,
  with the standard error of a bootstrap of both cohorts (multinomial resampling of their
  counts in log-spaced bins of 0.5 %, so the cost does not grow with the events). It is
  tested only with ``TAIL_EVENTS`` (10) events beyond it in each cohort: p99.9 needs
  10,000 events a side. A quantile field also gets the whole **curve**, p50 to p99.9,
  with a band per quantile: "p85 and up regressed, p50 did not" is visible.
- ``shift(field)``: the whole distribution, as Kayenta compares it: Mann–Whitney, and
  the Hodges–Lehmann estimate of the B/A ratio with Moses' interval (binned).
- ``avg(field)``: the difference of means, Welch's interval and test.
- ``rate(FILTER)``: the share of events matching the filter. Fisher's exact test and
  Newcombe's interval for the difference; when A has none, the relative change means
  nothing: a significant test is a regression (errors in B, none in A), else the
  difference is judged against ±0.1 percentage point (``ZERO_BASE_TOLERANCE``), so a
  healthy service with no errors on either side passes once it has enough events.
- ``slope(field)``: a per-unit growth, the least-squares slope per hour of each host's
  series (a leak grows; a full cache does not).
- ``max(field)``, ``min(field)``: a per-unit statistic (a host's peak memory). The unit
  is the events' host (``--per``), so several hosts per cohort are not pseudo-replicated:
  the Behrens–Fisher test on the logarithms of the units' values (the ratio of geometric
  means; on the values themselves when one is not above zero), or a paired t when both
  cohorts hold the same units (the same hosts before and after a deploy). ``--per FIELD``
  compares any metric per unit (an ``avg`` per host). See ``units.compare_units``.

Verdicts, with ``tolerance`` the relative change that does not matter (defaults in
``TOLERANCE``). Larger is worse for every metric (latency, memory, the share of events
matching a filter) unless ``better`` says otherwise for it (``--better METRIC=higher``);
nothing is guessed from a name, and each metric says which way it assumed
(``better``, ``better_source``):

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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rootsift.analysis.compare.bins import BOOTSTRAP, SEED, STEPS
from rootsift.analysis.compare.cohorts import cohort, describe, finite, rounded
from rootsift.analysis.compare.concentrates import concentrates
from rootsift.analysis.compare.fields import Fields
from rootsift.analysis.compare.means import mean
from rootsift.analysis.compare.metrics import (
    TOLERANCE,
    Metric,
    check_field,
    default_metrics,
    direction,
    parse_metrics,
)
from rootsift.analysis.compare.quantile import quantile
from rootsift.analysis.compare.rates import rate
from rootsift.analysis.compare.shift import shift
from rootsift.analysis.compare.units import extreme, per_unit
from rootsift.analysis.compare.verdict import judge, overall, score, verdict
from rootsift.analysis.defaults import ALPHA
from rootsift.analysis.findings import Finding
from rootsift.analysis.saturation import unit_field
from rootsift.errors import QuerySpecError, UsageError
from rootsift.store.duckdb import DuckDBBackend

__all__ = ["ALPHA", "TOLERANCE", "Comparison", "Metric", "compare", "overall", "parse_metrics", "score", "verdict"]


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
    evidence: list[Finding] = field(default_factory=list, repr=False)
    """``findings`` as explain's objects, for drawing them (not in ``as_dict``)."""
    explains: str | None = None
    """The regressed metric the findings explain."""

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
    count_field: str | None = None,
) -> Comparison:
    """Compare cohort A with cohort B on each metric (see the module docstring).
    ``count_field``: each row stands for that many identical events (default: the
    dataset's setting, or ``event_count`` when present)."""
    if not (a or b or any(a_range) or any(b_range)):
        raise UsageError("say what the cohorts are: --a/--b filters and/or --a-from/--a-to, --b-from/--b-to")
    frames = {
        name: cohort(backend, dataset, where, text, rng, count_field)
        for name, text, rng in (("a", a, a_range), ("b", b, b_range))
    }
    chosen = metrics or default_metrics(frames["a"])
    names = [m.text for m in chosen]
    for flag, given in (("--tolerance", tolerance), ("--better", better), ("--weight", weights)):
        for name in given or {}:
            if name not in names:
                raise UsageError(f"{flag} {name}: not one of the metrics compared ({', '.join(names)})")
    out = Comparison(dataset, describe(frames["a"], a), describe(frames["b"], b), "no change", [])
    level = alpha / len(chosen)  # Bonferroni over the metrics: the verdict gates on any of them
    out.method = {
        "alpha": alpha,
        "per_metric_level": level,
        "correction": f"Bonferroni over {len(chosen)} metrics; intervals at {1 - level:.4g}",
        "bootstrap": f"{BOOTSTRAP} multinomial resamples of log-spaced bins ({STEPS} per doubling), seed {SEED}",
    }
    fields = Fields(frames["a"], frames["b"], chosen)
    for name, group in (("a", out.a), ("b", out.b)):
        n, w, eff = fields.totals[name]
        group["events"] = n
        if frames[name].row_weights:
            group.update(weighted_events=rounded(w), effective_events=rounded(eff))
        if n == 0:
            out.warnings.append(f"cohort {name.upper()} has no events: check its filter and time range")
    if frames["a"].row_weights:
        counted = [f"its sample rate ({frames['a'].weight!r})"] if frames["a"].weight else []
        counted += [f"its count ({frames['a'].count!r} identical events)"] if frames["a"].count else []
        out.method["weights"] = (
            f"each row counts as {' times '.join(counted)}; the tests use Kish's effective sizes "
            "(a count row is that many observations, a sampled event one)"
        )
    for metric in chosen:
        tol = (tolerance or {}).get(metric.text, TOLERANCE[metric.kind])
        unit = per or (unit_field(frames["a"]) if metric.kind in ("max", "min", "slope") else None)
        check_field(metric, frames["a"])
        way = direction(metric, better)
        if frames["a"].row_weights and unit and metric.kind in ("quantile", "slope"):
            out.warnings.append(
                f"{metric.text} per {unit}: each host's {metric.kind} counts stored rows, not sample rates or counts"
            )
        out.metrics.append(_one(fields, metric, tol, unit, level, way))
        out.metrics[-1]["weight"] = (weights or {}).get(metric.text, 1.0)
    out.verdict = overall([m["verdict"] for m in out.metrics])
    out.score = score(out.metrics)
    out.method["score"] = (
        "the percentage of the metrics' weight without a regression, over the metrics with enough data "
        "(Kayenta's canary score); the verdict does not depend on it"
    )
    regressed = next((m for m in out.metrics if m["verdict"] == "regression" and m["unit"] == "event"), None)
    if regressed is not None and regressed["kind"] in ("quantile", "rate"):
        out.evidence, note = concentrates(frames["a"], frames["b"], a, b, where, regressed, alpha)
        out.explains = str(regressed["metric"])
        out.findings = [f.as_dict() | {"explains": out.explains} for f in out.evidence]
        out.method["findings"] = note
    return out


def _one(
    fields: Fields, metric: Metric, tol: float, unit: str | None, level: float, better: tuple[str, str]
) -> dict[str, Any]:
    """One metric compared: its test's numbers, its tolerance, which way is better and why
    (``better``: the direction and ``default`` or ``--better``), and its verdict."""
    fa, fb = fields.fa, fields.fb
    if unit is not None and unit not in fa.fields:
        raise QuerySpecError(f"--per {unit}: no field {unit!r} in {fa.dataset}")
    if metric.kind == "slope" and unit is None:
        raise UsageError(f"--metrics {metric.text}: a slope is per series: name the unit with --per FIELD")
    if unit is not None and metric.kind != "rate":
        got = per_unit(fa, fb, metric, unit, level)
    elif metric.kind == "quantile":
        got = quantile(fields, metric, level)
    elif metric.kind == "rate":
        got = rate(fields, metric, level)
    elif metric.kind == "avg":
        got = mean(fa, fb, metric, level)
    elif metric.kind == "shift":
        got = shift(fields, metric, level)
    else:  # an extreme over events: one value per cohort, nothing to test
        got = extreme(fa, fb, metric)
    got["tolerance"] = tol
    got["better"], got["better_source"] = better
    judged = judge(got, tol, level, better[0])
    change, lo, hi = got["relative_change"], got["ci"][0], got["ci"][1]
    if math.isinf(change):  # JSON has no infinity: null, and said in words
        got["note"] = "; ".join(n for n in ("A has none: the relative change is infinite", got.get("note")) if n)
    got["ci"] = [finite(lo), finite(hi)]
    got["relative_change"] = finite(change)
    got["p_value"] = float(f"{got['p_value']:.4g}")
    return {"metric": metric.text, "verdict": judged, **got}
