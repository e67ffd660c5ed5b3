#!/usr/bin/env python3
"""A real ClickHouse server on one machine, from chdb's engine: ClickHouse's own HTTP
(and native TCP) listeners, started by clickhouse-local's ``SYSTEM START LISTEN``
(ClickHouse >= 26.6, in chdb-core >= 26.9), answering on a port like any
``clickhouse-server``. It is what the server backend's tests and ``bench/backends.py``
talk to over HTTP where no ``clickhouse-server`` package can be installed.

    python scripts/clickhouse_server.py --path DIR [--http-port N] [--tcp-port N]
        [--user NAME --password PW] [--config-extra FILE]

It prints one line, ``http://127.0.0.1:PORT``, once the server answers ``/ping`` (and
nothing after it: stdout is closed), and serves until it is sent SIGTERM or SIGINT.
``launch()`` starts it from Python and returns that address. Port 0 (the default) takes a free port.
``--user`` adds a user who needs the password; ``default`` stays without one (clickhouse-local
runs its own query as ``default``), which is why the listeners bind loopback only.
``--config-extra`` adds elements to its ``config.xml``: two servers with native TCP ports and a
``remote_servers`` section naming both as shards are a two-shard cluster
(tests/test_clickhouse_cluster.py); ``ON CLUSTER`` DDL and replicated tables need a Keeper,
which clickhouse-local does not run.

What it is not: a tuned server. It is clickhouse-local's context with its listeners
open: the same engine, SQL, HTTP handler, sessions, settings, authentication and
compression as ``clickhouse-server``, one process, no replication or Keeper.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from xml.sax.saxutils import escape

KEEP_OPEN = "SELECT count() FROM system.numbers WHERE sleepEachRow(1) = 1 SETTINGS max_block_size = 1"
"""clickhouse-local closes its listeners when its query ends: this one never ends (one
row a second, none kept), and the process ends by a signal."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _user(name: str, password: str) -> str:
    return (
        f"<{name}><password>{escape(password)}</password><networks><ip>::/0</ip></networks>"
        f"<profile>default</profile><quota>default</quota>"
        f"<access_management>1</access_management></{name}>"
    )


def write_config(folder: Path, http_port: int, tcp_port: int, user: str | None, password: str, extra: str = "") -> None:
    """clickhouse-local reads ``config.xml`` from its working directory; its users from
    the file that ``users_config`` names (without one, every listener is unauthenticated).
    ``extra``: more of the server's configuration (XML elements of ``<clickhouse>``, e.g.
    ``remote_servers``, ``macros``)."""
    # clickhouse-local runs its own query as ``default``, with no password and checked
    # against its networks like any client: ``default`` stays so, bound to loopback.
    users = _user("default", "")
    if user and user != "default":
        users += _user(user, password)
    (folder / "users.xml").write_text(
        f"<clickhouse><users>{users}</users><profiles><default/></profiles><quotas><default/></quotas></clickhouse>\n"
    )
    tcp = f"<tcp_port>{tcp_port}</tcp_port>" if tcp_port else ""
    (folder / "config.xml").write_text(
        "<clickhouse>"
        f"<http_port>{http_port}</http_port>{tcp}<listen_host>127.0.0.1</listen_host>"
        f"<users_config>{escape(str(folder / 'users.xml'))}</users_config>{extra}"
        "</clickhouse>\n"
    )


def wait_ready(url: str, seconds: float, alive: threading.Thread) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and alive.is_alive():
        try:
            with urllib.request.urlopen(f"{url}/ping", timeout=1) as answer:
                if answer.read().strip() == b"Ok.":
                    return True
        except OSError:
            time.sleep(0.1)
    return False


def launch(path: Path, log: Path, *options: str) -> tuple[str, subprocess.Popen[str]]:
    """Start this script as a server on ``path`` (its stderr into ``log``; ``options`` as
    on its command line): its address once it answers, and its process."""
    with log.open("w") as err:
        command = [sys.executable, __file__, "--path", str(path), *options]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)
    assert process.stdout is not None
    lines = iter(process.stdout.readline, "")  # the engine may print its own words first
    address = next((line.strip() for line in lines if line.startswith("http://")), "")
    process.stdout.close()
    if not address:
        process.kill()
        raise RuntimeError(f"the ClickHouse server did not start: {log.read_text().strip()}")
    return address, process


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", required=True, type=Path, help="the server's data directory")
    parser.add_argument("--http-port", type=int, default=0, help="0: a free port")
    parser.add_argument(
        "--tcp-port", type=int, default=-1, help="the native protocol's port (0: a free one; default: none)"
    )
    parser.add_argument("--user", help="a user who needs --password to connect")
    parser.add_argument("--password", default="")
    parser.add_argument("--ready-seconds", type=float, default=60.0)
    parser.add_argument(
        "--config-extra", type=Path, help="a file of more configuration: XML elements of <clickhouse> (a cluster's)"
    )
    args = parser.parse_args()
    try:
        import chdb._chdb as engine
    except ImportError:
        print("error: chdb is not installed (pip install 'rootsift[clickhouse]')", file=sys.stderr)
        return 2
    args.path.mkdir(parents=True, exist_ok=True)
    http_port = args.http_port or free_port()
    tcp_port = args.tcp_port if args.tcp_port != 0 else free_port()
    folder = Path(tempfile.mkdtemp(prefix="rootsift-clickhouse-"))
    extra = args.config_extra.read_text() if args.config_extra else ""
    write_config(folder, http_port, max(tcp_port, 0), args.user, args.password, extra)
    os.chdir(folder)
    failure: list[str] = []
    # Only the listeners asked for (QUERIES ALL would open TCP on 9000 unconfigured).
    listen = "SYSTEM START LISTEN HTTP;" + (" SYSTEM START LISTEN TCP;" if tcp_port > 0 else "")

    def serve() -> None:
        try:
            engine.query(f"{listen} {KEEP_OPEN}", "TabSeparated", path=str(args.path.absolute()))
        except Exception as error:  # the engine's own words, printed below
            failure.append(str(error))

    # The HTTP handler's default output format is the one this query runs with:
    # TabSeparated, as clickhouse-server's.
    listener = threading.Thread(target=serve, daemon=True)
    listener.start()
    url = f"http://127.0.0.1:{http_port}"
    if not wait_ready(url, args.ready_seconds, listener):
        if listener.is_alive():
            why = f"no answer on {url}/ping within {args.ready_seconds:g} s"
        else:
            why = failure[0] if failure else "the engine's query ended (its words above)"
        print(f"error: the ClickHouse server did not start: {why}", file=sys.stderr)
        return 1
    print(url, flush=True)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # nothing after the address: no pipe to fill
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(0.5) and listener.is_alive():
        pass
    sys.stdout.flush()
    os._exit(0 if stop.is_set() else 1)  # the engine's threads do not join


if __name__ == "__main__":
    sys.exit(main())
