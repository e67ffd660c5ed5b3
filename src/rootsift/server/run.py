"""Running the application under uvicorn on the API port and the OTLP port at once."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import socket
import threading
from collections.abc import Iterator

from rootsift.errors import UsageError
from rootsift.server.app import ServerConfig, create_app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(config: ServerConfig, host: str, ports: list[int], log_level: str = "warning") -> None:
    """Serve until SIGTERM/SIGINT (uvicorn stops accepting, finishes requests, then the
    lifespan writes the log and moves it into the store)."""
    import uvicorn

    from rootsift.server.keys import load

    if not is_loopback(host) and not load(config.data_dir):
        raise UsageError(
            f"--host {host}: serving beyond this machine needs keys, and {config.data_dir} has none; "
            "make one with `rootsift keys create --dataset NAME --scope ingest|read`, or use --host 127.0.0.1"
        )
    sockets = []
    for port in dict.fromkeys(ports):  # one server on every port: its signals, one lifespan
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            sock.close()
            raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        sockets.append(sock)
    app = create_app(config)

    class Server(uvicorn.Server):
        """uvicorn's server, whose SIGTERM/SIGINT stop it gracefully and are then done
        with (uvicorn re-raises them after shutdown, making a requested stop exit -15)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            old = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in old.items():
                    signal.signal(sig, handler)

    server = Server(uvicorn.Config(app, log_level=log_level, timeout_graceful_shutdown=30))
    asyncio.run(server.serve(sockets=sockets))
