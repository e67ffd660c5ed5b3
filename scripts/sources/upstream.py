"""A tiny HTTP upstream for the nginx real-source test: fixed answers, one slow path.

    python3 upstream.py PORT [SLOW_SECONDS]

Serves on 127.0.0.1:PORT until killed:
  /api/fast...     200 "fast\\n"
  /api/slow...     200 "slow\\n" after SLOW_SECONDS (default 0.15)
  /api/error...    500 "error\\n"
  anything else    404 "not found\\n"
GET, HEAD and POST (the request body is read and discarded). Stdlib only.
"""

from __future__ import annotations

import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SLOW = 0.15


class Handler(BaseHTTPRequestHandler):
    """Answers by path prefix; writes no access log of its own."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def _answer(self, send_body: bool) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        if path.startswith("/api/fast"):
            status, body = 200, b"fast\n"
        elif path.startswith("/api/slow"):
            time.sleep(SLOW)
            status, body = 200, b"slow\n"
        elif path.startswith("/api/error"):
            status, body = 500, b"error\n"
        else:
            status, body = 404, b"not found\n"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the name http.server dispatches to
        self._answer(True)

    def do_POST(self) -> None:  # noqa: N802
        self._answer(True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(False)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def main() -> None:
    global SLOW
    port = int(sys.argv[1])
    if len(sys.argv) > 2:
        SLOW = float(sys.argv[2])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
