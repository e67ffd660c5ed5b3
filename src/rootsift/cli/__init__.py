"""The ``rootsift`` command: a thin layer over rootsift.api.Rootsift.

Exit codes: 0 success, 1 failure, 2 usage error (a flag, a name, an expression).
Every command takes ``--json`` and then prints one JSON object on stdout.

One module per group of commands, each importing only ``common`` (and the module whose
helpers it reuses), never this package::

    common.py     consoles, --data/--json, errors and the JSON envelope
    data.py       ingest, formats, datasets, schema, retention
    query.py      query
    analyses.py   explain, investigate (and run_in_process, for demo)
    judging.py    compare, canary
    scenarios.py  scenario, demo
    profiles.py   profile-diff
"""

from __future__ import annotations

import click

from rootsift.cli import analyses, data, judging, profiles, query, scenarios
from rootsift.cli.common import Group

__all__ = ["main"]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rootsift")
def main() -> None:
    """rootsift: find why production broke, from the telemetry you have."""


for command in (
    data.ingest,
    scenarios.scenario_,
    scenarios.demo,
    data.formats_,
    data.datasets,
    data.schema,
    query.query,
    data.retention,
    analyses.explain,
    analyses.investigate,
    judging.compare,
    judging.canary,
    profiles.profile_diff,
):
    main.add_command(command)
