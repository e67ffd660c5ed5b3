"""The byte counts behind the JSON fast path's check, across chunk seams."""

from __future__ import annotations

from pathlib import Path

import pytest

from rootsift.ingest.jsonl import BlockStats, _count, _windows

BLOB = b'{"a":null,"bb": null,"c":1,"d":"x\\":y"}\n' * 300


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 6, 7, 8, 13, 64, 1000, 1 << 20])
def test_tokens_across_seams_are_counted_once(tmp_path: Path, chunk: int) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(BLOB)
    for token in (b'":', b'":null', b'": null'):
        got = sum(_count(buf, token, seam, end) for buf, seam, end in _windows(str(path), chunk))
        assert got == BLOB.count(token), (chunk, token)


def test_file_and_block_counts_agree(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(BLOB)
    whole, block = BlockStats.of_file(str(path)), BlockStats.of(BLOB)
    assert whole.key_tokens == block.key_tokens == BLOB.count(b'":')
    # per line: keys a, bb, c, d (a and bb null); one '":' inside the string of d
    assert whole.keys_with_values() == 2 * 300
    assert not whole.suspect and BlockStats.of(b'{"a":"\\u0022"}\n').suspect


@pytest.mark.parametrize(
    ("line", "suspect"),
    [
        (b'{"a":1}', False),
        (b'{"a": 1, "b": "x"}', False),
        (b'{"a":"say \\"hi\\" now"}', False),
        (b'{"a" : 1}', True),
        (b'{"a":"x" ,"b":1}', False),
        (b'{"a":" padded value","b":1}', False),
        (b'{"a":"x","b"  :1}', True),
        (b'{"a":"\\u003a"}', True),
    ],
)
def test_blocks_the_count_cannot_vouch_for(line: bytes, suspect: bool) -> None:
    assert BlockStats.of(line + b"\n").suspect is suspect


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_quote_pairs_across_seams(tmp_path: Path, chunk: int) -> None:
    from rootsift.ingest.jsonl import _quote_pairs

    blob = b'{"a":1,"b" :2,"c":"x"}\n' * 50
    path = tmp_path / "b.jsonl"
    path.write_bytes(blob)
    keys = spaced = 0
    for buf, seam, end in _windows(str(path), chunk):
        k, s = _quote_pairs(buf, max(0, seam - 1), end)
        keys, spaced = keys + k, spaced + s
    assert (keys, spaced) == (blob.count(b'":'), blob.count(b'" '))
