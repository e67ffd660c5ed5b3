"""``rootsift changes``: when a series shifted, and which change came right before."""

from __future__ import annotations

import bisect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rootsift.cli.common import Probability, common, emit_json, findings_limit, out
from rootsift.errors import RootsiftError, UsageError

if TYPE_CHECKING:
    from rootsift.analysis.changes import Changes
    from rootsift.api import Rootsift

SPARK = "▁▂▃▄▅▆▇█"
WIDTH = 72


@click.command()
@click.argument("dataset")
@click.option(
    "--measure",
    default="count",
    show_default=True,
    help="A calculation per bucket: p50(duration_ms), avg(x), count, rate(status >= 500); a bare field means p50 of it.",
)
@click.option("--by", default=None, help="A series per value of this field (e.g. host); FDR over all groups.")
@click.option(
    "--changes",
    "--events",
    "events",
    default=None,
    help="A dataset of change events (timestamp, change.kind, service, host, description) to rank as suspects.",
)
@click.option(
    "--related",
    default=None,
    help="A dataset of metrics: its series whose change points coincide with or lead the largest shift.",
)
@click.option("--from", "start", default=None, help="Start of the range (default: the dataset's first event).")
@click.option("--to", "end", default=None, help="End of the range (default: after the last event).")
@click.option("--where", default=None, help="Only look at events matching this filter.")
@click.option(
    "--granularity",
    "-g",
    default=None,
    help="Bucket width (default: the range over 720, at least the time resolution).",
)
@click.option(
    "--alpha", type=Probability(), default=0.05, show_default=True, help="False discovery rate over change points."
)
@findings_limit(10)
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a self-contained HTML report (each series charted with its change points and change events).",
)
@common(read_only=True)
def changes(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    measure: str,
    by: str | None,
    events: str | None,
    related: str | None,
    start: str | None,
    end: str | None,
    where: str | None,
    granularity: str | None,
    alpha: float,
    limit: int,
    report: Path | None,
) -> None:
    """When each series shifted (change points, with significance), and which change
    events came right before (suspects, ranked by the step each made in the series).

    Example: rootsift changes api --measure 'p50(duration_ms)' --changes deploys --by host
    """
    if report is not None and not report.parent.is_dir():
        raise UsageError(f"--report {report}: there is no folder {report.parent} to write it in (create it first)")
    result = rs.changes(
        dataset,
        measure=measure,
        by=by,
        events=events,
        related=related,
        start=start,
        end=end,
        where=where,
        granularity=granularity,
        alpha=alpha,
    )
    if report is not None:
        from rootsift.ui import changes_html

        command = ["rootsift", *sys.argv[1:]] if sys.argv[1:2] == ["changes"] else ["rootsift", "changes", dataset]
        try:
            report.write_text(changes_html.render(result, command), encoding="utf-8")
        except OSError as exc:
            raise RootsiftError(f"--report {report}: cannot write it ({exc.strerror or exc})") from exc
    if as_json:
        emit_json({**result.as_dict(), "report": str(report) if report else None})
    else:
        show(result, limit)
        if report is not None:
            out.print(f"report written to {report}")


def show(result: Changes, limit: int) -> None:
    """The series as a sparkline with change points (^), changes of slope (/) and change events (|)
    marked, then the findings."""
    out.print(
        f"[bold]{result.measure}[/bold] of {result.dataset} per {_g(result)}"
        + (f", by {result.by}" if result.by else ""),
        markup=True,
    )
    for view in result.series[:3]:
        if not view.times:
            continue
        line, per = _spark(view.values)
        marks = [" "] * len(line)
        t0, t1 = view.times[0], view.times[-1]

        def col(t: Any, times: list[Any] = view.times, per: int = per) -> int:
            # the column of the bucket holding t (a bucket starts at its time; gaps are left out)
            return max(0, bisect.bisect_right(times, t) - 1) // per

        for t in result.events:
            if t0 <= t <= t1:
                marks[col(t)] = "|"
        for s in result.shifts:
            if s.group == view.group:
                marks[col(s.time)] = "/" if s.aspect == "slope" else "^"
        name = f"{result.by}={view.group} " if result.by else ""
        out.print(
            f"  {name}{t0:%Y-%m-%d %H:%M} .. {t1:%Y-%m-%d %H:%M}  min {min(view.values):.4g}  max {max(view.values):.4g}"
        )
        out.print(f"  {line}")
        out.print(f"  {''.join(marks)}   ^ change point  / change of slope  | change event")
    findings = result.findings()
    if not findings:
        out.print("no significant change point")
    for f in findings[:limit]:
        if f["kind"] == "suspect":
            out.print(
                f"suspect     {f['time']}  {f['event']}  ({f['lead']} before the change at {f['changepoint']}; "
                f"step at the event z={f['step_z']:.2f}, {f['compared']}"
                + (f", {f['regime']} hand-overs stitched out)" if f.get("regime") else ")")
            )
        elif f["kind"] == "related":
            out.print(
                f"related     {f['time']}  {f['series']}  {f['before']:.4g} -> {f['after']:.4g}  "
                f"(leads the shift by {f['lead']}, q={f['q_value']:.2g})"
            )
        else:
            where = f" {f['field']}={f['value']}" if f.get("field") else ""
            what = {"spread": "spread", "slope": "slope per bucket"}.get(f["aspect"], "median")
            out.print(
                f"changepoint {f['time']}{where}  {what} "
                f"{f['before']:.4g} -> {f['after']:.4g}, "
                f"mean {f['mean_before']:.4g} -> {f['mean_after']:.4g}  (effect {f['effect']:.2f}, q={f['q_value']:.2g})"
            )
    for w in result.warnings:
        out.print(f"warning: {w}")


def _spark(values: list[float]) -> tuple[str, int]:
    """(the sparkline, buckets per character): at most ``WIDTH`` characters, each the mean
    of the same number of buckets (the last of fewer), so that a cycle or an alternation
    looks alike all along; columns of unequal widths (2 and 3) turn a steady alternation
    into a level that shifts where the widths change."""
    import numpy as np

    v = np.asarray(values, dtype=float)
    per = max(1, -(-len(v) // WIDTH))
    if per > 1:
        v = np.array([v[i : i + per].mean() for i in range(0, len(v), per)])
    lo, hi = float(np.min(v)), float(np.max(v))
    if hi <= lo:
        return SPARK[0] * len(v), per
    return "".join(SPARK[min(len(SPARK) - 1, int((x - lo) / (hi - lo) * len(SPARK)))] for x in v), per


def _g(result: Changes) -> str:
    from rootsift.timeutil import format_duration

    return format_duration(result.granularity)
