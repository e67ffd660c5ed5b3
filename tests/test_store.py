"""The store: durability under kill -9, retention that gives space back, concurrent
ingest and queries, dataset listing and dataset-name errors."""

from __future__ import annotations

import os
import random
import selectors
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers.store import column, dir_size, iso, run_python, subprocess_env, write_jsonl
from rootsift import Calculation, QuerySpec, Rootsift
from rootsift.errors import DatasetNotFoundError, RootsiftError, StoreLockedError, UsageError

T0 = datetime(2024, 3, 1)


# -- durability: kill -9 in the middle of an ingest ------------------------------------------

KILL_CHILD = """
import sys
from rootsift import Rootsift
data, seed, segment_rows, block_bytes = sys.argv[1:3] + [int(a) for a in sys.argv[3:5]]
rs = Rootsift(data, segment_rows=segment_rows)
rs.ingest(seed, dataset="dur")  # the dataset exists, so the writer commits at each segment's end

def ack(total):
    sys.stdout.write(f"ACK {total}\\n")
    sys.stdout.flush()

# A stream (stdin) is acknowledged commit by commit; a file only when it is whole (test_ingest_durable.py)
summary = rs.ingest("-", dataset="dur", block_bytes=block_bytes, on_commit=ack)
sys.stdout.write(f"DONE {summary.events}\\n")
sys.stdout.flush()
"""


def _read_acks(proc: subprocess.Popen[bytes], want: int, deadline: float) -> list[int]:
    """ACK totals from the child's stdout until ``want`` were seen (or the child ended)."""
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    acks: list[int] = []
    buf = b""
    try:
        while len(acks) < want:
            left = deadline - time.monotonic()
            assert left > 0, f"no {want} ACKs in time (got {acks})"
            if not sel.select(timeout=left):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                word, _, n = line.decode().partition(" ")
                if word == "ACK":
                    acks.append(int(n))
                elif word == "DONE":
                    raise AssertionError(f"the child finished before it could be killed (acks {acks})")
    finally:
        sel.close()
    return acks


def test_kill_9_keeps_every_acknowledged_event(tmp_path: Path) -> None:
    rows = 240_000
    source = write_jsonl(
        tmp_path / "big.jsonl",
        (
            {
                "timestamp": iso(T0 + timedelta(milliseconds=i)),
                "n": i,
                "service": f"svc-{i % 13}",
                "msg": f"event number {i} " + "x" * (i % 50),
            }
            for i in range(rows)
        ),
    )
    assert source.stat().st_size > 20 << 20
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"timestamp": iso(T0 - timedelta(days=1)), "n": -1}])
    data = tmp_path / "data"
    with open(source, "rb") as stdin:
        proc = subprocess.Popen(
            [sys.executable, "-c", KILL_CHILD, str(data), str(seed), "15000", str(256 << 10)],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
        )
    try:
        acks = _read_acks(proc, 3, time.monotonic() + 120)
        assert len(acks) >= 3, (acks, proc.stderr.read().decode() if proc.stderr else "")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    last = acks[-1]
    assert acks == sorted(acks) and 0 < last < rows

    with Rootsift(data) as rs:
        stored = rs.events("dur") - 1  # less the seed
        assert last <= stored <= rows
        # what survived is exactly the first ``stored`` input rows, once each
        out = rs.query(
            QuerySpec(
                "dur",
                where="n >= 0",
                calculations=[
                    Calculation.parse("count"),
                    Calculation.parse("sum(n)"),
                    Calculation.parse("count_distinct(n)"),
                    Calculation.parse("max(n)"),
                ],
            )
        )
        assert out.rows == [[stored, float(stored * (stored - 1) // 2), stored, float(stored - 1)]]
        [info] = rs.datasets()
        assert (info.name, info.stored_rows, info.first) == ("dur", stored + 1, T0 - timedelta(days=1))
        assert info.last is not None and info.last >= T0 + timedelta(milliseconds=last - 1)
        assert {e["field"] for e in rs.schema("dur")} >= {"timestamp", "n", "service", "msg"}
        # and the store still takes writes
        more = write_jsonl(tmp_path / "more.jsonl", [{"timestamp": iso(T0 + timedelta(days=1)), "n": -2}])
        assert rs.ingest(more, dataset="dur").events == 1
        assert rs.events("dur") == stored + 2
    with Rootsift(data) as rs:
        assert rs.events("dur") == stored + 2


# -- retention ---------------------------------------------------------------------------

DAY_ROWS = 8_000


def _day_file(tmp_path: Path, day: int, rnd: random.Random, rows: int = DAY_ROWS) -> tuple[Path, list[datetime]]:
    """One day of events (with incompressible text, so segments are MBs), evenly spread."""
    times = [T0 + timedelta(days=day, seconds=i * 86_400 / rows) for i in range(rows)]
    path = write_jsonl(
        tmp_path / f"day{day}.jsonl",
        ({"timestamp": iso(t), "n": day * rows + i, "blob": rnd.randbytes(200).hex()} for i, t in enumerate(times)),
    )
    return path, times


def _segment_bytes(data: Path, dataset: str, seg_id: int) -> int:
    return sum(p.stat().st_size for p in (data / dataset / "segments").glob(f"seg-{seg_id:06d}.duckdb*"))


@pytest.mark.parametrize("reopen", [False, True], ids=["same-process", "reopened"])
def test_retention_drops_whole_segments_and_rewrites_the_straddling_one(reopen: bool, tmp_path: Path) -> None:
    data = tmp_path / "data"
    rnd = random.Random(11)
    times: list[datetime] = []
    rs = Rootsift(data, segment_rows=DAY_ROWS)  # one day per segment: each file fills one exactly
    try:
        for day in range(4):
            path, day_times = _day_file(tmp_path, day, rnd)
            rs.ingest(path, dataset="ret")
            times += day_times
        assert rs.datasets()[0].segments == 4
        if reopen:
            rs.close()
            rs = Rootsift(data, segment_rows=DAY_ROWS)
        now = T0 + timedelta(days=4)
        keep = timedelta(days=2, hours=15)  # cutoff 1 day 9 h after T0: inside the second segment
        cutoff = now - keep
        want_deleted = sum(t < cutoff for t in times)
        assert DAY_ROWS < want_deleted < 2 * DAY_ROWS

        before_total, before_ds = dir_size(data), dir_size(data / "ret")
        straddling_before = _segment_bytes(data, "ret", 2)
        result = rs.retention("ret", keep, now=now)

        assert result["deleted_events"] == want_deleted
        assert result["cutoff"] == iso(cutoff)
        assert result["bytes_before"] == before_ds
        assert result["bytes_after"] == dir_size(data / "ret") < before_ds
        assert dir_size(data) < before_total
        assert _segment_bytes(data, "ret", 1) == 0
        assert 0 < _segment_bytes(data, "ret", 2) < straddling_before

        remaining = len(times) - want_deleted
        assert rs.events("ret") == remaining
        [info] = rs.datasets()
        assert (info.stored_rows, info.segments) == (remaining, 3)
        assert info.first == min(t for t in times if t >= cutoff) and info.last == times[-1]
        kept = column(rs, "ret", "timestamp")
        assert len(kept) == remaining and min(kept) >= cutoff
        assert column(rs, "ret", "n") == [float(i) for i in range(want_deleted, len(times))]
        # a query over the deleted range sees nothing; one straddling the cutoff sees only what is kept
        out = rs.query(QuerySpec("ret", start=iso(T0), end=iso(cutoff)))
        assert out.rows in ([], [[0]])
        out = rs.query(QuerySpec("ret", start=iso(cutoff - timedelta(hours=1)), end=iso(cutoff + timedelta(hours=1))))
        assert out.rows == [[sum(cutoff <= t < cutoff + timedelta(hours=1) for t in times)]]

        # running it again deletes nothing and changes nothing on disk
        size = dir_size(data)
        assert rs.retention("ret", keep, now=now)["deleted_events"] == 0
        assert dir_size(data) == size
    finally:
        rs.close()
    assert not list((data / "ret" / "segments").glob("*.rewrite*"))
    with Rootsift(data) as again:
        assert again.events("ret") == remaining
        assert column(again, "ret", "n")[0] == float(want_deleted)


@pytest.mark.parametrize("reopen", [False, True], ids=["same-process", "reopened"])
def test_retention_of_only_a_straddling_segment_shrinks_the_directory(reopen: bool, tmp_path: Path) -> None:
    data = tmp_path / "data"
    rs = Rootsift(data)
    try:
        path, times = _day_file(tmp_path, 0, random.Random(5), rows=20_000)
        rs.ingest(path, dataset="one")
        if reopen:
            rs.close()
            rs = Rootsift(data)
        now = T0 + timedelta(days=1)
        keep = timedelta(hours=8)
        cutoff = now - keep
        before = dir_size(data)
        result = rs.retention("one", keep, now=now)
        assert result["deleted_events"] == sum(t < cutoff for t in times)
        assert rs.events("one") == sum(t >= cutoff for t in times)
        assert rs.datasets()[0].segments == 1
        assert dir_size(data) < before
        assert result["bytes_after"] < result["bytes_before"]
        assert min(column(rs, "one", "timestamp")) >= cutoff
    finally:
        rs.close()


def test_retention_keeping_everything_or_nothing(rs: Rootsift, tmp_path: Path) -> None:
    path, times = _day_file(tmp_path, 0, random.Random(1), rows=500)
    rs.ingest(path, dataset="r")
    now = T0 + timedelta(days=1)
    assert rs.retention("r", timedelta(days=30), now=now)["deleted_events"] == 0
    assert rs.events("r") == 500
    assert rs.retention("r", timedelta(0), now=now)["deleted_events"] == 500
    assert rs.events("r") == 0
    out = rs.query(QuerySpec("r"))
    assert out.rows in ([], [[0]])
    # the emptied dataset still exists and takes new events
    assert [d.name for d in rs.datasets()] == ["r"]
    assert rs.ingest(path, dataset="r").events == 500


def test_segment_rows_holds_for_a_new_dataset(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "a.jsonl", ({"timestamp": iso(T0 + timedelta(seconds=i)), "n": i} for i in range(5000))
    )
    commits: list[int] = []
    with Rootsift(tmp_path / "data", segment_rows=1000) as rs:
        rs.ingest(path, dataset="fresh", block_bytes=8000, on_commit=commits.append)
        assert rs.datasets()[0].segments >= 4  # the file's pending segments roll over too
        assert commits == [5000]  # a file of several blocks is acknowledged when it is whole


# -- concurrency -------------------------------------------------------------------------


def test_queries_during_an_ingest_see_the_file_whole_or_not_at_all(tmp_path: Path) -> None:
    rows = 30_000
    source = write_jsonl(
        tmp_path / "c.jsonl",
        ({"timestamp": iso(T0 + timedelta(seconds=i)), "n": i, "svc": f"s{i % 5}"} for i in range(rows)),
    )
    seed = write_jsonl(tmp_path / "seed.jsonl", [{"timestamp": iso(T0 - timedelta(days=1)), "n": 0, "svc": "seed"}])
    errors: list[BaseException] = []
    seen: list[tuple[int, float]] = []
    done = threading.Event()
    with Rootsift(tmp_path / "data", segment_rows=2_000) as rs:
        rs.ingest(seed, dataset="conc")

        def ingest() -> None:
            try:
                rs.ingest(source, dataset="conc", block_bytes=16 << 10)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
            finally:
                done.set()

        def query() -> None:
            spec = QuerySpec("conc", calculations=[Calculation.parse("count"), Calculation.parse("sum(n)")])
            try:
                while True:
                    finished = done.is_set()
                    [[count, total]] = rs.query(spec).rows
                    seen.append((count, total))
                    rs.events("conc")
                    if finished:
                        break
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=ingest), threading.Thread(target=query)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        counts = [c for c, _ in seen]
        assert counts == sorted(counts), "a count went down"
        assert counts[-1] == rows + 1
        # The file is read in many transactions (blocks of 16 KiB) into pending segments: each
        # query saw the seed alone or the seed and the whole file, never a part of it.
        assert set(seen) <= {(1, 0.0), (rows + 1, rows * (rows - 1) // 2)}, sorted(set(seen))
        assert rs.events("conc") == rows + 1


def test_two_threads_ingesting_into_one_dataset(tmp_path: Path) -> None:
    files = [
        write_jsonl(
            tmp_path / f"{k}.jsonl",
            ({"timestamp": iso(T0 + timedelta(seconds=i)), "n": k * 10_000 + i} for i in range(5_000)),
        )
        for k in range(2)
    ]
    errors: list[BaseException] = []
    with Rootsift(tmp_path / "data", segment_rows=3_000) as rs:
        rs.ingest(files[0], dataset="two", block_bytes=32 << 10)

        def run(path: Path) -> None:
            try:
                rs.ingest(path, dataset="two", block_bytes=32 << 10)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(p,)) for p in files]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
        assert rs.events("two") == 15_000
        out = rs.query(QuerySpec("two", calculations=[Calculation.parse("count_distinct(n)")]))
        assert out.rows == [[10_000]]


# -- datasets ----------------------------------------------------------------------------


def test_datasets_lists_events_span_bytes_and_segments(rs: Rootsift, data_dir: Path, tmp_path: Path) -> None:
    rnd = random.Random(3)
    api = [
        {"timestamp": iso(T0 + timedelta(minutes=i)), "samplerate": rnd.choice([1, 5, 20, 0.5]), "x": i}
        for i in range(300)
    ]
    db = [{"timestamp": iso(T0 + timedelta(days=2, seconds=i)), "q": "select"} for i in range(40)]
    rs.ingest(write_jsonl(tmp_path / "api.jsonl", api), dataset="api")
    rs.ingest(write_jsonl(tmp_path / "db.jsonl", db), dataset="db.primary")
    infos = rs.datasets()
    assert [d.name for d in infos] == ["api", "db.primary"]
    a, d = infos
    assert a.events == sum(max(r["samplerate"], 1) for r in api) == rs.events("api")
    assert (a.stored_rows, a.first, a.last, a.segments) == (300, T0, T0 + timedelta(minutes=299), 1)
    assert (d.events, d.stored_rows, d.first, d.last) == (
        40,
        40,
        T0 + timedelta(days=2),
        T0 + timedelta(days=2, seconds=39),
    )
    assert a.bytes_on_disk == dir_size(data_dir / "api") > 0
    assert d.bytes_on_disk == dir_size(data_dir / "db.primary") > 0
    # a second handle on the same directory sees the same
    rs.close()
    with Rootsift(data_dir) as again:
        assert [(x.name, x.events, x.stored_rows, x.first, x.last) for x in again.datasets()] == [
            (x.name, x.events, x.stored_rows, x.first, x.last) for x in infos
        ]


def test_empty_data_dir_lists_nothing(tmp_path: Path) -> None:
    with Rootsift(tmp_path / "nothing-here") as rs:
        assert rs.datasets() == []
        with pytest.raises(DatasetNotFoundError, match="none yet"):
            rs.query(QuerySpec("api"))


def test_unknown_dataset_names_the_existing_ones(rs: Rootsift, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"timestamp": iso(T0)}])
    rs.ingest(path, dataset="api")
    rs.ingest(path, dataset="web")
    calls = [
        lambda: rs.query(QuerySpec("apj")),
        lambda: rs.schema("apj"),
        lambda: rs.events("apj"),
        lambda: rs.retention("apj", timedelta(days=1)),
    ]
    for call in calls:
        with pytest.raises(DatasetNotFoundError) as info:
            call()
        assert "'apj'" in str(info.value) and "api" in str(info.value) and "web" in str(info.value)
        assert isinstance(info.value, UsageError) and info.value.exit_code == 2
    assert not (rs.data_dir / "apj").exists()


BAD_NAMES = [
    "",
    ".",
    "..",
    "../escape",
    "a/b",
    "a\\b",
    ".hidden",
    "-dash",
    "_under",
    "a b",
    "x" * 129,
    "naïve",
    "tab\there",
    "nul\x00",
    "semi;colon",
    "quo'te",
    'quo"te',
]


@pytest.mark.parametrize("name", BAD_NAMES, ids=[repr(n)[:20] for n in BAD_NAMES])
def test_invalid_dataset_names_are_usage_errors(name: str, rs: Rootsift, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"timestamp": iso(T0)}])
    for call in (
        lambda: rs.ingest(path, dataset=name),
        lambda: rs.query(QuerySpec(name)),
        lambda: rs.schema(name),
        lambda: rs.retention(name, timedelta(days=1)),
    ):
        with pytest.raises(UsageError) as info:
            call()
        assert not isinstance(info.value, DatasetNotFoundError)
    assert not (tmp_path / "escape").exists()
    assert not rs.data_dir.exists() or list(rs.data_dir.iterdir()) in ([], [rs.data_dir / ".tmp"])


@pytest.mark.parametrize("name", ["a", "A.b-c_9", "9lives", "x" * 128])
def test_valid_dataset_names(name: str, rs: Rootsift, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"timestamp": iso(T0)}])
    assert rs.ingest(path, dataset=name).events == 1
    assert [d.name for d in rs.datasets()] == [name]


# -- read-only and locked stores --------------------------------------------------------------


def test_read_only_store_reads_but_does_not_write(data_dir: Path, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"timestamp": iso(T0 + timedelta(seconds=i)), "n": i} for i in range(10)])
    with Rootsift(data_dir) as rs:
        rs.ingest(path, dataset="ro")
    before = dir_size(data_dir)
    with Rootsift(data_dir, read_only=True) as ro:
        assert ro.events("ro") == 10
        assert ro.query(QuerySpec("ro", calculations=[Calculation.parse("sum(n)")])).rows == [[45.0]]
        with pytest.raises(RootsiftError):
            ro.ingest(path, dataset="ro")
        with pytest.raises(DatasetNotFoundError):
            ro.ingest(path, dataset="new")
        assert ro.events("ro") == 10
    assert not (data_dir / "new").exists()
    assert dir_size(data_dir / "ro" / "segments") <= before


HOLD_CHILD = """
import sys
from rootsift import Rootsift
rs = Rootsift(sys.argv[1])
print(rs.events("held"), flush=True)
sys.stdin.read()
rs.close()
"""


def test_a_store_held_by_another_process_is_a_locked_error(data_dir: Path, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "a.jsonl", [{"timestamp": iso(T0)}])
    with Rootsift(data_dir) as rs:
        rs.ingest(path, dataset="held")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_CHILD, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"1"
        with Rootsift(data_dir) as rs, pytest.raises(StoreLockedError):
            rs.events("held")
    finally:
        proc.communicate(b"", timeout=60)
    assert proc.returncode == 0
    with Rootsift(data_dir) as rs:
        assert rs.events("held") == 1


def test_subprocess_helper_sees_this_checkout() -> None:
    proc = run_python("import rootsift, sys; print(rootsift.__file__)")
    import rootsift

    assert Path(proc.stdout.decode().strip()) == Path(rootsift.__file__)
