"""The odd lines of an access log DuckDB parsed: parsed by text, numbered in the block only for
their rejects, and all numbered when DuckDB's calls and the block's lines do not add up
(``ingest/textodd.py``; docs/adr/0016-text-formats-in-one-duckdb-pass.md, third amendment)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from helpers.store import query_rows
from rootsift import Rootsift
from rootsift.ingest import textsql
from rootsift.ingest.rejects import Reject
from rootsift.ingest.textcut import Cut
from rootsift.ingest.textodd import in_text_order, renumbered

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_logs import nginx_combined  # noqa: E402

SPAN = {"start": "2024-01-01", "end": "2025-01-01"}
TLS = '10.9.9.9 - - [01/Mar/2024:10:00:00 +0000] "\\x16\\x03\\x01\\x00" 400 0 "-" "-"'
"""An odd line that makes an event (the Python parser unescapes it, into ``request``)."""


def _log(path: Path, inserts: dict[int, str], n: int = 3000, seed: int = 9) -> list[str]:
    lines = list(nginx_combined(random.Random(seed), n))
    for at in sorted(inserts, reverse=True):
        lines.insert(at, inserts[at])
    path.write_text("\n".join(lines) + "\n")
    return lines


def _looked_for(monkeypatch: pytest.MonkeyPatch) -> list[set[str | None]]:
    """The sets of texts ``odd_lines`` is asked to find in a block, in order."""
    asked: list[set[str | None]] = []
    find = textsql.odd_lines

    def spied(path: str, first_line: int, texts: set[str | None]) -> list[tuple[int, str]]:
        asked.append(set(texts))
        return find(path, first_line, texts)

    monkeypatch.setattr(textsql, "odd_lines", spied)
    return asked


def test_odd_lines_that_all_make_events_are_not_looked_for_in_the_block(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _looked_for(monkeypatch)
    src = tmp_path / "access.log"
    lines = _log(src, {2900: TLS, 1500: TLS, 10: TLS, 700: ""})
    summary = rs.ingest(src, "web", format="nginx")
    tls = sum("\\x16" in line for line in lines)
    assert (summary.events, summary.rejects, summary.blocks) == (len(lines) - 1, 0, 1)
    assert asked == []
    assert query_rows(rs, "web", "count", where="exists request", **SPAN) == [[tls]]


def test_only_the_texts_of_rejected_odd_lines_are_numbered_in_the_block(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _looked_for(monkeypatch)
    src = tmp_path / "access.log"
    lines = _log(src, {2999: "garbage b", 2500: "garbage a", 2000: TLS, 1200: "garbage b", 700: "garbage a", 20: TLS})
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.rejects) == (3002, 4)
    garbage = [(n, line) for n, line in enumerate(lines, 1) if line.startswith("garbage")]
    assert [(r["line"], r["text"]) for r in summary.first_rejects] == garbage
    assert [text for _, text in garbage] == ["garbage a", "garbage b", "garbage a", "garbage b"]
    assert asked == [{"garbage a", "garbage b"}]


@pytest.mark.parametrize("broken", ["count", "twice"])
def test_odd_texts_that_do_not_add_up_to_the_blocks_lines_are_all_numbered_in_the_block(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str
) -> None:
    # the texts are kept once per call of odd_line: were DuckDB to call it twice for a line
    # (or the count to be off), the lines found in the block decide, as before, never the calls
    src = tmp_path / "access.log"
    lines = _log(src, {2999: "garbage", 2000: TLS, 1200: "garbage", 20: TLS})
    expected = rs.ingest(src, "reference", format="nginx")
    if broken == "count":
        monkeypatch.setattr(textsql.LineCount, "lines", lambda self, wait=0.0: 1)
    else:
        make = textsql.TextLinesReader._odd_line

        def twice(self: textsql.TextLinesReader) -> str:
            name = make(self)
            odd = self._odd
            if odd is not None and not isinstance(odd, _Twice):
                self._odd = _Twice(odd)
            return name

        monkeypatch.setattr(textsql.TextLinesReader, "_odd_line", twice)
    asked = _looked_for(monkeypatch)
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.rejects) == (expected.events, expected.rejects) == (len(lines) - 2, 2)
    assert summary.first_rejects == expected.first_rejects
    assert [r["line"] for r in summary.first_rejects] == [n for n, line in enumerate(lines, 1) if line == "garbage"]
    assert asked == [{line for line in lines if "\\x16" in line or line == "garbage"}]  # every odd text
    tls = sum("\\x16" in line for line in lines)
    assert query_rows(rs, "web", "count", where="exists request", **SPAN) == [[tls]]


class _Twice(list):  # type: ignore[type-arg]
    """A list that keeps each text twice: ``odd_line`` as if DuckDB called it twice per line."""

    def __init__(self, inner: list[str | None]) -> None:
        super().__init__()
        self.inner = inner

    def append(self, item: str | None) -> None:
        self.inner.append(item)
        self.inner.append(item)


def test_renumbered_gives_the_kth_equal_text_the_kth_line_of_that_text() -> None:
    order = in_text_order(["b", None, "a", "b", "a", "c"])
    assert order == ["", "a", "a", "b", "b", "c"]
    rejects = [Reject(5, "bad b", "b"), Reject(2, "bad a", "a"), Reject(4, "bad b", "b"), Reject(3, "bad a", "a")]
    lines = {"a": [(10, "a"), (30, "a")], "b": [(20, "b"), (40, "b")]}

    def find(wanted: set[str]) -> list[tuple[int, str]]:
        return sorted(item for text in wanted for item in lines[text])

    assert [(r.line, r.text) for r in renumbered(rejects, order, find) or []] == [
        (10, "a"),
        (20, "b"),
        (30, "a"),
        (40, "b"),
    ]
    # a text found fewer (or more) times than DuckDB handed it: None, the caller numbers them all
    assert renumbered(rejects, order, lambda wanted: [(10, "a"), (20, "b"), (40, "b")]) is None


@pytest.mark.parametrize(
    ("block", "lines"), [(b"", 0), (b"a\n", 1), (b"a", 1), (b"a\n\nb", 3), (b"\n\n", 2), (b"a\nb\n", 2)]
)
def test_a_blocks_lines_are_counted_as_duckdb_reads_them_as_rows(block: bytes, lines: int, tmp_path: Path) -> None:
    import duckdb

    from rootsift.ingest.textlines import LINES

    assert Cut([block] if block else [], 1, True).lines() == lines
    path = tmp_path / "block.log"
    path.write_bytes(block)
    if block:
        rows = duckdb.connect().execute(f"SELECT count(*) FROM {LINES.format(path=repr(str(path)))}").fetchone()
        assert rows == (lines,)
