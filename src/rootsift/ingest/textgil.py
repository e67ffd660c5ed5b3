"""A shorter GIL switch interval while a text format's parser runs on its own thread.

The parser (pure Python, the reader thread) and the thread that stores its blocks share
the GIL. The storing thread mostly waits on DuckDB, with the GIL released, but between
its calls it runs a little Python (counting a block's JSON keys, building SQL), and each
time it needs the GIL back it waited up to the switch interval (5 ms) for the parser to
give it up: for a 200k-entry slow log, 0.85 s of wall time in the storing thread's byte
counts, which took 0.08 s of CPU. With 0.5 ms the same ingest took 1.93-2.12 s instead
of 2.14-2.41 (three rounds, alternated, quiet machine). The interval is process-wide:
it is set while any parser runs and restored when the last one ends.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import TypeVar

SWITCH_INTERVAL = 0.0005
"""Seconds a thread holds the GIL before another that waits for it gets it (Python's default: 0.005)."""

T = TypeVar("T")

_lock = threading.Lock()
_running = 0
_saved = 0.005


def sharing_gil(items: Iterator[T]) -> Iterator[T]:
    """``items``, pulled with the switch interval at ``SWITCH_INTERVAL`` until they end (or
    the iterator is closed), then set back as it was before the first parser started."""
    global _running, _saved
    with _lock:
        if _running == 0:
            _saved = sys.getswitchinterval()
            sys.setswitchinterval(min(_saved, SWITCH_INTERVAL))
        _running += 1
    try:
        yield from items
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                sys.setswitchinterval(_saved)
