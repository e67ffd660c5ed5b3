"""The ``rootsift`` command: a thin layer over rootsift.api.Rootsift.

Exit codes: 0 success, 1 failure, 2 usage error (a flag, a name, an expression).
Every command takes ``--json`` and then prints one JSON object on stdout.

One module per group of commands, each importing only ``common`` (and the module whose
helpers it reuses), never this package::

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

import click

from rootsift.cli import analyses, changes, collect, data, judging, keys, profiles, query, scenarios, serve, trends
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
    collect.collect,
    analyses.explain,
    analyses.investigate,
    judging.compare,
    judging.canary,
    serve.serve,
    keys.keys,
    trends.trends,
    changes.changes,
    profiles.profile_diff,
):
    main.add_command(command)
