"""The collect commands: ``rootsift collect procfs`` samples this machine's /proc into a dataset."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from rootsift.cli.common import Duration, common, emit_json, err, out
from rootsift.cli.data import parse_labels

if TYPE_CHECKING:
    from rootsift.api import Rootsift
    from rootsift.ingest.collect import CollectSummary


@click.group()
def collect() -> None:
    """Sample telemetry of this machine into a dataset on an interval (runs in the foreground).

    Example: rootsift collect procfs --every 60s --label kernel=$(uname -r)
    """


@collect.command("procfs")
@click.option("--every", type=Duration(), default="60s", show_default=True, help="Time between samples, e.g. 60s, 5m.")
@click.option("--dataset", "-d", default="hosts", show_default=True, help="Dataset to store the samples in.")
@click.option(
    "--label",
    "labels",
    multiple=True,
    metavar="KEY=VALUE",
    help="A field set on every event, e.g. --label kernel=$(uname -r) (repeatable).",
)
@click.option("--host", default=None, help="Host name on every event (default: this machine's name).")
@click.option("--count", type=click.IntRange(min=1), default=None, help="Take this many samples, then exit.")
@click.option(
    "--files",
    default=None,
    metavar="LIST",
    help="Comma-separated /proc files (default meminfo,slabinfo,vmstat,cgroups,pressure,loadavg; "
    "also stat, diskstats, zoneinfo, net/sockstat, net/tcp).",
)
@click.option("--proc", "proc", default="/proc", show_default=True, help="The /proc to read (e.g. /host/proc).")
@click.option(
    "--to", "to", default=None, metavar="URL", help="Send to a rootsift serve at URL instead of --data's store."
)
@click.option("--key", envvar="ROOTSIFT_KEY", default=None, help="The server's ingest key (default: $ROOTSIFT_KEY).")
@common(read_only=False)
def procfs(
    rs: Rootsift,
    as_json: bool,
    every: timedelta,
    dataset: str,
    labels: tuple[str, ...],
    host: str | None,
    count: int | None,
    files: str | None,
    proc: str,
    to: str | None,
    key: str | None,
) -> None:
    """Sample /proc (meminfo, slabinfo, vmstat, cgroups, pressure, loadavg) every interval
    into a dataset, with the fields of the procfs format, labelled with the host.

    Runs until SIGTERM or Ctrl-C (what was sampled is committed first) or --count samples.
    Files that cannot be read (slabinfo is root-only) are reported once and skipped; a
    busy store is retried with backoff. See docs/collect.md for a systemd unit.

    Example: rootsift collect procfs --every 60s --dataset hosts --label kernel=$(uname -r)
    """

    def warn(message: str) -> None:
        err.print(f"[yellow]warning:[/] {message}", markup=True, highlight=False, soft_wrap=True)

    names = [f for f in files.split(",") if f.strip()] if files is not None else None
    if not as_json:
        where = f"{dataset} at {to}" if to else dataset
        err.print(f"collecting {proc} every {every.total_seconds():g} s into {where}; Ctrl-C stops", highlight=False)
    summary = rs.collect_procfs(
        dataset,
        every=every.total_seconds(),
        count=count,
        proc=proc,
        files=names,
        host=host,
        labels=parse_labels(labels),
        warn=warn,
        to=to,
        key=key,
    )
    if as_json:
        emit_json(summary.as_dict())
    else:
        _print_summary(summary)
    if problem := summary.problem():
        err.print(f"[red]error:[/red] {problem}", markup=True, highlight=False)
        sys.exit(1)


def _print_summary(summary: CollectSummary) -> None:
    out.print(
        f"collected [bold]{summary.stored_samples:,}[/bold] samples ({summary.events:,} events) of "
        f"{', '.join(summary.files)} into [bold]{summary.dataset}[/bold] as host {summary.host} "
        f"in {summary.seconds:.1f} s"
    )
    if summary.stopped_by:
        out.print(f"stopped by {summary.stopped_by}: every sample taken was committed first")
    for name, why in summary.unreadable.items():
        out.print(f"[yellow]not read:[/] {summary.proc}/{name}: {why}")
    for warning in summary.warnings:
        out.print(f"[yellow]warning:[/] {warning}")
    if summary.busy_retries:
        out.print(f"the store was busy {summary.busy_retries} time(s); retried with backoff")
    if summary.rejects:
        out.print(f"[yellow]{summary.rejects:,} rejected lines[/] (first of each file saved to {summary.rejects_file})")
