"""profile-diff: which functions take a different share of the stack samples in cohort B
than in A, with a table of the top changes and a differential flame graph (--report)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from rootsift.cli.common import Probability, cohort_options, common, emit_json, out

if TYPE_CHECKING:
    from rootsift.analysis.profiles import ProfileDiff
    from rootsift.api import Rootsift


@click.command("profile-diff")
@click.argument("dataset")
@cohort_options
@click.option("--where", default=None, help="Only stack samples matching this filter, in both cohorts.")
@click.option("--type", "profile_type", default=None, help="Only profiles of this type: cpu, heap, goroutine...")
@click.option("--value", default=None, help="The field summed per stack (default: samples).")
@click.option("--focus", metavar="FUNC", default=None, help="Only stacks through FUNC, from it down.")
@click.option("--alpha", type=Probability(), default=0.05, show_default=True, help="False discovery rate.")
@click.option("--limit", type=click.IntRange(min=1), default=15, show_default=True, help="Rows of the table.")
@click.option(
    "--report",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a differential flame graph: self-contained HTML (widths from B, red grew, blue shrank).",
)
@common(read_only=True)
def profile_diff(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    a: str | None,
    b: str | None,
    a_from: str | None,
    a_to: str | None,
    b_from: str | None,
    b_to: str | None,
    where: str | None,
    profile_type: str | None,
    value: str | None,
    focus: str | None,
    alpha: float,
    limit: int,
    report: Path | None,
) -> None:
    """Per function: its self and total share of the samples in cohort A and B, the change
    in points and a q-value that counts each profile as a unit; the call paths where the
    change sits, new and vanished callees.

    Example: rootsift profile-diff cpu --a 'version = "1.0"' --b 'version = "1.1"' --report diff.html
    """
    if report is not None and not report.parent.is_dir():
        raise click.UsageError(
            f"--report {report}: there is no folder {report.parent} to write it in (create it first)"
        )
    result = rs.profile_diff(
        dataset, a=a, b=b, a_from=a_from, a_to=a_to, b_from=b_from, b_to=b_to,
        where=where, profile_type=profile_type, value=value, focus=focus, alpha=alpha,
    )  # fmt: skip
    if report is not None:
        from rootsift.ui import flamegraph

        title = f"{dataset}: B ({b or 'time range'}) against A ({a or 'time range'})"
        report.write_text(flamegraph.render(result, title), encoding="utf-8")
    if as_json:
        emit_json({**result.as_dict(), "report": str(report) if report else None})
        return
    show(result, limit)
    if report is not None:
        out.print(f"differential flame graph written to {report}")


def show(result: ProfileDiff, limit: int) -> None:
    """The top ``limit`` changes as a table, the paths of the first, the warnings."""
    from rich.table import Table

    from rootsift.ui.terminal import prob

    a, b = result.cohorts["a"], result.cohorts["b"]
    out.print(
        f"[bold]{result.dataset}[/bold]: {result.value} in A ({a['profiles']} profiles) vs B ({b['profiles']} "
        f"profiles), {result.functions} functions; {result.method} test, FDR {result.alpha}"
    )
    if not result.findings:
        out.print("[dim]no function's share changed significantly[/dim]")
    else:
        t = Table(show_edge=False, header_style="bold")
        for col in ("function", "self A", "self B", "Δ self", "total A", "total B", "Δ total", "excess", "q"):
            t.add_column(col, justify="left" if col == "function" else "right")
        for f in result.findings[:limit]:
            d = f.as_dict()
            mark = {"new": " (new)", "vanished": " (vanished)"}.get(f.status, "")
            t.add_row(
                f.function + mark,
                f"{100 * f.a_self:.2f}%",
                f"{100 * f.b_self:.2f}%",
                f"{f.change_self:+.2f}",
                f"{100 * f.a_total:.2f}%",
                f"{100 * f.b_total:.2f}%",
                f"{f.change_total:+.2f}",
                f"{f.excess:+.2f}",
                prob(d["q_value"]),
            )
        out.print(t)
        top = result.findings[0]
        if top.paths:
            out.print(f"where {top.function} {'grew' if top.excess > 0 else 'shrank'} ({top.basis} share):")
            for p in top.paths:
                out.print(f"  {p['change_points']:+.2f} pts  {p['path']}")
    for w in result.warnings:
        out.print(f"[yellow]warning:[/yellow] {w}")
