"""keys: the server's API keys (create, list, revoke)."""

from __future__ import annotations

from pathlib import Path

import click

from rootsift.cli.common import data_option, emit_json, fail, out
from rootsift.errors import RootsiftError


@click.group()
def keys() -> None:
    """Make, list and revoke the server's API keys (docs/server.md, Keys).

    Example: rootsift keys create --dataset api --scope ingest
    """


def _dir(data_dir: Path | None) -> Path:
    from rootsift.api import default_data_dir

    return Path(data_dir or default_data_dir())


@keys.command()
@data_option
@click.option("--dataset", required=True, help="The dataset the key reaches, or '*' for every one.")
@click.option("--scope", type=click.Choice(["ingest", "read"]), required=True, help="Send events, or read them.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def create(data_dir: Path | None, dataset: str, scope: str, as_json: bool) -> None:
    """Make a key; its token is printed once (only its hash is kept).

    Example: rootsift keys create --dataset api --scope ingest
    """
    from rootsift.server import keys as store

    try:
        key, token = store.create(_dir(data_dir), dataset, scope)
    except RootsiftError as exc:
        fail(exc, as_json)
    if as_json:
        emit_json({"id": key.id, "dataset": key.dataset, "scope": key.scope, "token": token})
    else:
        out.print(f"key {key.id} ({key.scope} on {key.dataset!r}); shown once, keep it:")
        out.print(token, markup=False)


@keys.command(name="list")
@data_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def list_(data_dir: Path | None, as_json: bool) -> None:
    """The keys (ids, datasets, scopes; never the tokens).

    Example: rootsift keys list
    """
    from rootsift.server import keys as store

    try:
        found = store.load(_dir(data_dir))
    except RootsiftError as exc:
        fail(exc, as_json)
    rows = [{"id": k.id, "dataset": k.dataset, "scope": k.scope, "created": k.created} for k in found]
    if as_json:
        emit_json({"keys": rows})
        return
    for r in rows or [{"id": "(no keys: the server binds loopback only)", "dataset": "", "scope": "", "created": ""}]:
        out.print(f"{r['id']:10} {r['scope']:7} {r['dataset']:20} {r['created']}", markup=False)


@keys.command()
@data_option
@click.argument("key_id")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def revoke(data_dir: Path | None, key_id: str, as_json: bool) -> None:
    """Revoke a key by its id (the server stops accepting it at once).

    Example: rootsift keys revoke 3f9a1c2e
    """
    from rootsift.server import keys as store

    try:
        store.revoke(_dir(data_dir), key_id)
    except RootsiftError as exc:
        fail(exc, as_json)
    if as_json:
        emit_json({"revoked": key_id})
    else:
        out.print(f"revoked {key_id}")
