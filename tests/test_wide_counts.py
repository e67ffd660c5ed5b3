"""explain's count pass on datasets with more fields than one ``GROUPING()`` takes (64
in DuckDB and ClickHouse): the grouping set's id is then written in chunks."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from helpers.backends import BACKENDS, opened
from helpers.store import iso, write_jsonl
from rootsift.analysis.counts import GROUPING_MAX, _gid, _gid_literal


@pytest.mark.parametrize("n", [1, GROUPING_MAX, GROUPING_MAX + 1, 2 * GROUPING_MAX + 7])
def test_a_grouping_id_reads_back_as_written(n: int) -> None:
    rng = np.random.default_rng(n)
    for _ in range(50):
        gid = int(rng.integers(0, 2**62)) & ((1 << n) - 1) if n < 62 else int.from_bytes(rng.bytes(32)) % (1 << n)
        written = _gid_literal(gid, n)
        assert _gid(written.this, n) == gid  # the literal as the engine returns it


@pytest.mark.parametrize("engine", BACKENDS)
def test_explain_finds_the_cause_among_eighty_fields(engine: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    t0 = datetime(2024, 6, 1)
    rows = []
    for k in range(3000):
        event = {f"f{j:02d}": str(rng.choice(["a", "b", "c"])) for j in range(80)}
        slow = event["f77"] == "a" and rng.random() < 0.8
        event.update(timestamp=iso(t0 + timedelta(seconds=k)), duration_ms=float(rng.lognormal(7 if slow else 4, 0.3)))
        rows.append(event)
    path = write_jsonl(tmp_path / "wide.jsonl", rows)
    with opened(tmp_path / "data", engine) as rs:
        rs.ingest(path, dataset="wide")
        found = rs.explain("wide", select="duration_ms > 400").as_dict()
    top = found["findings"][0]
    assert (top["field"], top["value"]) == ("f77", "a"), top
