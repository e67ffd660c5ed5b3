"""What a snapshot's path says: the time in its file name and the host it came from.

Shared by the ``procfs`` and ``prometheus`` formats, whose inputs are snapshots (one
file per capture, often named by a cron job) rather than logs with a time per line.

Rules (docs/formats/procfs.md, docs/formats/prometheus.md):

* time: the first date-and-time in the file's name, else in its parent directory's name;
  forms ``2020-01-02.10:15`` (``date +%Y-%m-%d.%H:%M``), ``2024-01-01T10:00:00Z``,
  ``2024-01-01_10-00-00``, ``20240101T100000``, ``20240101-1000`` (optional seconds,
  fraction and ``Z``/``±HH:MM`` offset) and 10-digit epoch seconds (``date +%s``). A date
  alone is not a time. Times without an offset are read in the ``--tz`` zone.
* host: the nearest directory above the file that is not part of the /proc layout
  (``proc``, ``net``, ``self``, ``thread-self``, a process number) nor a date; none for
  stdin or a bare file name.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from pathlib import PurePath

_DASHED = re.compile(
    r"(?<!\d)(\d{4})-(\d{2})-(\d{2})[T _.\-]?(\d{2})[:\-.h]?(\d{2})"
    r"(?:[:\-.m]?(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+\-]\d{2}:?\d{2}(?!\d))?(?!\d)",
    re.IGNORECASE,
)
_COMPACT = re.compile(
    r"(?<!\d)(\d{4})(\d{2})(\d{2})[T_\-.](\d{2})(\d{2})(\d{2})?(?:[.,](\d{1,9}))?(Z|[+\-]\d{2}:?\d{2}(?!\d))?(?!\d)",
    re.IGNORECASE,
)
_EPOCH = re.compile(r"(?<!\d)1\d{9}(?!\d)")
_DATE_DIR = re.compile(r"\d{4}-?\d{2}-?\d{2}(?!\d)")
PROC_LAYOUT = frozenset({"proc", "net", "pressure", "self", "thread-self", "task", ""})
"""Directory names that are part of a /proc tree, never a host."""


def _offset(text: str | None, zone: tzinfo) -> tzinfo:
    if not text:
        return zone
    if text.upper() == "Z":
        return UTC
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))


def _from_match(m: re.Match[str], zone: tzinfo) -> datetime | None:
    year, month, day, hour, minute, second, frac, off = m.groups()
    micros = int((frac or "0")[:6].ljust(6, "0"))
    try:
        return datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second or 0), micros, _offset(off, zone)
        )
    except ValueError:  # 2024-13-45: digits that are not a date
        return None


def time_in_name(name: str, zone: tzinfo = UTC) -> datetime | None:
    """The first date-and-time written in ``name`` (naive ones read in ``zone``), or None.

    >>> time_in_name("meminfo_2020-01-02.10:15").isoformat()
    '2020-01-02T10:15:00+00:00'
    """
    for pattern in (_DASHED, _COMPACT):
        for m in pattern.finditer(name):
            found = _from_match(m, zone)
            if found is not None:
                return found
    epoch = _EPOCH.search(name)
    return datetime.fromtimestamp(int(epoch.group()), UTC) if epoch else None


def time_from_path(source: str, zone: tzinfo = UTC) -> datetime | None:
    """The time in the file's name, else in its parent directory's name, else None."""
    if source in ("", "-"):
        return None
    path = PurePath(source)
    return time_in_name(path.name, zone) or time_in_name(path.parent.name, zone)


def host_from_path(source: str) -> str | None:
    """The nearest directory above ``source`` that names neither a /proc part nor a date.

    >>> host_from_path("snapshots/web01/proc/net/tcp")
    'web01'
    """
    if source in ("", "-"):
        return None
    for part in reversed(PurePath(source).parent.parts):
        if part in PROC_LAYOUT or part in (".", "..", "/") or part.isdigit() or _DATE_DIR.match(part):
            continue
        if time_in_name(part) is not None:
            continue
        return part
    return None
