"""changes' self-contained HTML report: one file, no network, no script.

Each series shown is an inline SVG line chart: change points as red lines (solid for a
level shift, dashed for spread), change events as grey lines, hovering any of them shows
what it is (SVG ``<title>``). Then the findings as a table, and the command line that
reproduces them.
"""

from __future__ import annotations

import html
import math
import shlex
from datetime import datetime
from typing import Any

from rootsift.analysis.changes import Changes
from rootsift.timeutil import format_duration, iso_z
from rootsift.ui.report_html import CSS
from rootsift.ui.terminal import prob

WIDTH, HEIGHT, PAD = 1000, 220, 40


def render(result: Changes, command: list[str]) -> str:
    """The report as one HTML string; ``command`` is the changes command line it reproduces."""
    title = f"{result.measure} of {result.dataset}"
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>rootsift changes: {_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<div class='sub'>per {_e(format_duration(result.granularity))}"
        + (f", by {_e(result.by)}" if result.by else "")
        + (f"; change events from {_e(result.changes_dataset)}" if result.changes_dataset else "")
        + "</div>",
        f"<pre>{_e(shlex.join(command))}</pre>",
    ]
    for view in result.series:
        name = f"{result.by} = {view.group}" if result.by else result.measure
        parts += [f"<h2>{_e(name)}</h2>", chart(result, view.group, view.times, view.values)]
    findings = result.findings()
    parts.append("<h2>Findings</h2>")
    if not findings:
        parts.append("<p>No significant change point.</p>")
    else:
        parts.append("<table><tr><th>kind</th><th>time</th><th>what</th><th>numbers</th><th>score</th></tr>")
        parts += [_row(f) for f in findings]
        parts.append("</table>")
    parts += [f"<p class='warn'>{_e(w)}</p>" for w in result.warnings]
    parts.append("</body></html>")
    return "\n".join(parts)


def chart(result: Changes, group: object, times: list[datetime], values: list[float]) -> str:
    """One series as an SVG polyline with its change points and the change events marked."""
    if not times:
        return "<p>no values</p>"
    t0, t1 = times[0], times[-1]
    span = (t1 - t0).total_seconds() or 1.0
    lo, hi = min(values), max(values)
    hi = hi if hi > lo else lo + 1.0

    def x(t: datetime) -> float:
        return PAD + (t - t0).total_seconds() / span * (WIDTH - 2 * PAD)

    def y(v: float) -> float:
        return HEIGHT - PAD / 2 - (v - lo) / (hi - lo) * (HEIGHT - PAD)

    points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in zip(times, values, strict=True) if math.isfinite(v))
    out = [f"<svg width='{WIDTH}' height='{HEIGHT}' viewBox='0 0 {WIDTH} {HEIGHT}' role='img'>"]
    for t in result.events:
        if t0 <= t <= t1:
            out.append(
                f"<line x1='{x(t):.1f}' x2='{x(t):.1f}' y1='0' y2='{HEIGHT}' stroke='#9aa3b5'>"
                f"<title>change event {_e(iso_z(t))}</title></line>"
            )
    for s in result.shifts:
        if s.group == group:
            dash = " stroke-dasharray='4 3'" if s.aspect == "spread" else ""
            what = (
                f"{s.aspect} change {iso_z(s.time)}: {s.point.before:.4g} -> {s.point.after:.4g}, q={prob(s.q_value)}"
            )
            out.append(
                f"<line x1='{x(s.time):.1f}' x2='{x(s.time):.1f}' y1='0' y2='{HEIGHT}' stroke='#d23c3c' "
                f"stroke-width='2'{dash}><title>{_e(what)}</title></line>"
            )
    out.append(f"<polyline fill='none' stroke='#2f5fb3' stroke-width='1.5' points='{points}'/>")
    out.append(f"<text x='4' y='14' font-size='11'>{hi:.4g}</text>")
    out.append(f"<text x='4' y='{HEIGHT - 4}' font-size='11'>{lo:.4g}</text>")
    out.append(f"<text x='{PAD}' y='{HEIGHT - 4}' font-size='11'>{_e(iso_z(t0))}</text>")
    out.append(f"<text x='{WIDTH - PAD}' y='{HEIGHT - 4}' font-size='11' text-anchor='end'>{_e(iso_z(t1))}</text>")
    out.append("</svg>")
    return "".join(out)


def _row(f: dict[str, Any]) -> str:
    if f["kind"] == "suspect":
        what = f["event"]
        nums = f"{f['lead']} before the change at {f['changepoint']}; step z={f['step_z']}, {f['compared']}"
    elif f["kind"] == "related":
        what = f["series"]
        nums = f"{f['before']:.4g} → {f['after']:.4g}; leads by {f['lead']}; q={prob(f['q_value'])}"
    else:
        what = f["series"] + (f" ({f['aspect']})" if f.get("aspect") == "spread" else "")
        nums = f"{f['before']:.4g} → {f['after']:.4g}; effect {f['effect']:.2f}; q={prob(f['q_value'])}"
    cells = [f["kind"], f["time"], what, nums, f["score"]]
    return "<tr>" + "".join(f"<td>{_e(c)}</td>" for c in cells) + "</tr>"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)
