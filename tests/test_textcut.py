"""Blocks of whole lines cut from the pieces they were read in (``ingest/textcut.py``)."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rootsift.ingest.textcut import Joined, cut_blocks


class _Input:
    """What ``Joined`` reads: an ``Input``'s ``stream``."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=40),
    end=st.sampled_from([b"", b"\n"]),
    head=st.integers(0, 40),
    most=st.integers(1, 90),
    step=st.integers(1, 40),
)
def test_blocks_are_the_input_cut_at_line_breaks_with_their_numbers_and_counts(
    lines: list[bytes], end: bytes, head: int, most: int, step: int
) -> None:
    data = b"\n".join(lines) + end if lines else b""
    inp: Any = _Input(data[head:])
    cuts = list(cut_blocks(Joined(data[:head], inp), most, step))
    assert b"".join(piece for cut in cuts for piece in cut.pieces) == data
    assert [cut.last for cut in cuts] == [False] * (len(cuts) - 1) + [True] * bool(cuts)
    line = 1
    for cut in cuts:
        block = b"".join(cut.pieces)
        assert cut.first == line and all(cut.pieces)
        assert cut.last or block.endswith(b"\n")
        assert cut.count.lines(wait=0) == cut.lines() == block.count(b"\n") + (not block.endswith(b"\n"))
        line += block.count(b"\n")


def test_a_line_longer_than_a_block_is_kept_whole() -> None:
    data = b"short\n" + b"x" * 100 + b"\nend\n"
    cuts = list(cut_blocks(Joined(b"", _Input(data)), 10, 4))  # type: ignore[arg-type]
    blocks = [b"".join(cut.pieces) for cut in cuts]
    assert b"".join(blocks) == data and all(b.endswith(b"\n") for b in blocks)
    assert any(b"x" * 100 + b"\n" in block for block in blocks)
    assert [cut.first for cut in cuts] == [1, *[1 + b"".join(blocks[:i]).count(b"\n") for i in range(1, len(cuts))]]
