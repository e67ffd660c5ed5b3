"""Reading inputs that pause or break: compressed streams cut short, and streams (stdin, a
pipe) that may never end, cut into blocks every few seconds so each can be committed.

``CutGuard`` turns a decompressor's failure into the end of the stream with every complete
line kept; ``Pumped`` reads a stream on a daemon thread so its front can be taken without
waiting for a full buffer; ``paced_buffers`` cuts blocks by size and by time
(docs/storage.md, "Ingest").
"""

from __future__ import annotations

import io
import lzma
import queue
import threading
import time
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import zstandard

DECOMPRESSION_ERRORS = (EOFError, OSError, zlib.error, lzma.LZMAError, zstandard.ZstdError)
"""What a decompressor raises on a cut or corrupt stream (gzip: EOFError, BadGzipFile)."""


class ZstdFrames(io.RawIOBase):
    """zstd frames one after another, decompressed; raises EOFError when the input ends
    inside a frame (zstandard's stream reader ends quietly there, hiding a cut file)."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._dctx = zstandard.ZstdDecompressor()
        self._frame = self._dctx.decompressobj()
        self._started = False
        self._out = b""
        self._at = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        while self._at == len(self._out):
            self._out, self._at = b"", 0
            data = self._stream.read(1 << 20)
            if not data:
                if self._started and not self._frame.eof:
                    raise EOFError("the zstd stream ends inside a frame")
                return 0
            while data:
                if self._frame.eof:  # the next frame
                    self._frame, self._started = self._dctx.decompressobj(), False
                self._started = True
                self._out += self._frame.decompress(data)
                data = self._frame.unused_data if self._frame.eof else b""
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = memoryview(self._out)[self._at : self._at + n]
        self._at += n
        return n

    def close(self) -> None:
        self._stream.close()
        super().close()


class CutGuard(io.RawIOBase):
    """A decompressing stream that ends, rather than fails, where its input is cut short.

    It hands out whole lines only: the bytes after the last line break read so far are held
    back until more arrive (or the stream ends cleanly). When the decompressor fails (a
    truncated ``.gz``: "Compressed file ended before the end-of-stream marker was reached"),
    the stream ends there: every complete line before the cut has been read, the held-back
    partial line is kept in ``cut_line`` and ``error`` says what happened.
    """

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._tail = b""
        self._ended = False
        self.error: str | None = None
        self.cut_line = b""
        self.delivered = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        while True:
            held = len(self._tail)
            if held >= len(view) or self._ended:  # a line longer than the read, or the end
                n = min(len(view), held)
                view[:n] = self._tail[:n]
                self._tail = self._tail[n:]
                self.delivered += n
                return n
            view[:held] = self._tail
            try:
                # One read of the decompressor at a time: a buffered read that fails part-way
                # through filling a large request drops what it had decompressed.
                got = self._stream.readinto1(view[held:])  # type: ignore[attr-defined]
            except DECOMPRESSION_ERRORS as exc:
                self.error = str(exc) or type(exc).__name__
                self.cut_line, self._tail, self._ended = self._tail, b"", True
                return 0
            if not got:
                self._ended = True
                continue
            end = held + got
            line_end = _last_newline(view, end) + 1
            if line_end == 0:  # no line ends yet: hold it all and read on
                self._tail = bytes(view[:end])
                continue
            self._tail = bytes(view[line_end:end])
            self.delivered += line_end
            return line_end

    def close(self) -> None:
        self._stream.close()
        super().close()


def _last_newline(view: memoryview, end: int) -> int:
    """Index of the last b"\\n" in ``view[:end]``, or -1; looks at the end first (lines are short)."""
    width = 4096
    while True:
        start = max(0, end - width)
        at = bytes(view[start:end]).rfind(b"\n")
        if at >= 0:
            return start + at
        if start == 0:
            return -1
        end, width = start, width * 4


DRAIN_SECONDS = 1.0
"""How long a stopped stream (SIGTERM) keeps taking what its writer still sends before the
last commit; it stops earlier when nothing arrives for a moment."""


class Pumped(io.RawIOBase):
    """A stream read by a daemon thread into a small queue, so that its front can be taken
    without blocking for more than arrived (``head``) and a reader blocked on a pipe never
    holds a lock another thread needs."""

    def __init__(self, stream: BinaryIO) -> None:
        self._chunks: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=8)
        self._left = b""
        self._eof = False
        read = getattr(stream, "read1", stream.read)

        def pump() -> None:
            try:
                while data := read(1 << 20):
                    self._chunks.put(data)
                self._chunks.put(b"")
            except BaseException as exc:  # noqa: BLE001 - handed to the reader
                self._chunks.put(exc)

        threading.Thread(target=pump, name="rootsift-input", daemon=True).start()

    def readable(self) -> bool:
        return True

    def _next(self, timeout: float | None = None) -> bytes:
        item = self._chunks.get(timeout=timeout)
        if isinstance(item, BaseException):
            raise item
        self._eof = not item
        return item

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        if not self._left and not self._eof:
            self._left = self._next()
        n = min(len(buffer), len(self._left))
        buffer[:n] = self._left[:n]
        self._left = self._left[n:]
        return n

    def head(self, limit: int, quiet: float = 0.5) -> bytes:
        """The stream's first bytes: up to ``limit``, fewer when it ends or, once a whole line
        has arrived, nothing more comes for ``quiet`` seconds (``tail -f`` of a small log)."""
        got = bytearray(self._left)
        while len(got) < limit and not self._eof:
            try:
                got += self._next(timeout=quiet if b"\n" in got else None)
            except queue.Empty:
                break
        self._left = bytes(got[limit:])
        return bytes(got[:limit])


def paced_buffers(
    stream: BinaryIO, block_bytes: int, every: float, stop: threading.Event, quoted: bool = False
) -> Iterator[tuple[bytearray, int, int]]:
    """Like line_buffers, for a stream that may pause and never end (a pipe from ``tail -f``):
    a block also ends ``every`` seconds after its first byte arrived, at its last complete
    line, so each can be committed while the stream goes on. When ``stop`` is set (SIGTERM),
    what has arrived is drained and cut, the last line even without its line break.

    A daemon thread does the blocking reads into a queue of a few MiB; with ``quoted`` (CSV)
    a block only ends outside quotes.
    """
    chunks: queue.Queue[bytes | BaseException] = queue.Queue(maxsize=8)

    def pump() -> None:
        read = getattr(stream, "read1", stream.read)
        try:
            while data := read(1 << 20):
                chunks.put(data)
            chunks.put(b"")
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            chunks.put(exc)

    threading.Thread(target=pump, name="rootsift-stdin", daemon=True).start()
    line_no, buf, since, ended, stopping = 1, bytearray(), 0.0, False, 0.0
    while not ended:
        if stop.is_set() and not stopping:
            stopping = time.monotonic()
        wait = 0.2 if stopping or not buf else max(0.0, min(0.2, since + every - time.monotonic()))
        try:
            chunk = chunks.get(timeout=wait)
        except queue.Empty:
            chunk = None
            ended = bool(stopping)  # stopping: nothing more arrived in a moment
        ended = ended or (bool(stopping) and time.monotonic() > stopping + DRAIN_SECONDS)
        if isinstance(chunk, BaseException):
            raise chunk
        if chunk == b"":
            ended = True
        elif chunk:
            since = since if buf else time.monotonic()
            buf += chunk
        due = ended or len(buf) >= block_bytes or (buf and time.monotonic() >= since + every)
        if not due or not buf:
            continue
        cut = len(buf) - 1 if ended else _cut_at(buf, quoted)
        if cut < 0:
            continue
        block = buf[: cut + 1]
        if not block.endswith(b"\n"):
            block += b"\n"
        yield block, len(block), line_no
        line_no += block.count(b"\n")
        buf = buf[cut + 1 :]
        since = time.monotonic()


def _cut_at(buf: bytearray, quoted: bool) -> int:
    """Where a block of ``buf`` may end: its last line break (outside quotes with ``quoted``), or -1."""
    cut = buf.rfind(b"\n")
    while quoted and cut >= 0 and buf.count(b'"', 0, cut) % 2:
        cut = buf.rfind(b"\n", 0, cut)
    return cut
