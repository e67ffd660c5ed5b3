"""The analysis commands: explain and investigate, thin layers over the Python API."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rootsift.analysis.defaults import ALPHA, TOP_VALUES
from rootsift.cli.common import Probability, common, emit_json, findings_limit, out
from rootsift.errors import RootsiftError, UsageError
from rootsift.query.spec import Calculation, QuerySpec
from rootsift.timeutil import parse_duration

if TYPE_CHECKING:
    from rootsift.api import Rootsift


@click.command()
@click.argument("dataset")
@click.option("--from", "start", default=None, help="Start of the range (default: the dataset's first event).")
@click.option("--to", "end", default=None, help="End of the range (default: after the last event).")
@click.option("--select", "select", default=None, help="The events to explain, e.g. 'duration_ms > 1000'.")
@click.option("--select-from", default=None, help="Start of the selected time sub-range.")
@click.option("--select-to", default=None, help="End of the selected time sub-range.")
@click.option("--baseline", default=None, help="Compare with these events instead of the rest of the range.")
@click.option("--where", default=None, help="Only look at events matching this filter.")
@click.option(
    "--alpha", type=Probability(), default=ALPHA, show_default=True, help="False discovery rate for findings."
)
@click.option("--top", "top_values", type=int, default=TOP_VALUES, show_default=True, help="Values tested per field.")
@click.option(
    "--select-by-start",
    "select_start_of",
    metavar="FIELD",
    default=None,
    help="The time box bounds each event's start, its timestamp less this duration (logs stamped at completion).",
)
@click.option(
    "--sampled",
    is_flag=True,
    help="Read from the store's 1-in-64 uniform sample (a rare selection exactly); the error is stated.",
)
@click.option(
    "--count-field",
    metavar="FIELD",
    default=None,
    help="Each row stands for this many identical events (default: the dataset's, or event_count).",
)
@findings_limit()
@common(read_only=True)
def explain(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    start: str | None,
    end: str | None,
    select: str | None,
    select_from: str | None,
    select_to: str | None,
    baseline: str | None,
    where: str | None,
    alpha: float,
    top_values: int,
    select_start_of: str | None,
    sampled: bool,
    count_field: str | None,
    limit: int,
) -> None:
    """What is different about the selected events: each field's values and each
    measure's distribution in the selection against the baseline, with significance.

    Example: rootsift explain api --from -2h --select 'duration_ms > 1000'
    """
    result = rs.explain(
        dataset,
        start=start,
        end=end,
        where=where,
        select=select,
        select_from=select_from,
        select_to=select_to,
        baseline=baseline,
        alpha=alpha,
        top_values=top_values,
        sampled=sampled,
        select_start_of=select_start_of,
        count_field=count_field,
    )
    if as_json:
        emit_json(result.as_dict())
    else:
        from rootsift.ui import findings as view

        view.explanation(out, result, limit)


@click.command()
@click.argument("dataset")
@click.option("--from", "start", default=None, help="Start of the range (default: the dataset's first event).")
@click.option("--to", "end", default=None, help="End of the range (default: after the last event).")
@click.option(
    "--measure", default=None, help="The numeric field whose shift to look for (default: the duration field)."
)
@click.option("--where", default=None, help="Only look at events matching this filter.")
@click.option(
    "--timeout",
    "timeouts",
    multiple=True,
    metavar="FIELD=DURATION",
    help="A configured timeout, e.g. upstream_connect_time_ms=500ms (repeatable; default: inferred).",
)
@click.option(
    "--timestamp-at",
    type=click.Choice(["start", "end"]),
    default="start",
    show_default=True,
    help="What an event's timestamp marks: its start (spans, JSON events) or its end (nginx access logs).",
)
@click.option(
    "--alpha", type=Probability(), default=ALPHA, show_default=True, help="False discovery rate for findings."
)
@click.option(
    "--count-field",
    metavar="FIELD",
    default=None,
    help="Each row stands for this many identical events (default: the dataset's, or event_count).",
)
@click.option(
    "--changes",
    metavar="DATASET",
    default=None,
    help="A dataset of change events (deploys, config): ranked as suspects of the onset (docs/changes.md).",
)
@findings_limit()
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a self-contained HTML report (heatmap, a chart per finding, the commands behind each number).",
)
@common(read_only=True)
def investigate(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    start: str | None,
    end: str | None,
    measure: str | None,
    where: str | None,
    timeouts: tuple[str, ...],
    timestamp_at: str,
    alpha: float,
    count_field: str | None,
    changes: str | None,
    limit: int,
    report: Path | None,
) -> None:
    """Find when things went wrong (a latency or error-rate shift, or a stall) and explain
    it: what is different about the bad events, where the time went (waiting vs service),
    pools or workers held at their limit, timeouts not respected.

    Example: rootsift investigate api --from -6h
    """
    if report is not None and not report.parent.is_dir():
        raise UsageError(f"--report {report}: there is no folder {report.parent} to write it in (create it first)")
    result = rs.investigate(
        dataset,
        start=start,
        end=end,
        where=where,
        measure=measure,
        timeouts=parse_timeouts(timeouts),
        timestamp_at=timestamp_at,
        alpha=alpha,
        count_field=count_field,
        changes=changes,
    )
    grid = None
    field = measure or (result.anomaly.measure if result.anomaly and result.anomaly.kind == "latency" else None)
    if field and (report is not None or not as_json):
        calc = [Calculation.parse(f"heatmap({field})")]
        grid = rs.query(QuerySpec(dataset, start=start, end=end, where=where, calculations=calc)).heatmap
    if report is not None:
        from rootsift.ui import report_html

        command = (
            ["rootsift", *sys.argv[1:]] if sys.argv[1:2] == ["investigate"] else ["rootsift", "investigate", dataset]
        )
        try:
            report.write_text(report_html.render(result, grid, command), encoding="utf-8")
        except OSError as exc:
            raise RootsiftError(f"--report {report}: cannot write it ({exc.strerror or exc})") from exc
    if as_json:
        emit_json({**result.as_dict(), "report": str(report) if report else None})
        return
    from rootsift.ui import findings as view

    view.investigation(out, result, limit, grid)
    if report is not None:
        out.print(f"report written to {report}")


def parse_timeouts(items: tuple[str, ...]) -> dict[str, float]:
    """``FIELD=DURATION`` flags as limits in the field's unit (``_ms`` fields in milliseconds, else seconds)."""
    limits: dict[str, float] = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name.strip():
            raise UsageError(f"--timeout {item!r} is not FIELD=DURATION (e.g. upstream_connect_time_ms=500ms)")
        seconds = parse_duration(text.strip()).total_seconds()
        limits[name.strip()] = seconds * 1000 if name.strip().endswith("_ms") else seconds
    return limits
