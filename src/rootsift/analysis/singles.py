"""explain's single tests: one per field/value share and one per measure's distribution,
in effective events (``Scale``: Kish's size under sample rates and counts).

A value's share is tested with Fisher's exact test (``stats.share_test``) and scored as
its difference of shares less 1.96 standard errors; a measure with the Mann–Whitney test
on its log-spaced bins, scored by Cliff's delta less 1.96 standard errors.
docs/explain.md says it in plain words.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from rootsift.analysis import stats
from rootsift.analysis.counts import Cell, Counts, bin_edges
from rootsift.analysis.findings import Finding

QUANTILES = (0.5, 0.9, 0.99)


@dataclass
class Scale:
    """Totals of the selection and baseline, weighted and effective (for the tests)."""

    sel_w: float
    base_w: float
    sel_eff: float
    base_eff: float

    def effective(self, cell: Cell) -> tuple[float, float]:
        """A cell's counts in effective events (its weighted counts, scaled)."""
        a = cell.sel_w * self.sel_eff / self.sel_w if self.sel_w else 0.0
        b = cell.base_w * self.base_eff / self.base_w if self.base_w else 0.0
        return a, b

    def table(self, cell: Cell) -> tuple[float, float, float, float]:
        """(value in selection, selection, value in baseline, baseline) in effective events,
        each group scaled by the smaller of its own and the value's effective events per
        unit of weight: a value whose events are weighted unevenly is tested as the smaller
        sample it is."""
        f1 = self.sel_eff / self.sel_w if self.sel_w else 0.0
        f0 = self.base_eff / self.base_w if self.base_w else 0.0
        if cell.sel_w2 > 0:
            f1 = min(f1, cell.sel_w / cell.sel_w2)
        if cell.base_w2 > 0:
            f0 = min(f0, cell.base_w / cell.base_w2)
        return cell.sel_w * f1, self.sel_w * f1, cell.base_w * f0, self.base_w * f0


def dimension_findings(counts: Counts, scale: Scale, alpha: float) -> list[Finding]:
    """One test per (field, value), missing as a value; a measure's missing share too.

    A value too rare to be significant even if all its events fell on one side is not
    tested (Tarone: it could never be a finding, and testing it would only dilute the
    others). A value kept for being common in the selection is tested against every
    value its field has (its p-value times the field's distinct count).
    """
    pairs: list[tuple[str, Any, Cell]] = [(name, v, c) for name, vals in counts.values.items() for v, c in vals]
    for name, cells in counts.bins.items():
        missing = next((c for k, c in cells if k is None), None)
        present = any(k is not None for k, _ in cells)
        if missing is not None and present and name not in counts.values:  # a dimension counts it already
            pairs.append((name, None, missing))
    if not pairs:
        return []
    tables = np.array([scale.table(c) for _, _, c in pairs])
    a, n1, b, n0 = tables[:, 0], tables[:, 1], tables[:, 2], tables[:, 3]
    with_value = a + b
    all_sel = np.minimum(with_value, n1)
    all_base = np.minimum(with_value, n0)
    best = np.minimum(
        stats.share_test(all_sel, with_value - all_sel, n1, n0),
        stats.share_test(with_value - all_base, all_base, n1, n0),
    )
    testable = best <= alpha
    pairs = [pair for pair, ok in zip(pairs, testable) if ok]
    a, n1, b, n0 = a[testable], n1[testable], b[testable], n0[testable]
    if not pairs:
        return []
    p_sel = np.array([c.sel_w for _, _, c in pairs]) / scale.sel_w
    p_base = np.array([c.base_w for _, _, c in pairs]) / scale.base_w
    p = stats.share_test(a, b, n1, n0)
    every = counts.total.sel_n + counts.total.base_n  # bounds the distinct values of a heavy-hitter field
    looked = np.array([1.0 if c.among_common else float(counts.distinct.get(n) or every) for n, _, c in pairs])
    p = np.minimum(1.0, p * looked)
    diff, score = stats.share_score(p_sel, p_base, n1, n0)
    return [
        Finding(
            "dimension",
            float(score[i]),
            float(p[i]),
            field=name,
            value=value,
            selection_fraction=float(p_sel[i]),
            baseline_fraction=float(p_base[i]),
            selection_count=cell.sel_w,
            baseline_count=cell.base_w,
            effect=float(diff[i]),
        )
        for i, (name, value, cell) in enumerate(pairs)
    ]


def measure_findings(counts: Counts, scale: Scale) -> list[Finding]:
    """A rank test per measure, with its quantiles side by side."""
    found = []
    for name, cells in counts.bins.items():
        present = sorted(((k, c) for k, c in cells if k is not None), key=lambda kc: kc[0])
        if not present:
            continue
        keys = np.array([k for k, _ in present], dtype=np.float64)
        eff = np.array([scale.effective(c) for _, c in present])
        delta, p, se = stats.binned_rank_test(eff[:, 0], eff[:, 1])
        low, high = bin_edges(keys)
        sel_q = stats.binned_quantiles(np.array([c.sel_w for _, c in present]), low, high, QUANTILES)
        base_q = stats.binned_quantiles(np.array([c.base_w for _, c in present]), low, high, QUANTILES)
        sel_n = sum(c.sel_w for _, c in present)
        base_n = sum(c.base_w for _, c in present)
        quantiles = {
            f"p{round(q * 100)}": {"selection": _r(s), "baseline": _r(b)} for q, s, b in zip(QUANTILES, sel_q, base_q)
        }
        found.append(
            Finding(
                "measure",
                max(0.0, abs(delta) - stats.Z95 * se),
                p,
                field=name,
                selection_count=sel_n,
                baseline_count=base_n,
                effect=delta,
                detail={"direction": "higher" if delta > 0 else "lower", "quantiles": quantiles},
            )
        )
    return found


def _r(x: float | None) -> float | None:
    return None if x is None else float(f"{x:.6g}")
