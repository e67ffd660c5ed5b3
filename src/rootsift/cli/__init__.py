"""The ``rootsift`` command: a thin layer over rootsift.api.Rootsift.

Exit codes: 0 success, 1 failure, 2 usage error (a flag, a name, an expression).
Every command takes ``--json`` and then prints one JSON object on stdout.

One module per group of commands, each importing only ``common`` (and the module whose
helpers it reuses), never this package; ``COMMANDS`` names each command's module, imported
when the command is used::

    common.py     consoles, --data/--json, errors and the JSON envelope
    data.py       ingest, formats, datasets, schema, retention
    query.py      query
    analyses.py   explain, investigate
    judging.py    compare, canary
    changes.py    changes
    scenarios.py  scenario, demo
    serve.py      serve (the HTTP server itself is rootsift.server)
    keys.py       keys create|list|revoke (the server's API keys)
    collect.py    collect procfs
    trends.py     trends
    profiles.py   profile-diff
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from rootsift.cli.common import Group

__all__ = ["main"]

COMMANDS = {
    "ingest": "data:ingest",
    "scenario": "scenarios:scenario_",
    "demo": "scenarios:demo",
    "formats": "data:formats_",
    "datasets": "data:datasets",
    "schema": "data:schema",
    "query": "query:query",
    "retention": "data:retention",
    "collect": "collect:collect",
    "explain": "analyses:explain",
    "investigate": "analyses:investigate",
    "compare": "judging:compare",
    "canary": "judging:canary",
    "serve": "serve:serve",
    "keys": "keys:keys",
    "trends": "trends:trends",
    "changes": "changes:changes",
    "profile-diff": "profiles:profile_diff",
}
"""Each command's module and name in it: a command's module is imported when the command
is used (or listed by --help), so a command starts without the others' definitions."""


class Commands(dict[str, Any]):
    """The group's commands by name, each imported on first access (``COMMANDS``)."""

    def __getitem__(self, name: str) -> click.Command:
        value = super().__getitem__(name)
        if isinstance(value, str):
            module, attr = value.split(":")
            value = getattr(importlib.import_module(f"rootsift.cli.{module}"), attr)
            super().__setitem__(name, value)
        return value  # type: ignore[no-any-return]

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def values(self) -> list[click.Command]:  # type: ignore[override]
        return [self[k] for k in self]

    def items(self) -> list[tuple[str, click.Command]]:  # type: ignore[override]
        return [(k, self[k]) for k in self]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rootsift")
def main() -> None:
    """rootsift: find why production broke, from the telemetry you have."""


main.commands = Commands(COMMANDS)
