"""A bounded, seeded HTTP load against a local nginx; prints what it sent as JSON.

    python3 http_load.py BASE_URL [REQUESTS] [--seed N] [--threads N]

BASE_URL must be a loopback address (http://127.0.0.1:PORT). Sends exactly REQUESTS
(default 500) requests over a fixed mix of paths (see PLAN), from a few threads, each
with a 10 s timeout, and prints ``{"sent": n, "by_path": {path: {status: count}},
"methods": {method: count}, "agents": {user_agent: count}, "errors": [...]}`` where
``path`` excludes the query string and ``status`` is what the client received ("error"
when no answer came). Stdlib only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator

# (weight, method, path): the mix of requests. /api/* goes to the upstream, /static/*
# and /health are answered by nginx itself, /flaky/* goes to an upstream group whose
# first peer refuses connections.
PLAN = [
    (40, "GET", "/api/fast"),
    (6, "GET", "/api/slow"),
    (8, "GET", "/api/missing"),
    (4, "GET", "/api/error"),
    (6, "POST", "/api/fast"),
    (3, "HEAD", "/api/fast"),
    (12, "GET", "/static/hello.txt"),
    (5, "GET", "/static/nope.txt"),
    (10, "GET", "/health"),
    (6, "GET", "/flaky/fast"),
]
AGENTS = [
    "rootsift-load/1.0",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36",
    'curl/8.4.0 "quoted"',  # nginx escapes the quotes as \x22 in the log
]


def requests(n: int, seed: int) -> Iterator[tuple[str, str, dict[str, str], bytes | None]]:
    """The ``n`` requests of the load: method, target (path and query), headers, body."""
    rng = random.Random(seed)
    weights = [w for w, _, _ in PLAN]
    for i in range(n):
        _, method, path = rng.choices(PLAN, weights)[0]
        query = urllib.parse.urlencode({"i": i, "q": rng.choice(["a b", "x/y", "ünï"])})
        headers = {"User-Agent": rng.choice(AGENTS)}
        if rng.random() < 0.3:
            headers["Referer"] = f"http://example.test/page/{rng.randrange(5)}"
        body = None
        if method == "POST":
            body = json.dumps({"i": i}).encode()
            headers["Content-Type"] = "application/json"
        yield method, f"{path}?{query}", headers, body


def run(base: str, n: int, seed: int, threads: int) -> dict[str, object]:
    """Send the load and count what came back, by path and status."""
    url = urllib.parse.urlsplit(base)
    if url.hostname not in ("127.0.0.1", "localhost", "::1"):
        raise SystemExit(f"http_load: {base} is not a loopback address")
    todo = list(requests(n, seed))
    lock = threading.Lock()
    by_path: dict[str, Counter[str]] = {}
    methods: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    errors: list[str] = []

    def worker(items: list[tuple[str, str, dict[str, str], bytes | None]]) -> None:
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=10)
        for method, target, headers, body in items:
            try:
                conn.request(method, target, body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                status = str(resp.status)
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port or 80, timeout=10)
                status = "error"
                with lock:
                    errors.append(f"{method} {target}: {exc}")
            with lock:
                by_path.setdefault(target.split("?", 1)[0], Counter())[status] += 1
                methods[method] += 1
                agents[headers["User-Agent"]] += 1
        conn.close()

    pool = [threading.Thread(target=worker, args=(todo[k::threads],)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return {
        "sent": n,
        "by_path": {p: dict(sorted(c.items())) for p, c in sorted(by_path.items())},
        "methods": dict(sorted(methods.items())),
        "agents": dict(sorted(agents.items())),
        "errors": errors[:10],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("base")
    ap.add_argument("requests", nargs="?", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=4)
    args = ap.parse_args()
    print(json.dumps(run(args.base, args.requests, args.seed, args.threads), indent=1))


if __name__ == "__main__":
    main()
