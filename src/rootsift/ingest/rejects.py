"""Rejected input lines: kept with their line number and reason, never silently skipped."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import IO

SNIPPET = 300


@dataclass(frozen=True)
class Reject:
    """One input line that could not become an event."""

    line: int
    reason: str
    text: str

    def as_dict(self) -> dict[str, object]:
        return {"line": self.line, "reason": self.reason, "text": self.text[:SNIPPET]}


class RejectLog:
    """Appends rejects to a JSON-lines file, created on the first reject."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.count = 0
        self.first: list[Reject] = []
        self._fh: IO[str] | None = None

    def add(self, reject: Reject) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._fh.write(json.dumps(reject.as_dict(), ensure_ascii=False) + "\n")
        self.count += 1
        if len(self.first) < 5:
            self.first.append(reject)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
