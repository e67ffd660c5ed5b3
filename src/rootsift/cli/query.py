"""The query command: counts, aggregates, breakdowns and heatmaps of a dataset's events."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from rootsift.cli.common import common, emit_json, out
from rootsift.errors import QuerySpecError
from rootsift.query.spec import Calculation, QuerySpec

if TYPE_CHECKING:
    from rootsift.api import Rootsift


@click.command()
@click.argument("dataset")
@click.option("--from", "start", default=None, help="Start: RFC 3339, epoch seconds or relative (-2h).")
@click.option("--to", "end", default=None, help="End (exclusive), same forms as --from.")
@click.option("--where", "where", multiple=True, help="Filter, e.g. 'status >= 500'; repeated filters are ANDed.")
@click.option("--breakdown", "-b", multiple=True, help="Group by this field (repeatable).")
@click.option("--calc", "-c", multiple=True, help="count, count_distinct(f), sum/avg/min/max(f), p99(f), heatmap(f).")
@click.option("--granularity", "-g", default=None, help="Time bucket width, e.g. 1m; omit for totals.")
@click.option("--order", multiple=True, help="Order key, e.g. 'count desc' or 'p99(duration_ms) asc'.")
@click.option("--limit", default=1000, show_default=True, type=int, help="At most this many rows.")
@click.option(
    "--spec",
    "spec_file",
    type=click.File("r"),
    default=None,
    help="Read the query spec as JSON from a file (- for stdin).",
)
@common(read_only=True)
def query(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    start: str | None,
    end: str | None,
    where: tuple[str, ...],
    breakdown: tuple[str, ...],
    calc: tuple[str, ...],
    granularity: str | None,
    order: tuple[str, ...],
    limit: int,
    spec_file: Any,
) -> None:
    """Count, aggregate, break down or draw a heatmap of a dataset's events.

    Example: rootsift query api --from -2h --where 'status >= 500' -b endpoint -c count -c 'p99(duration_ms)' -g 1m
    """
    if spec_file is not None:
        try:
            data = json.load(spec_file)
        except json.JSONDecodeError as exc:
            raise QuerySpecError(f"--spec: not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise QuerySpecError("--spec: the query spec must be a JSON object")
        data.setdefault("dataset", dataset)
        spec = QuerySpec.from_dict(data)
    else:
        spec = QuerySpec(
            dataset=dataset,
            start=start,
            end=end,
            where=" and ".join(f"({w})" for w in where) if where else None,
            breakdowns=list(breakdown),
            calculations=[Calculation.parse(c) for c in calc],
            granularity=granularity,
            order=list(order),
            limit=limit,
        )
    result = rs.query(spec, keep_plan=True)  # the same query again starts without sqlglot
    if as_json:
        emit_json(result.as_dict())
        return
    from rootsift.ui import terminal  # rich: not imported for --json

    if result.heatmap is not None:
        terminal.heatmap(out, result.heatmap)
        terminal.warnings(out, result.warnings)
    else:
        terminal.table(out, result)
