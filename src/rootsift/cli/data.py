"""The data commands: ingest, formats, datasets, schema, retention."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from rootsift.cli.common import Duration, common, emit_json, err, out
from rootsift.errors import UsageError
from rootsift.ingest import COMMIT_EVERY
from rootsift.ui import terminal

if TYPE_CHECKING:
    from rootsift.api import Rootsift
    from rootsift.ingest.pipeline import IngestSummary


class FormatChoice(click.Choice):
    """``--format``'s choices, listed when first needed: the log formats' parsers are
    imported to name them, which ``rootsift --help`` has no need of."""

    def __init__(self) -> None:
        super().__init__(())

    @property  # type: ignore[override]
    def choices(self) -> Sequence[str]:
        from rootsift.ingest import formats
        from rootsift.ingest.sources import FORMATS

        return (*FORMATS, *formats.all_formats())

    @choices.setter
    def choices(self, value: Any) -> None:
        pass  # click.Choice.__init__ sets it; the property is the one truth


def parse_labels(items: tuple[str, ...]) -> dict[str, str]:
    """``--label KEY=VALUE`` flags as a dict; a malformed one is a usage error naming it."""
    labels: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--label {item!r} is not KEY=VALUE (e.g. --label version=1.6.0)")
        labels[key.strip()] = value
    return labels


BUILTIN_FORMATS = {
    "auto": "sniffed from the content: a log format sure of the first lines, else JSON, CSV or TSV",
    "jsonl": "JSON lines: one object per line",
    "json": "a JSON array of objects",
    "csv": "CSV with a header row",
    "tsv": "tab-separated values with a header row",
}


@click.command()
@click.argument("source")
@click.option("--dataset", "-d", required=True, help="Dataset to ingest into (created if new).")
@click.option(
    "--format",
    "fmt",
    default="auto",
    show_default=True,
    type=FormatChoice(),
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
    "--count-field",
    metavar="FIELD",
    default=None,
    help="Pre-aggregated rows: this field says how many identical events a row stands for (kept as the dataset's).",
)
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
    count_field: str | None,
) -> None:
    """Ingest SOURCE into a dataset: a file or - for stdin (plain, gzip or zstd), or a
    directory of files in a log format (e.g. /proc snapshots).

    Example: rootsift ingest /var/log/nginx/access.log --dataset web --format nginx
    """
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

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
            count_field=count_field,
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
    for warning in summary.warnings:
        out.print(f"[yellow]warning:[/] {warning}")
    if summary.rejects:
        level = "[yellow]" if strictness != "ignore" else "[dim]"
        out.print(f"{level}{summary.rejects:,} rejected lines[/] saved to {summary.rejects_file}")
        if strictness == "warn":
            for r in summary.first_rejects:
                out.print(f"  line {r['line']}: {r['reason']}")


@click.command("formats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def formats_(as_json: bool) -> None:
    """List the input formats `rootsift ingest --format` reads, and the options each takes.

    Example: rootsift formats
    """
    from rootsift.ingest import formats

    rows = [{"name": n, "summary": s, "options": []} for n, s in BUILTIN_FORMATS.items()]
    rows += [
        {"name": n, "summary": cls.summary, "options": ["--" + o.replace("_", "-") for o in cls.reads]}
        for n, cls in formats.all_formats().items()
    ]
    if as_json:
        emit_json({"formats": rows})
        return
    from rich.table import Table

    t = Table(show_edge=False, header_style="bold")
    for col in ("format", "reads", "options"):
        t.add_column(col)
    for r in rows:
        t.add_row(str(r["name"]), str(r["summary"]), " ".join(r["options"]))  # type: ignore[arg-type]
    out.print(t)


@click.command()
@common(read_only=True)
def datasets(rs: Rootsift, as_json: bool) -> None:
    """List datasets: events, time span, bytes on disk.

    Example: rootsift datasets --json
    """
    infos = rs.datasets() if rs.data_dir.exists() else []
    if as_json:
        emit_json({"datasets": [d.as_dict() for d in infos]})
        return
    from rich.table import Table

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


@click.command()
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
    from rich.table import Table

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
    for f in fields:
        if "overflow_keys" in f:
            keys = f["overflow_keys"]
            more = ", …" if keys["count"] > len(keys["sample"]) else ""
            out.print(
                f"{f['field']} holds {keys['count']:,} keys past the field limit, queryable by name "
                f"(e.g. p99(key), key > 3): {', '.join(keys['sample'])}{more}",
                markup=False,
            )


@click.command()
@click.argument("dataset")
@click.option("--keep", type=Duration(), help="Keep this much recent data, e.g. 7d; older events are deleted.")
@click.option("--dry-run", is_flag=True, help="Delete nothing: print how many events would go and the bytes freed.")
@click.option(
    "--standing",
    is_flag=True,
    help="Also have the server go on deleting what gets older than --keep (a ClickHouse server's TTL).",
)
@click.option("--remove-standing", is_flag=True, help="Stop the dataset's standing retention; delete nothing.")
@common(read_only=lambda args: args["dry_run"] or not (args["keep"] is not None or args["remove_standing"]))
def retention(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    keep: timedelta | None,
    dry_run: bool,
    standing: bool,
    remove_standing: bool,
) -> None:
    """Delete events older than --keep and give the disk space back; without --keep, show
    the dataset's standing retention.

    Example: rootsift retention api --keep 7d --dry-run
    """
    if remove_standing and (keep is not None or standing):
        raise UsageError("--remove-standing deletes nothing and takes no --keep or --standing")
    if keep is None and (standing or dry_run):
        raise UsageError(f"{'--standing' if standing else '--dry-run'} needs --keep, e.g. --keep 7d")
    if keep is None:
        shown = rs.standing_retention(dataset, remove=remove_standing)
        if as_json:
            emit_json(shown)
            return
        if remove_standing:
            was = shown["removed"]
            out.print(
                f"removed the standing retention of {dataset} ({was['ttl']})"
                if was
                else f"{dataset} has no standing retention"
            )
            return
        out.print(_standing_line(dataset, shown["standing"]))
        return
    result = rs.retention(dataset, keep, dry_run=dry_run, standing=standing)
    if as_json:
        emit_json(result)
        return
    if dry_run:
        out.print(
            f"would delete {result['would_delete_events']:,} events older than {result['cutoff']} from {dataset}, "
            f"freeing about {result['would_free_bytes'] / 1e6:,.1f} MB of {result['bytes_before'] / 1e6:,.1f} MB "
            "(dry run: nothing deleted)"
        )
        if standing:
            out.print(
                f"would set a standing retention of {result['would_set_standing']['keep']}: the server would go on "
                "deleting each day once all its events are older (dry run: not set)"
            )
            return
    else:
        out.print(
            f"deleted {result['deleted_events']:,} events older than {result['cutoff']} from {dataset}; "
            f"{result['bytes_before'] / 1e6:,.1f} MB → {result['bytes_after'] / 1e6:,.1f} MB on disk"
        )
    if result["standing"] or standing:
        out.print(_standing_line(dataset, result["standing"]))


def _standing_line(dataset: str, standing: dict[str, Any] | None) -> str:
    if standing is None:
        return f"{dataset} has no standing retention"
    keep = standing["keep"] or standing["ttl"]
    return (
        f"standing retention of {dataset}: the server deletes each day once all its events are older than {keep} "
        f"(TTL {standing['ttl']})"
    )
