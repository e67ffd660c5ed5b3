"""investigate's self-contained HTML report: one file, no network, no script.

The measure's heatmap is inline SVG with the anomalous region shaded. Each top finding
gets a small chart: shares side by side, or quantiles side by side. Beside each number
is the exact command that reproduces it. Hovering a cell or a bar shows its numbers
(SVG ``<title>``).
"""

from __future__ import annotations

import html
import json
import math
import shlex
from typing import Any

from rootsift.analysis.findings import Finding, iso
from rootsift.analysis.investigate import Investigation
from rootsift.analysis.timeouts import ident_text
from rootsift.query.engine import Heatmap
from rootsift.ui.findings import num, p_at_most, q_cell, sides, what
from rootsift.ui.terminal import PALETTE

TOP = 8
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1d2433;background:#fbfbfd}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.sub{color:#5b6478} table{border-collapse:collapse;width:100%;margin:8px 0}
td,th{padding:4px 8px;border-bottom:1px solid #e3e6ee;text-align:left;vertical-align:top}
th{font-weight:600;background:#f1f3f8} td.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px ui-monospace,monospace;background:#f1f3f8;border-radius:4px}
pre{padding:8px;white-space:pre-wrap;word-break:break-all} .warn{color:#9a5b00}
.finding{border:1px solid #e3e6ee;border-radius:6px;padding:10px 14px;margin:10px 0;background:#fff}
"""


def render(result: Investigation, grid: Heatmap | None, command: list[str]) -> str:
    """The report as one HTML string; ``command`` is the investigate command line it reproduces."""
    a = result.anomaly
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f"<title>rootsift investigate {_e(result.dataset)}</title><style>{CSS}</style></head><body>",
        f"<h1>rootsift investigate {_e(result.dataset)}</h1>",
        f"<div class=sub>reproduce: <code>{_e(shlex.join(command))}</code></div>",
    ]
    if a is None:
        parts.append("<p><b>No anomalous region found.</b></p>")
    else:
        parts.append(
            f"<h2>{_e(a.kind)} from {_e(iso(a.start))} to {_e(iso(a.end))}</h2>"
            f"<p class=sub>scan log-likelihood ratio {a.score:.1f}, {_e(p_at_most(a.p_value))}"
            + (f"; bad = {_e(a.measure)} above {num(a.threshold)}" if a.kind == "latency" else "")
            + (f"; the median moved at {_e(a.detail['median_shift_at'])}" if "median_shift_at" in a.detail else "")
            + "</p>"
        )
    if grid is not None:
        parts.append(f"<h2>heatmap of {_e(grid.field)}</h2>")
        parts.append(heatmap_svg(grid, (a.start, a.end) if a is not None else None))
    if result.selection:
        parts.append(
            f"<p class=sub>onset explained: {result.selection['events']:,} selected events "
            f"({_e(_describe(result.selection))}) against {result.baseline['events']:,} "
            f"({_e(_describe(result.baseline))})</p>"
        )
    parts.append("<h2>findings</h2>")
    parts.append(_table(result.findings))
    for f in result.findings[:TOP]:
        parts.append(_finding(f, result, command))
    for w in result.warnings:
        parts.append(f"<p class=warn>warning: {_e(w)}</p>")
    parts.append("</body></html>")
    return "".join(parts)


def heatmap_svg(grid: Heatmap, mark: tuple[Any, Any] | None, width: int = 1000, height: int = 320) -> str:
    """Time across, log-scaled value buckets up, colour = events; ``mark`` shades a time range."""
    cols, rows = len(grid.times), len(grid.bucket_edges)
    if cols == 0 or rows == 0:
        return "<p class=sub>no values to draw</p>"
    left, bottom = 70, 24
    cw, ch = (width - left) / cols, (height - bottom) / rows
    peak = max((c for r in grid.counts for c in r), default=0.0)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="heatmap">'
    ]
    if mark is not None and cols > 1:
        step = grid.times[1] - grid.times[0]
        inside = [i for i, t in enumerate(grid.times) if t + step > mark[0] and t < mark[1]]
        if inside:
            x0, x1 = left + inside[0] * cw, left + (inside[-1] + 1) * cw
            out.append(
                f'<rect class="region" x="{x0:.1f}" y="0" width="{x1 - x0:.1f}" height="{height - bottom}" fill="#d7263d" fill-opacity="0.12" stroke="#d7263d"/>'
            )
    for r in range(rows):
        y = (rows - 1 - r) * ch
        for c, count in enumerate(grid.counts[r]):
            if count <= 0:
                continue
            level = int(math.log1p(count) / math.log1p(peak) * (len(PALETTE) - 1)) if peak > 0 else 0
            tip = f"{iso(grid.times[c])}: {count:g} events ≥ {num(grid.bucket_edges[r])}"
            out.append(
                f'<rect class="cell" x="{left + c * cw:.1f}" y="{y:.1f}" width="{cw + 0.3:.1f}" height="{ch + 0.3:.1f}" '
                f'fill="{PALETTE[level]}"><title>{_e(tip)}</title></rect>'
            )
    for r in range(0, rows, max(1, rows // 6)):
        y = (rows - 1 - r) * ch + ch / 2 + 4
        out.append(
            f'<text x="{left - 6}" y="{y:.1f}" font-size="11" text-anchor="end">{_e(num(grid.bucket_edges[r]))}</text>'
        )
    out.append(f'<text x="{left}" y="{height - 6}" font-size="11">{_e(iso(grid.times[0]))}</text>')
    out.append(f'<text x="{width}" y="{height - 6}" font-size="11" text-anchor="end">{_e(iso(grid.times[-1]))}</text>')
    out.append("</svg>")
    return "".join(out)


def _table(findings: list[Finding]) -> str:
    rows = [
        "<table><tr><th>#</th><th>kind</th><th>what</th><th>selection</th><th>baseline</th><th>score</th><th>q</th></tr>"
    ]
    for i, f in enumerate(findings, 1):
        sel, base = sides(f, quantiles=None)
        q = q_cell(f)
        rows.append(
            f"<tr><td class=n>{i}</td><td>{_e(f.kind)}</td><td>{_e(what(f))}</td><td class=n>{_e(sel)}</td>"
            f"<td class=n>{_e(base)}</td><td class=n>{f.score:.3f}</td><td class=n>{q}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _finding(f: Finding, result: Investigation, command: list[str]) -> str:
    chart = {"measure": _quantile_bars, "decomposition": _part_bars, "saturation": _in_flight_bars}.get(
        f.kind, _share_bars
    )(f)
    return (
        f"<div class=finding><b>{_e(f.kind)}: {_e(what(f))}</b>{chart}"
        f"<div class=sub>reproduce: <code>{_e(shlex.join(_reproduce(f, result, command)))}</code></div></div>"
    )


def _share_bars(f: Finding) -> str:
    if f.selection_fraction is None or f.baseline_fraction is None:
        return ""
    bars = []
    for i, (label, share, colour) in enumerate(
        (("selection", f.selection_fraction, "#d7263d"), ("baseline", f.baseline_fraction, "#2b66a8"))
    ):
        w = 400 * share
        bars.append(
            f'<text x="0" y="{18 + i * 22}" font-size="12">{label}</text>'
            f'<rect class="bar" x="80" y="{6 + i * 22}" width="{w:.1f}" height="16" fill="{colour}">'
            f"<title>{label}: {100 * share:.1f} %</title></rect>"
            f'<text x="{86 + w:.1f}" y="{18 + i * 22}" font-size="12">{100 * share:.1f} %</text>'
        )
    return f'<div><svg xmlns="http://www.w3.org/2000/svg" width="560" height="52">{"".join(bars)}</svg></div>'


def _in_flight_bars(f: Finding) -> str:
    """A saturation finding's mean in-flight count in the region and outside it, on the scale
    of its largest count in the region (its ceiling, when it held at one)."""
    d = f.detail
    top = max(float(d["in_flight_max"]), float(d["in_flight_mean"]), 1e-9)
    bars = []
    for i, (label, v, colour) in enumerate(
        (("region", d["in_flight_mean"], "#d7263d"), ("outside", d["in_flight_mean_outside"], "#2b66a8"))
    ):
        w = 400 * float(v) / top
        bars.append(
            f'<text x="0" y="{18 + i * 22}" font-size="12">{label}</text>'
            f'<rect class="bar" x="80" y="{6 + i * 22}" width="{w:.1f}" height="16" fill="{colour}">'
            f"<title>{label}: {num(v)} in flight on average</title></rect>"
            f'<text x="{86 + w:.1f}" y="{18 + i * 22}" font-size="12">{num(v)}</text>'
        )
    return f'<div><svg xmlns="http://www.w3.org/2000/svg" width="560" height="52">{"".join(bars)}</svg></div>'


def _part_bars(f: Finding) -> str:
    """Each part's share of the measure's rise, a nested part indented under the part it
    lies in and labelled with its share of that part's rise (shares add up among siblings)."""
    out = []
    for i, p in enumerate(f.detail["parts"]):
        share = max(0.0, min(1.0, float(p["share_of_rise"] or 0)))
        w, y, depth = 400 * share, 6 + i * 22, int(p.get("depth", 0))
        colour = "#d7263d" if p["role"] == "wait" else "#2b66a8"
        label = f"{100 * share:.0f} % ({_e(p['role'])})"
        if p.get("parent"):
            label = f"{100 * float(p['share_of_parent'] or 0):.0f} % of {_e(p['parent'])} ({_e(p['role'])})"
        out.append(
            f'<text x="{14 * depth}" y="{y + 12}" font-size="12">{"└ " if depth else ""}{_e(p["field"])}</text>'
            f'<rect class="bar" x="220" y="{y}" width="{w:.1f}" height="16" fill="{colour}">'
            f"<title>{_e(p['field'])} ({_e(p['role'])}): +{num(p['rise'])}</title></rect>"
            f'<text x="{226 + w:.1f}" y="{y + 12}" font-size="12">{label}</text>'
        )
    height = 12 + 22 * len(f.detail["parts"])
    return f'<div><svg xmlns="http://www.w3.org/2000/svg" width="720" height="{height}">{"".join(out)}</svg></div>'


def _quantile_bars(f: Finding) -> str:
    q = f.detail.get("quantiles", {})
    values = [v for k in q for v in (q[k]["selection"], q[k]["baseline"]) if v is not None and v > 0]
    if not values:
        return ""
    top = math.log10(max(values)) + 0.3
    bottom = min(0.0, math.log10(min(values)) - 0.3)
    out = []
    for i, (name, pair) in enumerate(q.items()):
        for j, (label, colour) in enumerate((("selection", "#d7263d"), ("baseline", "#2b66a8"))):
            v = pair[label]
            if v is None or v <= 0:
                continue
            w = 400 * (math.log10(v) - bottom) / (top - bottom)
            y = 6 + (2 * i + j) * 18
            out.append(
                f'<text x="0" y="{y + 12}" font-size="12">{name} {label}</text>'
                f'<rect class="bar" x="120" y="{y}" width="{w:.1f}" height="14" fill="{colour}"><title>{name} {label}: {num(v)}</title></rect>'
                f'<text x="{126 + w:.1f}" y="{y + 12}" font-size="12">{num(v)}</text>'
            )
    height = 12 + 2 * len(q) * 18
    return f'<div><svg xmlns="http://www.w3.org/2000/svg" width="640" height="{height}">{"".join(out)}</svg></div>'


def _reproduce(f: Finding, result: Investigation, command: list[str]) -> list[str]:
    """The explain (or query) command that gives this finding's numbers."""
    base = ["rootsift", "explain", result.dataset]
    data = [x for i, x in enumerate(command) if i > 0 and command[i - 1] == "--data"]
    tail = ["--data", data[0]] if data else []
    if f.kind == "stall" and result.anomaly is not None:
        return [
            "rootsift",
            "query",
            result.dataset,
            "--from",
            str(iso(result.anomaly.start)),
            "--to",
            str(iso(result.anomaly.end)),
            "--breakdown",
            str(f.field),
            "--calc",
            "count",
            *tail,
        ]
    if f.kind in ("decomposition", "saturation") and result.anomaly is not None:
        a = result.anomaly
        fields = [f.detail["measure"], *(p["field"] for p in f.detail["parts"])] if f.kind == "decomposition" else []
        calcs = [x for name in fields for x in ("-c", f"avg({name})")] or ["-c", "count", "-g", "1m"]
        same = f"{ident_text(str(f.field))} = {json.dumps(f.value)}"
        where = ["--where", same] if f.kind == "saturation" and f.field else []
        region = ["--from", str(iso(a.start)), "--to", str(iso(a.end))]
        return ["rootsift", "query", result.dataset, *region, *where, *calcs, *tail]
    if f.kind == "timeout":
        limit = f"`{f.detail['field']}` > {f.detail['ceiling'] * 1.05!r}"
        within = f"`{f.detail['field']}` <= {f.detail['ceiling'] * 1.05!r}"
        return [*base, "--select", limit, "--baseline", within, *tail]
    sel, bl = result.selection, result.baseline
    out = [*base]
    if sel.get("where"):
        out += ["--select", sel["where"]]
    if sel.get("from"):
        out += ["--select-from", sel["from"]]
    if sel.get("to"):
        out += ["--select-to", sel["to"]]
    if str(sel.get("time", "")).startswith("start: timestamp - "):
        out += ["--select-by-start", sel["time"].removeprefix("start: timestamp - ")]
    if bl.get("where"):
        out += ["--baseline", bl["where"]]
    return out + tail


def _describe(group: dict[str, Any]) -> str:
    bits = [f"where {group['where']}"] if group.get("where") else ["the rest of the range"]
    if group.get("from") or group.get("to"):
        bits.append(f"from {group.get('from') or 'the start'} to {group.get('to') or 'the end'}")
    return " ".join(bits)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)
