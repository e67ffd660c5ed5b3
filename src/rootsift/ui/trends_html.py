"""trends' self-contained HTML report: one file, no network, no script.

The worst series is an inline SVG chart (samples, the fitted line, the limit); each
component's share of the trend is a bar; the findings table lists every number with the
command that reproduces it. Hovering a point or a bar shows its numbers (SVG ``<title>``).
"""

from __future__ import annotations

import html
import shlex
from datetime import UTC, datetime
from typing import Any

from rootsift.ui.report_html import CSS
from rootsift.ui.trends import amount, chart_frame, numbers, what

WIDTH, HEIGHT, PAD = 1000, 320, 48


def _e(text: Any) -> str:
    return html.escape(str(text))


def render(result: dict[str, Any], command: list[str]) -> str:
    """The report of ``Trends.as_dict()`` as one HTML string; ``command`` reproduces it."""
    title = f"rootsift trends {result['dataset']}"
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<div class=sub>reproduce: <code>{_e(shlex.join(command))}</code></div>",
        f"<p class=sub>trend of {_e(result['measure'] or 'every numeric field')}"
        + (f" per {_e(result['by'])}" if result["by"] else "")
        + (f", {_e(result['bucket'])} means" if result["bucket"] else "")
        + "</p>",
    ]
    if result.get("chart"):
        chart = result["chart"]
        shown = "samples, trend" + (", limit" if chart.get("limit") is not None else "")
        parts.append(f"<h2>{_e(chart['field'])} on {_e(chart['series'])}: {shown}</h2>")
        parts.append(chart_svg(chart))
    components = [f for f in result["findings"] if f["kind"] == "component"]
    if components:
        parts.append("<h2>share of the trend by part</h2>")
        parts.append(share_svg(components))
    parts.append("<h2>findings</h2><table><tr><th>#</th><th>kind</th><th>what</th><th>numbers</th><th>p</th></tr>")
    for i, f in enumerate(result["findings"], 1):
        p = f.get("q_value", f.get("p_value"))
        parts.append(
            f"<tr><td class=n>{i}</td><td>{_e(f['kind'])}</td><td>{_e(what(f))}</td>"
            f"<td>{_e(numbers(f))}</td><td class=n>{_e(f'{p:.2g}' if isinstance(p, float) else '')}</td></tr>"
        )
    parts.append("</table>")
    for w in result["warnings"]:
        parts.append(f"<p class=warn>warning: {_e(w)}</p>")
    parts.append("</body></html>")
    return "".join(parts)


def chart_svg(chart: dict[str, Any]) -> str:
    """Samples as dots, the fitted line as a line, the limit as a dashed line."""
    frame = chart_frame(chart)
    if frame is None:
        return "<p class=sub>too few points to draw</p>"
    pts, limit, lo, hi, t0, t1, span = frame.pts, frame.limit, frame.lo, frame.hi, frame.t0, frame.t1, frame.span

    def x(h: float) -> float:
        return PAD + (h - t0) / span * (WIDTH - 2 * PAD)

    def y(v: float) -> float:
        return PAD / 2 + (hi - v) / (hi - lo) * (HEIGHT - PAD)

    field = chart["field"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" role="img">']
    out.append(f'<text x="4" y="{y(hi) + 4:.1f}" font-size="11">{_e(amount(hi, field))}</text>')
    out.append(f'<text x="4" y="{y(lo) + 4:.1f}" font-size="11">{_e(amount(lo, field))}</text>')
    for when, anchor in ((t0, "start"), (t1, "end")):
        stamp = datetime.fromtimestamp(when * 3600, tz=UTC).strftime("%Y-%m-%d %H:%M")
        out.append(f'<text x="{x(when):.1f}" y="{HEIGHT - 4}" font-size="11" text-anchor="{anchor}">{stamp}</text>')
    if limit is not None:
        out.append(
            f'<line x1="{PAD}" x2="{WIDTH - PAD}" y1="{y(limit):.1f}" y2="{y(limit):.1f}" stroke="#b3261e" '
            f'stroke-dasharray="6 4"><title>limit {_e(amount(limit, field))}</title></line>'
        )
    for h, v, _ in pts:
        stamp = datetime.fromtimestamp(h * 3600, tz=UTC).strftime("%Y-%m-%d %H:%M")
        out.append(
            f'<circle cx="{x(h):.1f}" cy="{y(v):.1f}" r="2.5" fill="#4a6fa5">'
            f"<title>{stamp}: {_e(amount(v, field))}</title></circle>"
        )
    (h0, _, f0), (h1, _, f1) = pts[0], pts[-1]
    out.append(
        f'<line x1="{x(h0):.1f}" y1="{y(f0):.1f}" x2="{x(h1):.1f}" y2="{y(f1):.1f}" stroke="#1d2433" '
        f'stroke-width="2"><title>trend</title></line>'
    )
    out.append("</svg>")
    return "".join(out)


def share_svg(components: list[dict[str, Any]]) -> str:
    """One horizontal bar per part: its share of the trend (negative to the left)."""
    row, label = 22, 260
    scale = max(1.0, max(abs(c["share"] or 0) for c in components))
    mid = label + (WIDTH - label - PAD) / 2
    half = (WIDTH - label - PAD) / 2
    height = row * len(components) + 8
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="100%" role="img">']
    out.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="0" y2="{height}" stroke="#5b6478"/>')
    for i, c in enumerate(components):
        share = c["share"] or 0.0
        w = abs(share) / scale * half
        left = mid if share >= 0 else mid - w
        colour = "#4a6fa5" if share >= 0 else "#a8b3c7"
        top = i * row + 4
        out.append(f'<text x="4" y="{top + 14}" font-size="12">{_e(c["field"])}</text>')
        out.append(
            f'<rect x="{left:.1f}" y="{top}" width="{w:.1f}" height="{row - 6}" fill="{colour}">'
            f"<title>{_e(c['field'])}: {share * 100:+.1f} % of the trend of {_e(c['of'])}</title></rect>"
        )
    out.append("</svg>")
    return "".join(out)
