"""bench/rca.py: the benchmark's scoring rules (README of ../shared/rca_dev) and the way a
case is given to explain, on a small cube with a planted cause (no benchmark files read)."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import numpy as np
import pytest

from rootsift import Rootsift

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import rca  # noqa: E402


def el(**pairs: str) -> frozenset[tuple[str, str]]:
    return frozenset(pairs.items())


def test_scoring_follows_the_readme() -> None:
    truth = [el(a="a3", e="e1"), el(a="a1")]
    assert rca.score([el(a="a3", e="e1"), el(a="a1")], truth) == (2, 0, 0)
    # no credit for a parent or a child
    assert rca.score([el(a="a3"), el(a="a1", b="b2")], truth) == (0, 2, 2)
    # duplicates count once; an empty answer is all false negatives
    assert rca.score([el(a="a1"), el(a="a1")], truth) == (1, 0, 1)
    assert rca.score([], truth) == (0, 0, 2)


@pytest.mark.parametrize("direction", ["real_falls", "real_rises"])
def test_a_case_is_explained_as_count_rows(tmp_path: Path, direction: str) -> None:
    """A cube with forecast noise and one cause on a pair: explain's cause set names it."""
    rng = np.random.default_rng(7)
    lines = ["a,b,c,real,predict"]
    for a in range(1, 6):
        for b in range(1, 7):
            for c in range(1, 5):
                predict = float(rng.uniform(20, 200))
                real = predict * (1 + rng.normal(0, 0.05))
                if (a, b) == (2, 3):
                    real *= 0.3 if direction == "real_falls" else 2.5
                lines.append(f"a{a},b{b},c{c},{real:.6g},{predict:.6g}")
    case = tmp_path / "case.csv.gz"
    case.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    with Rootsift(tmp_path / "data") as rs:
        found, seconds = rca.run_case(rs, case, tmp_path, "case")
    assert found == [el(a="a2", b="b3")] and seconds > 0
