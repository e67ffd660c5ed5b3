"""Numbers the JSON fast path lets DuckDB's reader parse as DOUBLE itself (ADR 0005,
"Amended"): every 0 or 1 there may have been ``false`` or ``true``, so such values are
vouched for line by line, and whatever cannot be vouched for is still kept exactly."""

from __future__ import annotations

import mmap
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.store import column, iso, schema_map, write_jsonl
from rootsift import Rootsift
from rootsift.ingest import jsonl, vouch
from rootsift.ingest.blockstats import BlockStats, LineStarts

T0 = datetime(2026, 5, 1, 12, 0, 0)
ROWS = 20_000  # several of DuckDB's reader buffers, read by both threads
AT = 15_001


@pytest.fixture(autouse=True)
def numbers_parsed_by_the_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader's own number parsing is off by default (its memory grows with a file
    read as one block, see ``JsonLinesReader._parse_numbers``); these tests keep the
    mechanism, and its guarantee that a boolean still lands in ``#raw``, working."""
    monkeypatch.setattr(jsonl.JsonLinesReader, "_parse_numbers", True)


def _row(i: int) -> dict[str, Any]:
    # ``ms`` never 0 or 1 in the file's first lines, so the reader parses it as DOUBLE
    return {"timestamp": iso(T0 + timedelta(milliseconds=i)), "ms": 2.5 + i % 7, "http": {"bytes": 100 + i}}


def _seed(rs: Rootsift, tmp_path: Path) -> None:
    """The dataset already has ``ms`` and ``http.bytes`` as numbers: a later value of
    another kind is a conflict, kept in ``#raw`` (a fresh file's detection would make the
    field text instead)."""
    rs.ingest(write_jsonl(tmp_path / "seed.jsonl", (_row(i) for i in range(-100, 0))), dataset="n")


@pytest.fixture
def vouched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, bool | None]]:
    """Every call of ``vouch`` from the fast path: (suspects, verdict)."""
    calls: list[tuple[int, bool | None]] = []
    real = vouch.vouch

    def spy(
        path: str, suspects: list[tuple[int, tuple[str, ...]]], total: int, starts: LineStarts | None
    ) -> bool | None:
        verdict = real(path, suspects, total, starts)
        calls.append((len(suspects), verdict))
        return verdict

    monkeypatch.setattr(jsonl, "vouch", spy)
    return calls


@pytest.fixture
def whole_file_tries(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per checked insert of a whole file (the first and any retry)."""
    calls: list[int] = []
    real = jsonl.JsonLinesReader._fast

    def spy(self: jsonl.JsonLinesReader, *args: Any, **kwargs: Any) -> Any:
        if args[3] == jsonl.WHOLE_FILE_SAMPLE:
            calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(jsonl.JsonLinesReader, "_fast", spy)
    return calls


@pytest.mark.parametrize("value", [True, False], ids=["true", "false"])
@pytest.mark.parametrize("block_bytes", [None, 256 << 10], ids=["in-place", "blocks"])
@pytest.mark.parametrize("field", ["ms", "http.bytes"])
def test_a_boolean_among_parsed_numbers_deep_in_a_file_lands_in_raw(
    field: str,
    value: bool,
    block_bytes: int | None,
    vouched: list[tuple[int, bool | None]],
    rs: Rootsift,
    tmp_path: Path,
) -> None:
    """The reader would store ``true`` as 1.0. ``ms``: every other line holds a number
    there, so a row mapped to the wrong line would be vouched for; ``http.bytes``: the
    lines around its boolean hold the number itself."""
    rows = [_row(i) for i in range(ROWS)]
    number = float(value)

    def put(i: int, v: Any) -> None:
        (rows[i] if field == "ms" else rows[i]["http"])[field.split(".")[-1]] = v

    for i in (300, 9_000) if field == "ms" else (300, 9_000, AT - 1, AT + 1):
        put(i, number)
    put(AT, value)
    _seed(rs, tmp_path)
    summary = rs.ingest(write_jsonl(tmp_path / "b.jsonl", rows), dataset="n", block_bytes=block_bytes)
    assert (summary.events, summary.rejects) == (ROWS, 0)
    assert any(not verdict for _, verdict in vouched)  # the check caught it, no other rung
    stored, raw = column(rs, "n", field)[100:], column(rs, "n", field + "#raw")[100:]
    assert (stored[AT], raw[AT]) == (None, str(value).lower())
    assert stored[300] == stored[9_000] == number and raw.count(None) == ROWS - 1
    assert schema_map(rs, "n")[field]["conflicts"] == 1
    assert schema_map(rs, "n")["http.bytes" if field == "ms" else "ms"]["conflicts"] == 0
    expected = [r["ms"] if field == "ms" else r["http"]["bytes"] for r in rows]
    assert sum(x for x in stored if x is not None) == pytest.approx(sum(x for x in expected if not isinstance(x, bool)))


def test_rare_zeros_and_ones_are_vouched_for_on_the_fast_path(
    vouched: list[tuple[int, bool | None]], rs: Rootsift, tmp_path: Path
) -> None:
    rows = [_row(i) for i in range(ROWS)]
    ones = {AT: 1.0, 9_000: 0, 12_345: 1, 17_000: -0.0}
    for i, v in ones.items():
        rows[i]["ms"] = v
    rows[5_000]["http"]["bytes"] = "1"  # numeric text: read as the number, as the exact cast reads it
    summary = rs.ingest(write_jsonl(tmp_path / "r.jsonl", rows), dataset="n")
    assert (summary.blocks, summary.exact_blocks, summary.rejects) == (1, 0, 0)
    assert vouched == [(5, True)]
    ms = column(rs, "n", "ms")
    assert [ms[i] for i in ones] == [1.0, 0.0, 1.0, 0.0]
    assert column(rs, "n", "http.bytes")[5_000] == 1.0
    assert "ms#raw" not in schema_map(rs, "n")


SPACED = '  {"timestamp": "2026-05-01T11:00:00Z", "ms": 3.5}\n'


@pytest.mark.parametrize(("inserted", "mapped"), [("\n  \n", True), (SPACED, False)], ids=["blank", "spaced"])
def test_rows_are_found_by_the_lines_that_start_an_object(
    inserted: str,
    mapped: bool,
    vouched: list[tuple[int, bool | None]],
    whole_file_tries: list[int],
    rs: Rootsift,
    tmp_path: Path,
) -> None:
    """The reader skips blank lines (rows still map to the lines that start with ``{``);
    a line starting with a space makes a row no ``\\n{`` marks: nothing is vouched for,
    and the field is read as text and cast instead (the same values either way)."""
    rows = [_row(i) for i in range(ROWS)]
    rows[AT]["ms"] = 1
    path = write_jsonl(tmp_path / "blank.jsonl", rows)
    text = path.read_text().splitlines(keepends=True)
    path.write_text("".join(text[:100]) + inserted + "".join(text[100:]))
    summary = rs.ingest(path, dataset="n")
    assert (summary.events, summary.exact_blocks, summary.rejects) == (ROWS + (not mapped), 0, 0)
    assert vouched[0] == (1, True if mapped else None)
    assert len(whole_file_tries) == (1 if mapped else 2)  # not found by line: once more, cast
    assert 1.0 in column(rs, "n", "ms") and "ms#raw" not in schema_map(rs, "n")


@pytest.mark.parametrize("text", ["NaN", "-Infinity", " 7 ", "abc"])
def test_text_the_reader_turns_into_odd_numbers_is_still_read_exactly(
    text: str, whole_file_tries: list[int], rs: Rootsift, tmp_path: Path
) -> None:
    """``"NaN"`` parses to a non-finite DOUBLE (kept in ``#raw``); ``" 7 "`` the reader
    refuses while the exact cast reads 7 (so the file is tried once more, cast); ``"abc"``
    neither reads (no second try): each ends as the cast path has it."""
    rows = [_row(i) for i in range(ROWS)]
    rows[AT]["ms"] = text
    _seed(rs, tmp_path)
    whole_file_tries.clear()
    summary = rs.ingest(write_jsonl(tmp_path / "odd.jsonl", rows), dataset="n")
    assert (summary.events, summary.rejects) == (ROWS, 0)
    ms = column(rs, "n", "ms")[100:]
    raw = column(rs, "n", "ms#raw")[100:] if text != " 7 " else [None] * ROWS
    if text == " 7 ":
        assert (ms[AT], raw[AT], summary.exact_blocks) == (7.0, None, 0)
    else:
        assert (ms[AT], raw[AT]) == (None, text)
    assert len(whole_file_tries) == (2 if text == " 7 " else 1)


def _starts(path: Path) -> LineStarts:
    starts = BlockStats.of_file(str(path), chunk=mmap.ALLOCATIONGRANULARITY).lines  # several windows
    assert starts is not None
    return starts


def test_lines_of_rows_maps_rows_to_lines_or_refuses(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    lines = [f'{{"i":{i}}}'.encode() for i in range(5000)]
    path.write_bytes(b"\n".join(lines))  # no newline after the last line
    want = {0: lines[0], 1234: lines[1234], 4999: lines[4999]}
    assert vouch.lines_of_rows(str(path), [0, 1234, 4999], 5000, _starts(path)) == want
    assert vouch.lines_of_rows(str(path), [3], 4999, _starts(path)) is None  # more lines than rows
    path.write_bytes(b"\n\n" + b"\n".join(lines[:10]) + b"\n\r\n\n" + b"\n".join(lines[10:]) + b"\n")
    assert vouch.lines_of_rows(str(path), [0, 20, 4999], 5000, _starts(path)) == {
        0: lines[0],
        20: lines[20],
        4999: lines[4999],
    }
    path.write_bytes(b"\n".join(lines[:10]) + b"\n " + b"\n".join(lines[10:]) + b"\n")
    assert vouch.lines_of_rows(str(path), [20], 5000, _starts(path)) is None
    assert vouch.vouch(str(path), [(20, ("i",))], 5000, _starts(path)) is None
    assert vouch.vouch(str(path), [(20, ("i",))], 5000, None) is None


def test_vouch_accepts_numbers_and_refuses_booleans_and_missing_values(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "v.jsonl",
        [{"a": 1}, {"a": True}, {"b": {"c": 0.0}}, {"b": {"c": False}}, {"a": "1"}, {"A": 1}, {"a": None}],
    )
    total = 7
    starts = _starts(path)
    assert vouch.vouch(str(path), [(0, ("a",)), (2, ("b", "c")), (4, ("a",))], total, starts)
    for row, field in ((1, ("a",)), (3, ("b", "c")), (5, ("a",)), (6, ("a",))):
        assert vouch.vouch(str(path), [(row, field)], total, starts) is False
