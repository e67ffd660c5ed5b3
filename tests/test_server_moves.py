"""When the applier moves the write-ahead log into the store: large moves under load (small
ones cost the store about 2x the CPU a row), at once under a light load (applier.py)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from rootsift import Rootsift
from rootsift.server.applier import GENERATION_BYTES, MOVE_EVENTS, MOVE_WAIT, Applier
from rootsift.server.wal import Wal


def test_a_move_under_load_waits_until_it_is_large_and_not_under_a_light_load(tmp_path: Path) -> None:
    rs = Rootsift(tmp_path / "data")
    wal = Wal(tmp_path / "data" / ".server" / "wal")
    applier = Applier(wal, rs, threading.Lock(), every=3600)  # the threads are not started
    try:
        gen = applier._open
        assert not applier._movable()  # nothing converted
        now = time.monotonic()
        gen.files.append(tmp_path / "00000001.log")
        gen.events, gen.since = 1000, now + 3600  # converted "just now", whatever the clock does here
        applier._moved_at = now  # the store has just moved: it is busy
        assert not applier._movable()  # small, and more is being converted
        asyncio.run(wal.append("shop", b'{"n": 1}\n'))  # a request arrived since
        applier._caught_up = True
        assert not applier._movable()  # caught up with the log, but more came and the store is busy
        gen.log_bytes = wal.backlog_bytes
        assert applier._movable()  # a burst's end: the log holds nothing more
        gen.log_bytes = 0
        applier._moved_at = now - 7200
        assert applier._movable()  # a light load: the store rested
        applier._caught_up = False
        gen.events = MOVE_EVENTS
        assert applier._movable()  # two row groups
        gen.events, gen.size = 1000, GENERATION_BYTES
        assert applier._movable()  # full
        gen.size, gen.since = 0, now - MOVE_WAIT - 1
        assert applier._movable()  # its first events waited long enough
        gen.since, gen.ready = now + 3600, True
        assert applier._movable()  # the conversion decided to hand it over: whatever the log does now
        applier._converting = True
        assert not applier._movable()  # never while a conversion into it runs
    finally:
        wal.close()
        rs.close()
