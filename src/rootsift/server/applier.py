"""Moving the write-ahead log into the store, in two stages that overlap:

- **convert**: seal the log file being written and convert the sealed files (OTLP requests
  are logged as received: convert.py) into the open *generation*: Arrow files of OTLP
  events, JSON lines per dataset; under load back to back, idle every ``every`` s or as
  soon as the log holds ``BATCH_BYTES``;
- **ingest**: close the open generation (conversion goes on into the next) and ingest each
  of its datasets (the same checked ingest as a file: docs/storage.md), then delete its
  log files. Under load a move waits until it is large (``MOVE_EVENTS``, ``_movable``).

So the store ingests one batch while the next is converted, on the other core. Delivery
into the store is at least once. ``apply.state`` lists the log files of the generation
being ingested and each dataset as its ingest commits, so a crash between two datasets
re-ingests neither; only a crash inside the instant between one dataset's commit and that
record re-ingests that dataset's part on restart (docs/server.md).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rootsift.errors import RootsiftError
from rootsift.server.convert import ARROW, Converted, Converter, Poison
from rootsift.server.wal import Wal, write_synced
from rootsift.store.base import Backend

if TYPE_CHECKING:
    from rootsift.api import Rootsift

log = logging.getLogger("rootsift.server")

TIME_FIELD = "timestamp"
GENERATION_BYTES = 64 << 20
"""Most JSON lines converted into one generation: an ingest's memory grows with its input,
so when the store falls behind the log waits (and past --max-backlog, requests get 503)
instead of the batches growing."""
POISON_TRIES = 3
"""Conversions a record may fail (``convert.Poison``) before it is moved out of the log into
``DATA/.server/quarantine/`` (counted in /healthz as ``quarantined_batches``): a record the
converter rejects every time would otherwise hold back the log behind it forever."""
MOVE_EVENTS = 2 * 122_880
"""Under load a move waits for this many events (two of DuckDB's row groups): rows that do
not fill a row group go through DuckDB's own log and are compressed when the files are
released after the move, and again when the next move adds to their row group, so small
moves cost the store about 2x the CPU a row of large ones do (≈ 4.8 µs a span at 47k spans
a move, ≈ 2.5 µs at 235k: bench/serve_stages.py)."""
MOVE_WAIT = 2.0
"""Seconds a converted event waits at most for a move under load (``MOVE_EVENTS``)."""
BATCH_BYTES = 8 << 20
"""A log this large is moved at once, without waiting for ``every`` seconds (a burst's
first batch; under load the moves run back to back anyway); and about the most log
converted at a time, so that a burst is ingested in parts while the rest is converted."""


@dataclass
class Generation:
    """Log files converted into one JSON-lines file per dataset and Arrow files of OTLP events
    (one per dataset per conversion), ingested together."""

    directory: Path
    files: list[Path] = field(default_factory=list)
    outputs: dict[str, Converted] = field(default_factory=dict)
    arrows: dict[str, list[Converted]] = field(default_factory=dict)
    """``ARROW + dataset``: the Arrow files converted for it."""
    done: set[str] = field(default_factory=set)
    """Parts already ingested (a generation that a crash cut short): a dataset's JSON lines
    under its name, its Arrow files under ``ARROW + dataset``."""
    closed: bool = False
    """Nothing more is converted into it (it is the one a crash cut short)."""
    size: int = 0  # bytes of JSON lines and Arrow files converted into it
    events: int = 0  # events converted into it
    log_bytes: int = 0  # bytes of the log files converted into it
    ready: bool = False  # the conversion stopped for the ingest to take it
    since: float = 0.0  # when its first conversion ended (time.monotonic)

    def parts(self) -> list[str]:
        return [*self.outputs, *self.arrows]


class Applier:
    def __init__(self, wal: Wal, rs: Rootsift, turn: threading.Lock, *, every: float = 1.0) -> None:
        self.wal, self.rs, self.every = wal, rs, every
        self._turn = turn  # taken to release the files: not while a read uses them
        self.events = 0
        self.rejects = 0
        self.failures = 0
        self.moves = 0
        """Generations ingested: a move of part of the log into the store."""
        import pyarrow.ipc  # noqa: F401 - the ingest's: before serving, not in a thread while requests come

        self.converter = Converter()
        self._arrow = type(rs.backend).ingest_arrow is not Backend.ingest_arrow
        """The store takes Arrow (DuckDB); else (chdb) OTLP is converted to JSON lines as before."""
        self.quarantine = wal.directory.parent / "quarantine"
        self._poison: dict[tuple[Path, int], int] = {}
        stale_files = [*wal.directory.glob("*.jsonl"), *wal.directory.glob("gen-*"), *wal.directory.glob("*.rewrite")]
        for stale in stale_files:  # cut short by a crash
            shutil.rmtree(stale) if stale.is_dir() else stale.unlink()
        self._numbers = iter(range(1, 1 << 62))
        self._open = self._generation()
        self._claimed: set[Path] = set()
        self._converting = False
        self._ingesting = False
        self._ingesting_bytes = 0  # the log bytes of the generation being ingested
        self._caught_up = False  # the last look found no sealed log left to convert
        self._moved_at = 0.0  # when the last move ended (time.monotonic)
        self._converted_all = False
        self._ingest_gone = False  # stopped while the store refused: nothing more is taken
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._cond = threading.Condition()
        wal.on_written = lambda backlog: self._wake.set() if backlog >= BATCH_BYTES else None
        self._threads = [
            threading.Thread(target=self._convert_loop, name="rootsift-convert", daemon=True),
            threading.Thread(target=self._ingest_loop, name="rootsift-applier", daemon=True),
        ]

    def start(self) -> None:
        """Start the converter child (waiting until it is ready: before the server answers)
        and the two threads."""
        try:
            self.converter.start()
        except OSError as exc:  # tried again with the first batch
            log.warning("could not start the converter process: %s", exc)
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Apply what is in the log, then stop."""
        self._stop.set()
        self._wake.set()
        for thread in self._threads:
            thread.join()
        self.converter.close()
        shutil.rmtree(self._open.directory, ignore_errors=True)  # converted again on the next start

    def flush(self, timeout: float = 30.0) -> None:
        """Apply now and wait until the log is empty (for tests and a graceful stop)."""
        with self._cond:
            self._wake.set()
            self._cond.wait_for(lambda: self.wal.backlog_bytes == 0 or self._stop.is_set(), timeout)

    # -- converting ----------------------------------------------------------------
    def _convert_loop(self) -> None:
        try:
            moved = self._recover()
            while moved is not None:
                if not moved:  # idle: look every `every` seconds; under load: back to back
                    self._wake.wait(self.every)
                self._wake.clear()
                stopping = self._stop.is_set()
                try:
                    moved = self._convert_sealed()
                except Exception as exc:  # a bug: logged, and the loop goes on (the log waits)
                    self.failures += 1
                    log.error("could not convert the write-ahead log (will retry): %s: %s", type(exc).__name__, exc)
                    moved = False
                if stopping and not moved:
                    break
        finally:  # even past a bug: the ingest and a graceful stop must not wait forever
            with self._cond:
                self._converted_all = True
                self._cond.notify_all()

    def _recover(self) -> bool | None:
        """A generation whose ingest a crash cut short is converted again, alone, first
        (None: stopped before it could be; it stays for the next start)."""
        state = self.wal.directory / "apply.state"
        if not state.exists():
            return False
        listed, *finished = state.read_text().split("\n")
        files = [self.wal.directory / name for name in listed.split()]
        files = [f for f in files if f.exists()]
        if not files:
            state.unlink()
            return False
        with self._cond:
            self._open.done = {d for d in finished if d}
            self._open.closed = True
        while not self._convert(files, self._open):
            if self._stop.wait(min(self.every, 1.0)):
                return None
        return True

    def _convert_sealed(self) -> bool:
        """Convert sealed files not yet converted (up to ``BATCH_BYTES`` of them, the oldest)
        into the open generation; True when any were."""
        files: list[Path] = []
        size = 0
        for path in self.wal.seal():
            if path not in self._claimed and (not files or size < BATCH_BYTES):
                try:
                    size += path.stat().st_size
                except FileNotFoundError:  # listed, then moved into the store by the ingest
                    continue
                files.append(path)
        if not files:
            with self._cond:
                self._caught_up = True
                self._cond.notify_all()
            return False
        with self._cond:  # a full one (or the recovered one, or one ready while the ingest
            self._caught_up = False  # is idle) waits for the ingest to take it
            while self._open.closed or self._open.size >= GENERATION_BYTES or (not self._ingesting and self._movable()):
                if self._ingest_gone:
                    return False
                self._open.ready = True  # decided: the ingest takes it (a light load's signs flicker)
                self._cond.notify_all()
                self._cond.wait()
            gen = self._open
        return self._convert(files, gen)

    def _convert(self, files: list[Path], gen: Generation) -> bool:
        with self._cond:
            self._converting = True
            self._caught_up = False
        sizes = {d: out.path.stat().st_size for d, out in gen.outputs.items()}
        log_bytes = sum(path.stat().st_size for path in files)
        kept = {c.path for parts in gen.arrows.values() for c in parts}
        try:
            converted = self.converter.convert(files, gen.directory, arrow=self._arrow)
        except Exception as exc:  # the child died, the disk is full, a bug: undo the part written
            self.failures += 1
            log.warning("could not convert the write-ahead log (will retry): %s: %s", type(exc).__name__, exc)
            if isinstance(exc, Poison):
                self._poisoned(exc)
            for path in gen.directory.glob("*.jsonl"):
                dataset = path.stem
                if dataset in sizes:
                    os.truncate(path, sizes[dataset])
                else:
                    path.unlink()
            for path in gen.directory.glob("*.arrow"):
                if path not in kept:
                    path.unlink()
            converted = None
        with self._cond:
            self._converting = False
            if converted is not None:
                self._claimed.update(files)
                gen.files.extend(files)
                for part, out in converted.items():
                    if part.startswith(ARROW):
                        gen.arrows.setdefault(part, []).append(out)
                        continue
                    before = gen.outputs.get(part)
                    lines, skipped = (before.lines, before.skipped) if before else (0, 0)
                    gen.outputs[part] = Converted(out.path, lines + out.lines, skipped + out.skipped)
                gen.size = sum(out.path.stat().st_size for out in gen.outputs.values()) + sum(
                    c.path.stat().st_size for parts in gen.arrows.values() for c in parts
                )
                gen.events += sum(out.lines for out in converted.values())
                gen.log_bytes += log_bytes
                gen.since = gen.since or time.monotonic()
            self._cond.notify_all()
        return converted is not None

    @property
    def quarantined(self) -> int:
        """Records moved out of the log into the quarantine, by this run and earlier ones."""
        return sum(1 for _ in self.quarantine.glob("*.rec")) if self.quarantine.exists() else 0

    def _poisoned(self, exc: Poison) -> None:
        """Count a record's failure; at ``POISON_TRIES`` move it out of the log."""
        where = (exc.path, exc.end)
        self._poison[where] = tries = self._poison.get(where, 0) + 1
        if tries < POISON_TRIES:
            return
        del self._poison[where]
        try:
            kept = self.wal.quarantine(exc.path, exc.end, self.quarantine)
        except (OSError, ValueError) as why:
            log.warning("could not quarantine the record ending at byte %d of %s: %s", exc.end, exc.path, why)
            return
        log.error("quarantined %s: it failed to convert %d times (%s); the log goes on", kept, tries, exc)

    def _generation(self) -> Generation:
        directory = self.wal.directory / f"gen-{next(self._numbers):06d}"
        directory.mkdir()
        return Generation(directory)

    # -- ingesting -----------------------------------------------------------------
    def _ingest_loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._movable() or self._converted_all, min(self.every, MOVE_WAIT) / 2)
                if not self._movable():
                    if self._converted_all and not self._open.files:
                        self._cond.notify_all()
                        return
                    continue
                gen, self._open = self._open, self._generation()
                self._ingesting, self._ingesting_bytes = True, gen.log_bytes
                self._cond.notify_all()
            while not self._ingest(gen):
                if self._stop.is_set():  # the store refuses: the log stays for the next start
                    shutil.rmtree(gen.directory, ignore_errors=True)
                    with self._cond:
                        self._ingest_gone = True
                        self._cond.notify_all()
                    return
                self._stop.wait(min(self.every, 1.0))
            self.moves += 1
            for path in gen.files:  # then the record of the move: a crash between the two
                self.wal.applied(path)  # finds every dataset of it done
            (self.wal.directory / "apply.state").unlink(missing_ok=True)
            shutil.rmtree(gen.directory, ignore_errors=True)
            with self._cond:
                self._claimed.difference_update(gen.files)
                self._ingesting = False
                self._moved_at = time.monotonic()
                self._cond.notify_all()

    def _movable(self) -> bool:
        """Whether to ingest the open generation now (under ``_cond``): no conversion into it
        runs, and it holds ``MOVE_EVENTS`` or is full, or more is not worth waiting for (a
        stop, a recovered generation; the conversion caught up with the log and nothing
        arrived since, or the store rested ``every`` s: a light load, a burst's end), or its
        first events waited ``MOVE_WAIT`` s."""
        gen = self._open
        if not gen.files or self._converting:
            return False
        if gen.ready:
            return True
        now, moving = time.monotonic(), self._ingesting_bytes if self._ingesting else 0
        nothing_new = self.wal.backlog_bytes <= gen.log_bytes + moving  # the log holds no more
        return (
            gen.events >= MOVE_EVENTS
            or gen.size >= GENERATION_BYTES
            or gen.closed
            or (self._caught_up and (now - self._moved_at >= self.every or nothing_new))
            or self._converted_all
            or self._stop.is_set()
            or now - gen.since >= MOVE_WAIT
        )

    def _ingest(self, gen: Generation) -> bool:
        state = self.wal.directory / "apply.state"
        try:
            if not state.exists():
                write_synced(state, (" ".join(f.name for f in gen.files) + "\n").encode())
            for part in gen.parts():
                if part in gen.done:
                    continue
                dataset = part.removeprefix(ARROW)
                if part in gen.arrows:
                    events, rejects = self._ingest_arrow(dataset, gen.arrows[part], gen.directory)
                else:
                    summary = self.rs.ingest(gen.outputs[part].path, dataset, format="jsonl", time_field=TIME_FIELD)
                    events, rejects = summary.events, summary.rejects
                self.events += events
                self.rejects += rejects
                gen.done.add(part)
                with state.open("a") as progress:
                    progress.write(part + "\n")
                    progress.flush()
                    os.fsync(progress.fileno())
                with self._turn:  # other processes may read and write between applies
                    self.rs.backend.release(dataset)
        except (RootsiftError, OSError) as exc:  # the store is busy or the disk full: retry later
            self.failures += 1
            log.warning("could not move the write-ahead log into the store (will retry): %s", exc)
            return False
        except Exception as exc:  # a bug (an Arrow file it cannot read...): logged, retried, never silent
            self.failures += 1
            log.error("could not move the write-ahead log into the store (will retry): %s: %s", type(exc).__name__, exc)
            return False
        return True

    def _ingest_arrow(self, dataset: str, parts: list[Converted], directory: Path) -> tuple[int, int]:
        """A dataset's Arrow files into the store in one transaction (``Backend.ingest_arrow``),
        or, when the store cannot take them as they are, as JSON lines with the checked
        ingest of a file; (events, rejects)."""
        import pyarrow as pa

        tables = [pa.ipc.open_file(pa.memory_map(str(c.path))).read_all() for c in parts]
        try:
            table = pa.concat_tables(tables, promote_options="default")
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a key's kind differs between them
            table = None
        if table is not None:
            rows = self.rs.backend.ingest_arrow(dataset, table)
            if rows is not None:
                return rows, 0
        from rootsift.server.otlp_arrays import json_lines

        lines = directory / f"{dataset}.arrow.jsonl"
        with lines.open("wb") as f:
            for one in tables:
                f.writelines(json_lines(one))
        summary = self.rs.ingest(lines, dataset, format="jsonl", time_field=TIME_FIELD)
        lines.unlink()
        return summary.events, summary.rejects
