"""The server's write-ahead log: a request is acknowledged only once its events are in
it and fsync'd. Writes are group-committed: one writer thread takes everything queued,
writes it and fsyncs once, so many concurrent requests share one fsync.

Files ``wal/00000001.log``, ... hold records::

    magic | payload length u32 | crc32 u32 | dataset length u16 | dataset | payload

The magic names the payload's encoding: ``RSW1`` JSON lines (Honeycomb events, metric
points), ``RSWT`` an OTLP ExportTraceServiceRequest and ``RSWL`` an
ExportLogsServiceRequest, as protobuf (converted to events by the applier: convert.py).

The applier (``applier.py``) seals the file being written (the writer moves on to the
next) and moves sealed files into the store. On start, every file's torn tail (a record
cut by kill -9 or a full disk: short, or its checksum wrong) is cut off; records before
it are kept: they were fsync'd before any was acknowledged.
"""

from __future__ import annotations

import asyncio
import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from rootsift.store.segment import fsync_dir

JSONL, OTLP_TRACES, OTLP_LOGS = b"RSW1", b"RSWT", b"RSWL"
KINDS = frozenset({JSONL, OTLP_TRACES, OTLP_LOGS})
HEADER = struct.Struct("<4sIIH")


class Record(NamedTuple):
    dataset: str
    payload: bytes
    end: int
    """The offset just past the record in its file."""
    kind: bytes = JSONL
    """The payload's encoding: JSONL, OTLP_TRACES or OTLP_LOGS."""


class Overloaded(Exception):
    """More bytes are waiting than the limits allow: the request is refused, not dropped."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def encode(dataset: str, payload: bytes, kind: bytes = JSONL) -> bytes:
    name = dataset.encode()
    return HEADER.pack(kind, len(payload), zlib.crc32(payload, zlib.crc32(name)), len(name)) + name + payload


def records(path: Path) -> Iterator[Record]:
    """Each whole record, stopping at the first torn one."""
    data = path.read_bytes()
    at = 0
    while at + HEADER.size <= len(data):
        magic, size, crc, name_len = HEADER.unpack_from(data, at)
        start = at + HEADER.size
        end = start + name_len + size
        if magic not in KINDS or end > len(data):
            return
        name, payload = data[start : start + name_len], data[start + name_len : end]
        if zlib.crc32(payload, zlib.crc32(name)) != crc:
            return
        yield Record(name.decode(), payload, end, magic)
        at = end


def repair(path: Path) -> int:
    """Cut a torn tail off ``path``; the number of bytes cut."""
    good = 0
    for record in records(path):
        good = record.end
    size = path.stat().st_size
    if good < size:
        with path.open("r+b") as f:
            f.truncate(good)
            f.flush()
            os.fsync(f.fileno())
    return size - good


@dataclass
class _Pending:
    record: bytes
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


@dataclass
class WalStats:
    appended_records: int = 0
    fsyncs: int = 0
    repaired_bytes: int = 0
    refused: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class Wal:
    """Group-committed append-only log under ``directory``.

    ``max_queued`` bounds the bytes accepted but not yet fsync'd (past it: 429);
    ``max_backlog`` bounds the bytes fsync'd but not yet in the store (past it: 503, the
    store is behind). Both are refusals the client retries, never silent drops. A file
    is sealed once it holds ``file_bytes``, so that a burst is moved in several batches
    whose conversion and ingest overlap (applier.py)."""

    def __init__(
        self, directory: Path, *, max_queued: int = 64 << 20, max_backlog: int = 1 << 30, file_bytes: int = 8 << 20
    ) -> None:
        self.directory = directory
        self.file_bytes = file_bytes
        directory.mkdir(parents=True, exist_ok=True)
        self.max_queued, self.max_backlog = max_queued, max_backlog
        self.stats = WalStats()
        existing = self.files()
        for path in existing:
            self.stats.repaired_bytes += repair(path)
        self._backlog = sum(p.stat().st_size for p in existing)
        self._number = int(existing[-1].stem) + 1 if existing else 1
        self._file = self._open(self._number)
        self._cond = threading.Condition()
        self._queue: list[_Pending] = []
        self._queued_bytes = 0
        self._closing = False
        self.on_written: Callable[[int], None] | None = None
        """Told the backlog after each fsync (the applier starts a move early when it is large)."""
        self._file_lock = threading.Lock()
        self._thread = threading.Thread(target=self._write_loop, name="rootsift-wal", daemon=True)
        self._thread.start()

    # -- appending ---------------------------------------------------------------
    def admit(self, size: int) -> None:
        """Refuse a request of ``size`` bytes (its Content-Length) before its body is read,
        when the queue or the backlog would not take it: a refusal then costs the server no
        body read, parse or conversion, so clients offering far more than it takes are
        answered at the rate they offer (Overloaded; the route answers 429 or 503)."""
        with self._cond:
            self._refuse(size)

    def _refuse(self, size: int) -> None:
        if self._closing:
            raise Overloaded("the server is shutting down", retry_after=5)
        if self._queued_bytes + size > self.max_queued and self._queue:
            self.stats.refused += 1
            raise Overloaded("the ingest queue is full", retry_after=1)
        if self._backlog + size > self.max_backlog:
            self.stats.refused += 1
            raise Overloaded("the store is behind the write-ahead log", retry_after=5)

    async def append(self, dataset: str, payload: bytes, kind: bytes = JSONL) -> None:
        """Return once ``payload`` (for ``dataset``, encoded as ``kind`` says) is durable."""
        record = encode(dataset, payload, kind)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            self._refuse(len(record))
            self._queue.append(_Pending(record, loop, future))
            self._queued_bytes += len(record)
            self._backlog += len(record)
            self._cond.notify()
        await future

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._closing:
                    self._cond.wait()
                batch, self._queue = self._queue, []
                if not batch and self._closing:
                    return
            error: BaseException | None = None
            try:
                with self._file_lock:
                    self._file.write(b"".join(p.record for p in batch))
                    self._file.flush()
                    os.fsync(self._file.fileno())
                    if self._file.tell() >= self.file_bytes:  # a burst is moved in parts (applier.py)
                        self._roll()
                self.stats.fsyncs += 1
                self.stats.appended_records += len(batch)
            except OSError as exc:  # a full disk: the requests fail, nothing is acknowledged
                error = exc
            with self._cond:
                self._queued_bytes -= sum(len(p.record) for p in batch)
                if error is not None:
                    self._backlog -= sum(len(p.record) for p in batch)
            for p in batch:
                p.loop.call_soon_threadsafe(_settle, p.future, error)
            if error is None and self.on_written is not None:
                self.on_written(self._backlog)

    # -- sealing, for the applier ------------------------------------------------------
    def seal(self) -> list[Path]:
        """Close the file being written (if it holds anything) and open the next; every
        sealed file, oldest first, is returned for the applier."""
        with self._file_lock:
            if self._file.closed:  # after close(): every file is sealed
                return self.files()
            if self._file.tell() > 0:
                self._roll()
        return [p for p in self.files() if int(p.stem) < self._number]

    def _roll(self) -> None:
        self._file.close()
        self._number += 1
        self._file = self._open(self._number)

    def applied(self, path: Path) -> None:
        """``path``'s records are in the store: forget the file."""
        size = path.stat().st_size
        path.unlink()
        with self._cond:
            self._backlog -= size

    def quarantine(self, path: Path, end: int, into: Path) -> Path:
        """Move the record of sealed file ``path`` that ends at ``end`` out of the log, into a
        file of its own in the directory ``into`` (framed as in the log: ``records`` reads it);
        return that file. The record is written and fsync'd there before the log file is
        replaced (atomically) by one without it, so a crash between the two leaves it in both
        (quarantined again on the next start), never in neither."""
        data = path.read_bytes()
        start = 0
        for record in records(path):
            if record.end == end:
                break
            start = record.end
        else:
            raise ValueError(f"{path.name} has no record ending at byte {end}")
        into.mkdir(parents=True, exist_ok=True)
        kept = into / f"{path.stem}-{start:010d}.rec"
        write_synced(kept, data[start:end])
        write_synced(path.with_suffix(".rewrite"), data[:start] + data[end:])
        os.replace(path.with_suffix(".rewrite"), path)
        fsync_dir(self.directory)
        with self._cond:
            self._backlog -= end - start
        return kept

    @property
    def backlog_bytes(self) -> int:
        return self._backlog

    def files(self) -> list[Path]:
        return sorted(self.directory.glob("*.log"), key=lambda p: int(p.stem))

    def close(self) -> None:
        """Write what is queued, fsync, stop the writer."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        with self._file_lock:
            self._file.close()

    def _open(self, number: int):  # type: ignore[no-untyped-def]
        path = self.directory / f"{number:08d}.log"
        f = path.open("ab")
        fsync_dir(self.directory)  # the new file's name is durable too
        return f


def write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it."""
    with path.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if future.done():  # the client went away: its events are durable all the same
        return
    if error is None:
        future.set_result(None)
    else:
        future.set_exception(error)
