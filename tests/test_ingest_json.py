"""JSON-lines ingest on the inputs people have: escaped text, keys the check must not be
fooled by, wide schemas, empty keys and mixed time formats."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers.store import column, columns_of, iso, write_jsonl
from rootsift import QuerySpec, Rootsift

T0 = datetime(2026, 5, 1, 12, 0, 0)
SMALL_BLOCKS = 64 << 10


def _ts(i: int) -> str:
    return iso(T0 + timedelta(seconds=i))


def _write_ascii(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows as Python's json writes them by default: non-ASCII text as \\uXXXX escapes."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")
    return path


# -- escaped text takes the fast path ------------------------------------------------------

ESCAPED = ["café", "naïve ☃", "emoji 🚀 here", 'quote " and colon ":', "nul-free \u00a0 nbsp", "\u0022:\u003a"]


@pytest.mark.parametrize("block_bytes", [None, SMALL_BLOCKS], ids=["in-place", "blocks"])
def test_escaped_text_is_read_on_the_fast_path_and_round_trips(
    block_bytes: int | None, rs: Rootsift, tmp_path: Path
) -> None:
    rows = [{"timestamp": _ts(i), "n": i, "msg": f"plain {i}"} for i in range(5000)]
    for i in range(0, 5000, 10):
        rows[i]["msg"] = ESCAPED[(i // 10) % len(ESCAPED)]
        rows[i]["note"] = ESCAPED[(i // 10 + 1) % len(ESCAPED)]
    path = _write_ascii(tmp_path / "e.jsonl", rows)
    assert b"\\u00e9" in path.read_bytes()
    kwargs = {"block_bytes": block_bytes} if block_bytes else {}
    summary = rs.ingest(path, dataset="esc", **kwargs)
    assert summary.events == 5000 and summary.rejects == 0
    assert summary.exact_blocks == 0  # the escapes no longer send blocks down the exact path
    assert column(rs, "esc", "msg") == [r["msg"] for r in rows]
    assert column(rs, "esc", "note") == [r.get("note") for r in rows]


def test_escaped_keys_are_their_decoded_names(rs: Rootsift, tmp_path: Path) -> None:
    rows = [{"timestamp": _ts(i), "caf\u00e9": i, 'a"b': "x", "c:d": i % 2 == 0} for i in range(300)]
    _write_ascii(tmp_path / "k.jsonl", rows)
    summary = rs.ingest(tmp_path / "k.jsonl", dataset="keys")
    assert summary.events == 300 and summary.rejects == 0
    assert column(rs, "keys", "caf\u00e9") == [float(i) for i in range(300)]
    assert column(rs, "keys", 'a"b') == ["x"] * 300
    assert column(rs, "keys", "c:d") == ["true" if i % 2 == 0 else "false" for i in range(300)]


@pytest.mark.parametrize("block_bytes", [None, SMALL_BLOCKS], ids=["in-place", "blocks"])
def test_a_key_ending_in_a_backslash_cannot_hide_a_dropped_key(
    block_bytes: int | None, rs: Rootsift, tmp_path: Path
) -> None:
    # The key 'k\' ends in the bytes '\\":', which look like a quote inside a string: counted
    # as such, it cancels a key the typed rows miss (here a key beyond the type sample).
    rows: list[dict[str, Any]] = [{"timestamp": _ts(i)} for i in range(6000)]
    rows[10]["k\\"] = 1
    rows[5000]["rare"] = 5
    path = write_jsonl(tmp_path / "b.jsonl", rows)
    kwargs = {"block_bytes": block_bytes} if block_bytes else {}
    summary = rs.ingest(path, dataset="bs", **kwargs)
    assert summary.events == 6000
    assert column(rs, "bs", "rare").count(5.0) == 1
    assert column(rs, "bs", "k\\").count(1.0) == 1


# -- gzip is read in place -----------------------------------------------------------------


def _gzip_members(path: Path, lines: list[bytes], members: int) -> Path:
    import gzip

    per = -(-len(lines) // members)
    with open(path, "wb") as fh:
        for i in range(0, len(lines), per):
            fh.write(gzip.compress(b"".join(lines[i : i + per])))
    return path


@pytest.mark.parametrize("members", [1, 3])
def test_a_gzip_file_is_read_in_place_in_one_checked_transaction(members: int, rs: Rootsift, tmp_path: Path) -> None:
    # Over 8 MiB decompressed: streamed in blocks, this was at least two transactions.
    rows = [
        {"timestamp": _ts(i), "n": i, "pad": "x" * 120, "msg": "caf\u00e9" if i % 7 else "plain"} for i in range(70_000)
    ]
    lines = [json.dumps(r).encode() + b"\n" for r in rows]
    path = _gzip_members(tmp_path / "e.jsonl.gz", lines, members)
    summary = rs.ingest(path, dataset="gz")
    assert summary.compression == "gzip"
    assert (summary.events, summary.rejects, summary.blocks, summary.exact_blocks) == (70_000, 0, 1, 0)
    assert column(rs, "gz", "n") == [float(i) for i in range(70_000)]
    assert column(rs, "gz", "msg") == [r["msg"] for r in rows]


def test_a_gzip_file_the_check_refuses_goes_in_blocks_and_keeps_everything(rs: Rootsift, tmp_path: Path) -> None:
    lines = [json.dumps({"timestamp": _ts(i), "n": i}).encode() + b"\n" for i in range(3000)]
    lines[2000] = b'{"timestamp": "' + _ts(2000).encode() + b'", "n" : 2000, "spaced" : "k"}\n'
    lines[2500] = b"not json\n"
    path = _gzip_members(tmp_path / "s.jsonl.gz", lines, 1)
    summary = rs.ingest(path, dataset="gz2")
    assert (summary.events, summary.rejects) == (2999, 1)
    assert summary.first_rejects[0]["line"] == 2501
    assert column(rs, "gz2", "spaced").count("k") == 1
    assert "spaced" in columns_of(rs, "gz2")


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_the_whole_file_sample_is_its_first_lines_in_a_file_of_their_own(
    gz: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Types are detected in the first WHOLE_FILE_SAMPLE lines, copied (inflated, for gzip)
    into a small plain file, not in a buffer DuckDB reads (and inflates) from the input."""
    import gzip

    import duckdb

    from rootsift.ingest import jsonl

    lines = [json.dumps({"timestamp": _ts(i), "n": i}).encode() + b"\n" for i in range(jsonl.WHOLE_FILE_SAMPLE + 50)]
    path = tmp_path / ("h.jsonl.gz" if gz else "h.jsonl")
    path.write_bytes(gzip.compress(b"".join(lines)) if gz else b"".join(lines))
    reader = jsonl.JsonLinesReader(duckdb.connect(), {}, str(tmp_path), None, None)
    head = reader._head(str(path))
    assert head is not None and Path(head).read_bytes() == b"".join(lines[: jsonl.WHOLE_FILE_SAMPLE])
    monkeypatch.setattr(jsonl, "HEAD_BYTES", len(lines[0]) - 1)  # not one whole line: no sample file
    assert reader._head(str(path)) is None
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(gzip.compress(b"".join(lines))[:100])
    assert reader._head(str(cut)) is None  # cut short: DuckDB's read of the file says why


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_the_whole_file_sample_reads_no_further_than_its_lines(
    gz: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lines are read a MiB at a time: a .gz is inflated only as far as they go,
    not HEAD_BYTES into the file."""
    import gzip

    import duckdb

    from rootsift.ingest import jsonl

    lines = [json.dumps({"timestamp": _ts(i), "n": i, "pad": "x" * 200}).encode() + b"\n" for i in range(40_000)]
    path = tmp_path / ("h.jsonl.gz" if gz else "h.jsonl")
    path.write_bytes(gzip.compress(b"".join(lines)) if gz else b"".join(lines))
    read: list[int] = []
    real = jsonl.open_decompressed

    class Counted:
        def __init__(self, fh: Any) -> None:
            self.fh = fh

        def __enter__(self) -> Counted:
            return self

        def __exit__(self, *exc: object) -> None:
            self.fh.close()

        def read(self, n: int) -> bytes:
            data: bytes = self.fh.read(n)
            read.append(len(data))
            return data

    monkeypatch.setattr(jsonl, "open_decompressed", lambda p: Counted(real(p)))
    reader = jsonl.JsonLinesReader(duckdb.connect(), {}, str(tmp_path), None, None)
    head = reader._head(str(path))
    wanted = b"".join(lines[: jsonl.WHOLE_FILE_SAMPLE])
    assert head is not None and Path(head).read_bytes() == wanted
    assert len(b"".join(lines)) > 8 * len(wanted) and sum(read) < len(wanted) + jsonl.HEAD_READ


def test_a_first_line_longer_than_the_sample_bytes_is_still_read_in_place(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rootsift.ingest import jsonl

    monkeypatch.setattr(jsonl, "HEAD_BYTES", 10)
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps({"timestamp": _ts(i), "n": i}) + "\n" for i in range(500)))
    summary = rs.ingest(path, dataset="long")
    assert (summary.events, summary.blocks, summary.exact_blocks) == (500, 1, 0)
    assert column(rs, "long", "n") == [float(i) for i in range(500)]


# -- wide schemas: a field limit, the rest in _overflow -------------------------------------


def _wide_rows(n: int, keys: int, seed: int = 3) -> list[dict[str, Any]]:
    import random

    rng = random.Random(seed)
    rows = []
    for i in range(n):
        row: dict[str, Any] = {"timestamp": _ts(i), "n": i}
        for k in rng.sample(range(keys), 3):
            row[f"key_{k:05d}"] = k if k % 2 else f"v{k}"
        rows.append(row)
    return rows


@pytest.mark.parametrize("block_bytes", [None, SMALL_BLOCKS], ids=["in-place", "blocks"])
def test_keys_past_the_field_limit_go_into_overflow_and_are_reported(
    block_bytes: int | None, rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOTSIFT_MAX_FIELDS", "40")
    rows = _wide_rows(3000, 400)
    path = write_jsonl(tmp_path / "w.jsonl", rows)
    kwargs = {"block_bytes": block_bytes} if block_bytes else {}
    summary = rs.ingest(path, dataset="wide", **kwargs)
    assert (summary.events, summary.rejects) == (3000, 0)
    stored = [c for c in columns_of(rs, "wide") if not c.endswith("#raw")]
    assert len(stored) <= 40 + 1  # the fields, plus the time column
    assert "_overflow" in stored
    # every value is kept: as a column, or under its name in _overflow
    overflow = column(rs, "wide", "_overflow")
    values = {c: column(rs, "wide", c) for c in stored}
    for i, row in enumerate(rows):
        moved = json.loads(overflow[i]) if overflow[i] else {}
        for key, value in row.items():
            if key in ("timestamp", "n"):
                continue
            if key in stored:
                got = values[key][i]
                assert got == (float(value) if isinstance(value, int) else value)
                assert key not in moved
            else:
                assert moved[key] == value
    warning = next(w for w in summary.warnings if "field limit" in w)
    assert "_overflow" in warning and "(40)" in warning
    # the overflow is queryable through its JSON column
    assert _count(rs, "wide", 'exists _overflow and _overflow contains "key_"') == sum(1 for x in overflow if x)


def _count(rs: Rootsift, dataset: str, where: str) -> int:
    return int(rs.query(QuerySpec(dataset, where=where)).rows[0][0])


# -- the empty key -------------------------------------------------------------------------


@pytest.mark.parametrize("block_bytes", [None, SMALL_BLOCKS], ids=["in-place", "blocks"])
def test_an_empty_key_is_renamed_and_reported(block_bytes: int | None, rs: Rootsift, tmp_path: Path) -> None:
    rows: list[dict[str, Any]] = [{"timestamp": _ts(i), "n": i} for i in range(200)]
    rows[5][""] = "top"
    rows[7]["ctx"] = {"": 3, "_empty": 4}
    path = write_jsonl(tmp_path / "e.jsonl", rows)
    kwargs = {"block_bytes": block_bytes} if block_bytes else {}
    summary = rs.ingest(path, dataset="empty", **kwargs)
    assert (summary.events, summary.rejects, summary.time_field) == (200, 0, "timestamp")
    assert column(rs, "empty", "_empty")[5] == "top"
    assert column(rs, "empty", "ctx._empty")[7] == 4.0
    assert column(rs, "empty", "ctx._empty~2")[7] == 3.0
    assert column(rs, "empty", "n") == [float(i) for i in range(200)]
    assert any('2 empty keys ("") stored as' in w for w in summary.warnings)


# -- mixed time formats in one field -------------------------------------------------------


def _mixed_time(i: int) -> Any:
    moment = T0 + timedelta(seconds=i)
    epoch = (moment - datetime(1970, 1, 1)).total_seconds()
    return [iso(moment), int(epoch), int(epoch * 1000), moment.strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]][i % 4]


@pytest.mark.parametrize("block_bytes", [None, SMALL_BLOCKS], ids=["in-place", "blocks"])
@pytest.mark.parametrize("numbers_first", [False, True])
def test_mixed_time_formats_each_line_read_by_the_format_that_matches(
    block_bytes: int | None, numbers_first: bool, rs: Rootsift, tmp_path: Path
) -> None:
    n = 2000
    rows: list[dict[str, Any]] = [{"ts": _mixed_time(i), "n": i} for i in range(n)]
    bad = {17: "yesterday at noon", 1500: "2026-13-45T99:00:00Z"}
    for i, text in bad.items():
        rows[i]["ts"] = text
    if numbers_first:  # a sample of numbers only: the strings further down still read
        for i in range(0, 1200):
            rows[i]["ts"] = _mixed_time(1 + 4 * (i // 4) + (i % 2))
    path = write_jsonl(tmp_path / "m.jsonl", rows)
    kwargs = {"block_bytes": block_bytes} if block_bytes else {}
    summary = rs.ingest(path, dataset="mixed", **kwargs)
    rejected = sorted(bad) if not numbers_first else sorted(i for i in bad if i >= 1200)
    assert summary.rejects == len(rejected)
    assert [r["line"] for r in summary.first_rejects] == [i + 1 for i in rejected]
    assert summary.events == n - len(rejected)
    stored = dict(zip(column(rs, "mixed", "n"), column(rs, "mixed", "timestamp")))
    for i, row in enumerate(rows):
        if i in rejected:
            continue
        seconds = 1 + 4 * (i // 4) + (i % 2) if numbers_first and i < 1200 else i
        assert stored[float(i)] == T0 + timedelta(seconds=seconds), (i, row["ts"])


def test_a_time_field_no_one_format_reads_most_of_is_not_refused(rs: Rootsift, tmp_path: Path) -> None:
    # 40 % RFC 3339, 30 % log4j, 30 % unreadable: no single format reads half the sample.
    rows: list[dict[str, Any]] = []
    for i in range(1000):
        moment = T0 + timedelta(seconds=i)
        kind = i % 10
        ts = iso(moment) if kind < 4 else moment.strftime("%Y-%m-%d %H:%M:%S,000") if kind < 7 else f"garbage {i}"
        rows.append({"time": ts, "n": i})
    summary = rs.ingest(write_jsonl(tmp_path / "t.jsonl", rows), dataset="t")
    assert (summary.events, summary.rejects) == (700, 300)
    assert summary.first_rejects[0]["line"] == 8
    assert "garbage 7" in str(summary.first_rejects[0]["reason"])
    assert column(rs, "t", "timestamp")[:2] == [T0, T0 + timedelta(seconds=1)]


def test_a_time_field_nothing_reads_is_refused_naming_a_value(rs: Rootsift, tmp_path: Path) -> None:
    from rootsift.errors import UsageError

    rows = [{"time": f"garbage {i}", "n": i} for i in range(50)]
    with pytest.raises(UsageError, match="garbage 0"):
        rs.ingest(write_jsonl(tmp_path / "g.jsonl", rows), dataset="g")


def test_an_input_field_named_overflow_is_kept_inside_ours(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROOTSIFT_MAX_FIELDS", "4")
    rows = [{"timestamp": _ts(i), "a": i, "_overflow": {"mine": i}, "b": 1, "c": 2, "d": 3} for i in range(50)]
    summary = rs.ingest(write_jsonl(tmp_path / "o.jsonl", rows), dataset="own")
    assert summary.events == 50
    stored = set(columns_of(rs, "own"))
    moved = [json.loads(x) for x in column(rs, "own", "_overflow")]
    for i, m in enumerate(moved):
        kept = {k for k in ("a", "b", "c", "d") if k in stored}
        assert {k for k in m if k in ("a", "b", "c", "d")} == {"a", "b", "c", "d"} - kept
        assert m.get("_overflow") == {"mine": i} or m.get("_overflow.mine") == i


def test_the_cli_prints_the_warnings_and_json_carries_them(tmp_path: Path) -> None:
    import subprocess
    import sys

    rows: list[dict[str, Any]] = [{"timestamp": _ts(i), "n": i, "": "e"} for i in range(20)]
    path = write_jsonl(tmp_path / "w.jsonl", rows)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "rootsift.cli", "ingest", str(path), "--dataset", "w", *args]
        return subprocess.run(
            [*cmd, "--data", str(tmp_path / "data")], capture_output=True, text=True, timeout=120, check=False
        )

    text = cli()
    assert text.returncode == 0, text.stderr
    assert "warning: 20 empty keys (\"\") stored as '_empty'" in text.stdout
    as_json = cli("--json")
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["warnings"] == ["20 empty keys (\"\") stored as '_empty'"]
