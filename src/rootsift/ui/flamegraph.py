"""A differential flame graph: one self-contained HTML page, the graph an inline SVG.

Each frame is drawn as wide as its share of cohort B's samples (the callers at the
bottom, what they call stacked above), coloured by how its total share changed from A:
red grew, blue shrank, the deeper the larger the change (full colour at ``FULL_POINTS``);
frames only in A (vanished) take no width in B and are listed under the graph. Hovering a
frame shows its numbers (an SVG ``<title>``); clicking it zooms to it, clicking the
bottom bar zooms out. No script or style is fetched from anywhere.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from rootsift.ui.terminal import prob

if TYPE_CHECKING:
    from rootsift.analysis.profiles import ProfileDiff
    from rootsift.analysis.profiles.paths import Node

WIDTH = 1200.0
ROW = 18
MIN_WIDTH = 0.3
"""Frames narrower than this (pixels) are not drawn (their parent's width holds them)."""
FULL_POINTS = 5.0
"""A change of this many points of share (or more) is drawn in full colour."""

SCRIPT = """
const svg = document.getElementById('flame'), W = %(width)s;
function zoom(x0, w0, y0) {
  for (const g of svg.querySelectorAll('g.f')) {
    const x = +g.dataset.x, w = +g.dataset.w, y = +g.dataset.y;
    const inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9;
    const show = y0 === null || (y >= y0 ? inside : (x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9));
    g.style.display = show ? '' : 'none';
    if (!show) continue;
    const nx = y0 === null ? x : (Math.max(x, x0) - x0) / w0 * W;
    const nw = y0 === null ? w : (Math.min(x + w, x0 + w0) - Math.max(x, x0)) / w0 * W;
    g.querySelector('rect').setAttribute('x', nx); g.querySelector('rect').setAttribute('width', nw);
    const t = g.querySelector('text'); t.setAttribute('x', nx + 3);
    const chars = Math.floor((nw - 6) / 7); const name = g.dataset.n;
    t.textContent = chars < 3 ? '' : (name.length <= chars ? name : name.slice(0, chars - 2) + '..');
  }
}
svg.addEventListener('click', e => {
  const g = e.target.closest('g.f'); if (!g) return;
  if (+g.dataset.y === 0) { zoom(0, W, null); return; }
  zoom(+g.dataset.x, +g.dataset.w, +g.dataset.y);
});
"""


def render(result: ProfileDiff, title: str) -> str:
    """The page for ``result``: the flame graph, then a table of the top findings and the warnings."""
    tree = result.tree
    rows: list[str] = []
    depth = _draw(tree, 0.0, WIDTH, 0, tree, rows)
    height = (depth + 1) * ROW + 4
    # the root at the bottom: y grows downwards in SVG, so flip rows
    body = "\n".join(r.replace("{Y}", "") for r in rows)
    body = _flip(body, depth)
    vanished = _vanished(tree)
    return PAGE % {
        "title": html.escape(title),
        "summary": html.escape(_summary(result)),
        "width": int(WIDTH),
        "height": height,
        "svg": body,
        "script": SCRIPT % {"width": WIDTH},
        "table": _findings(result),
        "vanished": "".join(f"<li>{html.escape(v)}</li>" for v in vanished[:50]) or "<li>none</li>",
        "warnings": "".join(f"<p class=w>{html.escape(w)}</p>" for w in result.warnings),
    }


def _draw(node: Node, x: float, width: float, level: int, root: Node, rows: list[str]) -> int:
    """Append ``node`` and its callees (widths from B) to ``rows``; the deepest level drawn."""
    deepest = level
    a_share = node.a / root.a if root.a else 0.0
    b_share = node.b / root.b if root.b else 0.0
    change = 100 * (b_share - a_share)
    name = html.escape(node.name, quote=True)
    tip = (
        f"{node.name}\nB: {100 * b_share:.2f}% ({node.b:g})  A: {100 * a_share:.2f}% ({node.a:g})\n"
        f"change: {change:+.2f} points" + ("  (new in B)" if node.a == 0 else "")
    )
    chars = int((width - 6) // 7)
    label = node.name if len(node.name) <= chars else (node.name[: chars - 2] + ".." if chars >= 3 else "")
    rows.append(
        f'<g class=f data-x="{x:.3f}" data-w="{width:.3f}" data-y="{level}" data-n="{name}">'
        f"<title>{html.escape(tip)}</title>"
        f'<rect x="{x:.3f}" y="@{level}@" width="{width:.3f}" height="{ROW - 1}" fill="{_colour(change, node.a == 0)}" rx="2"/>'
        f'<text x="{x + 3:.3f}" y="@{level}@t">{html.escape(label)}</text></g>'
    )
    at = x
    for child in sorted(node.children.values(), key=lambda n: n.name):
        w = width * child.b / node.b if node.b else 0.0
        if w >= MIN_WIDTH:
            deepest = max(deepest, _draw(child, at, w, level + 1, root, rows))
        at += w
    return deepest


def _flip(body: str, depth: int) -> str:
    for level in range(depth, -1, -1):
        y = (depth - level) * ROW + 2
        body = body.replace(f'"@{level}@"', f'"{y}"').replace(f'"@{level}@t"', f'"{y + ROW - 5}"')
    return body


def _colour(change: float, new: bool) -> str:
    """Red for growth, blue for shrinkage, pale for no change; a new frame is full red."""
    level = 1.0 if new else min(1.0, abs(change) / FULL_POINTS)
    pale = (235, 232, 225)
    full = (215, 48, 39) if change > 0 or new else (49, 110, 200)
    r, g, b = (round(p + (f - p) * level) for p, f in zip(pale, full, strict=True))
    return f"rgb({r},{g},{b})"


def _vanished(root: Node) -> list[str]:
    """Call paths with samples in A and none in B (they have no width to be drawn with)."""
    out: list[str] = []
    stack = [(root, "")]
    while stack:
        node, path = stack.pop()
        for child in node.children.values():
            p = f"{path};{child.name}" if path else child.name
            if child.b == 0 and child.a > 0:
                out.append(f"{p} ({100 * child.a / root.a:.2f}% of A)" if root.a else p)
            else:
                stack.append((child, p))
    return sorted(out)


def _summary(result: ProfileDiff) -> str:
    a, b = result.cohorts["a"], result.cohorts["b"]
    return (
        f"{result.value}: A {a['value']:,.0f} in {a['profiles']} profiles, B {b['value']:,.0f} in {b['profiles']} profiles; "
        f"{len(result.findings)} functions changed significantly ({result.method} test, FDR {result.alpha})"
    )


def _findings(result: ProfileDiff) -> str:
    head = "<tr><th>function</th><th>self A</th><th>self B</th><th>Δ self</th><th>total A</th><th>total B</th><th>Δ total</th><th>excess</th><th>q</th></tr>"
    rows = [
        f"<tr><td>{html.escape(f.function)}</td><td>{100 * f.a_self:.2f}%</td><td>{100 * f.b_self:.2f}%</td>"
        f"<td>{f.change_self:+.2f}</td><td>{100 * f.a_total:.2f}%</td><td>{100 * f.b_total:.2f}%</td>"
        f"<td>{f.change_total:+.2f}</td><td>{f.excess:+.2f}</td><td>{html.escape(prob(f.as_dict()['q_value']))}</td></tr>"
        for f in result.findings[:20]
    ]
    return f"<table>{head}{''.join(rows)}</table>" if rows else "<p>No function's share changed significantly.</p>"


PAGE = """<!doctype html>
<html lang=en><head><meta charset=utf-8><title>%(title)s</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:16px;margin:0 0 4px} .s{color:#555;margin:0 0 10px}
svg text{font:11px monospace;pointer-events:none;fill:#111}
g.f{cursor:pointer} g.f:hover rect{stroke:#000;stroke-width:.6}
table{border-collapse:collapse;margin-top:12px} td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #eee}
td:first-child,th:first-child{text-align:left;font-family:monospace} .w{color:#a60}
.k span{display:inline-block;width:12px;height:10px;margin:0 4px 0 10px}
</style></head><body>
<h1>%(title)s</h1>
<p class=s>%(summary)s</p>
<p class=k>width: share of B's samples<span style="background:rgb(215,48,39)"></span>grew
<span style="background:rgb(49,110,200)"></span>shrank <span style="background:rgb(235,232,225)"></span>same
&nbsp; hover a frame for its numbers, click to zoom, click the bottom bar to zoom out</p>
<svg id=flame xmlns="http://www.w3.org/2000/svg" width="%(width)s" height="%(height)s" viewBox="0 0 %(width)s %(height)s">
%(svg)s
</svg>
%(warnings)s
<h2 style="font-size:14px">Top changes</h2>
%(table)s
<h2 style="font-size:14px">Call paths only in A (vanished)</h2><ul>%(vanished)s</ul>
<script>%(script)s</script>
</body></html>
"""
