"""``rootsift trends``: what is leaking, where, and when it runs out; a thin layer over
``Rootsift.trends`` (docs/trends.md)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from rootsift.analysis.defaults import ALPHA
from rootsift.cli.common import Duration, Probability, common, emit_json, out
from rootsift.errors import UsageError

if TYPE_CHECKING:
    from rootsift.api import Rootsift


@click.command()
@click.argument("dataset")
@click.option(
    "--measure",
    default=None,
    help="The series, e.g. 'avg(mem_available_bytes)', 'max(open_fds)', 'p99(duration_ms)' or a bare field "
    "(its average). Default: every numeric field's trend is fitted and ranked.",
)
@click.option(
    "--by",
    default="auto",
    show_default=True,
    help="One series per value of this field; auto: host when the dataset has it; none: one series.",
)
@click.option(
    "--limit",
    "limit_text",
    metavar="VALUE|FIELD",
    default=None,
    help="The limit the trend runs into: a number, or a field whose per-series median it is (mem_total_bytes).",
)
@click.option(
    "--parts",
    default=None,
    metavar="FIELD,FIELD,…",
    help="Parts of the measure, ranked by their share of its trend (default for mem_available_bytes: "
    "the meminfo categories: sunreclaim_bytes, anon_pages_bytes, active_file_bytes …).",
)
@click.option("--from", "start", default=None, help="Start of the range (default: the dataset's first event).")
@click.option("--to", "end", default=None, help="End of the range (default: after the last event).")
@click.option("--where", default=None, help="Only look at events matching this filter.")
@click.option(
    "--horizon",
    type=Duration(),
    default="90d",
    show_default=True,
    help="How far ahead a limit counts as reached in time.",
)
@click.option(
    "--alpha", type=Probability(), default=ALPHA, show_default=True, help="False discovery rate over the series."
)
@click.option(
    "--show", type=click.IntRange(min=1), default=20, show_default=True, help="Findings shown in the terminal."
)
@common(read_only=True)
def trends(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    measure: str | None,
    by: str,
    limit_text: str | None,
    parts: str | None,
    start: str | None,
    end: str | None,
    where: str | None,
    horizon: timedelta,
    alpha: float,
    show: int,
) -> None:
    """What is leaking, where, and when it runs out: each series' robust trend (cycles and
    random walks are not leaks), the part that drives it, the label that separates the
    hosts that leak, and the time until the limit with an interval. Without --measure,
    every numeric field's trend is ranked (and, for /proc/meminfo, MemAvailable is split
    into its parts).

    Example: rootsift trends hosts --measure 'avg(mem_available_bytes)' --limit 0 --where 'kind = "meminfo"'
    """
    result = rs.trends(
        dataset,
        measure=measure,
        by=by,
        limit=parse_limit(limit_text),
        parts=parse_parts(parts),
        start=start,
        end=end,
        where=where,
        horizon=horizon,
        alpha=alpha,
    )
    if as_json:
        emit_json(result.as_dict())
        return
    from rootsift.ui import trends as view

    view.trends(out, result.as_dict(), show)


def parse_limit(text: str | None) -> float | str | None:
    """``--limit``: a number (``0``, ``8e9``) or a field name; empty is a usage error."""
    if text is None:
        return None
    text = text.strip()
    if not text:
        raise UsageError("--limit is empty: give a number (e.g. 0) or a field (e.g. mem_total_bytes)")
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value):
        raise UsageError(f"--limit {text!r} is not a finite number")
    return value


def parse_parts(text: str | None) -> list[str] | None:
    """``--parts a,b,c`` as a list of field names; an empty name is a usage error."""
    if text is None:
        return None
    names = [p.strip() for p in text.split(",")]
    if not all(names):
        raise UsageError(f"--parts {text!r}: a part is empty; write FIELD,FIELD,…")
    return names
