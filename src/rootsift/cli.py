"""The ``rootsift`` command: a thin layer over rootsift.api.Rootsift.

Exit codes: 0 success, 1 failure, 2 usage error (a flag, a name, an expression).
Every command takes ``--json`` and then prints one JSON object on stdout.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from rootsift import scenarios
from rootsift.api import Rootsift, default_data_dir
from rootsift.errors import QuerySpecError, RootsiftError, UsageError
from rootsift.ingest import formats
from rootsift.ingest.pipeline import COMMIT_EVERY, IngestSummary
from rootsift.ingest.sources import FORMATS
from rootsift.query.spec import Calculation, QuerySpec
from rootsift.timeutil import parse_duration
from rootsift.ui import terminal

# Piped output is not cut to 80 columns: tables keep whole values for grep and less.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, default=str, ensure_ascii=False))


def parse_labels(items: tuple[str, ...]) -> dict[str, str]:
    """``--label KEY=VALUE`` flags as a dict; a malformed one is a usage error naming it."""
    labels: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--label {item!r} is not KEY=VALUE (e.g. --label version=1.6.0)")
        labels[key.strip()] = value
    return labels


def fail(exc: RootsiftError, as_json: bool) -> NoReturn:
    """Report an error (also as a JSON envelope with --json) and exit with its code."""
    if as_json:
        emit_json({"error": {"type": type(exc).__name__, "message": str(exc)}})
    err.print(f"[red]error:[/red] {exc}", markup=True, highlight=False)
    sys.exit(exc.exit_code)


data_option = click.option(
    "--data",
    "data_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Data directory (default: $ROOTSIFT_DATA or ./.rootsift).",
)


def common(read_only: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Shared options: --data and --json; opens the store and maps errors to exit codes."""

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        @data_option
        @click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
        @functools.wraps(func)
        def run(data_dir: Path | None, as_json: bool, **kwargs: Any) -> None:
            try:
                with Rootsift(data_dir or default_data_dir(), read_only=read_only and _exists(data_dir)) as rs:
                    func(rs, as_json=as_json, **kwargs)
            except RootsiftError as exc:
                fail(exc, as_json)

        return run

    return wrap


def _exists(data_dir: Path | None) -> bool:
    return (data_dir or default_data_dir()).exists()


BUILTIN_FORMATS = {
    "auto": "sniffed from the content: a log format sure of the first lines, else JSON, CSV or TSV",
    "jsonl": "JSON lines: one object per line",
    "json": "a JSON array of objects",
    "csv": "CSV with a header row",
    "tsv": "tab-separated values with a header row",
}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rootsift")
def main() -> None:
    """rootsift: find why production broke, from the telemetry you have."""


@main.command()
@click.argument("source")
@click.option("--dataset", "-d", required=True, help="Dataset to ingest into (created if new).")
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=click.Choice([*FORMATS, *formats.all_formats()]),
    help="Input format: sniffed from the content by default (see `rootsift formats`).",
)
@click.option("--log-format", default=None, help="Access logs: the nginx log_format (or Apache LogFormat) string.")
@click.option("--log-line-prefix", default=None, help="PostgreSQL stderr logs: the server's log_line_prefix.")
@click.option("--host", default=None, help="Host name for every event (procfs, prometheus; default: from the path).")
@click.option(
    "--tz", default=None, help="Time zone of times written without an offset (default UTC), e.g. Europe/Berlin."
)
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="Log formats: a field set on every event, e.g. --label version=1.6.0 (repeatable; the event's own value wins).",
)
@click.option("--time-field", default=None, help="Field holding the event time (default: detected).")
@click.option(
    "--time-format", default=None, help="rfc3339, epoch, epoch_s/ms/us/ns or a strptime pattern (default: detected)."
)
@click.option(
    "--on-error",
    "strictness",
    default="warn",
    show_default=True,
    type=click.Choice(["ignore", "warn", "raise"]),
    help="What a bad line does.",
)
@click.option(
    "--commit-every",
    type=float,
    default=COMMIT_EVERY,
    show_default=True,
    metavar="SECONDS",
    help="Stdin or a pipe: commit at least this often (and on SIGTERM/SIGINT), releasing the store in between.",
)
@common(read_only=False)
def ingest(
    rs: Rootsift,
    as_json: bool,
    source: str,
    dataset: str,
    fmt: str,
    time_field: str | None,
    time_format: str | None,
    strictness: str,
    log_format: str | None,
    log_line_prefix: str | None,
    host: str | None,
    tz: str | None,
    labels: tuple[str, ...],
    commit_every: float,
) -> None:
    """Ingest SOURCE into a dataset: a file or - for stdin (plain, gzip or zstd), or a
    directory of files in a log format (e.g. /proc snapshots).

    Example: rootsift ingest /var/log/nginx/access.log --dataset web --format nginx
    """
    show = err.is_terminal and not as_json
    with Progress(
        TextColumn("ingesting {task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[events]:,} events"),
        TimeElapsedColumn(),
        console=err,
        disable=not show,
        transient=True,
    ) as bar:
        task = bar.add_task(source, total=None, events=0)

        def progress(done: int, total: int | None, events: int) -> None:
            bar.update(task, completed=done, total=total, events=events)

        summary = rs.ingest(
            source,
            dataset,
            format=fmt,
            time_field=time_field,
            time_format=time_format,
            strictness=strictness,
            progress=progress,
            log_format=log_format,
            log_line_prefix=log_line_prefix,
            host=host,
            tz=tz,
            labels=parse_labels(labels),
            commit_every=commit_every,
        )
    if as_json:
        emit_json(summary.as_dict())
    else:
        _print_ingested(summary, dataset, strictness)
    if problem := summary.problem():  # what could be read is stored, yet the input was not all good
        err.print(f"[red]error:[/red] {problem}", markup=True, highlight=False)
        sys.exit(1)


def _print_ingested(summary: IngestSummary, dataset: str, strictness: str) -> None:
    out.print(
        f"ingested [bold]{summary.events:,}[/bold] events into [bold]{dataset}[/bold] from {summary.source} "
        f"({summary.format}, {summary.compression}) in {summary.seconds:.2f} s "
        f"({summary.events_per_second:,.0f} events/s); time field {summary.time_field!r} "
        f"({summary.time_format})"
    )
    if summary.stopped_by:
        out.print(f"stopped by {summary.stopped_by}: every line that had arrived was committed")
    if summary.rejects:
        level = "[yellow]" if strictness != "ignore" else "[dim]"
        out.print(f"{level}{summary.rejects:,} rejected lines[/] saved to {summary.rejects_file}")
        if strictness == "warn":
            for r in summary.first_rejects:
                out.print(f"  line {r['line']}: {r['reason']}")


@main.command("scenario")
@click.argument("name", required=False)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Folder to write the telemetry to."
)
@click.option("--seed", type=int, default=1, show_default=True, help="Seed: names, magnitudes and times vary with it.")
@click.option("--scale", default="ci", show_default=True, help="ci, small, large, or a multiple of ci.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def scenario_(name: str | None, out_dir: Path | None, seed: int, scale: str, as_json: bool) -> None:
    """Write a reference incident's telemetry (docs/scenarios.md); without NAME, list them.

    Example: rootsift scenario memleak --out /tmp/memleak --seed 7
    """
    try:
        if name is None:
            rows = [{"name": n, "summary": cls.summary} for n, cls in scenarios.all_scenarios().items()]
            if as_json:
                emit_json({"scenarios": rows})
                return
            for r in rows:
                out.print(f"[bold]{r['name']}[/bold]  {r['summary']}")
            return
        if out_dir is None:
            raise UsageError("--out is required: the folder to write the scenario to")
        manifest = scenarios.generate(name, out_dir, seed, scale)
    except RootsiftError as exc:
        fail(exc, as_json)
    if as_json:
        emit_json({"out": str(out_dir), **dataclasses.asdict(manifest)})
        return
    out.print(f"wrote scenario [bold]{name}[/bold] (seed {seed}, scale {manifest.scale:g}) to {out_dir}")
    for src in manifest.sources:
        argv = ["rootsift", "ingest", str(out_dir / src.path), "-d", src.dataset, "--format", src.format]
        for key, value in src.options.items():
            if key == "labels":
                argv += [arg for k, v in value.items() for arg in ("--label", f"{k}={v}")]
            else:
                argv += [f"--{key.replace('_', '-')}", str(value)]
        out.print(f"  {shlex.join(argv)}", markup=False)
    if manifest.analyses:
        out.print("then ask:")
        for argv in manifest.analyses:
            out.print(f"  {shlex.join(['rootsift', *argv])}", markup=False)


@main.command()
@click.argument("name", required=False)
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Where scenarios are written.")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of every scenario run.")
@click.option("--scale", default="ci", show_default=True, help="ci, small, large, or a multiple of ci.")
@common(read_only=False)
def demo(rs: Rootsift, as_json: bool, name: str | None, out_dir: Path | None, seed: int, scale: str) -> None:
    """Generate reference incidents (all, or NAME), ingest them and show what rootsift finds.

    Each scenario is written to OUT/NAME (default: DATA/.scenarios/NAME) and ingested into
    its datasets, prefixed NAME_. Example: rootsift demo memleak --data /tmp/demo
    """
    names = [name] if name else list(scenarios.all_scenarios())
    root = out_dir or rs.data_dir / ".scenarios"
    report = [scenarios.demo(rs, n, root / n, seed, scale) for n in names]
    from rootsift.cli_analyses import run_in_process  # registered after this module loads
    from rootsift.ui import findings as findings_view

    warnings = []
    results: dict[str, list[Any]] = {}
    for run in report:
        asked, run["analyses"] = run["analyses"], []
        for argv in asked:
            result = run_in_process(rs, argv) if argv[0] in main.commands else None
            entry: dict[str, Any] = {"command": shlex.join(["rootsift", *argv]), "available": argv[0] in main.commands}
            if result is not None:
                entry["result"] = result.as_dict()
                results.setdefault(run["scenario"], []).append((entry["command"], result))
            run["analyses"].append(entry)
        missing = sorted({a["command"].split()[1] for a in run["analyses"]} - set(main.commands))
        if missing:
            warnings.append(f"{run['scenario']}: not available yet: {', '.join(missing)} (no findings from them)")
    if as_json:
        emit_json({"scenarios": report, "warnings": warnings})
        return
    for run in report:
        out.print(f"[bold]{run['scenario']}[/bold] (seed {seed}) written to {run['out']}")
        t = Table(show_edge=False, header_style="bold")
        for col in ("dataset", "source", "format", "events", "rejects"):
            t.add_column(col, justify="right" if col in ("events", "rejects") else "left")
        for src in run["ingested"]:
            t.add_row(src["dataset"], src["source"], src["format"], f"{src['events']:,}", f"{src['rejects']:,}")
        out.print(t)
        out.print("what to ask of it:")
        for analysis in run["analyses"]:
            out.print(f"  {analysis['command']}", markup=False)
        for command, result in results.get(run["scenario"], []):
            out.print(f"\n[bold]$ {command}[/bold]", highlight=False)
            if hasattr(result, "anomaly"):
                findings_view.investigation(out, result, limit=5)
            elif hasattr(result, "verdict"):
                findings_view.comparison(out, result)
            else:
                findings_view.explanation(out, result, limit=5)
    for w in warnings:
        out.print(f"[yellow]{w}[/yellow]")


@main.command("formats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def formats_(as_json: bool) -> None:
    """List the input formats `rootsift ingest --format` reads, and the options each takes.

    Example: rootsift formats
    """
    rows = [{"name": n, "summary": s, "options": []} for n, s in BUILTIN_FORMATS.items()]
    rows += [
        {"name": n, "summary": cls.summary, "options": ["--" + o.replace("_", "-") for o in cls.reads]}
        for n, cls in formats.all_formats().items()
    ]
    if as_json:
        emit_json({"formats": rows})
        return
    t = Table(show_edge=False, header_style="bold")
    for col in ("format", "reads", "options"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["name"]), str(r["summary"]), " ".join(r["options"]))  # type: ignore[arg-type]
    out.print(t)


@main.command()
@common(read_only=True)
def datasets(rs: Rootsift, as_json: bool) -> None:
    """List datasets: events, time span, bytes on disk.

    Example: rootsift datasets --json
    """
    infos = rs.datasets() if rs.data_dir.exists() else []
    if as_json:
        emit_json(
            {
                "datasets": [
                    {
                        "name": d.name,
                        "events": d.events,
                        "stored_rows": d.stored_rows,
                        "first": terminal.fmt(d.first) if d.first else None,
                        "last": terminal.fmt(d.last) if d.last else None,
                        "bytes_on_disk": d.bytes_on_disk,
                        "segments": d.segments,
                    }
                    for d in infos
                ]
            }
        )
        return
    t = Table(show_edge=False, header_style="bold")
    for col in ("dataset", "events", "first", "last", "on disk", "segments"):
        t.add_column(col, justify="right" if col in ("events", "on disk", "segments") else "left", no_wrap=True)
    for d in infos:
        t.add_row(
            d.name,
            f"{d.events:,}",
            terminal.fmt(d.first),
            terminal.fmt(d.last),
            f"{d.bytes_on_disk / 1e6:,.1f} MB",
            str(d.segments),
        )
    out.print(t if infos else f"no datasets in {rs.data_dir}")


@main.command()
@click.argument("dataset")
@common(read_only=True)
def schema(rs: Rootsift, as_json: bool, dataset: str) -> None:
    """Show a dataset's fields: type, presence, distinct-count estimate, type conflicts.

    Example: rootsift schema api
    """
    fields = rs.schema(dataset)
    if as_json:
        emit_json({"dataset": dataset, "fields": fields})
        return
    t = Table(show_edge=False, header_style="bold")
    for col in ("field", "type", "present", "distinct ≈", "conflicts"):
        t.add_column(col, justify="left" if col in ("field", "type") else "right")
    for f in fields:
        t.add_row(
            f["field"],
            f["type"],
            f"{f['present_fraction']:.1%}",
            f"{f['distinct_estimate']:,}",
            f"[yellow]{f['conflicts']:,}[/yellow]" if f["conflicts"] else "0",
        )
    out.print(t)


@main.command()
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
    result = rs.query(spec)
    if as_json:
        emit_json(result.as_dict())
    elif result.heatmap is not None:
        terminal.heatmap(out, result.heatmap)
        terminal.warnings(out, result.warnings)
    else:
        terminal.table(out, result)


@main.command()
@click.argument("dataset")
@click.option("--keep", required=True, help="Keep this much recent data, e.g. 7d; older events are deleted.")
@common(read_only=False)
def retention(rs: Rootsift, as_json: bool, dataset: str, keep: str) -> None:
    """Delete events older than --keep and give the disk space back.

    Example: rootsift retention api --keep 7d
    """
    result = rs.retention(dataset, parse_duration(keep))
    if as_json:
        emit_json(result)
        return
    out.print(
        f"deleted {result['deleted_events']:,} events older than {result['cutoff']} from {dataset}; "
        f"{result['bytes_before'] / 1e6:,.1f} MB → {result['bytes_after'] / 1e6:,.1f} MB on disk"
    )


from rootsift import cli_analyses  # noqa: E402, F401  (registers the analysis commands on main)

if __name__ == "__main__":
    main()
