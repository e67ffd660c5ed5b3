"""Drawing an analysis's findings in a terminal: the two groups, a ranked table, warnings."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.table import Table

from rootsift.analysis.compare import Comparison
from rootsift.analysis.explain import Explanation
from rootsift.analysis.findings import Finding, iso, show
from rootsift.analysis.investigate import Investigation
from rootsift.query.engine import Heatmap
from rootsift.ui.terminal import fmt, heatmap, prob, warnings


def explanation(console: Console, result: Explanation, limit: int = 20) -> None:
    """The selection and baseline, then the findings (most explanatory first) and warnings."""
    console.print(_group("selection", result.selection))
    console.print(_group("baseline", result.baseline))
    sampling = result.method.get("sampling")
    if sampling:
        console.print(f"[dim]sampled: {sampling['statement']}[/dim]")
    if not result.findings:
        console.print("[dim]no significant difference between the selection and the baseline[/dim]")
    else:
        rows = [(what(f), *sides(f), prob(f.q_value)) for f in result.findings[:limit]]
        _table(console, result.findings[:limit], rows)
        if len(result.findings) > limit:
            console.print(f"[dim]{len(result.findings) - limit} more findings: --limit or --json[/dim]")
    warnings(console, result.warnings)


def _table(
    console: Console, shown: list[Finding], rows: list[tuple[str, str, str, str]], ranks: list[int] | None = None
) -> None:
    """Ranked findings: #, kind, what, selection, baseline, score, q (rows give what…q;
    ``ranks`` the numbers shown, 1, 2, 3… by default)."""
    t = Table(show_edge=False, header_style="bold")
    for col, justify in (("#", "right"), ("kind", "left"), ("what", "left"), ("selection", "right")):
        t.add_column(col, justify=justify)  # type: ignore[arg-type]
    for col in ("baseline", "score", "q"):
        t.add_column(col, justify="right")
    for i, f, (what, sel, base, q) in zip(ranks or range(1, len(shown) + 1), shown, rows, strict=True):
        t.add_row(str(i), f.kind, what, sel, base, f"{f.score:.3f}", q)
    console.print(t)


def _group(name: str, g: dict[str, Any]) -> str:
    parts = [f"[bold]{name}[/bold]: {g['events']:,} events"]
    if "effective_events" in g:
        parts.append(f"({g['weighted_events']:,.0f} weighted, {g['effective_events']:,.0f} effective)")
    if g.get("where"):
        parts.append(f"where {g['where']}")
    elif name == "baseline":
        parts.append("(the rest of the range)")
    if g.get("from") or g.get("to"):
        parts.append(f"from {g.get('from') or 'the start'} to {g.get('to') or 'the end'}")
    if g.get("time"):
        parts.append(f"(by {g['time']})")
    return " ".join(parts)


def sides(f: Finding, quantiles: tuple[str, ...] | None = ("p50", "p99")) -> tuple[str, str]:
    """(selection, baseline) as table cells: shares for values, counts for a stall's events,
    ``quantiles`` (all when None) for measures."""
    if f.kind == "stall":
        return f"{f.selection_count:,.0f} in stall", f"{f.baseline_count:,.0f} elsewhere"
    if f.kind == "decomposition":
        return f"mean {num(f.detail['region_mean'])}", f"mean {num(f.detail['outside_mean'])}"
    if f.kind == "saturation":
        return f"mean {num(f.detail['in_flight_mean'])}", f"mean {num(f.detail['in_flight_mean_outside'])}"
    if f.kind == "suspect":
        return ("at the onset" if f.detail["coincides_with_onset"] else f"step z {num(f.detail['step_z'])}"), ""
    if f.kind != "measure":
        return _pct(f.selection_fraction), _pct(f.baseline_fraction)
    q = {k: v for k, v in f.detail.get("quantiles", {}).items() if quantiles is None or k in quantiles}
    return (
        " ".join(f"{k} {num(v['selection'])}" for k, v in q.items()),
        " ".join(f"{k} {num(v['baseline'])}" for k, v in q.items()),
    )


def num(x: float | None) -> str:
    """A measured value: thousands separated from 100 up, three significant digits below."""
    if x is None:
        return "∅"
    return f"{x:,.0f}" if abs(x) >= 100 else fmt(float(f"{x:.3g}"))


def _pct(x: float | None) -> str:
    return "∅" if x is None else f"{100 * x:.1f} %"


def investigation(console: Console, result: Investigation, limit: int = 20, grid: Heatmap | None = None) -> None:
    """The anomalous region (on the heatmap when given), then the findings and warnings."""
    a = result.anomaly
    if a is None:
        console.print("[bold]no anomalous region found[/bold]")
    else:
        side = "below" if a.detail.get("direction") == "down" else "above"
        bad = {"latency": f"{a.measure} {side} {num(a.threshold)}", "errors": f"{a.measure} >= 500"}.get(a.kind, "")
        console.print(
            f"[bold]{a.kind}[/bold] from {iso(a.start)} to {iso(a.end)}"
            + (f": more events with {bad}" if bad else ": events stopped, then completed in a burst")
            + f" (scan LLR {a.score:.1f}, {p_at_most(a.p_value)})"
        )
        if grid is not None:
            heatmap(console, grid, mark=(a.start, a.end))
    for other in result.regions[1:]:
        console.print(
            f"[dim]also {other.kind} from {iso(other.start)} to {iso(other.end)} ({p_at_most(other.p_value)})[/dim]"
        )
    if "resolution" in result.method:
        shortest = result.method.get("stall_min_seconds")
        console.print(
            f"[dim]time resolution {result.method['resolution']}"
            + (f": no stall shorter than {num(shortest)} s is reported" if shortest else "")
            + "[/dim]"
        )
    if result.selection:
        console.print(_group("selection", result.selection))
        console.print(_group("baseline", result.baseline))
    if result.findings:
        # the first ``limit``, and every finding about saturation or timeouts (few, and not
        # ranked against the explanation's)
        ranks = [i for i, f in enumerate(result.findings, 1) if i <= limit or f.kind in ALWAYS_SHOWN]
        shown = [result.findings[i - 1] for i in ranks]
        rows = [(what(f), *sides(f), q_cell(f)) for f in shown]
        _table(console, shown, rows, ranks)
    warnings(console, result.warnings)


ALWAYS_SHOWN = ("decomposition", "saturation", "timeout", "suspect")


def q_cell(f: Finding) -> str:
    """The q-value as shown; blank for descriptive findings (a stall's events, a suspect)."""
    return "" if f.kind in ("stall", "suspect") else prob(f.q_value)


def p_at_most(p: float) -> str:
    """A scan's p-value is a bound: ``p ≤ 0.003``, or ``p < 1e-300`` once it underflowed."""
    return f"p {prob(p)}" if p <= 0 else f"p ≤ {prob(p)}"


def part_tree(parts: list[dict[str, Any]], parent: str | None = None) -> str:
    """A decomposition's parts in words, each nested part inside its parent's ``(of which
    …)`` with its share of the parent's rise: shares add up among siblings only."""
    words = []
    for p in parts:
        if p.get("parent") != parent:
            continue
        share = p.get("share_of_parent", p["share_of_rise"]) or 0
        inner = part_tree(parts, p["field"])
        wait = " (wait)" if p["role"] == "wait" else ""
        words.append(f"{p['field']}{wait} {100 * share:.0f} %" + (f" (of which {inner})" if inner else ""))
    return ", ".join(words)


def what(f: Finding) -> str:
    """What a finding points at, in words (the field and value, the stall's event, the timeout)."""
    if f.kind == "stall":
        return f"{f.field} = {show(f.value)} (+{f.detail['seconds_after_stall_end']:.3f} s)"
    if f.kind == "decomposition":
        return f"{f.detail['measure']} +{num(f.detail['rise'])}: {part_tree(f.detail['parts'])}"
    if f.kind == "saturation":
        who = f"{f.field} = {show(f.value)}" if f.field else "all events"
        d = f.detail
        if d.get("in_flight_ceiling") is None:
            return f"{who}: in flight rose ({d['duration']})"
        return f"{who}: {num(d['in_flight_ceiling'])} in flight ({d['duration']}) held up to {num(d['longest_at_ceiling_seconds'])} s"
    if f.kind == "suspect":
        d = f.detail
        when = "after the onset: not a cause" if d["relation"] == "after" else f"{d['lead']} before the shift"
        return f"{d['event']} ({d['change_kind'] or 'change'}, {when})"
    if f.kind == "timeout":
        who = " and ".join(f"{c['field']} = {show(c['value'])}" for c in f.conditions or [])
        past = f"{f.detail['events_past']:,} past {f.detail['field']} ≈ {num(f.detail['ceiling'])}"
        return past + (f": {who}" if who else "")
    within, restates = f.detail.get("within"), f.detail.get("restates")
    if restates:  # a part of the selected measure, or derived from it (analysis/parts.py)
        return f.describe() + f" ({'part of' if restates['how'] == 'part' else 'derived from'} {restates['measure']})"
    if f.detail.get("implied_by"):  # adds nothing given a higher-ranked value (analysis/redundancy.py)
        return f.describe() + f" (implied by {f.detail['implied_by']})"
    return f.describe() + (f" (within {within['field']} = {show(within['value'])})" if within else "")


VERDICT_STYLE = {"regression": "bold red", "improvement": "bold green", "no change": "", "not enough data": "yellow"}


def comparison(console: Console, result: Comparison) -> None:
    """The cohorts, a row per metric (A, B, change with its interval, p, which way is
    better and why, verdict), the metrics' notes, the quantile curves, where a regression
    concentrates, and the overall verdict."""
    for name, g in (("A", result.a), ("B", result.b)):
        console.print(_group(name, g))
    t = Table(show_edge=False, header_style="bold")
    for col in ("metric", "unit", "A", "B", "change", "interval", "p", "better", "verdict"):
        t.add_column(col, justify="left" if col in ("metric", "unit", "better", "verdict") else "right")
    for m in result.metrics:
        t.add_row(
            m["metric"],
            str(m.get("unit", "")),
            num(m.get("a")),
            num(m.get("b")),
            "+∞" if "infinite" in m.get("note", "") else _change(m.get("relative_change")),
            _interval(m),
            prob(m["p_value"]),
            f"{m['better']} ({m['better_source']})",
            f"[{VERDICT_STYLE.get(m['verdict'], '')}]{m['verdict']}[/]"
            if VERDICT_STYLE.get(m["verdict"])
            else m["verdict"],
        )
    console.print(t)
    for m in result.metrics:
        if m.get("note"):
            console.print(f"[dim]{m['metric']}: {m['note']}[/dim]")
    for m in result.metrics:
        if m.get("curve"):
            cells = "  ".join(
                f"p{100 * c['q']:g} {_change(c['relative_change'])} [{_change(c['ci'][0])}, {_change(c['ci'][1])}]"
                for c in m["curve"]
            )
            console.print(f"[dim]{m['field']} by quantile, B vs A: {cells}[/dim]")
            break
    if result.evidence:
        console.print(f"[bold]where the regression of {result.explains} concentrates[/bold] (B against A)")
        _table(console, result.evidence, [(what(f), *sides(f), prob(f.q_value)) for f in result.evidence])
        console.print(f"[dim]{result.method['findings']}[/dim]")
    style = VERDICT_STYLE.get(result.verdict, "")
    line = f"verdict: [{style}]{result.verdict}[/]" if style else f"verdict: {result.verdict}"
    if result.score is not None:
        line += f"  [dim](score {result.score:g}: the metrics' weight without a regression)[/dim]"
    console.print(line)
    warnings(console, result.warnings)


def _interval(m: dict[str, Any]) -> str:
    """A metric's interval: relative, or in percentage points for a rate judged on its
    difference (none in A)."""
    if "absolute_tolerance" in m and m.get("absolute_ci"):
        lo, hi = m["absolute_ci"]
        return f"{100 * lo:+.2g} … {100 * hi:+.2g} pp"
    return f"{_change(m['ci'][0])} … {_change(m['ci'][1])}"


def _change(x: float | None) -> str:
    if x is None:
        return "∅"
    if math.isinf(x):
        return "+∞" if x > 0 else "−∞"
    return f"{100 * x:+.1f} %"
