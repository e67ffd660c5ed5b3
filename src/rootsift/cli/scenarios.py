"""The scenario commands: write a reference incident's telemetry (scenario), or generate,
ingest and analyse them in one go (demo)."""

from __future__ import annotations

import dataclasses
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rootsift.cli.common import FindingsShown, common, emit_json, fail, out
from rootsift.errors import RootsiftError, UsageError

if TYPE_CHECKING:
    from rootsift.api import Rootsift


@click.command("scenario")
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
    from rootsift import scenarios

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
    except OSError as exc:
        fail(RootsiftError(f"--out {out_dir}: cannot write the scenario there ({exc.strerror or exc})"), as_json)
    commands = registered()
    asks = [argv for argv in manifest.analyses if argv and argv[0] in commands]  # only what this version has
    if as_json:
        emit_json({"out": str(out_dir), **dataclasses.asdict(manifest), "analyses": asks})
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
    if asks:
        out.print("then ask:")
        for argv in asks:
            out.print(f"  {shlex.join(['rootsift', *argv])}", markup=False)


@click.command()
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
    from rootsift import scenarios

    names = [name] if name else list(scenarios.all_scenarios())
    root = out_dir or rs.data_dir / ".scenarios"
    report = [scenarios.demo(rs, n, root / n, seed, scale) for n in names]
    commands = registered()
    warnings = []
    for run in report:
        asked, run["analyses"] = run["analyses"], []
        for argv in asked:
            entry: dict[str, Any] = {"command": shlex.join(["rootsift", *argv]), "available": argv[0] in commands}
            run["analyses"].append(entry)
        missing = sorted({a["command"].split()[1] for a in run["analyses"]} - set(commands))
        if missing:
            warnings.append(f"{run['scenario']}: not available yet: {', '.join(missing)} (no findings from them)")
        run["_asked"] = asked
    if as_json:
        for run in report:
            for argv, entry in zip(run.pop("_asked"), run["analyses"]):
                if entry["available"]:
                    entry["result"] = _in_process(rs, commands[argv[0]], argv, capture=True)
        emit_json({"scenarios": report, "warnings": warnings})
        return
    for run in report:
        out.print(f"[bold]{run['scenario']}[/bold] (seed {seed}) written to {run['out']}")
        from rich.table import Table

        t = Table(show_edge=False, header_style="bold")
        for col in ("dataset", "source", "format", "events", "rejects"):
            t.add_column(col, justify="right" if col in ("events", "rejects") else "left")
        for src in run["ingested"]:
            t.add_row(src["dataset"], src["source"], src["format"], f"{src['events']:,}", f"{src['rejects']:,}")
        out.print(t)
        if any(analysis["available"] for analysis in run["analyses"]):
            out.print("what to ask of it:")
        for analysis in run["analyses"]:
            if analysis["available"]:
                out.print(f"  {analysis['command']}", markup=False)
        for argv, entry in zip(run.pop("_asked"), run["analyses"]):
            if entry["available"]:
                out.print(f"\n[bold]$ {entry['command']}[/bold]", highlight=False)
                _in_process(rs, commands[argv[0]], argv, capture=False)
    for w in warnings:
        out.print(f"[yellow]{w}[/yellow]")


DEMO_LIMIT = "5"
"""Findings each analysis shows in the demo's terminal output (its --limit, when it has one)."""


def _in_process(rs: Rootsift, command: click.Command, argv: list[str], capture: bool) -> Any:
    """Run a manifest's command line on the open store, as the command itself would: its
    JSON (capture) or its own terminal output, shortened to DEMO_LIMIT findings."""
    from rootsift.cli.common import served

    args = list(argv[1:])
    shortens = any(isinstance(p, FindingsShown) for p in command.params)
    if not capture and shortens and "--limit" not in args:
        args += ["--limit", DEMO_LIMIT]
    got: list[Any] = []
    with served(rs, got.append if capture else None):
        try:
            command.main(
                args=[*args, "--json"] if capture else args, prog_name=f"rootsift {argv[0]}", standalone_mode=False
            )
        except click.ClickException as exc:
            got.append({"error": {"type": "UsageError", "message": exc.format_message()}})
            if not capture:
                out.print(f"[red]error:[/red] {exc.format_message()}", markup=True, highlight=False)
        except SystemExit:
            pass  # an analysis that exits 1 on what it found (a regression) has printed it
    return got[-1] if got else None


def registered() -> Mapping[str, click.Command]:
    """The commands of the ``rootsift`` group running this command, by name (its own
    mapping: the ``rootsift`` group imports a command's module when it is looked up)."""
    root = click.get_current_context().find_root().command
    return root.commands if isinstance(root, click.Group) else {}
