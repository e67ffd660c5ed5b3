"""The front of an access log's first block is probed while the reader thread cuts the block
(``textrun``: a ``RawLines`` with ``front``; ``textsql.TextLinesReader._prepare``), with
the same result as probing it from the block (docs/adr/0016-text-formats-in-one-duckdb-pass.md,
third amendment)."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers.store import stored_rows
from rootsift import Rootsift
from rootsift.ingest import textrun, textsql
from rootsift.ingest.textprobe import PROBE_BYTES
from rootsift.store.writer import SegmentWriter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_logs import nginx_combined  # noqa: E402

TLS = '10.9.9.9 - - [01/Mar/2024:10:00:00 +0000] "\\x16\\x03\\x01\\x00" 400 0 "-" "-"'


def _both_ways(rs: Rootsift, src: Path, monkeypatch: pytest.MonkeyPatch, steps: list[str]) -> tuple[Any, ...]:
    """The stored rows, field types, counts and rejects of ``src`` read by DuckDB and by Python
    (``steps``: the DuckDB reading's only)."""
    out = []
    for name, sql in (("py", False), ("sql", True)):
        monkeypatch.setattr(textrun, "SQL_LINES", sql)
        steps.clear()
        summary = rs.ingest(src, name, format="nginx")
        rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in stored_rows(rs, name))
        types = sorted((k, v.type) for k, v in rs.backend.fields(name).items())
        out.append((rows, types, (summary.events, summary.rejects), [r["line"] for r in summary.first_rejects]))
    return tuple(reversed(out))


def _steps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the storing thread does, in order: "prepare", "probe" (a DuckDB probe of a front),
    "statement" (a block's checked insert)."""
    steps: list[str] = []
    prepare, probe, checked = textsql.TextLinesReader._prepare, textsql.read_front, SegmentWriter.write_checked

    def spied_prepare(self: Any, *args: Any) -> None:
        steps.append("prepare")
        prepare(self, *args)

    def spied_probe(*args: Any) -> Any:
        steps.append("probe")
        return probe(*args)

    def spied_checked(self: Any, *args: Any) -> Any:
        steps.append("statement")
        return checked(self, *args)

    monkeypatch.setattr(textsql.TextLinesReader, "_prepare", spied_prepare)
    monkeypatch.setattr(textsql, "read_front", spied_probe)
    monkeypatch.setattr(SegmentWriter, "write_checked", spied_checked)
    return steps


def _log(path: Path, n: int, inserts: dict[int, str]) -> list[str]:
    lines = list(nginx_combined(random.Random(8), n))
    for at in sorted(inserts, reverse=True):
        lines.insert(at, inserts[at])
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_the_front_of_the_first_block_is_probed_before_the_block_comes(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = _steps(monkeypatch)
    src = tmp_path / "access.log"
    _log(src, 14_000, {12_000: "garbage", 6000: TLS, 30: TLS, 20: "garbage"})
    assert src.stat().st_size > 1.5 * PROBE_BYTES
    sql, py = _both_ways(rs, src, monkeypatch, steps)
    assert sql == py and sql[2] == (14_002, 2)
    # the probe ran once, for the front handed on ahead of the block, before its statement
    assert steps == ["prepare", "probe", "statement"]


def test_a_front_read_otherwise_than_its_block_is_probed_again_from_the_block(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a control byte past the front makes the block not ``clean`` (the SQL's checks differ):
    # the front's probe is not used for it
    steps = _steps(monkeypatch)
    src = tmp_path / "access.log"
    lines = _log(src, 14_000, {30: TLS})
    lines[13_000] = lines[13_000].replace("GET", "GET\x1f")
    src.write_text("\n".join(lines) + "\n")
    sql, py = _both_ways(rs, src, monkeypatch, steps)
    assert sql == py
    assert steps == ["prepare", "probe", "probe", "statement"]


def test_a_log_shorter_than_the_front_is_probed_from_its_block(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = _steps(monkeypatch)
    src = tmp_path / "access.log"
    _log(src, 2000, {30: TLS})
    sql, py = _both_ways(rs, src, monkeypatch, steps)
    assert sql == py
    assert steps == ["probe", "statement"]
