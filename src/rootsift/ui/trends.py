"""Drawing a trends result in a terminal: the findings table, then a text chart of the
worst series with its fitted line and the limit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rootsift.ui.terminal import fmt, prob, warnings

CHART_ROWS = 12
CHART_COLS = 72


def trends(console: Console, result: dict[str, Any], limit: int = 20) -> None:
    """``result`` is ``Trends.as_dict()``: findings most explanatory first, the chart, warnings."""
    head = f"[bold]{escape(result['dataset'])}[/bold]: trend of {escape(result['measure'] or 'every numeric field')}"
    if result["by"]:
        head += f" per {escape(result['by'])}"
    if result["bucket"]:
        head += f", {result['bucket']} means"
    console.print(head)
    shown = result["findings"][:limit]
    if shown:
        t = Table(show_edge=False, header_style="bold")
        for col in ("#", "kind", "what", "numbers", "score", "p"):
            t.add_column(col, justify="right" if col in ("#", "score", "p") else "left")
        for i, f in enumerate(shown, 1):
            t.add_row(str(i), f["kind"], escape(what(f)), escape(numbers(f)), fmt(f.get("score")), _p(f))
        console.print(t)
        if len(result["findings"]) > limit:
            console.print(f"[dim]{len(result['findings']) - limit} more findings: --show or --json[/dim]")
    if result.get("chart"):
        for line in chart_lines(result["chart"]):
            console.print(escape(line), highlight=False)
    warnings(console, result["warnings"])


def what(f: dict[str, Any]) -> str:
    kind = f["kind"]
    if kind == "trend":
        series = f" on {f['series']}" if f.get("series") is not None else ""
        extra = f" ({f['groups_trending']}/{f['groups']} groups)" if "groups_trending" in f else ""
        return f"{f['field']} {f['direction']}{series}{extra}"
    if kind == "component":
        return f"{f['field']} ({f['relation']} {f['of']})"
    if kind == "cohort":
        return f"{f['field']} = {f['value']} (trending {f['of']})"
    series = f" on {f['series']}" if f.get("series") is not None else ""
    return f"{f['field']} reaches {amount(f['limit'], f['field'])}{series}"


def numbers(f: dict[str, Any]) -> str:
    kind = f["kind"]
    if kind == "trend":
        rel = f.get("relative_per_day")
        per_day = amount(f["slope_per_day"], f["field"])
        return f"{per_day}/day" + (f" ({rel * 100:+.2f} %/day)" if rel is not None else "")
    if kind == "component":
        return f"{f['share'] * 100:+.0f} % of the trend, {amount(f['slope_per_day'], f['field'])}/day"
    if kind == "cohort":
        return f"{f['trending_with_value']}/{f['trending']} trending vs {f['others_with_value']}/{f['others']} others"
    low, high = f["interval_days"]
    if f["status"] == "reached":
        return "reached"
    if f["status"] != "within":
        return f"not within the horizon ({fmt(f['horizon_days'])} days)"
    span = f"{fmt(low)}–{fmt(high) if high is not None else '∞'}"
    return f"in {fmt(f['days'])} days ({span}, {f['level']:.0%}), {f['at']}"


def amount(value: float | None, field: str) -> str:
    """A number in its field's unit: bytes (``*_bytes``) in KiB, MiB, GiB…, else as it is."""
    if value is None or not field.endswith("_bytes"):
        return fmt(value)
    size, unit = abs(value), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{'-' if value < 0 else ''}{size:.3g} {unit}"


def _p(f: dict[str, Any]) -> str:
    p = f.get("q_value", f.get("p_value"))
    return prob(p) if isinstance(p, float) else ""


@dataclass
class ChartFrame:
    """A trend chart's points (hour, sample, fitted) and the box they are drawn in: the
    values from ``lo`` to ``hi`` (the limit included), the hours from ``t0`` over ``span``."""

    pts: list[tuple[float, float, float]]
    limit: float | None
    lo: float
    hi: float
    t0: float
    t1: float
    span: float


def chart_frame(chart: dict[str, Any]) -> ChartFrame | None:
    """The drawable points of ``trends``' ``chart`` and their box; None under two points
    (the terminal chart and the HTML report draw from the same frame)."""
    rows = zip(chart["hours"], chart["values"], chart["fitted"], strict=True)
    pts = [(h, v, f) for h, v, f in rows if v is not None and math.isfinite(v)]
    if len(pts) < 2:
        return None
    limit = chart.get("limit")
    ys = [v for _, v, _ in pts] + [f for _, _, f in pts] + ([limit] if limit is not None else [])
    lo, hi = min(ys), max(ys)
    t0, t1 = pts[0][0], pts[-1][0]
    return ChartFrame(pts, limit, lo, hi if hi > lo else lo + 1, t0, t1, (t1 - t0) or 1.0)


def chart_lines(chart: dict[str, Any], rows: int = CHART_ROWS, cols: int = CHART_COLS) -> list[str]:
    """The series as dots, its fitted line as ``─`` and the limit as ``═``, value (y) over time (x)."""
    frame = chart_frame(chart)
    if frame is None:
        return []
    pts, limit, lo, hi, t0, span = frame.pts, frame.limit, frame.lo, frame.hi, frame.t0, frame.span
    grid = [[" "] * cols for _ in range(rows)]

    def row(y: float) -> int:
        return min(rows - 1, max(0, round((hi - y) / (hi - lo) * (rows - 1))))

    if limit is not None:
        grid[row(limit)] = ["═"] * cols
    for h, v, f in pts:
        c = min(cols - 1, round((h - t0) / span * (cols - 1)))
        grid[row(f)][c] = "─"
        grid[row(v)][c] = "•"
    label = f"{chart['field']} on {chart['series']}" if chart.get("series") is not None else chart["field"]
    out = [f"{label}: • samples, ─ trend" + (", ═ limit" if limit is not None else "")]
    top, bottom = amount(hi, chart["field"]), amount(lo, chart["field"])
    width = max(len(top), len(bottom))
    for i, cells in enumerate(grid):
        axis = top if i == 0 else bottom if i == rows - 1 else ""
        out.append(f"{axis:>{width}} │{''.join(cells)}")
    return out
