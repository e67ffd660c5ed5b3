"""explain: what is different about the selected events, against the rest.

One pass counts every dimension's values and every measure's distribution in the
selection and the baseline (``counts.py``); each field/value share and each measure is
tested (``singles.py``), the tests corrected together for the false discovery rate, and
the significant ones ranked by a score that is the effect shrunk by its uncertainty:
dimension culprits first, then measures and a quantity's values, then values nested in
another, then restatements of the selected measure (``parts.py``). A second, small pass
counts conjunctions of the strongest values (``combos.py``); the cause set
(``causes.py``) comes first; a value that adds nothing given a higher-ranked one is
listed after the rest (``redundancy.py``). docs/explain.md explains the statistics in plain words.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from rootsift.analysis import stats
from rootsift.analysis.causes import CAUSE_METHOD, find_causes
from rootsift.analysis.combos import COMBO_METHOD, search_combinations
from rootsift.analysis.counts import BIN_STEPS, Cell, Counts, count_pass
from rootsift.analysis.defaults import ALPHA, TOP_VALUES
from rootsift.analysis.fields import PILOT_ROWS, plan_fields
from rootsift.analysis.findings import Finding, iso
from rootsift.analysis.frame import Frame
from rootsift.analysis.parts import PARTS_METHOD, restatements
from rootsift.analysis.redundancy import REDUNDANCY_METHOD, demote_implied
from rootsift.analysis.singles import Scale, dimension_findings, measure_findings
from rootsift.errors import UsageError
from rootsift.store.duckdb import DuckDBBackend
from rootsift.store.segment import SAMPLE_EVERY

SMALL_SELECTION = 30


@dataclass
class Explanation:
    """explain's result: the two groups, the findings (most explanatory first) and warnings."""

    dataset: str
    selection: dict[str, Any]
    baseline: dict[str, Any]
    findings: list[Finding]
    warnings: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)
    cause_set: list[Finding] = field(default_factory=list)
    """The fewest conjunctions that together explain the difference (causes.py); also the first findings."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "selection": self.selection,
            "baseline": self.baseline,
            "cause_set": [f.as_dict() for f in self.cause_set],
            "findings": [f.as_dict() for f in self.findings],
            "warnings": self.warnings,
            "fields": self.fields,
            "method": self.method,
        }


def explain(
    backend: DuckDBBackend,
    dataset: str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    where: str | None = None,
    select: str | None = None,
    select_from: datetime | None = None,
    select_to: datetime | None = None,
    baseline: str | None = None,
    alpha: float = ALPHA,
    top_values: int = TOP_VALUES,
    sampled: bool = False,
    select_start_of: str | None = None,
    count_field: str | None = None,
    outcomes: Collection[str] = (),
) -> Explanation:
    """Compare the selection (``select`` and/or ``select_from``…``select_to``) with the
    baseline (the rest of the range, or the events matching ``baseline``); return the
    fields and values that tell them apart, most explanatory first. ``sampled``: the
    baseline from the store's uniform sample (the selection stays exact).
    ``select_start_of``: a duration field; the time box bounds each event's start
    (timestamp less the duration, for logs stamped at completion). ``count_field``: the
    field saying how many identical events a row stands for (default: the dataset's
    setting, or ``event_count`` when present). ``outcomes``: fields that say what the
    selection produced, not where it happened (investigate: a latency region's status
    fields); they are reported but join no combination or cause."""
    if not 0 < alpha < 1:
        raise UsageError(f"--alpha {alpha} must be between 0 and 1")
    if top_values < 1:
        raise UsageError(f"--top {top_values} must be at least 1")
    frame = Frame(
        backend,
        dataset,
        start,
        end,
        where,
        select,
        select_from,
        select_to,
        baseline,
        sampled,
        select_start_of,
        count_field,
    )
    if not frame.has_selection():
        raise UsageError("say what to explain: --select EXPR and/or --select-from/--select-to")
    plan = plan_fields(frame)
    # fields that restate the measure the selection is a threshold on (parts.py): not causes
    restating = restatements(frame, [*plan.measures, *plan.dimensions])
    counts = count_pass(frame, plan, top_values)
    total = counts.total
    scale = Scale(
        total.sel_w,
        total.base_w,
        stats.effective_size(total.sel_w, counts.sel_w2),
        stats.effective_size(total.base_w, counts.base_w2),
    )
    out = Explanation(
        dataset,
        _group(total.sel_n, total.sel_w, scale.sel_eff, select or None, select_from, select_to, frame.weighted),
        _group(total.base_n, total.base_w, scale.base_eff, baseline or None, None, None, frame.weighted),
        [],
        _warnings(total, scale, frame),
        _fields_summary(plan, counts, scale, restating),
        _method(alpha, top_values, frame, total.sel_n, total.base_n),
    )
    if select_start_of and (select_from or select_to):
        out.selection["time"] = f"start: timestamp - {select_start_of}"
    if sampled and not frame.sampled:
        out.warnings.append(
            "the store has no sample of these events yet (it was opened read-only since it was written; any write, such as an ingest, makes one): exact"
        )
    if total.sel_n == 0 or total.base_n == 0:
        return out
    singles = dimension_findings(counts, scale, alpha) + measure_findings(counts, scale)
    for f in singles:
        if f.field in restating:
            f.detail["restates"] = restating[str(f.field)].as_dict()
    _set_q(singles)
    not_causes = set(restating) | set(outcomes)
    candidates = [f for f in singles if f.q_value < alpha and f.field not in not_causes]
    combos, tested = search_combinations(frame, candidates, scale, alpha)
    everything = singles + tested
    _set_q(everything)
    # significant, and an effect that stands clear of zero (a score of 0 is a difference
    # the counts cannot tell from none, such as one unusual value on one event)
    kept = [f for f in singles + combos if f.q_value < alpha and f.score > 0]
    # a quantity (a number also compared as a distribution: bytes, a duration) is described by
    # its measure finding; its single values are no cause (a cause set names values, not ranges)
    quantities = set(plan.dimensions) & set(plan.measures)
    ranked = sorted(_drop_complements(kept), key=lambda f: _rank(f, quantities))
    out.cause_set = find_causes(frame, counts, singles, scale, alpha, exclude=not_causes | quantities)
    for f in out.cause_set:
        f.q_value = f.p_value  # already corrected for every conjunction tried
    named = {_names(f) for f in out.cause_set}
    listed = out.cause_set + [f for f in ranked if _names(f) not in named]
    # a value that adds nothing given a higher-ranked one goes after the rest (redundancy.py)
    out.findings = demote_implied(
        frame,
        listed,
        scale,
        alpha,
        eligible=lambda f: (
            f.kind == "dimension" and f.effect > 0 and f.field not in not_causes | quantities and not _tail(f)
        ),
        tail=_tail,
    )
    for f in out.findings:
        if "implied_by" in f.detail:
            f.detail.pop("cause_set", None)  # the value it adds nothing to stands for it
    out.cause_set = [f for f in out.findings if f.detail.get("cause_set")]
    out.method["tests"] = len(everything)
    return out


def _rank(f: Finding, quantities: set[str]) -> tuple[Any, ...]:
    """Where dimension culprits (an upstream, a zone, a statement) come first: then measures
    and a quantity's values (how the selection differs, not where), then values nested in
    one that explains them, then restatements of the selected measure; by score within each
    (equal scores by what they name: the order is the same whatever order an engine gave)."""
    named = [str(c["field"]) for c in f.conditions] if f.conditions is not None else [str(f.field)]
    described = f.kind == "measure" or any(n in quantities for n in named)
    return ("restates" in f.detail, "within" in f.detail, described, -f.score, f.p_value, f.kind, _names(f))


def _tail(f: Finding) -> bool:
    """Listed last whatever their score: values nested in another, restatements of the measure."""
    return "within" in f.detail or "restates" in f.detail


def _names(f: Finding) -> tuple[Any, ...]:
    """What a dimension or combination finding points at, in any order of its conditions."""
    if f.conditions is not None:
        return tuple(sorted((str(c["field"]), repr(c["value"])) for c in f.conditions))
    return ((str(f.field), repr(f.value)),) if f.kind != "measure" else ("measure", str(f.field))


def _drop_complements(findings: list[Finding]) -> list[Finding]:
    """A value less common in the selection is shown only when no value of its field is more common."""
    over = {f.field for f in findings if f.kind == "dimension" and f.effect > 0}
    return [f for f in findings if not (f.kind == "dimension" and f.effect < 0 and f.field in over)]


def _set_q(findings: list[Finding]) -> None:
    q = stats.q_values(np.array([f.p_value for f in findings]))
    for f, value in zip(findings, q):
        f.q_value = float(value)


def _group(
    n: float, w: float, eff: float, where: str | None, lo: datetime | None, hi: datetime | None, weighted: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {"where": where, "from": iso(lo), "to": iso(hi), "events": int(n)}
    if weighted:
        out["weighted_events"] = round(w, 3)
        out["effective_events"] = round(eff, 1)
    return out


def _warnings(total: Cell, scale: Scale, frame: Frame) -> list[str]:
    out = []
    if total.sel_n == 0:
        out.append("the selection is empty: nothing to explain (check --select and the time range)")
    elif scale.sel_eff < SMALL_SELECTION:
        out.append(
            f"the selection has only {scale.sel_eff:.0f} (effective) events: only large differences can be "
            "significant, and nothing found is not evidence of no difference"
        )
    if total.base_n == 0:
        out.append("the baseline is empty: nothing to compare the selection with (widen --from/--to or --baseline)")
    if frame.weight and scale.sel_w > 0 and scale.sel_eff < 0.5 * total.sel_n:
        out.append(
            f"sample rates ({frame.weight!r}) vary: the {int(total.sel_n)} selected events count as "
            f"{scale.sel_eff:.0f} independent ones in the tests"
        )
    return out


def _fields_summary(plan: Any, counts: Counts, scale: Scale, restating: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(set(plan.dimensions) | set(plan.measures) | set(plan.heavy)):
        role = "dimension" if name not in plan.measures else "measure" if name not in plan.dimensions else "both"
        info: dict[str, Any] = {"role": role, "id_like": name in plan.id_like}
        if name in plan.heavy:
            info["role"] = "heavy hitters"
        if name in restating:
            info["restates"] = restating[name].as_dict()
        if name in counts.distinct or name in plan.heavy:
            distinct = counts.distinct.get(name) or None
            info["distinct"] = distinct
            if distinct is None:
                info["distinct_in_pilot"] = plan.distinct_in_pilot.get(name)
            shown = counts.values.get(name, [])
            if (distinct is None or distinct > len(shown)) and scale.sel_w and scale.base_w:
                info["other"] = {
                    "values": distinct - len(shown) if distinct else None,
                    "selection_fraction": _r(1 - sum(c.sel_w for _, c in shown) / scale.sel_w),
                    "baseline_fraction": _r(1 - sum(c.base_w for _, c in shown) / scale.base_w),
                }
        out[name] = info
    for name, why in plan.skipped.items():
        out[name] = {"role": "skipped", "why": why}
    return out


def _method(alpha: float, top_values: int, frame: Frame, sel_rows: float, base_rows: float) -> dict[str, Any]:
    out: dict[str, Any] = {"exact": not frame.sampled}
    if frame.count:
        out["count_field"] = frame.count
    if frame.sampled:

        def bound(n: float) -> float:  # the 95 % error of a share estimated from n sampled events, at worst
            return float(f"{1.96 * 0.5 / math.sqrt(max(n, 1.0)):.3g}")

        sample = f"the store's uniform sample, 1 event in {SAMPLE_EVERY} (each weighing {SAMPLE_EVERY})"
        sel = f"selection shares from {int(sel_rows):,} sampled events within ±{bound(sel_rows):.2g}, "
        out["sampling"] = {
            "baseline": sample,
            "selection": sample if frame.selection_sampled else "every event (exact)",
            "baseline_sample_events": int(base_rows),
            "share_error_95": bound(base_rows),
            "selection_share_error_95": bound(sel_rows) if frame.selection_sampled else 0.0,
            "statement": (
                (sel if frame.selection_sampled else "selection exact, ")
                + f"baseline shares from {int(base_rows):,} sampled events within ±{bound(base_rows):.2g} "
                "(95 %, at worst; ±1.96·√(p(1−p)/n) for a share p); the tests use the sample's sizes, so their "
                "p-values account for it"
            ),
        }
    return out | {
        "alpha": alpha,
        "dimensions": (
            f"each value's share in selection vs baseline, missing counted as a value; the {top_values} values "
            "with the largest share in either group per field are tested, the rest summed as 'other'; "
            "hypergeometric (Fisher) test on effective counts"
        ),
        "measures": (
            f"Mann-Whitney rank test on log-spaced bins ({BIN_STEPS} per doubling, so quantiles are within "
            f"{2 ** (1 / BIN_STEPS) - 1:.1%}); effect = Cliff's delta"
        ),
        "combinations": COMBO_METHOD,
        "cause_set": CAUSE_METHOD,
        "implied": REDUNDANCY_METHOD,
        "restatements": PARTS_METHOD,
        "correction": "Benjamini-Hochberg false discovery rate over every test of the run",
        "score": "effect (difference of shares, or Cliff's delta) less 1.96 standard errors, floored at 0",
        "field_roles": f"numbers with few distinct values in the first {PILOT_ROWS:,} events are also counted per value",
    }


def _r(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")
