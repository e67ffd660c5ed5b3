"""profile-diff: which functions take a different share of the samples in cohort B than in A.

For every function: its self share (samples in the function itself) and total share (in
it or anything it calls) in each cohort, the change in percentage points, and a p-value
that treats each profile as a unit (``significance``), with Benjamini–Hochberg q-values
over all functions. A function is a finding when its self or total change is significant.

Shares add up to one: when one function gets slower every other function's share
shrinks, though its own cost did not change. The ranking uses what the shares do tell: a
function's cost relative to the rest of the program, ``share / (1 - share)``. Its change,
in points of A's samples (``excess_points``: ``(odds_B - odds_A) * (1 - share_A)``), is
how much the function's own cost grew or shrank if the rest of the program cost the same
in both; when one function changed, its excess is the largest of all (for any function
holding less than half the samples), while the shares of the others moved only in
proportion. Findings whose self share changed come first (that is where the time went),
by the size of their excess, then those whose total alone changed (the callers on the way
to it). Each finding has the call paths where the change sits and its new and vanished
callees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from rootsift.analysis.compare.cohorts import and_filters, describe
from rootsift.analysis.defaults import ALPHA
from rootsift.analysis.frame import Frame
from rootsift.analysis.profiles import significance
from rootsift.analysis.profiles.paths import Node, call_changes, call_tree, callees, caller_paths
from rootsift.analysis.profiles.samples import Cohort, read_cohort, value_field
from rootsift.errors import QuerySpecError, UsageError
from rootsift.store.duckdb import DuckDBBackend

MAX_FINDINGS = 50


@dataclass
class FunctionChange:
    """One function whose share of the samples changed between A and B."""

    function: str
    a_self: float
    b_self: float
    a_total: float
    b_total: float
    p_self: float
    p_total: float
    q_self: float
    q_total: float
    status: str
    """``changed``, ``new`` (no sample in A) or ``vanished`` (none in B)."""
    basis: str
    """``self`` or ``total``: which change made it a finding."""
    paths: list[dict[str, Any]] = field(default_factory=list)
    new_callees: list[str] = field(default_factory=list)
    vanished_callees: list[str] = field(default_factory=list)

    @property
    def change_self(self) -> float:
        return 100 * (self.b_self - self.a_self)

    @property
    def change_total(self) -> float:
        return 100 * (self.b_total - self.a_total)

    @property
    def excess(self) -> float:
        """The change of the function's cost relative to the rest of the program, in points of A."""
        a, b = (self.a_self, self.b_self) if self.basis == "self" else (self.a_total, self.b_total)
        if max(a, b) >= 1 - 1e-9:  # the whole profile: there is no rest to be relative to
            return 100 * (b - a)
        return 100 * (b / (1 - b) - a / (1 - a)) * (1 - a)

    @property
    def score(self) -> float:
        return abs(self.excess)

    def as_dict(self) -> dict[str, Any]:
        q = self.q_self if self.basis == "self" else self.q_total
        p = self.p_self if self.basis == "self" else self.p_total
        return {
            "kind": "function",
            "function": self.function,
            "status": self.status,
            "direction": "grew" if self.excess > 0 else "shrank",
            "basis": self.basis,
            "score": round(self.score, 4),
            "p_value": _sig(p),
            "q_value": _sig(q),
            "a": {"self_share": round(self.a_self, 6), "total_share": round(self.a_total, 6)},
            "b": {"self_share": round(self.b_self, 6), "total_share": round(self.b_total, 6)},
            "change_points": {"self": round(self.change_self, 4), "total": round(self.change_total, 4)},
            "excess_points": round(self.excess, 4),
            "q_values": {"self": _sig(self.q_self), "total": _sig(self.q_total)},
            "paths": self.paths,
            "new_callees": self.new_callees,
            "vanished_callees": self.vanished_callees,
        }


@dataclass
class ProfileDiff:
    """What ``profile_diff`` returns: the findings (most explanatory first), the cohorts and warnings."""

    dataset: str
    value: str
    method: str
    alpha: float
    cohorts: dict[str, dict[str, Any]]
    findings: list[FunctionChange]
    warnings: list[str]
    tree: Node
    functions: int
    calls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Calls made only in B (``new``) or only in A (``vanished``): caller, callee, share."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "value": self.value,
            "method": self.method,
            "alpha": self.alpha,
            "cohorts": self.cohorts,
            "functions": self.functions,
            "findings": [f.as_dict() for f in self.findings],
            "new_calls": self.calls.get("new", []),
            "vanished_calls": self.calls.get("vanished", []),
            "warnings": self.warnings,
        }


def profile_diff(
    backend: DuckDBBackend,
    dataset: str,
    *,
    a: str | None,
    b: str | None,
    a_range: tuple[datetime | None, datetime | None] = (None, None),
    b_range: tuple[datetime | None, datetime | None] = (None, None),
    where: str | None = None,
    profile_type: str | None = None,
    value: str | None = None,
    focus: str | None = None,
    alpha: float = ALPHA,
) -> ProfileDiff:
    """Diff the stack samples of cohort A (filter ``a`` and/or ``a_range``) and cohort B.

    ``profile_type`` keeps only profiles of that type (``cpu``, ``heap``…); ``value`` is
    the field summed (default ``samples``); ``focus`` keeps only stacks through that
    function, from it down (shares are then of the focused samples)."""
    if not (a or any(a_range)) or not (b or any(b_range)):
        raise UsageError("give both cohorts: --a and --b (filters such as 'version = \"1.0\"') or their time ranges")
    if profile_type is not None:
        if "profile_type" not in backend.fields(dataset):
            raise QuerySpecError(f"--type {profile_type}: the profiles of {dataset!r} carry no profile_type")
        where = and_filters(where, f'profile_type = "{_quoted(profile_type)}"')
    frames = [Frame(backend, dataset, r[0], r[1], and_filters(where, t)) for t, r in ((a, a_range), (b, b_range))]
    field_name = value_field(frames[0], value)
    ca, cb = (read_cohort(f, field_name, focus) for f in frames)
    warnings = _cohort_warnings(ca, cb, field_name, focus)
    how = significance.method(len(ca.units), len(cb.units))
    findings, functions = _changes(ca, cb, alpha) if ca.total > 0 and cb.total > 0 else ([], 0)
    for f in findings[:MAX_FINDINGS]:
        _locate(f, ca, cb)
    cohorts = {
        name: {**describe(frame, text), "profiles": len(c.units), "value": c.total, "stacks": len(c.stacks)}
        for name, frame, text, c in (("a", frames[0], a, ca), ("b", frames[1], b, cb))
    }
    tree = call_tree(ca.stacks, cb.stacks)
    calls = call_changes(ca.stacks, ca.total, cb.stacks, cb.total)
    return ProfileDiff(
        dataset, field_name, how, alpha, cohorts, findings[:MAX_FINDINGS], warnings, tree, functions, calls
    )


def _changes(ca: Cohort, cb: Cohort, alpha: float) -> tuple[list[FunctionChange], int]:
    names = sorted(set(ca.total_values) | set(cb.total_values))
    za, zb = np.zeros(len(ca.units)), np.zeros(len(cb.units))

    def matrix(c: dict[str, np.ndarray], zero: np.ndarray) -> np.ndarray:
        return np.array([c.get(n, zero) for n in names], dtype=np.float64).reshape(len(names), len(zero))

    sa, sb = matrix(ca.self_values, za), matrix(cb.self_values, zb)
    ta, tb = matrix(ca.total_values, za), matrix(cb.total_values, zb)
    p = np.concatenate(
        [
            significance.p_values(sa, ca.unit_totals, sb, cb.unit_totals),
            significance.p_values(ta, ca.unit_totals, tb, cb.unit_totals),
        ]
    )
    from rootsift.analysis.stats import q_values

    q = q_values(p)
    n = len(names)
    mean = [significance.shares(m, c.unit_totals).mean(axis=1) for m, c in ((sa, ca), (sb, cb), (ta, ca), (tb, cb))]
    out = []
    for i, name in enumerate(names):
        sig_self, sig_total = q[i] < alpha, q[n + i] < alpha
        if not (sig_self or sig_total):
            continue
        status = "new" if ta[i].sum() == 0 else "vanished" if tb[i].sum() == 0 else "changed"
        out.append(
            FunctionChange(
                name, mean[0][i], mean[1][i], mean[2][i], mean[3][i], p[i], p[n + i], q[i], q[n + i],
                status, "self" if sig_self and mean[0][i] != mean[1][i] else "total",
            )
        )  # fmt: skip
    out.sort(key=lambda f: (f.basis != "self", -f.score, f.function))
    return out, n


def _locate(f: FunctionChange, ca: Cohort, cb: Cohort) -> None:
    f.paths = caller_paths(f.function, ca.stacks, ca.total, cb.stacks, cb.total)
    calls_a, calls_b = callees(
        {s: v for s, v in ca.stacks.items() if f.function in s}, {s: v for s, v in cb.stacks.items() if f.function in s}
    )
    f.new_callees = sorted(calls_b.get(f.function, set()) - calls_a.get(f.function, set()))
    f.vanished_callees = sorted(calls_a.get(f.function, set()) - calls_b.get(f.function, set()))


def _cohort_warnings(ca: Cohort, cb: Cohort, value: str, focus: str | None) -> list[str]:
    out = []
    for name, c in (("A", ca), ("B", cb)):
        if c.total <= 0:
            through = f" through {focus}" if focus else ""
            out.append(f"cohort {name} has no stack samples{through} with a {value} above 0: nothing to compare")
    if ca.total > 0 and cb.total > 0 and significance.method(len(ca.units), len(cb.units)) == significance.POOLED:
        out.append(
            f"one profile in cohort {'A' if len(ca.units) < 2 else 'B'}: the significance counts samples as "
            "independent (a binomial test), so it separates a change from sampling noise but not from the "
            "run-to-run variation of the program; ingest two or more profiles per cohort for that"
            + ("" if value == "samples" else f" (and {value} is not a sample count, which overstates it further)")
        )
    return out


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _sig(p: float) -> float:
    return float(f"{p:.4g}")
