"""``rootsift trends``: what is leaking, where, and when it runs out; a thin layer over
``Rootsift.trends`` (docs/trends.md)."""

from __future__ import annotations

import math
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rootsift.analysis.defaults import ALPHA
from rootsift.cli.common import Duration, Probability, common, emit_json, out
from rootsift.errors import RootsiftError, UsageError

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
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a self-contained HTML report (the worst series with its trend and limit, the parts' shares).",
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
    report: Path | None,
) -> None:
    """What is leaking, where, and when it runs out: each series' robust trend (cycles and
    random walks are not leaks), the part that drives it, the label that separates the
    hosts that leak, and the time until the limit with an interval. Without --measure,
    every numeric field's trend is ranked (and, for /proc/meminfo, MemAvailable is split
    into its parts).

    Example: rootsift trends hosts --measure 'avg(mem_available_bytes)' --limit 0 --where 'kind = "meminfo"'
    """
    if report is not None and not report.parent.is_dir():
        raise UsageError(f"--report {report}: there is no folder {report.parent} to write it in (create it first)")
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
    found = result.as_dict()
    if report is not None:
        from rootsift.ui import trends_html

        command = ["rootsift", *sys.argv[1:]] if sys.argv[1:2] == ["trends"] else ["rootsift", "trends", dataset]
        try:
            report.write_text(trends_html.render(found, command), encoding="utf-8")
        except OSError as exc:
            raise RootsiftError(f"--report {report}: cannot write it ({exc.strerror or exc})") from exc
    if as_json:
        emit_json({**found, "report": str(report) if report else None})
        return
    from rootsift.ui import trends as view

    view.trends(out, found, show)
    if report is not None:
        out.print(f"report written to {report}")


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
