"""Access logs read by DuckDB on every core: the one-pass statement, its odd lines, its blocks
and a stream's periodic commits (docs/adr/0016-text-formats-in-one-duckdb-pass.md, amendment)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.store import query_rows
from rootsift import Rootsift
from rootsift.ingest import textrun
from rootsift.ingest.textsql import odd_lines
from rootsift.store.writer import SegmentWriter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from gen_logs import nginx_combined  # noqa: E402


def _access_log(path: Path, n: int, seed: int = 5) -> list[str]:
    lines = list(nginx_combined(random.Random(seed), n))
    path.write_text("\n".join(lines) + "\n")
    return lines


def test_the_one_pass_statement_has_no_window_so_duckdb_runs_it_on_every_thread(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # row_number() OVER () in the statement made DuckDB run everything above it (the
    # conversion and the insert) on one thread: the plan of each block's insert has no window
    plans: list[str] = []
    original = SegmentWriter.write_checked

    def spied(self: SegmentWriter, select_sql: str, *args: Any) -> Any:
        rows = self.cur.execute(f"EXPLAIN {select_sql}").fetchall()
        plans.append("\n".join(str(r[1]) for r in rows))
        return original(self, select_sql, *args)

    monkeypatch.setattr(SegmentWriter, "write_checked", spied)
    src = tmp_path / "access.log"
    _access_log(src, 2000)
    summary = rs.ingest(src, "web", format="nginx", block_bytes=32 << 10)
    assert summary.events == 2000 and summary.rejects == 0
    assert len(plans) == summary.blocks > 2 and all("WINDOW" not in plan.upper() for plan in plans)


def test_odd_lines_are_numbered_by_their_text_wherever_they_repeat(tmp_path: Path) -> None:
    block = tmp_path / "block.log"
    block.write_bytes(b"ok 1\nTLS\x16probe\nok 2\n\nGET /caf\xc3\xa9\nTLS\x16probe\nok 3\n")
    # DuckDB hands the odd texts in any order, each once or more; None is an empty line
    found = odd_lines(str(block), 41, {"GET /café", "TLS\x16probe", None})
    assert found == [(42, "TLS\x16probe"), (44, ""), (45, "GET /café"), (46, "TLS\x16probe")]
    assert odd_lines(str(block), 1, {"not there"}) == []


def test_odd_lines_are_told_apart_by_their_whole_text_not_their_key(tmp_path: Path) -> None:
    # the vectorised key (length and the middle 8 bytes) only picks candidates: lines that
    # share it, and lines that differ only in their middle, are told apart by their text
    block = tmp_path / "block.log"
    same_key = ["a" * 10 + "MIDDLE!!" + "b" * 10, "c" * 10 + "MIDDLE!!" + "d" * 10]
    other_middle = "a" * 10 + "middle??" + "b" * 10
    block.write_text("\n".join([same_key[0], same_key[1], other_middle, "short", same_key[0]]))
    assert odd_lines(str(block), 1, {same_key[0]}) == [(1, same_key[0]), (5, same_key[0])]
    assert odd_lines(str(block), 1, {other_middle, "short"}) == [(3, other_middle), (4, "short")]


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.text(alphabet="ab \x16\\é", max_size=20), max_size=12),
    end=st.sampled_from(["", "\n"]),
    picks=st.lists(st.integers(0, 20), max_size=4),
)
def test_odd_lines_number_what_a_split_of_the_block_numbers(lines: list[str], end: str, picks: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        block = Path(tmp) / "block.log"
        data = "\n".join(lines) + end
        block.write_bytes(data.encode())
        texts = {lines[i] if lines[i] else None for i in picks if i < len(lines)} | {"not there"}
        wanted = {t or "" for t in texts}
        split = data[:-1].split("\n") if data.endswith("\n") else data.split("\n")
        assert odd_lines(str(block), 7, texts) == [(n, line) for n, line in enumerate(split, 7) if line in wanted]


def test_odd_lines_repeated_in_one_block_keep_their_log_line_numbers(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "access.log"
    lines = list(nginx_combined(random.Random(9), 3000))
    for at in (2999, 2500, 1200, 700):  # the same odd line four times, in the one block
        lines.insert(at, "garbage line")
    src.write_text("\n".join(lines) + "\n")
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.blocks) == (3000, 1)
    assert [r["line"] for r in summary.first_rejects] == [701, 1202, 2503, 3003]


SPAN = {"start": "2024-01-01", "end": "2025-01-01"}
TLS = '10.9.9.9 - - [01/Mar/2024:10:00:00 +0000] "\\x16\\x03\\x01\\x00" 400 0 "-" "-"'
"""A TLS handshake sent to a plain-HTTP port: an odd line (the Python parser unescapes it)
whose event has a field the SQL never gives, ``request``."""


def _transactions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, list[str]]]:
    """Each transaction the writer commits, in order: ("checked", rows, columns) for a block's
    one statement, ("queued", rows, []) for staged tables (the odd lines' rows)."""
    seen: list[tuple[str, int, list[str]]] = []
    checked, commit = SegmentWriter.write_checked, SegmentWriter.commit

    def spied_checked(self: SegmentWriter, select_sql: str, columns: dict[str, str], *args: Any) -> Any:
        verified = checked(self, select_sql, columns, *args)
        seen.append(("checked", verified.rows if verified else 0, list(columns)))
        return verified

    def spied_commit(self: SegmentWriter) -> int:
        rows = commit(self)
        if rows:
            seen.append(("queued", rows, []))
        return rows

    monkeypatch.setattr(SegmentWriter, "write_checked", spied_checked)
    monkeypatch.setattr(SegmentWriter, "commit", spied_commit)
    return seen


def test_blocks_are_all_big_and_the_odd_lines_rows_are_committed_once_after_them(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a small first block, and the few rows of each block's odd lines committed between two
    # blocks, were small transactions before big ones: the segment's checkpoint then rewrote
    # its row groups (0.3-0.8 s of a 200k-line ingest, and a bigger file)
    monkeypatch.setattr(textrun, "FIRST_BLOCK_BYTES", 8 << 10)
    monkeypatch.setattr(textrun, "RAW_BLOCK_BYTES", 192 << 10)
    seen = _transactions(monkeypatch)
    src = tmp_path / "access.log"
    lines = list(nginx_combined(random.Random(4), 8000))
    for at in (7900, 5000, 2100, 300, 10):
        lines.insert(at, TLS)
    lines.insert(1500, "garbage line")
    src.write_text("\n".join(lines) + "\n")
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.rejects) == (8005, 1) and summary.first_rejects[0]["line"] == 1501
    blocks = [rows for kind, rows, _ in seen if kind == "checked"]
    assert len(blocks) == summary.blocks >= 4
    assert blocks[0] >= 0.9 * max(blocks), f"a small first block: {blocks}"
    assert [kind for kind, *_ in seen] == ["checked"] * len(blocks) + ["queued"], seen
    tls = sum(line.startswith("10.") and "\\x16" in line for line in lines)  # the generator's own too
    assert seen[-1][1] == tls > 5  # the odd lines' rows, once
    assert query_rows(rs, "web", "count", where="exists request", **SPAN) == [[tls]]
    assert query_rows(rs, "web", "count", **SPAN) == [[8005]]


def test_odd_lines_rows_kept_back_are_bounded(rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # memory: past DEFER_ROWS waiting rows they are committed before the next block
    from rootsift.ingest import textsql

    monkeypatch.setattr(textsql, "DEFER_ROWS", 3)
    monkeypatch.setattr(textrun, "FIRST_BLOCK_BYTES", 8 << 10)
    monkeypatch.setattr(textrun, "RAW_BLOCK_BYTES", 64 << 10)
    seen = _transactions(monkeypatch)
    src = tmp_path / "access.log"
    lines = list(nginx_combined(random.Random(4), 3000))
    for at in range(2900, 0, -150):
        lines.insert(at, TLS)
    src.write_text("\n".join(lines) + "\n")
    summary = rs.ingest(src, "web", format="nginx")
    tls = sum(line.startswith("10.") and "\\x16" in line for line in lines)
    assert (summary.events, summary.rejects) == (len(lines), 0)
    kinds = [kind for kind, *_ in seen]
    assert kinds.count("queued") > 1 and kinds[0] == "checked" and "queued" in kinds[: len(kinds) - 1]
    assert sum(rows for kind, rows, _ in seen if kind == "queued") == tls
    assert query_rows(rs, "web", "count", where="exists request", **SPAN) == [[tls]]


def test_a_field_of_the_odd_lines_at_the_front_is_a_column_of_the_blocks_own_insert(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the odd lines' ``request``, added by ALTER TABLE after the block's rows, made the
    # checkpoint rewrite every row group: the front of the first block tells it in advance
    seen = _transactions(monkeypatch)
    src = tmp_path / "access.log"
    lines = list(nginx_combined(random.Random(6), 2000))
    lines.insert(50, TLS)
    lines.insert(1800, TLS)
    src.write_text("\n".join(lines) + "\n")
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.rejects) == (2002, 0)
    assert "request" in seen[0][2] and seen[0][0] == "checked"
    assert summary.new_fields.count("request") == 1
    tls = sum("\\x16" in line for line in lines)
    assert query_rows(rs, "web", "count", where="exists request", **SPAN) == [[tls]]


def test_a_field_with_no_value_at_the_front_still_gets_its_later_values(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the front decides the first block's new columns; a line with a value for another
    # field goes to Python, which adds it: nothing is lost, and later blocks insert it
    from rootsift.ingest import textprobe

    monkeypatch.setattr(textprobe, "PROBE_BYTES", 4 << 10)
    monkeypatch.setattr(textrun, "RAW_BLOCK_BYTES", 64 << 10)
    monkeypatch.setattr(textrun, "FIRST_BLOCK_BYTES", 8 << 10)
    src = tmp_path / "access.log"
    lines = list(nginx_combined(random.Random(8), 2000))
    users = {at: lines[at].replace(" - - [", f" - user{at} [", 1) for at in (900, 1300, 1700)}
    for at, line in users.items():
        lines[at] = line
    src.write_text("\n".join(lines) + "\n")
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.rejects) == (2000, 0) and summary.blocks > 2
    assert "remote_user" in summary.new_fields
    found = query_rows(rs, "web", "count", breakdowns=["remote_user"], where="exists remote_user", **SPAN)
    assert sorted(found) == sorted([f"user{at}", 1] for at in users)


def _visible(data: Path, dataset: str) -> int | None:
    with Rootsift(data, read_only=True) as rs:
        return rs.events(dataset) if dataset in {d.name for d in rs.datasets()} else None


def _stream_lines(fmt: str, n: int) -> list[str]:
    if fmt == "nginx":
        return list(nginx_combined(random.Random(3), n))
    return [f"time=2024-05-01T10:{i // 60:02d}:{i % 60:02d}Z level=info i={i}" for i in range(n)]


@pytest.mark.parametrize("fmt", ["nginx", "logfmt"])
def test_a_text_log_stream_commits_every_few_seconds_and_on_sigterm(fmt: str, tmp_path: Path) -> None:
    # `tail -f access.log | rootsift ingest - --format nginx`: lines DuckDB parses (nginx) and
    # lines the Python parser reads (logfmt) are cut every --commit-every seconds too (they
    # waited for 2 MiB or the end), and SIGTERM ends the ingest while the pipe stays open
    data = tmp_path / "data"
    data.mkdir()
    lines = _stream_lines(fmt, 150)
    cmd = [sys.executable, "-m", "rootsift.cli", "ingest", "-", "-d", "live", "--format", fmt]
    writer = subprocess.Popen(
        [*cmd, "--commit-every", "1", "--json", "--data", str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "ROOTSIFT_LOCK_WAIT": "30"},
    )
    assert writer.stdin is not None
    try:
        writer.stdin.write("".join(line + "\n" for line in lines[:100]).encode())
        writer.stdin.flush()
        deadline = time.monotonic() + 30
        seen = None
        while seen != 100 and time.monotonic() < deadline:
            seen = _visible(data, "live")
            time.sleep(0.2)
        assert seen == 100, "the stream's first lines were not committed within 30 s"
        writer.stdin.write("".join(line + "\n" for line in lines[100:]).encode())
        writer.stdin.flush()
        time.sleep(0.1)
        writer.send_signal(signal.SIGTERM)
        writer.wait(timeout=30)  # the pipe is still open: the signal alone ends the ingest
        assert writer.stdout is not None and writer.stderr is not None
        out, err = writer.stdout.read(), writer.stderr.read()
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
        for pipe in (writer.stdin, writer.stdout, writer.stderr):
            if pipe is not None:
                pipe.close()
    assert writer.returncode == 0, err.decode()
    summary = json.loads(out)
    assert (summary["events"], summary["rejects"], summary["stopped_by"]) == (150, 0, "SIGTERM")
    assert _visible(data, "live") == 150


def test_the_reader_thread_writes_json_lines_and_the_storing_thread_counts_them(tmp_path: Path) -> None:
    # the parser's thread is the slower one: the byte counts of its JSON lines moved out of it
    from rootsift.ingest.blockstats import BlockStats
    from rootsift.ingest.formats import get
    from rootsift.ingest.formats.base import FormatOptions
    from rootsift.ingest.textrun import open_files, text_blocks

    src = tmp_path / "app.log"
    src.write_text("".join(f'time=2024-05-01T10:00:{i % 60:02d}Z i={i} msg="a \\"quoted\\" {i}"\n' for i in range(500)))
    fmt = get("logfmt")
    blocks = list(text_blocks(open_files([str(src)]), lambda *_: fmt, FormatOptions(), str(tmp_path), 4 << 10, False))
    assert len(blocks) > 3
    for block in blocks:
        assert block.stats is None and block.json_path is not None
        data = Path(block.json_path).read_bytes()
        counted = block.counted()
        assert counted is not None and counted.path == block.json_path
        expected = BlockStats.of(data)
        assert (counted.key_tokens, counted.suspect) == (expected.key_tokens, expected.suspect) != (0, False)


def test_an_odd_line_not_found_in_the_block_is_numbered_by_duckdb(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a safety net: should DuckDB ever read a line's text other than its bytes, the line is
    # still handed to Python with its number (an ordered read of the block), never dropped
    from rootsift.ingest import textsql

    monkeypatch.setattr(textsql, "odd_lines", lambda *_: [])
    src = tmp_path / "access.log"
    lines = list(nginx_combined(random.Random(9), 2000))
    for at in (1500, 900):
        lines.insert(at, "garbage line")
    src.write_text("\n".join(lines) + "\n")
    summary = rs.ingest(src, "web", format="nginx")
    assert (summary.events, summary.rejects) == (2000, 2)
    assert [r["line"] for r in summary.first_rejects] == [901, 1502]


def test_a_parser_thread_shortens_the_gil_switch_interval_while_it_runs(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the storing thread waited up to 5 ms for the GIL each time it ran a little Python
    # between DuckDB calls (0.85 s of a 200k-entry slow log's ingest)
    from rootsift.ingest.textgil import SWITCH_INTERVAL

    before = sys.getswitchinterval()
    seen: list[float] = []
    dumped = textrun.dumped

    def spied(event: dict[str, Any], fmt: str) -> bytes | str:
        seen.append(sys.getswitchinterval())
        return dumped(event, fmt)

    monkeypatch.setattr(textrun, "dumped", spied)
    src = tmp_path / "app.log"
    src.write_text("".join(f"time=2024-05-01T10:00:{i % 60:02d}Z level=info i={i}\n" for i in range(300)))
    assert rs.ingest(src, "app", format="logfmt").events == 300
    assert seen and set(seen) == {min(before, SWITCH_INTERVAL)}
    assert sys.getswitchinterval() == before


def test_the_switch_interval_comes_back_when_the_last_parser_ends() -> None:
    from rootsift.ingest.textgil import SWITCH_INTERVAL, sharing_gil

    before = sys.getswitchinterval()
    a, b = sharing_gil(iter(range(5))), sharing_gil(iter(range(5)))
    assert (next(a), next(b)) == (0, 0)
    a.close()  # an ingest that stopped early
    assert sys.getswitchinterval() == min(before, SWITCH_INTERVAL)
    assert list(b) == [1, 2, 3, 4]
    assert sys.getswitchinterval() == before
