"""A flooding client process for the server's overload test: threads posting 200-event
batches (70 kB) as fast as they can for the given seconds, then one JSON line on stdout:
the first number of each acknowledged batch and every refusal (status, Retry-After, body),
written to OUT as JSON.

Run as ``python flood.py URL FIRST_SEED THREADS SECONDS OUT``. Separate processes, and plain
HTTP/1.1 over sockets rather than a client library: what one interpreter's threads can
offer is bounded by its lock, and the point is to offer far more than the server takes."""

from __future__ import annotations

import socket
import sys
import threading
import time
from urllib.parse import urlsplit

import orjson


def _response(sock: socket.socket, buffer: bytearray) -> tuple[int, dict[str, str], bytes]:
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed before a response")
        buffer += chunk
    head, _, rest = bytes(buffer).partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    size = int(headers.get("content-length", "0"))
    while len(rest) < size:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed inside a response")
        rest += chunk
    buffer[:] = rest[size:]
    return int(status_line.split()[1]), headers, rest[:size]


def main() -> None:
    url, first, threads, seconds, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
    where = urlsplit(url)
    acked: list[int] = []
    refusals: list[tuple[int, str | None, str]] = []
    lock = threading.Lock()
    until = time.monotonic() + seconds

    def client(seed: int) -> None:
        n = seed * 10_000_000
        sock: socket.socket | None = None
        buffer = bytearray()
        while time.monotonic() < until:
            body = orjson.dumps([{"data": {"seq": i, "pad": "z" * 300}} for i in range(n, n + 200)])
            head = (
                f"POST /1/batch/flood HTTP/1.1\r\nHost: {where.netloc}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            try:
                if sock is None:
                    sock = socket.create_connection((where.hostname, where.port), timeout=10)
                    buffer.clear()
                sock.sendall(head + body)
                status, headers, text = _response(sock, buffer)
            except OSError:  # the server closed the connection after a refusal: open another
                if sock is not None:
                    sock.close()
                sock = None
                continue  # not answered: neither acknowledged nor refused, sent again
            with lock:
                if status == 200:
                    acked.append(n)
                else:
                    refusals.append((status, headers.get("retry-after"), text.decode()))
            if headers.get("connection", "").lower() == "close":
                sock.close()
                sock = None
            n += 200
        if sock is not None:
            sock.close()

    pool = [threading.Thread(target=client, args=(first + k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    with open(out, "wb") as f:  # not a pipe: a report past its buffer would block until read
        f.write(orjson.dumps({"acked": acked, "refusals": refusals}))


if __name__ == "__main__":
    main()
