"""The analysis commands of the CLI (``explain``), thin layers over the Python API."""

from __future__ import annotations

import click

from rootsift.analysis.explain import ALPHA, TOP_VALUES
from rootsift.api import Rootsift
from rootsift.cli import common, emit_json, main, out
from rootsift.ui import findings as view


@main.command()
@click.argument("dataset")
@click.option("--from", "start", default=None, help="Start of the range (default: the dataset's first event).")
@click.option("--to", "end", default=None, help="End of the range (default: after the last event).")
@click.option("--select", "select", default=None, help="The events to explain, e.g. 'duration_ms > 1000'.")
@click.option("--select-from", default=None, help="Start of the selected time sub-range.")
@click.option("--select-to", default=None, help="End of the selected time sub-range.")
@click.option("--baseline", default=None, help="Compare with these events instead of the rest of the range.")
@click.option("--where", default=None, help="Only look at events matching this filter.")
@click.option("--alpha", type=float, default=ALPHA, show_default=True, help="False discovery rate for findings.")
@click.option("--top", "top_values", type=int, default=TOP_VALUES, show_default=True, help="Values tested per field.")
@click.option("--limit", type=int, default=20, show_default=True, help="Findings shown in the terminal.")
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
    )
    if as_json:
        emit_json(result.as_dict())
    else:
        view.explanation(out, result, limit)
