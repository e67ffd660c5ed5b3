"""A pending segment is checkpointed without vacuum at publish (``store/pending.unvacuumed``;
docs/adr/0016-text-formats-in-one-duckdb-pass.md, third amendment)."""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from rootsift import Rootsift
from rootsift.store import pending

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_logs import nginx_combined  # noqa: E402


def _setting(con: duckdb.DuckDBPyConnection) -> int:
    row = con.execute("SELECT current_setting('max_vacuum_tasks')").fetchone()
    assert row is not None
    return int(row[0])


def test_unvacuumed_sets_no_vacuum_task_and_sets_back_what_was_there() -> None:
    con = duckdb.connect()
    con.execute("SET max_vacuum_tasks = 7")
    with pending.unvacuumed(con):
        assert _setting(con) == 0
    assert _setting(con) == 7
    with pytest.raises(RuntimeError), pending.unvacuumed(con):
        raise RuntimeError("a failed checkpoint")
    assert _setting(con) == 7


def test_a_multi_block_ingest_publishes_its_segments_unvacuumed(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    plain = pending.unvacuumed

    def spied(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        with plain(con):
            seen.append(_setting(con))
            yield

    monkeypatch.setattr(pending, "unvacuumed", contextlib.contextmanager(spied))
    src = tmp_path / "access.log"
    src.write_text("\n".join(nginx_combined(random.Random(3), 4000)) + "\n")
    summary = rs.ingest(src, "web", format="nginx", block_bytes=128 << 10)
    assert summary.blocks > 2 and summary.events == 4000
    assert seen and set(seen) == {0}
    assert _setting(rs.backend._con) == 100  # DuckDB's default, set back
