"""Drawing results in a terminal: tables, a heatmap of blocks, the ingest summary."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from rootsift.query.engine import Heatmap, QueryOutput

# A sequential palette from faint to hot, readable on dark and light terminals.
PALETTE = ["#1b2a49", "#23457a", "#2b66a8", "#3a8fc2", "#5cb8b2", "#9ad48a", "#e3de6a", "#f7a94b", "#f2663a", "#d7263d"]


def fmt(value: Any) -> str:
    """A value as a table cell: integers without '.0', floats to 4 significant digits."""
    if value is None:
        return "∅"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.4g}" if abs(value) >= 1e-3 else f"{value:.3g}"
    return str(value)


def prob(p: float | None) -> str:
    """A p- or q-value as printed: two significant digits; one that underflowed to 0 is
    ``< 1e-300`` (a probability is never 0, and ``p ≤ 0`` reads as nonsense)."""
    if p is None:
        return "∅"
    return "< 1e-300" if p <= 0 else f"{p:.2g}"


def table(console: Console, out: QueryOutput) -> None:
    """Print a query's rows as a table with its warnings."""
    from rich.table import Table

    t = Table(show_edge=False, header_style="bold")
    nkeys = len(out.columns) - len(out.spec.calculations)
    for i, col in enumerate(out.columns):
        t.add_column(col, justify="left" if i < nkeys else "right")
    for row in out.rows:
        t.add_row(*[fmt(v) for v in row])
    console.print(t)
    if not out.rows:
        console.print("[dim]no events match[/dim]")
    warnings(console, out.warnings)


def warnings(console: Console, items: list[str]) -> None:
    for w in items:
        console.print(f"[yellow]warning:[/yellow] {w}")


def heatmap(console: Console, grid: Heatmap, max_rows: int = 24, mark: tuple[datetime, datetime] | None = None) -> None:
    """Draw time (x) against log-scaled value buckets (y, high at the top), one block per cell;
    ``mark`` underlines the columns of a time range (an anomalous region)."""
    from rich.text import Text

    if not grid.times:
        console.print("[dim]no events with a value for this field[/dim]")
        return
    counts, edges = grid.counts, grid.bucket_edges
    if len(edges) > max_rows:  # merge adjacent buckets so the plot fits
        group = math.ceil(len(edges) / max_rows)
        merged = [[sum(col) for col in zip(*counts[i : i + group])] for i in range(0, len(counts), group)]
        counts, edges = merged, edges[::group]
    peak = max((c for row in counts for c in row), default=0.0)
    label_width = max(len(fmt(e)) for e in edges)
    console.print(f"[bold]heatmap of {grid.field}[/bold]  (rows: value buckets, log scale; columns: time)")
    for i in range(len(edges) - 1, -1, -1):
        line = Text()
        line.append(fmt(edges[i]).rjust(label_width) + " ┤", style="dim")
        for c in counts[i]:
            if c <= 0:
                line.append(" ")
            else:
                level = int((math.log1p(c) / math.log1p(peak)) * (len(PALETTE) - 1)) if peak > 0 else 0
                line.append("█", style=PALETTE[level])
        console.print(line)
    if any(grid.nonpositive):
        console.print(
            Text("≤0".rjust(label_width) + " ┤" + "".join("▪" if c else " " for c in grid.nonpositive), style="dim")
        )
    first, last = grid.times[0], grid.times[-1]
    axis = " " * (label_width + 2) + "└" + "─" * max(0, len(grid.times) - 1)
    console.print(Text(axis, style="dim"))
    if mark is not None:
        step = grid.times[1] - grid.times[0] if len(grid.times) > 1 else None
        marks = "".join("▲" if step is not None and t + step > mark[0] and t < mark[1] else " " for t in grid.times)
        console.print(Text(" " * (label_width + 2) + marks + "  anomalous region", style="bold red"))
    console.print(
        Text(" " * (label_width + 2) + f"{fmt(first)} … {fmt(last)}  ({len(grid.times)} columns)", style="dim")
    )
    total = sum(sum(r) for r in grid.counts) + sum(grid.nonpositive)
    console.print(
        Text(
            " " * (label_width + 2)
            + f"{fmt(total)} events; darkest {fmt(min((c for r in counts for c in r if c), default=0))}, hottest {fmt(peak)} per cell",
            style="dim",
        )
    )
