"""A format parsed in Python: the block of JSON lines is cut once the parser has read the whole
file, so the last block (stored after the parser ends, by DuckDB alone) holds only the events
of its last read (``textrun.TAIL_CHECK``; docs/adr/0016-text-formats-in-one-duckdb-pass.md,
third amendment)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from rootsift import Rootsift
from rootsift.ingest import formats, textrun
from rootsift.ingest.formats.base import FormatOptions
from rootsift.ingest.textrun import open_files, text_blocks

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_logs import mysql_slow  # noqa: E402

READ = 4 << 20
"""What the parser reads at a time (``numbered_lines``)."""


def _slow_log(path: Path, n: int) -> None:
    path.write_text("\n".join(mysql_slow(random.Random(2), n)) + "\n")


def test_the_last_block_holds_only_the_events_of_the_parsers_last_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(textrun, "TEXT_BLOCK_BYTES", 256 << 20)  # no cut by size after the first blocks
    src = tmp_path / "slow.log"
    _slow_log(src, 60_000)
    size = src.stat().st_size
    assert size > 3 * READ
    fmt = formats.get("mysql-slow")
    blocks = list(text_blocks(open_files([str(src)]), lambda *_: fmt, FormatOptions(), str(tmp_path), 256 << 20, False))
    sizes = [Path(b.json_path).stat().st_size if b.json_path else 0 for b in blocks]
    events = [len(b.lines) for b in blocks]
    assert sum(events) == 60_000
    # blocks of 2, 4, 8... MiB of JSON lines, one up to the parser's last read, then the rest
    assert sizes[:3] == sorted(sizes[:3]) and sizes[0] >= textrun.FIRST_BLOCK_BYTES
    per_event = size / 60_000
    assert 0 < events[-1] * per_event <= READ + textrun.TAIL_CHECK * per_event, (events, sizes)
    assert sizes[-2] < 2 * sizes[-3], "the block before the last was cut before its size"


def test_a_file_read_in_one_block_is_not_cut_before_its_end(tmp_path: Path) -> None:
    src = tmp_path / "slow.log"
    _slow_log(src, 2000)
    fmt = formats.get("mysql-slow")
    blocks = list(text_blocks(open_files([str(src)]), lambda *_: fmt, FormatOptions(), str(tmp_path), 256 << 20, False))
    assert [len(b.lines) for b in blocks] == [2000]


def test_a_slow_log_cut_at_its_last_read_keeps_every_event(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "slow.log"
    _slow_log(src, 40_000)
    summary = rs.ingest(src, "slow", format="mysql-slow")
    assert (summary.events, summary.rejects) == (40_000, 0)
