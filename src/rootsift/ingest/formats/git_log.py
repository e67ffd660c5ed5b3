"""``git log`` as change events: every commit is one event with ``change.kind = "commit"``.

The parser reads the output of exactly this command (docs/formats.md, "Change events")::

    git log --format='%H%x1f%cI%x1f%an%x1f%ae%x1f%s' [--name-only | --name-status]

one line per commit, its fields separated by the ASCII unit separator (``%x1f``): the
full hash, the committer date in strict ISO 8601 (when the commit landed: rebases and
merges keep the author's date but not this one), the author's name and email, the
subject. The four-field form without the email (``%H%x1f%cI%x1f%an%x1f%s``) and the
author date (``%aI``) in place of ``%cI`` read the same. With ``--name-only`` or
``--name-status`` the files under each commit become ``files`` (the new path of a
rename) and ``files_changed``. ``service`` and other scope come from ``--label``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

SEP = "\x1f"
_HASH = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # SHA-1, SHA-256 repositories
_STATUS = re.compile(r"[AMDRTCUX]\d*\t")
"""The status column of ``--name-status`` (``M``, ``R100``…) before the path(s)."""


def _commit(line: str) -> tuple[Event | None, str]:
    """A header line as an event, or None and what is wrong with it."""
    fields = line.split(SEP)
    if len(fields) not in (4, 5):
        return None, f"a commit line has 4 or 5 fields separated by %x1f, this one {len(fields)}"
    sha, when, author = fields[0].strip(), fields[1].strip(), fields[2]
    if not _HASH.fullmatch(sha):
        return None, f"commit hash {sha[:80]!r} is not 40 or 64 hex digits (use %H)"
    try:
        at = datetime.fromisoformat(when)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        return None, f"commit date {when[:80]!r} is not strict ISO 8601 with an offset (use %cI or %aI)"
    ev: Event = {TIME_KEY: at, "change": {"kind": "commit"}, "commit": sha, "author": author}
    if len(fields) == 5:
        ev["author_email"] = fields[3]
    ev["description"] = fields[-1]
    return ev, ""


@register
class GitLogFormat(TextFormat):
    """``git log --format='%H%x1f%cI%x1f%an%x1f%ae%x1f%s'`` (optionally ``--name-only``): one change per commit."""

    name = "git-log"
    summary = "git log --format='%H%x1f%cI%x1f%an%x1f%ae%x1f%s' [--name-only]: one change event per commit"
    reads = ()

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        heads = [ln for ln in lines if SEP in ln]
        if not heads:
            return 0.0
        good = sum(_commit(ln)[0] is not None for ln in heads)
        return 0.95 if good and good >= 0.5 * len(heads) else 0.0  # a unit separator is rare in anything else

    def parse(self, lines: Lines) -> Iterator[Item]:
        current: tuple[int, Event] | None = None
        files: list[str] = []
        bad_header = 0
        for n, line in lines:
            if SEP in line:
                if current is not None:
                    yield self._done(current, files)
                current, files, bad_header = None, [], 0
                ev, error = _commit(line)
                if ev is None:
                    bad_header = n
                    yield Reject(n, error, line)
                    continue
                current = (n, ev)
                continue
            path = line.strip()
            if not path:
                continue
            if current is None:
                why = f"a file of the rejected commit at line {bad_header}" if bad_header else "text before any commit"
                yield Reject(n, f"{why} (expected git log --format='%H%x1f%cI%x1f%an%x1f%ae%x1f%s')", line)
                continue
            if _STATUS.match(line):
                path = line.split("\t")[-1]
            files.append(path)
        if current is not None:
            yield self._done(current, files)

    @staticmethod
    def _done(current: tuple[int, Event], files: list[str]) -> tuple[int, Event]:
        n, ev = current
        if files:
            ev["files"] = ", ".join(files)
            ev["files_changed"] = len(files)
        return n, ev
