"""The byte counts behind the JSON fast path's check (rootsift.ingest.blockstats), across chunk seams."""

from __future__ import annotations

from pathlib import Path

import pytest

from rootsift.ingest.blockstats import BlockStats, _count, _windows

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
    assert not whole.suspect and not BlockStats.of(b'{"a":"\\u0022"}\n').suspect


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
        (b'{"a":"x","b"\t:1}', True),
        (b'{"a":"\\u003a"}', False),  # an escape cannot make or hide a '":' token
        (b'{"a\\u0022":"\\u0022:"}', False),
    ],
)
def test_blocks_the_count_cannot_vouch_for(line: bytes, suspect: bool) -> None:
    assert BlockStats.of(line + b"\n").suspect is suspect


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_quote_pairs_across_seams(tmp_path: Path, chunk: int) -> None:
    from rootsift.ingest.blockstats import _quote_pairs

    blob = b'{"a":1,"b" :2,"c":"x","d":""}\n' * 50
    path = tmp_path / "b.jsonl"
    path.write_bytes(blob)
    keys = spaced = doubled = 0
    for buf, seam, end in _windows(str(path), chunk):
        k, s, d = _quote_pairs(buf, max(0, seam - 1), end)
        keys, spaced, doubled = keys + k, spaced + s, doubled + d
    assert (keys, spaced, doubled) == (blob.count(b'":'), blob.count(b'" '), blob.count(b'""'))


def _pairs_bytewise(buf: bytes, start: int, end: int) -> tuple[int, int, int]:
    """The three counts of ``_quote_pairs``, one byte pair at a time."""
    pairs = [(buf[i], buf[i + 1]) for i in range(start, end - 1)]
    return (
        sum(a == 34 and b == 58 for a, b in pairs),
        sum(a == 34 and b <= 32 for a, b in pairs),
        sum(a == 34 and b == 34 for a, b in pairs),
    )


@pytest.mark.parametrize("words", [1, 2, 3, 5, 1 << 18])
def test_quote_pairs_count_every_pair_once_whatever_the_slicing(monkeypatch: pytest.MonkeyPatch, words: int) -> None:
    """Pairs are compared as 16-bit words in slices of ``PAIR_WORDS``: a pair at an odd
    offset, or straddling two slices, is counted once, and only inside [start, end)."""
    import random

    import rootsift.ingest.blockstats as blockstats

    monkeypatch.setattr(blockstats, "PAIR_WORDS", words)
    rnd = random.Random(words)
    for _ in range(400):
        buf = bytes(rnd.choice(b'"::  \t\r\n\x01\x1f!,a\\"') for _ in range(rnd.randrange(0, 40)))
        start = rnd.randrange(0, len(buf) + 1)
        end = rnd.randrange(start, len(buf) + 1)
        assert blockstats._quote_pairs(buf, start, end) == _pairs_bytewise(buf, start, end), (buf, start, end)


@pytest.mark.parametrize("cut", [-2, -1, 0, 1])
def test_an_empty_key_across_a_window_seam_is_suspect(tmp_path: Path, cut: int) -> None:
    """``"":`` split by the seam of two mapped windows (plain) or read windows (gzip)."""
    import gzip
    import mmap

    seam = mmap.ALLOCATIONGRANULARITY
    pad = b'{"a":"","b":1}\n' * (seam // 15)
    head = pad[: seam + cut - 7]  # '{"a":1,' is 7 bytes: the empty key's first quote lands at seam + cut
    head = head[: head.rfind(b"\n") + 1] + b" " * (len(head) - head.rfind(b"\n") - 1)
    blob = head + b'{"a":1,"":2}\n' + pad
    assert blob.index(b'"":') == seam + cut
    plain, packed = tmp_path / "b.jsonl", tmp_path / "b.jsonl.gz"
    plain.write_bytes(blob)
    packed.write_bytes(gzip.compress(blob))
    assert BlockStats.of_file(str(plain), seam).suspect
    assert BlockStats.of_file(str(packed), seam).suspect
    assert BlockStats.of(blob).suspect
    plain.write_bytes(blob.replace(b'"":2', b'"c":2'))
    assert not BlockStats.of_file(str(plain), seam).suspect


@pytest.mark.parametrize(
    ("blob", "with_values"),
    [
        (b'{"a":1,"b":"x\\":y"}\n', 2),  # a quote in a string
        (b'{"k\\\\":1,"b":2}\n', 2),  # a key ending in a backslash
        (b'{"k\\\\\\\\":1,"s":"\\\\\\":x"}\n', 2),  # two backslashes; an escaped backslash and quote
        (b'{"k\\\\":null,"s":"\\":null","n": null}\n', 1),  # nulls outside strings only
    ],
)
@pytest.mark.parametrize("chunk", [1, 3, 8, 1 << 20])
def test_keys_with_values_tell_escaped_quotes_by_their_backslash_run(
    tmp_path: Path, blob: bytes, with_values: int, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import rootsift.ingest.blockstats as blockstats

    path = tmp_path / "b.jsonl"
    path.write_bytes(blob * 40)
    stats = BlockStats.of(blob * 40)
    stats.path = str(path)
    windows = blockstats._windows
    monkeypatch.setattr(blockstats, "_windows", lambda p: windows(p, chunk))
    assert stats.keys_with_values() == with_values * 40


def test_a_backslash_run_longer_than_the_seam_vouches_for_nothing(tmp_path: Path) -> None:
    from rootsift.ingest.blockstats import SEAM

    blob = b'{"a":1,"s":"' + b"\\" * SEAM + b'\\":"}\n'
    path = tmp_path / "b.jsonl"
    path.write_bytes(blob)
    stats = BlockStats.of(blob)
    stats.path = str(path)
    assert stats.keys_with_values() == -1


@pytest.mark.parametrize("chunk", [3, 64, 1 << 20])
def test_a_gzip_file_counts_as_its_decompressed_bytes(tmp_path: Path, chunk: int) -> None:
    import gzip

    blob = BLOB + b'{"x" :1}\n'
    path = tmp_path / "b.jsonl.gz"
    path.write_bytes(gzip.compress(blob[:5000]) + gzip.compress(blob[5000:]))  # two members
    stats, plain = BlockStats.of_file(str(path), chunk), BlockStats.of(blob)
    assert (stats.key_tokens, stats.suspect) == (plain.key_tokens, True)
    assert stats.keys_with_values() == 2 * 300  # the spaced key has no token: why it is suspect
    clean = tmp_path / "c.jsonl.gz"
    clean.write_bytes(gzip.compress(BLOB))
    assert not BlockStats.of_file(str(clean), chunk).suspect


def test_a_truncated_gzip_file_vouches_for_nothing(tmp_path: Path) -> None:
    import gzip

    data = gzip.compress(BLOB * 50)
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    assert BlockStats.of_file(str(path)).suspect
