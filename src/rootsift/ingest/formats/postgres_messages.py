"""Numbers inside well-known PostgreSQL messages, as fields of their own.

temporary file: path "base/pgsql_tmp/pgsql_tmp731.0", size 24576      → temp_file_bytes
disconnection: session time: 0:00:04.010 user=bob database=shop …     → session_ms
process 4882 still waiting for ShareLock on transaction 259635360 after 1000.119 ms
process 4882 acquired ShareLock on transaction 259635360 after 2301.5 ms → lock_wait_ms
"""

from __future__ import annotations

import re

from rootsift.ingest.formats.base import Event

_TEMP = re.compile(r'temporary file: path ".*", size (\d+)')
_SESSION = re.compile(r"disconnection: session time: (\d+):(\d\d):(\d\d(?:\.\d+)?)")
_LOCK = re.compile(
    r"process \d+ (?:still waiting for|acquired|avoided deadlock for|detected deadlock while waiting for) .* after (\d+(?:\.\d+)?) ms"
)


def add_facts(event: Event, message: str) -> None:
    """Set the fields above when ``message`` is one of those messages."""
    if message.startswith("temporary file: "):
        m = _TEMP.match(message)
        if m is not None:
            event["temp_file_bytes"] = int(m.group(1))
    elif message.startswith("disconnection: "):
        m = _SESSION.match(message)
        if m is not None:
            hours, minutes, seconds = m.groups()
            event["session_ms"] = round((int(hours) * 3600 + int(minutes) * 60 + float(seconds)) * 1000, 3)
    elif message.startswith("process "):
        m = _LOCK.match(message)
        if m is not None:
            event["lock_wait_ms"] = float(m.group(1))
