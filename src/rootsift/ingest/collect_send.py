"""Sending collected samples to a ``rootsift serve`` instead of a local store
(``rootsift collect procfs --to URL``): each batch of samples is one POST to Honeycomb's
batch route ``/1/batch/<dataset>``, gzip'd, with the key in ``X-Rootsift-Key``. The
server answers 200 only once the events are durable; 429, 503 and a server that cannot
be reached are retried like a busy store (the samples wait, bounded); 400, 401, 403 and
404 stop the collector with the server's reason.
"""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from collections.abc import Iterable
from urllib.parse import quote

from rootsift.errors import RootsiftError, UsageError


class ServerBusy(RootsiftError):
    """The server refused for now (429, 503) or could not be reached: retry later."""


class Sender:
    def __init__(self, url: str, dataset: str, key: str | None = None, timeout: float = 30.0) -> None:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"--to {url!r}: give the server's URL, e.g. http://127.0.0.1:8080")
        self.url = f"{url.rstrip('/')}/1/batch/{quote(dataset, safe='')}"
        self.key, self.timeout = key, timeout

    def send(self, lines: Iterable[bytes]) -> tuple[int, int]:
        """Post JSON-lines events; (accepted, refused) by the server's per-item statuses."""
        items = [b'{"data":' + line.rstrip(b"\n") + b"}" for line in lines if line.strip()]
        if not items:
            return 0, 0
        body = gzip.compress(b"[" + b",".join(items) + b"]", compresslevel=5)
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
        if self.key:
            headers["X-Rootsift-Key"] = self.key
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as res:
                statuses = json.loads(res.read())
        except urllib.error.HTTPError as exc:
            why = _reason(exc)
            if exc.code in (429, 503):
                raise ServerBusy(f"{self.url}: {exc.code} {why}") from exc
            raise UsageError(f"{self.url}: {exc.code} {why}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ServerBusy(f"{self.url}: {getattr(exc, 'reason', exc)}") from exc
        accepted = sum(1 for s in statuses if isinstance(s, dict) and s.get("status") == 202)
        return accepted, len(statuses) - accepted


def _reason(exc: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(exc.read())["error"]["message"])
    except (ValueError, KeyError, TypeError, OSError):
        return str(exc.reason)
