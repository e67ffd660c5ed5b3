"""Ingest that loses nothing: truncated compressed input, files with nothing valid, inputs in
no known format, streams committed every few seconds and on SIGTERM, files committed in
bounded transactions that only become visible whole (issue 13; docs/storage.md)."""

from __future__ import annotations

import gzip
import json
import lzma
import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest
import zstandard

from helpers.formats import CORPORA
from helpers.store import iso, query_rows, subprocess_env, write_jsonl
from rootsift import Rootsift
from rootsift.errors import UsageError
from test_store import T0

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, data: Path) -> subprocess.CompletedProcess[str]:
    """``rootsift ARGS --data DATA`` in a subprocess, the way a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "rootsift.cli", *args, "--data", str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


def lines(n: int, start: int = 0) -> list[dict[str, object]]:
    """``n`` events numbered from ``start``, one millisecond apart."""
    return [
        {"timestamp": iso(T0 + timedelta(milliseconds=i)), "n": i, "msg": f"event {i} " + "x" * (i % 40)}
        for i in range(start, start + n)
    ]


# -- a truncated compressed input keeps every complete line before the cut ---------------------


def _decompress_what_is_there(kind: str, data: bytes) -> bytes:
    """Every byte a decompressor recovers from a cut stream (it does not insist on the end)."""
    if kind == "gz":
        return zlib.decompressobj(wbits=31).decompress(data)
    if kind == "zst":
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return lzma.LZMADecompressor().decompress(data)


@pytest.mark.parametrize(
    ("kind", "compress"),
    [
        ("gz", lambda b: gzip.compress(b, compresslevel=6)),
        ("zst", lambda b: zstandard.ZstdCompressor().compress(b)),
        ("xz", lzma.compress),
    ],
)
def test_a_truncated_compressed_file_keeps_the_complete_lines_reports_the_cut_and_exits_1(
    kind: str, compress: Callable[[bytes], bytes], tmp_path: Path
) -> None:
    whole = b"".join(json.dumps(e).encode() + b"\n" for e in lines(60_000))
    packed = compress(whole)
    cut = tmp_path / f"cut.jsonl.{kind}"
    cut.write_bytes(packed[: len(packed) * 2 // 3])
    got = _decompress_what_is_there(kind, cut.read_bytes())
    complete = got.count(b"\n")
    assert 0 < complete < 60_000 and not got.endswith(b"\n")

    data = tmp_path / "data"
    res = cli("ingest", str(cut), "-d", "cut", "--json", data=data)
    assert res.returncode == 1, res.stderr
    summary = json.loads(res.stdout)
    assert summary["events"] == complete
    kept = len(got) - len(got.rsplit(b"\n", 1)[1])
    assert cut.name in summary["truncated"] and f"after {kept:,} bytes" in summary["truncated"]
    assert summary["rejects"] == 1 and summary["first_rejects"][0]["line"] == complete + 1
    assert "truncated" in res.stderr and cut.name in res.stderr
    with Rootsift(data, read_only=True) as rs:
        assert rs.events("cut") == complete
        assert query_rows(rs, "cut", "max(n)") == [[complete - 1]]


def test_several_zstd_frames_are_read_whole(tmp_path: Path) -> None:
    frames = [b"".join(json.dumps(e).encode() + b"\n" for e in lines(500, start=k * 500)) for k in range(3)]
    src = tmp_path / "frames.jsonl.zst"
    src.write_bytes(b"".join(zstandard.ZstdCompressor().compress(f) for f in frames))
    res = cli("ingest", str(src), "-d", "z", "--json", data=tmp_path / "data")
    assert res.returncode == 0, res.stderr
    assert (json.loads(res.stdout)["events"], json.loads(res.stdout)["truncated"]) == (1500, None)


# -- a file whose every line is rejected is a failure ------------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "flags"),
    [
        (
            "bad.jsonl",
            '{"timestamp": "2024-01-01T00:00:00Z", "a": 1\n{"timestamp": nope}\n[1, 2]\n',
            ["--format", "jsonl"],
        ),
        ("bad.csv", "ts,a\nnot-a-time,1\nalso-not,2\n", ["--time-field", "ts", "--time-format", "epoch"]),
    ],
)
def test_a_file_whose_every_line_is_rejected_exits_1_with_the_rejects(
    name: str, text: str, flags: list[str], tmp_path: Path
) -> None:
    src = tmp_path / name
    src.write_text(text)
    res = cli("ingest", str(src), "-d", "x", *flags, data=tmp_path / "data")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "rejected lines" in res.stdout and "line 2:" in res.stdout
    assert "every line was rejected" in res.stderr
    res = cli("ingest", str(src), "-d", "x", *flags, "--json", data=tmp_path / "data")
    assert res.returncode == 1
    summary = json.loads(res.stdout)
    assert summary["events"] == 0 and summary["rejects"] >= 2 and "every line" in summary["problem"]


# -- an input in no known format says what it looks like ---------------------------------------


PGBOUNCER = "".join(
    f"2023-12-19 03:06:{i:02d}.586 CET [10384] LOG C-0x7f3bd6c47f40: retail/game_api@192.168.0.80:38296 "
    "closing because: client close request (age=5s)\n"
    for i in range(30)
)


@pytest.mark.parametrize(
    ("name", "content", "looks", "hint"),
    [
        ("blob.bin", bytes(range(256)) * 40, "binary data", "text telemetry"),
        ("pgbouncer.log", PGBOUNCER.encode(), "a PgBouncer log", "no PgBouncer format"),
        ("pgbouncer.log.gz", gzip.compress(PGBOUNCER.encode()), "a PgBouncer log", "no PgBouncer format"),
    ],
)
def test_an_input_in_no_known_format_says_what_it_looks_like(
    name: str, content: bytes, looks: str, hint: str, tmp_path: Path
) -> None:
    src = tmp_path / name
    src.write_bytes(content)
    res = cli("ingest", str(src), "-d", "x", data=tmp_path / "data")
    assert res.returncode == 2, res.stderr
    text = " ".join(res.stderr.split())
    assert f"it looks like {looks}" in text and hint in text and "--format" in text
    assert "read as csv" not in text and "Traceback" not in text


@pytest.mark.skipif(not CORPORA.exists(), reason="../shared/corpora is not beside the checkout")
@pytest.mark.parametrize(
    ("path", "looks"),
    [
        ("profiles/google_pprof/profile/testdata/gobench.cpu", "binary data"),
        ("pgbadger_fixtures/t/fixtures/pgbouncer.log.gz", "a PgBouncer log"),
        ("pgbadger_fixtures/t/fixtures/pgbouncer.1.21.log.gz", "a PgBouncer log"),
    ],
)
def test_real_inputs_in_no_known_format(path: str, looks: str, tmp_path: Path) -> None:
    res = cli("ingest", str(CORPORA / path), "-d", "x", data=tmp_path / "data")
    assert res.returncode == 2 and f"it looks like {looks}" in " ".join(res.stderr.split()), res.stderr


def test_csv_and_logs_a_format_reads_are_not_mistaken_for_unknown_ones(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "ok.jsonl", lines(3))
    assert cli("ingest", str(src), "-d", "ok", data=tmp_path / "data").returncode == 0
    csv = tmp_path / "ok.csv"
    csv.write_text("timestamp,n\n2024-03-01T00:00:00Z,1\n2024-03-01T00:00:01Z,2\n")
    assert cli("ingest", str(csv), "-d", "ok", data=tmp_path / "data").returncode == 0


# -- a stream is committed every few seconds and on SIGTERM, and does not hold the store ------


def _events_when_readable(data: Path, dataset: str) -> int | None:
    """The dataset's events as another process sees them now; None while it does not exist yet."""
    with Rootsift(data, read_only=True) as rs:
        names = {d.name for d in rs.datasets()}
        return rs.events(dataset) if dataset in names else None


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stream_commits_every_few_seconds_releases_the_store_and_commits_on_sigterm(
    stop: signal.Signals, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    writer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rootsift.cli",
            "ingest",
            "-",
            "-d",
            "live",
            "--commit-every",
            "1",
            "--json",
            "--data",
            str(data),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "ROOTSIFT_LOCK_WAIT": "30"},
    )
    assert writer.stdin is not None

    def send(events: list[dict[str, object]]) -> None:
        assert writer.stdin is not None
        writer.stdin.write(b"".join(json.dumps(e).encode() + b"\n" for e in events))
        writer.stdin.flush()

    try:
        send(lines(100))
        # the pipe stays open: the first lines are committed and readable by another process
        deadline = time.monotonic() + 30
        seen = None
        while seen != 100 and time.monotonic() < deadline:
            seen = _events_when_readable(data, "live")
            time.sleep(0.2)
        assert seen == 100, "the stream's first lines were not committed within 30 s"
        send(lines(50, start=100))
        time.sleep(0.1)  # written, not yet due for a commit (every 1 s): only the signal commits them
        writer.send_signal(stop)
        out, err = writer.communicate(timeout=60)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, err.decode()
    summary = json.loads(out)
    assert (summary["events"], summary["stopped_by"]) == (150, stop.name)
    with Rootsift(data, read_only=True) as rs:
        assert query_rows(rs, "live", "count", "count_distinct(n)", "max(n)") == [[150, 150, 149.0]]


def test_commit_every_must_be_positive(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "ok.jsonl", lines(3))
    res = cli("ingest", str(src), "-d", "ok", "--commit-every", "0", data=tmp_path / "data")
    assert res.returncode == 2 and "--commit-every" in res.stderr
    with Rootsift(tmp_path / "data2") as rs:
        with pytest.raises(UsageError, match="--commit-every"):
            rs.ingest(src, "ok", commit_every=-1)
        assert rs.ingest(src, "ok", commit_every=0.5).events == 3


# -- a file goes in bounded transactions, visible only when whole ------------------------------

FILE_KILL_CHILD = """
import sys
from rootsift import Rootsift
data, seed, source = sys.argv[1:4]
rs = Rootsift(data, segment_rows=20_000)
rs.ingest(seed, dataset="dur")

def progress(done, total, events):
    sys.stdout.write(f"PROGRESS {events}\\n")
    sys.stdout.flush()

rs.ingest(source, dataset="dur", block_bytes=256 << 10, progress=progress)
sys.stdout.write("DONE\\n")
"""


def test_kill_9_in_the_middle_of_a_file_leaves_none_of_it(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "big.jsonl", lines(200_000))
    seed = write_jsonl(tmp_path / "seed.jsonl", lines(1, start=-1))
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-c", FILE_KILL_CHILD, str(data), str(seed), str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    assert proc.stdout is not None
    try:
        committed = 0
        while committed < 40_000:  # two pending segments' worth, in many transactions
            line = proc.stdout.readline().decode()
            assert line.startswith("PROGRESS"), (line, proc.stderr.read().decode() if proc.stderr else "")
            committed = int(line.split()[1])
        proc.kill()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    segments = data / "dur" / "segments"
    assert list(segments.glob("*.pending")), "the file was being written into pending segments"
    with Rootsift(data, read_only=True) as rs:  # a reader sees none of the file
        assert rs.events("dur") == 1
    with Rootsift(data) as rs:  # the first writer to open the dataset removes what the crash left
        assert rs.events("dur") == 1
        assert not list(segments.glob("*.pending*"))
        assert rs.ingest(source, dataset="dur", block_bytes=256 << 10).events == 200_000
        assert query_rows(rs, "dur", "count", "count_distinct(n)") == [[200_001, 200_001]]


def test_a_file_that_fails_part_way_leaves_nothing_visible(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "a.jsonl", lines(20_000))
    commits: list[int] = []
    calls = 0

    def progress(done: int, total: int | None, events: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 4:  # three blocks were committed
            raise RuntimeError("the caller gave up")

    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(write_jsonl(tmp_path / "seed.jsonl", lines(1, start=-1)), "f")
        with pytest.raises(RuntimeError, match="gave up"):
            rs.ingest(source, "f", block_bytes=64 << 10, progress=progress, on_commit=commits.append)
        assert rs.events("f") == 1 and commits == []
        assert not list((tmp_path / "data" / "f" / "segments").glob("*.pending*"))
        summary = rs.ingest(source, "f", block_bytes=64 << 10, on_commit=commits.append)
        assert summary.events == 20_000 and summary.blocks > 3 and commits == [20_000]
        assert rs.events("f") == 20_001
