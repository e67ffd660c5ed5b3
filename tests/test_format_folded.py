"""Folded (collapsed) stacks: golden files, the FlameGraph and speedscope corpora, labels
and UTF-16 inputs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, check_golden, check_items, golden_cases, parse
from helpers.store import query_dicts
from rootsift.api import Rootsift
from rootsift.errors import UsageError

PROFILES = CORPORA / "profiles"
COLLAPSED = sorted((PROFILES / "flamegraph" / "test" / "results").glob("*-collapsed-all.txt"))
STACKCOLLAPSE = PROFILES / "speedscope" / "sample" / "profiles" / "stackcollapse"


@pytest.mark.parametrize("case", golden_cases("folded"), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    check_golden(case)


@pytest.mark.parametrize("path", COLLAPSED, ids=lambda p: p.name)
def test_flamegraph_results_read_whole(path: Path) -> None:
    """stackcollapse-perf.pl's expected outputs: every line one event, every sample counted."""
    text = path.read_text()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    events, rejects = parse("folded", text, mtime=0.0)
    assert not rejects
    assert len(events) == len(lines)
    assert sum(ev["samples"] for _, ev in events) == sum(int(ln.rsplit(" ", 1)[1]) for ln in lines)
    for (_, ev), line in zip(events, lines, strict=True):
        assert line.startswith(str(ev["stack"]))
        assert ev["depth"] == len([f for f in str(ev["stack"]).split(";") if f])


def test_speedscope_edge_cases_agree(tmp_path: Path) -> None:
    """Plain, CRLF, UTF-16 LE/BE and the file with comments and an invalid line hold the same samples."""
    with Rootsift(tmp_path / "data") as rs:
        for name in ("simple", "simple-crlf", "simple-utf16-le", "simple-utf16-be", "simple-with-invalids"):
            summary = rs.ingest(STACKCOLLAPSE / f"{name}.txt", name.replace("-", "_"))
            assert summary.format == "folded", name
            assert summary.rejects == (1 if name == "simple-with-invalids" else 0), name
            rows = query_dicts(rs, name.replace("-", "_"), "sum(samples)", breakdowns=["stack"])
            assert {r["stack"]: r["sum(samples)"] for r in rows} == {"a;b;c": 5, "a;b;d": 4, "a;b": 5}, name


def test_labels_name_the_profile(tmp_path: Path) -> None:
    """Two versions' profiles in one dataset, told apart by --label; a field of the event's own wins."""
    old = tmp_path / "cpu_old.folded"
    new = tmp_path / "cpu_new.folded"
    old.write_text("main;encode 10\nmain;read 30\n")
    new.write_text("main;encode 25\nmain;read 30\n")
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(old, "profiles", labels={"version": "1.3.1", "function": "not used"})
        rs.ingest(new, "profiles", labels={"version": "1.6.0"})
        rows = query_dicts(rs, "profiles", "sum(samples)", breakdowns=["version", "function"])
        got = {(r["version"], r["function"]): r["sum(samples)"] for r in rows}
        assert got == {("1.3.1", "encode"): 10, ("1.3.1", "read"): 30, ("1.6.0", "encode"): 25, ("1.6.0", "read"): 30}
        with pytest.raises(UsageError, match="--label applies to log formats"):
            rs.ingest(old, "other", format="jsonl", labels={"version": "x"})


def test_time_is_the_file_time(tmp_path: Path) -> None:
    import os

    path = tmp_path / "cpu.folded"
    path.write_text("a;b 1\n")
    os.utime(path, (1709350200, 1709350200))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(path, "p")
        (row,) = query_dicts(rs, "p", "count", granularity="1h")
        assert str(row["time"]).startswith("2024-03-02 03:00")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab; \t0123456789.#/"), max_size=40), max_size=30))
def test_any_input(lines: list[str]) -> None:
    text = "\n".join(lines)
    events, rejects = parse("folded", text, mtime=0.0)
    check_items(events, rejects, text.count("\n") + 1)
    for _, ev in events:
        assert ev["function"] and ev["depth"] >= 1


def test_sample_counts_beyond_64_bits_are_stored_as_doubles_and_endless_ones_rejected() -> None:
    # Found by tests/test_parser_properties.py: a count past 2^64 gave an event orjson cannot
    # write, and one past 4,300 digits made int() raise.
    events, rejects = parse("folded", "a;b 20000000000000000000\na;c " + "9" * 5000 + "\na;d 7\n")
    assert [(n, ev["samples"]) for n, ev in events] == [(1, 2e19), (3, 7)]
    assert [(r.line, r.reason) for r in rejects] == [
        (2, f"not a folded stack: sample count {'9' * 40!r} is not a finite number")
    ]
    check_items(events, rejects, 3)
