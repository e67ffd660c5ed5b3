"""Reading protobuf's wire format by hand, for content sniffing only (the profiles
themselves are decoded by the protobuf library)."""

from __future__ import annotations


def varint(data: bytes, pos: int) -> tuple[int | None, int]:
    """The base-128 varint at ``pos`` and the position after it; None when ``data`` ends
    first or it runs past 64 bits."""
    value, shift = 0, 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None, pos
