"""What every command shares: the consoles, ``--data``/``--json`` and the opened store,
JSON output, and errors reported with their exit code (and the JSON envelope with --json).

No traceback reaches a user: ``Group`` (the ``rootsift`` group's class) reports click's
own usage errors, OS errors (a file that cannot be written, a folder that does not exist)
and any error nothing else caught in one line, with the JSON envelope under --json.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import click

from rootsift.errors import RootsiftError
from rootsift.timeutil import parse_duration

if TYPE_CHECKING:
    from rich.console import Console


class _Later:
    """A console made on first use: rich costs ~15-25 ms to import, and ``--json``,
    ``--help`` and a command that fails on its flags print nothing through it."""

    def __init__(self, make: Callable[[], Console]) -> None:
        self._make = make
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            self._console = self._make()
        return getattr(self._console, name)


def _stdout() -> Console:
    from rich.console import Console

    # Piped output is not cut to 80 columns: tables keep whole values for grep and less.
    return Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


out = cast("Console", _Later(_stdout))
err = cast("Console", _Later(_stderr))


INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT), as shells report a command killed by it."""


class Group(click.Group):
    """A click group whose errors are always a line and an exit code, never a traceback:
    click's usage errors (an unknown option, a bad value) exit 2, Ctrl-C 130, OS errors 1, each with
    the JSON error envelope on stdout when ``--json`` was given; ``ROOTSIFT_DEBUG=1``
    lets an unexpected error through with its traceback."""

    def main(  # type: ignore[override]
        self,
        args: list[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(args) if args is not None else sys.argv[1:]
        as_json = "--json" in argv
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except click.ClickException as exc:
            if as_json:
                kind = "UsageError" if isinstance(exc, click.UsageError) else type(exc).__name__
                emit_json({"error": {"type": kind, "message": exc.format_message()}})
            exc.show()
            sys.exit(exc.exit_code)
        except (click.Abort, KeyboardInterrupt) as exc:
            if not interrupted(exc):  # click's Abort without Ctrl-C: end of input at a prompt
                err.print("aborted")
                sys.exit(1)
            _interrupted_exit(as_json)
        except RootsiftError as exc:
            if interrupted(exc):
                _interrupted_exit(as_json)
            fail(exc, as_json)
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # the reader went away (| head): nothing to say
                sys.stdout = None  # type: ignore[assignment]
                sys.exit(1)
            if interrupted(exc):
                _interrupted_exit(as_json)
            fail(RootsiftError(os_message(exc)), as_json)
        except Exception as exc:
            if interrupted(exc):
                _interrupted_exit(as_json)
            if os.environ.get("ROOTSIFT_DEBUG"):
                raise
            hint = "a bug in rootsift; ROOTSIFT_DEBUG=1 shows where"
            fail(RootsiftError(f"unexpected {type(exc).__name__}: {exc} ({hint})"), as_json)
        sys.exit(code if isinstance(code, int) else 0)


def interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is what Ctrl-C became: a KeyboardInterrupt, DuckDB's InterruptException
    or the RuntimeError DuckDB raises when it took the SIGINT itself (Ctrl-C during a
    query), or an error raised while any of them was handled (a buffer that
    cannot close during the unwinding, a store error wrapping the interrupted query)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if isinstance(at, KeyboardInterrupt) or (
            type(at).__name__ == "InterruptException" and type(at).__module__.lstrip("_") == "duckdb"
        ):
            return True
        if type(at) is RuntimeError and str(at) == "Query interrupted":  # DuckDB took the SIGINT itself
            return True
        at = at.__cause__ or at.__context__
    return False


def _interrupted_exit(as_json: bool) -> NoReturn:
    if as_json:
        emit_json({"error": {"type": "Interrupted", "message": "interrupted (Ctrl-C)"}})
    err.print("interrupted (Ctrl-C)")
    sys.exit(INTERRUPTED)


def os_message(exc: OSError) -> str:
    """An OS error in one line naming its file: ``/x/y.html: No such file or directory``."""
    return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)


_SERVED: contextvars.ContextVar[tuple[Any, Callable[[Any], None] | None] | None] = contextvars.ContextVar(
    "rootsift_served", default=None
)
"""Set while a command runs inside another process's work (the server, ``demo``): (the
open store to use, where its JSON goes: None prints as usual)."""


@contextlib.contextmanager
def served(rs: Any, sink: Callable[[Any], None] | None) -> Iterator[None]:
    """Run commands inside this block on ``rs`` (an open store, kept open): with a
    ``sink``, as with ``--json``, their JSON (or error envelope) handed to it instead of
    stdout; without one, printing as they would (``demo`` runs a manifest's commands so)."""
    token = _SERVED.set((rs, sink))
    try:
        yield
    finally:
        _SERVED.reset(token)


def emit_json(data: Any) -> None:
    shared = _SERVED.get()
    if shared is not None and shared[1] is not None:
        shared[1](data)
        return
    click.echo(json.dumps(data, default=str, ensure_ascii=False))


def fail(exc: RootsiftError, as_json: bool) -> NoReturn:
    """Report an error (also as a JSON envelope with --json) and exit with its code."""
    shared = _SERVED.get()
    captured = shared is not None and shared[1] is not None
    if as_json or captured:
        emit_json({"error": {"type": type(exc).__name__, "message": str(exc)}})
        if captured:
            sys.exit(exc.exit_code)
    from rich.markup import escape

    err.print(
        f"[red]error:[/red] {escape(str(exc))}", markup=True, highlight=False, soft_wrap=True
    )  # one line for grep
    sys.exit(exc.exit_code)


class Duration(click.ParamType):
    """A duration flag (``7d``, ``1h30m``, ``500ms``): one that cannot be read is click's
    usage error naming the flag."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        try:
            return parse_duration(str(value))
        except RootsiftError as exc:
            self.fail(str(exc), param, ctx)


class Probability(click.ParamType):
    """A level strictly between 0 and 1 (``--alpha 0.05``): 0, 1, a negative number or
    ``nan`` is click's usage error naming the flag."""

    name = "probability"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            level = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number; give a level between 0 and 1, e.g. 0.05", param, ctx)
        if not 0 < level < 1:  # also refuses nan
            self.fail(f"{value} is not between 0 and 1 (both excluded); e.g. 0.05", param, ctx)
        return level


def _data_dir(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: name the data directory (or leave --data out for the default)")
    return Path(value) if value is not None else None


data_option = click.option(
    "--data",
    "data_dir",
    type=click.Path(),
    default=None,
    callback=_data_dir,
    help="Data directory (default: $ROOTSIFT_DATA or ./.rootsift).",
)


BACKEND_NAMES = ("duckdb", "chdb", "clickhouse")
"""What --backend accepts (``rootsift.store.base.BACKENDS``)."""

backend_option = click.option(
    "--backend",
    type=click.Choice(BACKEND_NAMES, case_sensitive=False),
    default=None,
    envvar="ROOTSIFT_BACKEND",
    help="Store engine: duckdb (default), chdb (embedded ClickHouse) or clickhouse (a server: "
    "--clickhouse-url) (also $ROOTSIFT_BACKEND).",
)
clickhouse_url_option = click.option(
    "--clickhouse-url",
    default=None,
    envvar="ROOTSIFT_CLICKHOUSE_URL",
    help="The ClickHouse server of --backend clickhouse: http(s)://user:password@host:8123/database "
    "(?connect_timeout=10&read_timeout=300, seconds), or chdb:///dir; implies --backend clickhouse "
    "(also $ROOTSIFT_CLICKHOUSE_URL).",
)


def engine_of(backend: str | None, clickhouse_url: str | None) -> tuple[str, str | None]:
    """The backend to open and its server URL. A URL alone means ``clickhouse``; one from
    $ROOTSIFT_CLICKHOUSE_URL is ignored by another --backend, one given as --clickhouse-url
    is a usage error with it."""
    from click.core import ParameterSource

    engine = (backend or ("clickhouse" if clickhouse_url else "duckdb")).lower()
    if engine == "clickhouse":
        if not clickhouse_url:
            raise click.UsageError(
                "--backend clickhouse needs --clickhouse-url (or $ROOTSIFT_CLICKHOUSE_URL), e.g. "
                "http://user:password@host:8123/rootsift"
            )
        return engine, clickhouse_url
    context = click.get_current_context(silent=True)
    if clickhouse_url and context and context.get_parameter_source("clickhouse_url") == ParameterSource.COMMANDLINE:
        raise click.UsageError(f"--clickhouse-url is for --backend clickhouse, not --backend {engine}")
    return engine, None


def common(read_only: bool | Callable[[dict[str, Any]], bool]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Shared options: --data, --backend (--clickhouse-url) and --json; opens the store
    (read-only if ``read_only`` is, or returns true for the command's arguments) and maps
    errors to exit codes."""

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        @data_option
        @backend_option
        @clickhouse_url_option
        @click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
        @functools.wraps(func)
        def run(
            data_dir: Path | None, backend: str | None, clickhouse_url: str | None, as_json: bool, **kwargs: Any
        ) -> None:
            from rootsift.api import Rootsift, default_data_dir  # the store: not needed for --help

            try:
                shared = _SERVED.get()
                if shared is not None:  # run inside the server or demo, on its store
                    func(shared[0], as_json=as_json or shared[1] is not None, **kwargs)
                    return
                reads = read_only(kwargs) if callable(read_only) else read_only
                engine, url = engine_of(backend, clickhouse_url)
                with Rootsift(
                    data_dir or default_data_dir(),
                    read_only=reads and _exists(data_dir),
                    engine=engine,
                    clickhouse_url=url,
                ) as rs:
                    func(rs, as_json=as_json, **kwargs)
            except RootsiftError as exc:
                fail(exc, as_json)
            except OSError as exc:
                fail(RootsiftError(os_message(exc)), as_json)

        return run

    return wrap


def _exists(data_dir: Path | None) -> bool:
    from rootsift.api import default_data_dir

    return (data_dir or default_data_dir()).exists()


def cohort_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Two cohorts, A (the baseline) and B, each a filter and/or a time range: ``--a --b
    --a-from --a-to --b-from --b-to`` (compare, profile-diff)."""
    options = [
        click.option("--a", "a", default=None, help="Cohort A (the baseline), a filter, e.g. 'version = \"1.4\"'."),
        click.option("--b", "b", default=None, help="Cohort B (the change), a filter."),
        click.option("--a-from", default=None, help="Start of cohort A's time range."),
        click.option("--a-to", default=None, help="End of cohort A's time range."),
        click.option("--b-from", default=None, help="Start of cohort B's time range."),
        click.option("--b-to", default=None, help="End of cohort B's time range."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


class FindingsShown(click.Option):
    """``--limit``: how many findings an analysis shows in the terminal (``--json`` has
    them all). Its own class, so ``demo`` can shorten exactly this option."""


def findings_limit(default: int = 20) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--limit",
        cls=FindingsShown,
        type=click.IntRange(min=1),
        default=default,
        show_default=True,
        help="Findings shown in the terminal.",
    )
