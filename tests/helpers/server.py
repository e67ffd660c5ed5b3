"""A real `rootsift serve` process on free ports, for the server's and the web page's tests."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    data: Path
    proc: subprocess.Popen[bytes]
    port: int
    otlp_port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def otlp(self) -> str:
        return f"http://127.0.0.1:{self.otlp_port}"

    def health(self) -> dict[str, Any]:
        return dict(httpx.get(self.url + "/healthz", timeout=10).json())

    def settled(self, timeout: float = 30) -> dict[str, Any]:
        """Health once the write-ahead log is empty (everything is in the store)."""
        deadline = time.monotonic() + timeout
        while True:
            health = self.health()
            if health["wal_backlog_bytes"] == 0 or time.monotonic() > deadline:
                return health
            time.sleep(0.1)

    def query(self, spec: dict[str, Any]) -> dict[str, Any]:
        res = httpx.post(self.url + "/api/query", json=spec, timeout=30)
        assert res.status_code == 200, res.text
        return dict(res.json())

    def rss(self, field: str = "VmRSS") -> int:
        """The server's resident memory in bytes; ``VmHWM``: its peak since it started."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field}")


def start(data: Path, *extra: str) -> Server:
    port, otlp_port = free_port(), free_port()
    argv = [sys.executable, "-m", "rootsift", "serve", "--data", str(data), "--port", str(port)]
    argv += ["--otlp-port", str(otlp_port), "--apply-every", "0.1", *extra]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Server(data, proc, port, otlp_port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            why = proc.stderr.read().decode() if proc.stderr else ""
            if proc.stderr:
                proc.stderr.close()
            raise AssertionError(f"serve exited {proc.returncode}: {why}")
        try:
            server.health()
            return server
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    proc.wait()
    raise AssertionError("serve did not answer in 30 s")


def stop(server: Server) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    try:
        return server.proc.wait(30)
    finally:
        if server.proc.stderr:
            server.proc.stderr.close()
