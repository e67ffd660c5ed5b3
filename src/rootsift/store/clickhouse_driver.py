"""Reaching ClickHouse through clickhouse-connect: the URL ``--clickhouse-url`` takes, the
connection the ClickHouse backend runs its SQL on, and the driver's errors translated
into rootsift's tree (errors.py).

URL forms (``--clickhouse-url``, ``$ROOTSIFT_CLICKHOUSE_URL``)::

    http://user:password@host:8123/database        a server (https://…:8443 for TLS)
    http://host:8123                               user ``default``, database ``rootsift``
    chdb:///path/to/dir                            clickhouse-connect's in-process chdb engine
    …?connect_timeout=10&read_timeout=300          whole seconds (these are the defaults)

The database holds rootsift's tables (one a dataset) and the views of the OpenTelemetry
exporter's tables; it is created if missing. ``connect_timeout`` bounds each attempt to
open a TCP connection (clickhouse-connect retries a refused or timed-out connection once);
``read_timeout`` bounds a query's whole run on the server (``max_execution_time``: the
server sends progress headers while a query runs, every 10–120 s as clickhouse-connect asks,
which would keep a read timeout alone from firing) and, ``SOCKET_GRACE`` later, the wait for
the next bytes of an answer (the socket's read timeout, for a server that went silent).
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from rootsift.errors import StoreError, StoreUnavailableError, UsageError

if TYPE_CHECKING:
    import pyarrow as pa

DEFAULT_DATABASE = "rootsift"
CONNECT_TIMEOUT = 10
READ_TIMEOUT = 300
_DATABASE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


@dataclass(frozen=True)
class ClickHouseURL:
    """A parsed ``--clickhouse-url``: where the server (or chdb directory) is, who connects,
    the database of rootsift's tables, and the timeouts in seconds."""

    scheme: str
    host: str = ""
    port: int | None = None
    username: str = ""
    password: str = ""
    database: str = DEFAULT_DATABASE
    path: str = ""
    """The chdb data directory (``chdb:`` URLs)."""
    connect_timeout: int = CONNECT_TIMEOUT
    read_timeout: int | None = READ_TIMEOUT
    """None: no limit (the embedded store of ``--backend chdb``, where nothing is configured)."""

    def shown(self) -> str:
        """The URL as messages print it: never the password."""
        if self.scheme == "chdb":
            return f"chdb://{self.path}"
        user = f"{self.username}@" if self.username else ""
        return f"{self.scheme}://{user}{self.host}:{self.port}/{self.database}"

    @classmethod
    def embedded(cls, path: Path) -> ClickHouseURL:
        """``--backend chdb``'s store: chdb's engine in ``path``, no timeout configured."""
        return cls("chdb", path=str(path), read_timeout=None)


def parse_url(text: str) -> ClickHouseURL:
    """``text`` as a ClickHouseURL; a malformed one is a UsageError naming ``--clickhouse-url``."""

    def bad(why: str) -> UsageError:
        return UsageError(
            f"--clickhouse-url {text!r}: {why} (expected http(s)://user:password@host:8123/database "
            "or chdb:///path/to/dir; also $ROOTSIFT_CLICKHOUSE_URL)"
        )

    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as exc:
        raise bad(str(exc)) from None
    scheme = parts.scheme.lower()
    timeouts = {"connect_timeout": CONNECT_TIMEOUT, "read_timeout": READ_TIMEOUT}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in timeouts:
            raise bad(f"unknown parameter {key!r} (known: {', '.join(timeouts)})")
        if not value.isdigit() or int(value) < 1:
            raise bad(f"{key} must be a whole number of seconds, at least 1")
        timeouts[key] = int(value)
    connect_timeout, read_timeout = timeouts["connect_timeout"], timeouts["read_timeout"]
    if scheme == "chdb":
        if parts.netloc or not parts.path:
            raise bad("a chdb URL names a directory: chdb:///absolute/path")
        return ClickHouseURL(
            "chdb", path=unquote(parts.path), connect_timeout=connect_timeout, read_timeout=read_timeout
        )
    if scheme not in ("http", "https"):
        raise bad(f"the scheme must be http, https or chdb, not {scheme or 'none'!r}")
    if not parts.hostname:
        raise bad("no host")
    database = unquote(parts.path.strip("/")) or DEFAULT_DATABASE
    if not _DATABASE.match(database):
        raise bad(f"{database!r} is not a database name (letters, digits, '_')")
    return ClickHouseURL(
        scheme,
        host=parts.hostname,
        port=port or (8443 if scheme == "https" else 8123),
        username=unquote(parts.username or ""),
        password=unquote(parts.password or ""),
        database=database,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
    )


class ClientConnection:
    """SQL on a clickhouse-connect ``Client``: a server over HTTP(S), or chdb in process
    (a ``chdb:`` URL), the same client API either way."""

    def __init__(self, url: ClickHouseURL) -> None:
        self.url = url
        try:
            import clickhouse_connect
        except ImportError:
            raise UsageError(
                "the ClickHouse backends need clickhouse-connect: pip install 'rootsift[clickhouse]'"
            ) from None
        logging.getLogger("clickhouse_connect").addHandler(logging.NullHandler())  # errors reach the user as ours
        # Set once for the session: a per-call setting costs chdb's transport a SET, a
        # snapshot and a restore around every query.
        settings: dict[str, Any] = {"output_format_arrow_string_as_string": 1}
        if url.read_timeout is not None:
            settings["max_execution_time"] = url.read_timeout
        try:
            if url.scheme == "chdb":
                self.client = clickhouse_connect.get_client(dsn=f"chdb://{url.path}", settings=settings)
                # (its chdb transport takes no connect or socket timeout: the engine is in process)
            else:
                self.client = clickhouse_connect.get_client(
                    interface=url.scheme,
                    host=url.host,
                    port=url.port,
                    username=url.username or None,
                    password=url.password,
                    connect_timeout=url.connect_timeout,
                    # (a live server stops the query at read_timeout and says so; the
                    # socket waits SOCKET_GRACE longer so that its words arrive first)
                    send_receive_timeout=None if url.read_timeout is None else url.read_timeout + SOCKET_GRACE,
                    query_retries=0,
                    settings=settings,
                    autogenerate_session_id=False,
                )
        except ImportError:  # a chdb:// URL without chdb
            raise UsageError(f"{url.shown()} needs the chdb package: pip install 'rootsift[clickhouse]'") from None
        except Exception as exc:
            raise translate(exc, "", url) from exc  # names the URL

    def select(self, sql: str, params: dict[str, Any]) -> pa.Table:
        """The rows of a query as an Arrow table (strings as text)."""
        return self.client.query_arrow(sql, parameters=params or None)  # strings as text: the session's setting

    def command(self, sql: str, params: dict[str, Any]) -> None:
        """Run a statement that returns no rows (DDL, INSERT … SELECT)."""
        self.client.command(sql, parameters=params or None)

    def insert_arrow(self, table: str, columns: list[str], stream: Iterator[bytes], settings: dict[str, Any]) -> None:
        """Stream an Arrow IPC stream (``stream``'s chunks) into ``table`` in one INSERT."""
        chunks: Generator[bytes, None, None] = (chunk for chunk in stream)
        self.client.raw_insert(table, columns, insert_block=chunks, settings=settings, fmt="ArrowStream")

    def recover(self) -> None:
        if self.url.scheme == "chdb":  # takes what a failed query left (ClickHouseBackend.recover)
            self.client.raw_query("SELECT 1", fmt="TabSeparated")

    def close(self) -> None:
        self.client.close()


def translate(exc: BaseException, what: str, url: ClickHouseURL | None = None) -> StoreError:
    """A clickhouse-connect (or chdb) error as rootsift's: a server that cannot be reached
    (refused, unknown host, silent past a timeout) is a StoreUnavailableError naming the
    URL; every other failure a StoreError with the engine's first line. ``what`` (the
    action, e.g. "query failed") leads the message; empty, the URL does."""
    from clickhouse_connect.driver import exceptions as cc

    table = errors()
    kind = next((table[k] for k in type(exc).__mro__ if k in table), StoreError)
    text = str(exc).strip()
    code = getattr(exc, "code", None)
    if isinstance(exc, cc.OperationalError) and not isinstance(exc, cc.StreamFailureError) and code is None:
        kind, text = StoreUnavailableError, _network_reason(text, url)
    else:
        kind = StoreError if kind is StoreUnavailableError else kind
        text = engine_message(text)
        if url is not None and not what:
            text = f"ClickHouse at {url.shown()}: {text}"
        if code == TIMEOUT_EXCEEDED and url is not None:
            text += f" (read_timeout={url.read_timeout} s of --clickhouse-url)"
        if code == AUTHENTICATION_FAILED:
            text += " (the user and password of --clickhouse-url or $ROOTSIFT_CLICKHOUSE_URL)"
    return kind(f"{what}: {text}" if what else text)


def engine_message(text: str) -> str:
    """The engine's own words from a driver message: from ``Code: N.`` to the end of its
    line, without the request's URL and the server's version (HTTP adds both)."""
    start = text.find("Code: ")
    line = _first_line(text[start:] if start >= 0 else text)
    line = re.sub(r"\s*\(for url [^)]*\)\s*$", "", line)
    return re.sub(r"\s*\(version [^()]*(\([^()]*\))?[^()]*\)\s*$", "", line)


SOCKET_GRACE = 2
"""Seconds the socket waits past ``read_timeout``: the server stops a query at
``max_execution_time`` = ``read_timeout`` and sends its TIMEOUT_EXCEEDED, which a socket
timing out at the same second would race (measured against a live server: with a 1 s
``read_timeout`` the socket won). A server that says nothing fails at read_timeout + 2 s."""
TIMEOUT_EXCEEDED = 159
"""ClickHouse's error code for a query stopped by ``max_execution_time``."""
AUTHENTICATION_FAILED = 516
"""ClickHouse's error code for a user it does not know or a wrong password."""


@functools.cache
def errors() -> dict[type[BaseException], type[StoreError]]:
    """Every exception class of ``clickhouse_connect.driver.exceptions`` and the rootsift
    error it becomes (tests/test_clickhouse_server.py fails if one is missing). A function:
    clickhouse-connect is imported only when the backend opens."""
    from clickhouse_connect.driver import exceptions as cc

    return {
        cc.OperationalError: StoreUnavailableError,  # the server could not be reached or stopped answering
        cc.StreamFailureError: StoreError,  # the server failed while sending a result
        cc.StreamClosedError: StoreError,
        cc.ProgrammingError: StoreError,
        cc.NotSupportedError: StoreError,
        cc.DataError: StoreError,
        cc.IntegrityError: StoreError,
        cc.InternalError: StoreError,
        cc.DatabaseError: StoreError,
        cc.InterfaceError: StoreError,
        cc.Error: StoreError,
        cc.ClickHouseError: StoreError,
        cc.Warning: StoreError,
        cc.StreamCompleteException: StoreError,
    }


def _first_line(text: str) -> str:
    return text.split("\n")[0].strip()


def _network_reason(text: str, url: ClickHouseURL | None) -> str:
    """What went wrong reaching the server, in a few words, from urllib3's long message."""
    where = f"cannot reach ClickHouse at {url.shown()}" if url is not None else "cannot reach ClickHouse"
    hint = " (is the server up? the URL: --clickhouse-url or $ROOTSIFT_CLICKHOUSE_URL)"
    if "connect timeout" in text or "ConnectTimeoutError" in text:
        seconds = f" within connect_timeout={url.connect_timeout} s" if url is not None else ""
        return f"{where}: no connection{seconds}{hint}"
    if "Read timed out" in text:
        seconds = f" within read_timeout={url.read_timeout} s (+{SOCKET_GRACE} s)" if url is not None else ""
        return f"{where}: no answer{seconds}{hint}"
    errno = re.search(r"\[Errno -?\d+\] ([^')\"]+)", text)
    reason = errno.group(1).strip() if errno else _first_line(text)[:200]
    return f"{where}: {reason}{hint}"
