"""Opening inputs: files or stdin, plain, gzip or zstd, and sniffing their format.

Inputs are read as a stream of bytes in blocks, so memory stays bounded whatever the
size of the input.
"""

from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from rootsift.errors import InputFormatError
from rootsift.ingest.streams import CutGuard, Pumped, ZstdFrames

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
BZIP2_MAGIC = b"BZh"
XZ_MAGIC = b"\xfd7zXZ\x00"
BOM = b"\xef\xbb\xbf"
"""A UTF-8 byte-order mark: dropped from the front of an input."""
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
"""UTF-16 inputs (Windows tools write them) are recognised by their mark and read as UTF-8."""
FORMATS = ("auto", "jsonl", "json", "csv", "tsv")


@dataclass
class Input:
    """An opened input: a decompressed byte stream and what is known of it."""

    name: str
    stream: BinaryIO
    compression: str
    size: int | None
    raw: BinaryIO
    cut: CutGuard | None = None
    """For compressed input: where the compressed stream ended early, if it did."""

    @property
    def truncated(self) -> str | None:
        """How and where a compressed input was cut short (None when it was whole)."""
        if self.cut is None or self.cut.error is None:
            return None
        of = f" of {self.size:,} compressed bytes" if self.size else ""
        return (
            f"{self.name}: the {self.compression} stream is cut short after {self.cut.delivered:,} bytes "
            f"(decompressed){of}: {self.cut.error}"
        )

    def position(self) -> int:
        """Bytes consumed from the underlying (compressed) file, for progress."""
        try:
            return self.raw.tell()
        except (OSError, ValueError):
            return 0

    def head(self, limit: int = 64 << 10) -> bytes:
        """The input's first ``limit`` bytes; a stream's first lines, if it pauses before."""
        if isinstance(self.stream, Pumped):
            return self.stream.head(limit)
        return self.stream.read(limit)

    @property
    def is_stream(self) -> bool:
        """stdin or a pipe: input that may pause and never end (``tail -f app.log | rootsift ingest -``)."""
        return self.size is None

    def close(self) -> None:
        if self.is_stream:
            return  # stdin or a pipe: a reader thread may still be blocked on it (closing would wait)
        self.stream.close()
        if self.raw is not self.stream:
            self.raw.close()


def open_input(source: str | Path) -> Input:
    """Open a path, or ``-`` for stdin, decompressing gzip, zstd, bzip2 and xz by their magic bytes."""
    name = str(source)
    if name == "-":
        # The file descriptor itself: sys.stdin.buffer would wait to fill a whole read from a pipe.
        raw: BinaryIO = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
        size = None
    else:
        path = Path(name)
        if not path.exists():
            raise InputFormatError(f"input file not found: {name}")
        if path.is_dir():
            raise InputFormatError(f"input is a directory, not a file: {name}")
        raw = open(path, "rb")  # noqa: SIM115 - closed by Input.close
        size = path.stat().st_size if path.is_file() else None  # a FIFO is a stream
    buffered: Any = io.BufferedReader(raw, buffer_size=1 << 20) if name == "-" else raw  # type: ignore[type-var]
    head = buffered.peek(6)[:6] if isinstance(buffered, io.BufferedReader) else b""
    stream: BinaryIO
    if head.startswith(GZIP_MAGIC):
        stream, compression = gzip.GzipFile(fileobj=buffered), "gzip"  # type: ignore[assignment]
    elif head.startswith(ZSTD_MAGIC):
        stream = io.BufferedReader(ZstdFrames(buffered), buffer_size=1 << 20)  # type: ignore[assignment,type-var]
        compression = "zstd"
    elif head.startswith(BZIP2_MAGIC) and head[3:4].isdigit():
        stream, compression = bz2.BZ2File(buffered), "bzip2"  # type: ignore[assignment]
    elif head.startswith(XZ_MAGIC):
        stream, compression = lzma.LZMAFile(buffered), "xz"  # type: ignore[assignment]  # noqa: SIM115 - closed by Input.close
    else:
        stream, compression = buffered, "none"
    cut = None
    if compression != "none":
        cut = CutGuard(stream)
        stream = io.BufferedReader(cut, buffer_size=1 << 20)  # type: ignore[assignment,type-var]
    peek = getattr(stream, "peek", None)
    if peek is not None and peek(2)[:2] in UTF16_BOMS:
        stream = io.BufferedReader(Utf16AsUtf8(stream), buffer_size=1 << 20)  # type: ignore[assignment,type-var]
    if size is None:
        stream = Pumped(stream)  # type: ignore[assignment]
    return Input(name, stream, compression, size, buffered, cut)


class Utf16AsUtf8(io.RawIOBase):
    """A UTF-16 stream (with its byte-order mark) read as UTF-8 bytes, mark dropped."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-16")("replace")
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        while not self._pending:
            data = self._stream.read(1 << 20)
            self._pending = self._decoder.decode(data, final=not data).encode("utf-8")
            if not data:
                break
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        self._stream.close()
        super().close()


def sniff_format(head: bytes, name: str) -> str:
    """Guess jsonl, json (an array), csv or tsv from the first bytes and the file name."""
    text = head.removeprefix(BOM).lstrip(b" \t\r\n")
    lowered = name.lower()
    if text.startswith(b"["):
        return "json"
    if text.startswith(b"{"):
        return "jsonl"
    if ".tsv" in lowered or ".tab" in lowered:
        return "tsv"
    first_line = text.split(b"\n", 1)[0]
    if first_line.count(b"\t") > first_line.count(b","):
        return "tsv"
    if first_line:
        return "csv"
    raise InputFormatError(f"{name}: cannot tell the format of an empty input; pass --format")


class Prefetched(io.RawIOBase):
    """A stream with some bytes already read from its front put back."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        read = getattr(self._rest, "read1", self._rest.read)  # what is there: a pipe may pause
        data = read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


class Readable(Protocol):
    """Anything with ``read(n) -> bytes`` (files, decompressors, stdin)."""

    def read(self, n: int, /) -> bytes: ...


def line_blocks(stream: Readable, block_bytes: int, quoted: bool = False) -> Iterator[tuple[bytes, int]]:
    """Yield (block, first_line_number) with every block ending at a line boundary.

    A line longer than ``block_bytes`` is kept whole: the block grows to hold it. With
    ``quoted`` (CSV), a block only ends where it holds an even number of '"', so a
    quoted field with line breaks is never cut.
    """
    line_no = 1
    parts: list[bytes] = []  # the input since the last cut, kept in pieces while no line ends
    while data := stream.read(block_bytes):
        if data.rfind(b"\n") < 0:
            parts.append(data)  # a long line: keep reading without copying what came before
            continue
        if parts:
            data = b"".join([*parts, data])
        cut = data.rfind(b"\n")
        while quoted and cut >= 0 and data.count(b'"', 0, cut) % 2:
            cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            parts = [data]
            continue
        parts = [data[cut + 1 :]] if cut + 1 < len(data) else []
        yield data[: cut + 1], line_no
        line_no += data.count(b"\n", 0, cut + 1)
    rest = b"".join(parts)
    if rest:
        yield rest + b"\n", line_no


def read_full(stream: BinaryIO, view: memoryview) -> int:
    """Fill ``view`` from ``stream`` (which may return short reads); return the bytes read."""
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])  # type: ignore[attr-defined]
        if not n:
            break
        got += n
    return got


def line_buffers(
    stream: BinaryIO, block_bytes: int, first_bytes: int = 8 << 20
) -> Iterator[tuple[bytearray, int, int]]:
    """Yield (buffer, end, first_line_number): ``buffer[:end]`` is a block of whole lines.

    Like line_blocks, without copying the block: one buffer per block, filled in place.
    Blocks start at ``first_bytes`` and double up to ``block_bytes``, so work can start
    before a large block has been read.
    """
    line_no = 1
    carry = b""
    size = min(first_bytes, block_bytes)
    while True:
        buf = bytearray(len(carry) + size)
        buf[: len(carry)] = carry
        got = read_full(stream, memoryview(buf)[len(carry) :])
        end = len(carry) + got
        if got == 0:
            if carry:
                buf[end : end + 1] = b"\n"
                yield buf, end + 1, line_no
            return
        cut = buf.rfind(b"\n", 0, end)
        if cut < 0:
            carry = bytes(buf[:end])
            continue
        carry = bytes(buf[cut + 1 : end])
        yield buf, cut + 1, line_no
        line_no += buf.count(b"\n", 0, cut + 1)
        size = min(size * 2, block_bytes)
