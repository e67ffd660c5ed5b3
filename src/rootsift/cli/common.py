"""What every command shares: the consoles, ``--data``/``--json`` and the opened store,
JSON output, and errors reported with their exit code (and the JSON envelope with --json)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console

from rootsift.errors import RootsiftError

# Piped output is not cut to 80 columns: tables keep whole values for grep and less.
out = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False)


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, default=str, ensure_ascii=False))


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
            from rootsift.api import Rootsift, default_data_dir  # the store: not needed for --help

            try:
                with Rootsift(data_dir or default_data_dir(), read_only=read_only and _exists(data_dir)) as rs:
                    func(rs, as_json=as_json, **kwargs)
            except RootsiftError as exc:
                fail(exc, as_json)

        return run

    return wrap


def _exists(data_dir: Path | None) -> bool:
    from rootsift.api import default_data_dir

    return (data_dir or default_data_dir()).exists()
