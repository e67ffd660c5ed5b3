"""Timeout inference reads only the upper tail bin by bin (the store's sample says where it
starts) and finds exactly the ceilings a count of every bin finds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rootsift import Rootsift
from rootsift.analysis import sql as q
from rootsift.analysis import timeouts as to
from rootsift.analysis.counts import BIN_STEPS, bin_key
from rootsift.analysis.frame import Frame
from rootsift.store.sqltext import ident
from test_explain import write_events

START = datetime(2024, 6, 1, tzinfo=UTC)


def durations(seed: int, n: int) -> list[dict[str, Any]]:
    """Fields with a pile-up at a ceiling in the tail (``capped_ms``; ``rare_cap_ms``, ~60
    events of 20,000 at 30 s: one in the sample), none (``free_ms``), a pile-up below the tail
    (``common_ms``: a third of the values at 100), and a heavy tail (``heavy_s``)."""
    rng = np.random.default_rng(seed)
    capped = np.minimum(rng.lognormal(6, 1, n), 2000.0)
    rare = np.minimum(rng.lognormal(7, 1.2, n), 30_000.0)  # ~60 of 20,000 at the cap
    common = np.where(rng.random(n) < 0.33, 100.0, rng.lognormal(5, 1, n))
    return [
        {
            "timestamp": (START + timedelta(seconds=i * 0.1)).isoformat(),
            "capped_ms": round(float(capped[i]), 3),
            "rare_cap_ms": round(float(rare[i]), 3),
            "free_ms": round(float(rng.lognormal(5, 1)), 3),
            "common_ms": round(float(common[i]), 3),
            "heavy_s": round(float(rng.pareto(1.2)), 4),
        }
        for i in range(n)
    ]


def every_bin(frame: Frame, name: str) -> to.Ceiling | None:
    """The pile-up test over every bin, counted and moded per bin in one query (as before)."""
    col = ident(name)
    condition, params = frame.range_where()
    where = condition.sql(dialect="duckdb")  # the oracle writes DuckDB text by hand
    rows = frame.backend.execute_sql(
        f"SELECT {bin_key(q.col(name)).sql(dialect='duckdb')} AS k, count(*), mode({col}) FROM {frame.relation_sql} WHERE ({where}) AND {col} > 0 "
        "GROUP BY 1 ORDER BY 1",
        params,
    ).rows
    if len(rows) < 6:
        return None
    keys = np.array([r[0] for r in rows], dtype=np.float64)
    counts = np.array([r[1] for r in rows], dtype=np.float64)
    cum = np.cumsum(counts) / counts.sum()
    for i in range(len(rows) - 1, 3, -1):
        if cum[i - 1] < 0.9:
            break
        if (
            counts[i] >= to.PILE_MIN
            and keys[i] - keys[i - 4] <= 4 + BIN_STEPS
            and counts[i] >= to.PILE_UP * max(counts[i - 4 : i].mean(), 1.0)
        ):
            return to.Ceiling(name, float(rows[i][2]), int(counts[i]), True)
    return None


@pytest.mark.parametrize("seed", [1, 2])
def test_the_tail_read_alone_finds_what_every_bin_finds(
    rs: Rootsift, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rs.ingest(write_events(tmp_path / "d.jsonl", durations(seed, 20_000)), "api")
    frame = Frame(rs.backend, "api", None, None)
    fields = to.duration_fields(frame)
    assert fields == ["capped_ms", "common_ms", "free_ms", "heavy_s", "rare_cap_ms"]
    expected = [c for c in (every_bin(frame, f) for f in fields) if c is not None]
    assert {c.field for c in expected} == {"capped_ms", "rare_cap_ms"}
    full = []
    monkeypatch.setattr(to, "_all_bins", lambda frame, name: full.append(name) or ([], []))
    assert to.inferred_ceilings(frame, fields) == expected
    assert full == []  # no field needed a count of every bin


def test_without_a_sample_every_bin_is_read(rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rs.ingest(write_events(tmp_path / "d.jsonl", durations(3, 3000)), "api")
    frame = Frame(rs.backend, "api", None, None)
    fields = to.duration_fields(frame)
    expected = [c for c in (every_bin(frame, f) for f in fields) if c is not None]
    monkeypatch.setattr(type(rs.backend), "sample_relation", lambda self, *a: None)
    assert to.inferred_ceilings(frame, fields) == expected and expected
