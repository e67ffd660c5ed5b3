"""API keys: ``rs_<id>_<secret>``, each for one dataset (or ``*``) and one scope (``ingest``
or ``read``), stored in ``DATA/.server/keys.json`` as the SHA-256 of the secret (a key is
32 random bytes: a slow hash adds nothing against guessing it). The server re-reads the
file when it changes, so ``rootsift keys create`` takes effect without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from rootsift.errors import UsageError

SCOPES = ("ingest", "read")


@dataclass(frozen=True)
class Key:
    id: str
    hash: str
    dataset: str
    scope: str
    created: str

    def allows(self, dataset: str | None, scope: str) -> bool:
        """A key for one dataset reaches only it; what names no dataset (``datasets``)
        needs a key for every dataset, ``*``."""
        return self.scope == scope and (self.dataset == "*" or self.dataset == dataset)


def keys_file(data_dir: Path) -> Path:
    return data_dir / ".server" / "keys.json"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def load(data_dir: Path) -> list[Key]:
    path = keys_file(data_dir)
    if not path.exists():
        return []
    try:
        return [Key(**k) for k in json.loads(path.read_text())]
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path} is not a keys file rootsift wrote: {exc}") from exc


def _save(data_dir: Path, keys: list[Key]) -> None:
    from rootsift.store.files import write_json_atomic

    path = keys_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, [asdict(k) for k in keys], mode=0o600, indent=1)  # secrets' hashes: owner only


def create(data_dir: Path, dataset: str, scope: str) -> tuple[Key, str]:
    """A new key (saved) and its token, shown once."""
    if scope not in SCOPES:
        raise UsageError(f"--scope {scope!r}: one of {', '.join(SCOPES)}")
    if dataset != "*":
        from rootsift.store.base import check_dataset_name

        check_dataset_name(dataset)
    key_id, secret = secrets.token_hex(4), secrets.token_urlsafe(32)
    key = Key(key_id, _digest(secret), dataset, scope, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    _save(data_dir, [*load(data_dir), key])
    return key, f"rs_{key_id}_{secret}"


def revoke(data_dir: Path, key_id: str) -> None:
    keys = load(data_dir)
    kept = [k for k in keys if k.id != key_id]
    if len(kept) == len(keys):
        raise UsageError(f"no key {key_id!r} (rootsift keys list shows them)")
    _save(data_dir, kept)


class Keys:
    """The keys the server checks, re-read when the file changes."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._stamp: tuple[int, int] | None = None
        self._keys: dict[str, Key] = {}
        self.refresh()

    def refresh(self) -> None:
        path = keys_file(self.data_dir)
        try:
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            stamp = None
        if stamp != self._stamp:
            self._keys = {k.id: k for k in load(self.data_dir)}
            self._stamp = stamp

    @property
    def required(self) -> bool:
        self.refresh()
        return bool(self._keys)

    def find(self, token: str | None) -> Key | None:
        """The key ``token`` is, or None."""
        if not token or not token.startswith("rs_"):
            return None
        key_id, _, secret = token[3:].partition("_")
        key = self._keys.get(key_id)
        if key is None or not hmac.compare_digest(key.hash, _digest(secret)):
            return None
        return key


def token(headers: Mapping[str, str]) -> str | None:
    """The key a request carries: ``Authorization: Bearer KEY`` (OTLP exporters:
    ``OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer KEY``), ``X-Honeycomb-Team: KEY``
    (libhoney's write key) or ``X-Rootsift-Key: KEY``."""
    get = headers.get
    auth = get("authorization") or ""
    if auth.lower().startswith("bearer "):
        return str(auth[7:].strip())
    return get("x-honeycomb-team") or get("x-rootsift-key")


def check(keys: Keys, headers: Mapping[str, str], dataset: str | None, scope: str) -> tuple[int, str] | None:
    """None when the request may go on; else (401 or 403, why)."""
    if not keys.required:
        return None
    given = token(headers)
    key = keys.find(given)
    if key is None:
        return (
            401,
            "a key is required (Authorization: Bearer KEY); rootsift keys create makes one"
            if not given
            else "this key is not valid",
        )
    if not key.allows(dataset, scope):
        where = f"dataset {dataset!r}" if dataset else "every dataset (a key for '*')"
        return (
            403,
            f"key {key.id} is for {scope if key.scope == scope else key.scope} on {key.dataset!r}, not {scope} on {where}",
        )
    return None
