"""Reading a request body within limits: the compressed size, and the size after
decompression measured while inflating, so a gzip bomb is refused without being inflated.

    BodyTooLarge  past either limit (the route answers 413)
    BadBody       an encoding we do not know, or bytes that do not inflate (400)
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

MAX_BODY_BYTES = 16 * 1024 * 1024
"""The largest body accepted, after decompression (OTLP exporters batch far below it)."""

CHUNK = 64 * 1024
GZIP = 16 + zlib.MAX_WBITS


class BodyTooLarge(Exception):
    """The body is larger than the limit (compressed, or once inflated)."""


class BadBody(Exception):
    """The body cannot be decoded: an unknown Content-Encoding or corrupt compressed bytes."""


async def read_body(stream: AsyncIterator[bytes], encoding: str | None, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request's bytes, inflated when ``encoding`` is gzip or deflate; never more than
    ``limit`` bytes are held, compressed or inflated."""
    encoding = (encoding or "identity").strip().lower()
    if encoding in ("", "identity"):
        return await _read_plain(stream, limit)
    if encoding in ("gzip", "x-gzip"):
        return await _read_inflated(stream, GZIP, limit)
    if encoding == "deflate":
        return await _read_inflated(stream, zlib.MAX_WBITS, limit)
    raise BadBody(f"Content-Encoding {encoding!r} is not supported (gzip, deflate or none)")


async def _read_plain(stream: AsyncIterator[bytes], limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"the body is larger than {limit:,} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def _read_inflated(stream: AsyncIterator[bytes], wbits: int, limit: int) -> bytes:
    """Inflate every member of the body (a gzip stream may be several members back to back,
    RFC 1952), counting the inflated bytes of them all against ``limit``."""
    inflater = zlib.decompressobj(wbits)
    parts: list[bytes] = []
    size = compressed = 0
    try:
        async for chunk in stream:
            compressed += len(chunk)
            if compressed > limit:
                raise BodyTooLarge(f"the compressed body is larger than {limit:,} bytes")
            data = chunk
            while data:
                if inflater.eof:  # the next member
                    if wbits != GZIP:
                        raise BadBody("there are bytes after the end of the compressed body")
                    inflater = zlib.decompressobj(wbits)
                # never inflate more than the room left (+1 to know it overflowed)
                out = inflater.decompress(data, limit - size + 1)
                size += len(out)
                if size > limit:
                    raise BodyTooLarge(f"the body inflates past {limit:,} bytes")
                parts.append(out)
                data = inflater.unconsumed_tail or inflater.unused_data
        out = inflater.flush()
        size += len(out)
        if size > limit:
            raise BodyTooLarge(f"the body inflates past {limit:,} bytes")
        parts.append(out)
    except zlib.error as exc:
        raise BadBody(f"the compressed body is corrupt: {exc}") from exc
    if not inflater.eof:
        raise BadBody("the compressed body is truncated")
    return b"".join(parts)
