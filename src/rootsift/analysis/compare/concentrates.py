"""Where a regression concentrates: explain on B's regressed part against A's."""

from __future__ import annotations

from typing import Any

from rootsift.analysis.compare.cohorts import and_filters, time_text
from rootsift.analysis.explain import explain
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame
from rootsift.analysis.timeouts import ident_text


def concentrates(
    fa: Frame, fb: Frame, a: str | None, b: str | None, where: str | None, m: dict[str, Any], alpha: float
) -> tuple[list[Finding], str]:
    """Where the first regressed metric's regression concentrates: explain (its statistics,
    its corrections) on B's regressed part against A's events of the same kind. Returns
    the first ten findings and what was compared."""
    if m["kind"] == "quantile":
        line = f"{ident_text(str(m['field']))} > {float(m['a'])!r}"
        what = f"B's events above A's {m['metric']} ({m['a']}) against A's events above it"
    else:
        line = str(m["filter"])
        what = f"B's events matching {m['filter']} against A's" + (
            "" if m.get("count_a") else " (all of A's: A has none)"
        )
    a_part = and_filters(a, time_text(fa), line if m["kind"] == "quantile" or m.get("count_a") else None)
    starts = [t for t in (fa.start, fb.start) if t is not None]
    ends = [t for t in (fa.end, fb.end) if t is not None]
    result = explain(
        fb.backend,
        fb.dataset,
        start=min(starts) if len(starts) == 2 else None,
        end=max(ends) if len(ends) == 2 else None,
        where=where,
        select=and_filters(b, line),
        select_from=fb.start,
        select_to=fb.end,
        baseline=a_part or "true",
        alpha=alpha,
        count_field=fb.count,
    )
    return result.findings[
        :10
    ], f"explain: {what} ({result.selection['events']:,} against {result.baseline['events']:,} events)"
