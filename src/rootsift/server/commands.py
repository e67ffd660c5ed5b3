"""Every read command of the CLI over HTTP: ``POST /api/<command>`` with a JSON object of
its options runs it as ``rootsift <command> ... --json`` would, on the server's store, and
answers the same JSON. The command's click definition is the route's definition: its
options are the body's keys (``{"dataset": "api", "from": "-2h", "select": "duration_ms
> 1000"}``), parsed and checked by click exactly as on the command line, and the OpenAPI
document is made from it too. A command is served, or named in ``NOT_SERVED`` with why.
"""

from __future__ import annotations

from typing import Any

import click

from rootsift.cli.common import served

NOT_SERVED = {
    "ingest": "send events to /v1/traces, /v1/logs, /v1/metrics or /1/batch/<dataset>",
    "serve": "the server itself",
    "scenario": "writes files on the server's disk",
    "demo": "writes files and a store on the server's disk",
    "retention": "deletes events: needs keys, which are not built yet",
    "canary": "watches for minutes; run it from the command line",
    "keys": "manages the keys themselves",
    "collect": "samples the machine it runs on",
}
"""Commands with no route, and why (a test fails for a command in neither list)."""

NOT_OVER_HTTP = {
    "data": "the server's store is used",
    "report": "writes a file on the server's disk",
    "out": "writes files on the server's disk",
    "spec": "reads a file on the server's disk: post the spec itself to /api/query",
}
"""Options refused over HTTP, and why."""


class BadRequest(Exception):
    pass


def served_commands(group: click.Group) -> dict[str, click.Command]:
    return {name: cmd for name, cmd in group.commands.items() if name not in NOT_SERVED}


def keys(param: click.Parameter) -> list[str]:
    """The JSON keys a parameter answers to: its long flag without dashes (``select-from``),
    the same with underscores, and an argument's name."""
    if isinstance(param, click.Argument):
        return [param.name or ""]
    longs = [o[2:] for o in param.opts if o.startswith("--")]
    return list(dict.fromkeys([*longs, *(n.replace("-", "_") for n in longs)]))


def argv(command: click.Command, body: dict[str, Any]) -> list[str]:
    """The command line ``body`` stands for; BadRequest for an unknown or refused key."""
    known: dict[str, click.Parameter] = {}
    for param in command.params:
        if param.name == "as_json":  # every command answers with its --json
            continue
        for key in keys(param):
            known[key] = param
    unknown = [k for k in body if k not in known]
    if unknown:
        names = ", ".join(sorted({keys(p)[0] for p in known.values()} - set(NOT_OVER_HTTP)))
        raise BadRequest(f"unknown option(s) {', '.join(map(repr, unknown))}; {command.name} takes: {names}")
    positional: list[str] = []
    options: list[str] = []
    for key, value in body.items():
        param = known[key]
        name = keys(param)[0]
        if name in NOT_OVER_HTTP:
            raise BadRequest(f"{name!r} is not taken over HTTP: {NOT_OVER_HTTP.get(name, 'the server chooses it')}")
        if isinstance(param, click.Argument):
            positional += [str(v) for v in value] if isinstance(value, list) else [str(value)]
            continue
        flag = "--" + name
        if isinstance(param, click.Option) and param.is_flag:
            if not isinstance(value, bool):
                raise BadRequest(f"{name!r} is a flag: true or false")
            if value:
                options.append(flag)
            continue
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, dict | list):
                raise BadRequest(f"{name!r} takes a value or a list of values")
            options += [flag, str(v).lower() if isinstance(v, bool) else str(v)]
    return [*positional, *options, "--json"]


def run(command: click.Command, args: list[str], rs: Any) -> tuple[int, Any]:
    """(HTTP status, JSON) of running ``command`` with ``args`` on ``rs``."""
    out: list[Any] = []
    code = 0
    with served(rs, out.append):
        try:
            command.main(args=args, prog_name=f"rootsift {command.name}", standalone_mode=False)
        except click.ClickException as exc:
            return 400, {"error": {"type": "UsageError", "message": exc.format_message()}}
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    if not out:
        return 500, {"error": {"type": "NoOutput", "message": f"{command.name} printed no JSON (exit {code})"}}
    result = out[-1]
    if isinstance(result, dict) and set(result) == {"error"}:
        kind = str(result["error"].get("type", ""))
        return (404 if kind == "DatasetNotFoundError" else 400 if code == 2 else 500), result
    return 200, result


def _schema(param: click.Parameter) -> dict[str, Any]:
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        schema: dict[str, Any] = {"type": "boolean"}
    elif isinstance(kind, click.Choice):
        schema = {"type": "string", "enum": list(kind.choices)}
    elif isinstance(kind, click.types.IntParamType):
        schema = {"type": "integer"}
    elif isinstance(kind, click.types.FloatParamType):
        schema = {"type": "number"}
    else:
        schema = {"type": "string"}
    if getattr(param, "multiple", False):
        schema = {"type": "array", "items": schema}
    help_text = getattr(param, "help", None)
    if help_text:
        schema["description"] = help_text
    return schema


def openapi(group: click.Group, extra: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI 3.1 document: ``extra`` paths (ingest, query, health) and one POST
    route per served command, its body made from the command's options."""
    paths = dict(extra)
    for name, cmd in sorted(served_commands(group).items()):
        props: dict[str, Any] = {}
        required = []
        for param in cmd.params:
            key = keys(param)[0]
            if param.name == "as_json" or key in NOT_OVER_HTTP:
                continue
            props[key] = _schema(param)
            if param.required:
                required.append(key)
        body = {"type": "object", "properties": props, "required": required, "additionalProperties": False}
        paths.setdefault(f"/api/{name}", {})["post"] = {
            "summary": (cmd.help or "").split("\n\n")[0].replace("\n", " "),
            "description": f"Runs `rootsift {name} ... --json` on the server's store; the same JSON.",
            "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
            "responses": {
                "200": {"description": f"The JSON of `rootsift {name} --json`"},
                "400": {"description": "A usage error: {error: {type, message}}"},
                "404": {"description": "An unknown dataset"},
            },
        }
    return {"openapi": "3.1.0", "info": {"title": "rootsift", "version": _version()}, "paths": paths}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rootsift")
    except PackageNotFoundError:
        return "0"
