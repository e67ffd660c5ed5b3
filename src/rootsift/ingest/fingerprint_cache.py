"""A cache in front of ``fingerprint.mysql`` for logs where one statement shape repeats
with other numbers (the slow-log parser's hot path; docs/formats/fingerprints.md)."""

from __future__ import annotations

import re

from rootsift.ingest.fingerprint import mysql

_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")
# A digit run of the zeroed key as one 0, except before a digit, x or b: "0x1f" and "10x1f"
# (or "0b1" and "00b1") differ, as _MY_NUMBER reads them.
_RUNS = re.compile(rb"0+(?![0xXbB])")


class MySQLCache:
    """``mysql`` with a cache keyed by the statement with every digit made ``0``, so
    ``... id = 8513358`` and ``... id = 3015985`` are fingerprinted once.

    Exact: a MySQL fingerprint depends on where digits are, never on their values (every
    digit run becomes ``?``), except in ``CALL proc1(...)`` (the name is kept), the
    ``/*!40001`` mysqldump rule and admin commands, which are never cached. Statements
    over ``max_len`` characters are not cached.

    A second cache, consulted when the first misses, is keyed with each digit run made one
    ``0``: ``IN (123456, 98765)`` and ``IN (12, 3)`` have one fingerprint. Not for
    statements with a ``/*`` comment (percona-toolkit's ``/*db.tbl:1/2*/`` names single digits).
    """

    def __init__(self, limit: int = 20_000, max_len: int = 2_000) -> None:
        self.limit = limit
        self.max_len = max_len
        self._cache: dict[bytes, str] = {}
        self._runs: dict[bytes, str] = {}

    def __call__(self, statement: str) -> str:
        """The fingerprint of ``statement`` (see ``mysql``)."""
        if not isinstance(statement, str) or len(statement) > self.max_len:
            return mysql(statement)
        key = statement.encode("utf-8", "surrogatepass").translate(_ZERO_DIGITS)
        fp = self._cache.get(key)
        if fp is None:
            fp = self._miss(statement, key)
        return fp

    def _miss(self, statement: str, key: bytes) -> str:
        head = key[:30].lstrip()[:22].lower()
        if b"/*!" in key or head.startswith((b"call", b"administrator command")):
            return mysql(statement)
        runs = None if b"/*" in key else _RUNS.sub(b"0", key)
        fp = None if runs is None else self._runs.get(runs)
        if fp is None:
            fp = mysql(statement)
            if runs is not None:
                if len(self._runs) >= self.limit:
                    self._runs.clear()
                self._runs[runs] = fp
        if len(self._cache) >= self.limit:
            self._cache.clear()
        self._cache[key] = fp
        return fp
