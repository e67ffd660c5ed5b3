"""Moving the write-ahead log into the store: every ``every`` seconds (back to back under
load) the applier seals the log file being written, has the sealed files converted to
JSON lines (OTLP requests are logged as received: convert.py) and ingests them, one
ingest per dataset (the same checked ingest as a file: docs/storage.md), then deletes
the files.

Delivery into the store is at least once. ``apply.state`` lists the files being moved
and each dataset as its ingest commits, so a crash between two datasets re-ingests
neither; only a crash inside the instant between one dataset's commit and that record
re-ingests that dataset's part of the files on restart (docs/server.md).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from rootsift.errors import RootsiftError
from rootsift.server.convert import Converter
from rootsift.server.wal import Wal

if TYPE_CHECKING:
    from rootsift.api import Rootsift

log = logging.getLogger("rootsift.server")

TIME_FIELD = "timestamp"


class Applier:
    def __init__(self, wal: Wal, rs: Rootsift, turn: threading.Lock, *, every: float = 1.0) -> None:
        self.wal, self.rs, self.every = wal, rs, every
        self._turn = turn  # taken to release the files: not while a read uses them
        self.events = 0
        self.rejects = 0
        self.failures = 0
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._idle = threading.Condition()
        self.converter = Converter()
        for stale in wal.directory.glob("*.jsonl"):  # a conversion cut short by a crash
            stale.unlink()
        self._thread = threading.Thread(target=self._loop, name="rootsift-applier", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Apply what is in the log, then stop."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        self.converter.close()

    def flush(self, timeout: float = 30.0) -> None:
        """Apply now and wait until the log is empty (for tests and a graceful stop)."""
        with self._idle:
            self._wake.set()
            self._idle.wait_for(lambda: self.wal.backlog_bytes == 0 or self._stop.is_set(), timeout)

    def _loop(self) -> None:
        moved = False
        while True:
            # under load, the next move starts as soon as this one ends: a batch is what
            # arrived meanwhile (it grows with the ingest's own time, as group commit does);
            # idle, the log is looked at every `every` seconds
            if not moved:
                self._wake.wait(self.every)
            self._wake.clear()
            stopping = self._stop.is_set()
            moved = self.apply_sealed()
            with self._idle:
                self._idle.notify_all()
            if stopping:
                return

    def apply_sealed(self) -> bool:
        """Move every sealed log file into the store: one ingest per dataset over all of
        them (an ingest has a fixed cost; many small ones would fall behind). True when
        something was moved."""
        files = self.wal.seal()
        if not files:
            return False
        try:
            self._apply(files)
        except (RootsiftError, OSError) as exc:  # the store is busy or the disk full: retry later
            self.failures += 1
            log.warning("could not move the write-ahead log into the store (will retry): %s", exc)
            return False
        return True

    def _apply(self, files: list[Path]) -> None:
        state = self.wal.directory / "apply.state"
        done: set[str] = set()
        if state.exists():  # a previous apply of these files stopped part-way
            listed, *finished = state.read_text().split("\n")
            batch = [self.wal.directory / name for name in listed.split()]
            files = [f for f in batch if f.exists()] or files
            done = {d for d in finished if d}
        else:
            _write_synced(state, " ".join(f.name for f in files) + "\n")
        converted = self.converter.convert(files, self.wal.directory)
        try:
            for dataset, part in converted.items():
                if dataset in done:
                    continue
                summary = self.rs.ingest(part.path, dataset, format="jsonl", time_field=TIME_FIELD)
                self.events += summary.events
                self.rejects += summary.rejects
                with state.open("a") as progress:
                    progress.write(dataset + "\n")
                    progress.flush()
                    os.fsync(progress.fileno())
                with self._turn:  # other processes may read and write between applies
                    self.rs.backend.release(dataset)
        finally:
            for part in converted.values():
                part.path.unlink(missing_ok=True)
        for path in files:
            self.wal.applied(path)
        state.unlink()


def _write_synced(path: Path, text: str) -> None:
    with path.open("w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
