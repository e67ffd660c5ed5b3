"""``rootsift collect procfs``: samples of this machine's real /proc stored and queryable,
missing files reported once, a busy store retried, a stop signal committing first, and
the queue of samples waiting for a busy store bounded."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rootsift.api import Rootsift
from rootsift.errors import StoreLockedError, UsageError
from rootsift.ingest import collect
from rootsift.query.spec import Calculation, QuerySpec

ROOT = Path(__file__).resolve().parent.parent


def cli(data: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rootsift.cli", "collect", "procfs", "--data", str(data), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def rows(data: Path, dataset: str, where: str | None, *by: str) -> dict[tuple[Any, ...], int]:
    """Event counts by the fields ``by``."""
    with Rootsift(data, read_only=True) as rs:
        spec = QuerySpec(dataset, where=where, breakdowns=list(by), calculations=[Calculation.parse("count")])
        out = rs.query(spec)
    return {tuple(r[:-1]): int(r[-1]) for r in out.rows}


def meminfo_kb(key: str) -> int:
    m = re.search(rf"^{key}:\s+(\d+) kB$", Path("/proc/meminfo").read_text(), re.M)
    assert m
    return int(m.group(1))


def test_three_samples_of_this_machines_proc_are_stored_and_queryable(tmp_path: Path) -> None:
    data = tmp_path / "data"
    res = cli(data, "--every", "0.2s", "--count", "3", "--host", "gs-1", "--label", "kernel=5.0.0-test", "--json")
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert (summary["samples"], summary["stored_samples"], summary["problem"]) == (3, 3, None)
    assert summary["files"][:2] == ["meminfo", "slabinfo"] and "loadavg" in summary["files"]
    by_kind = rows(data, "hosts", None, "kind")
    assert sum(by_kind.values()) == summary["events"]
    assert by_kind[("meminfo",)] == by_kind[("loadavg",)] == by_kind[("vmstat",)] == 3
    cgroups = [ln for ln in Path("/proc/cgroups").read_text().splitlines() if ln and not ln.startswith("#")]
    assert by_kind[("cgroups",)] == 3 * len(cgroups)
    if os.access("/proc/slabinfo", os.R_OK):
        caches = len(Path("/proc/slabinfo").read_text().splitlines()) - 2
        assert abs(by_kind[("slabinfo",)] - 3 * caches) <= 3  # a cache may come or go between samples
    if Path("/proc/pressure/memory").exists():
        assert rows(data, "hosts", 'kind = "pressure"', "resource")[("memory",)] == 3
    # one time per sample, shared by every file of it; every event labelled
    assert len(rows(data, "hosts", None, "timestamp")) == 3
    assert rows(data, "hosts", None, "host", "kernel") == {("gs-1", "5.0.0-test"): summary["events"]}
    with Rootsift(data, read_only=True) as rs:
        spec = QuerySpec("hosts", where='kind = "meminfo"', calculations=[Calculation.parse("max(mem_total_bytes)")])
        total = rs.query(spec).rows[0][0]
    assert total == meminfo_kb("MemTotal") * 1024


def fake_proc(tmp_path: Path) -> Path:
    """A /proc with meminfo and loadavg, slabinfo missing and cgroups unreadable (a directory)."""
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_bytes(Path("/proc/meminfo").read_bytes())
    (proc / "loadavg").write_text("0.50 0.40 0.30 2/300 4242\n")
    (proc / "cgroups").mkdir()
    (proc / "vmstat").write_text("nr_free_pages 10\npgfault 20\nbogus line here\n")
    return proc


def test_missing_and_unreadable_files_are_reported_once_and_the_rest_is_stored(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path)
    said: list[str] = []
    with Rootsift(tmp_path / "data") as rs:
        summary = rs.collect_procfs("hosts", every=0.05, count=3, proc=proc, host="h1", warn=said.append)
    assert sorted(summary.unreadable) == ["cgroups", "pressure", "slabinfo"]
    assert len([s for s in said if "slabinfo" in s]) == 1 and len([s for s in said if "cgroups" in s]) == 1
    assert (summary.samples, summary.stored_samples, summary.problem()) == (3, 3, None)
    assert summary.events == 3 * 3  # meminfo, loadavg, vmstat in each sample
    assert summary.rejects == 3  # vmstat's bad line, in every sample ...
    assert summary.rejects_file is not None
    logged = [json.loads(line) for line in Path(summary.rejects_file).read_text().splitlines()]
    assert logged == [{"line": 3, "reason": logged[0]["reason"], "text": "bogus line here"}]  # ... logged once
    assert "/proc/vmstat" in logged[0]["reason"]
    assert rows(tmp_path / "data", "hosts", None, "kind") == {("meminfo",): 3, ("loadavg",): 3, ("vmstat",): 3}


def test_bad_flags_are_usage_errors_naming_the_flag(tmp_path: Path) -> None:
    res = cli(tmp_path / "data", "--files", "meminfo,smaps", "--count", "1")
    assert res.returncode == 2 and "--files 'smaps'" in res.stderr
    res = cli(tmp_path / "data", "--every", "0s", "--count", "1")
    assert res.returncode == 2 and "--every" in res.stderr
    res = cli(tmp_path / "data", "--proc", str(tmp_path / "nowhere"), "--count", "1", "--json")
    assert res.returncode == 2 and "--proc" in json.loads(res.stdout)["error"]["message"]
    assert "Traceback" not in res.stderr
    with Rootsift(tmp_path / "data") as rs, pytest.raises(UsageError, match="--count"):
        rs.collect_procfs("hosts", count=0)


def test_a_busy_store_is_retried_until_it_is_free(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    proc = fake_proc(tmp_path)
    with Rootsift(data) as rs:
        rs.collect_procfs("hosts", every=0.05, count=1, proc=proc)
    (segment,) = (data / "hosts" / "segments").glob("seg-*.duckdb")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print(1, flush=True); time.sleep(2.5)",
            str(segment),
        ],  # fmt: skip
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == b"1"  # the file is held
    monkeypatch.setenv("ROOTSIFT_LOCK_WAIT", "0.1")
    said: list[str] = []
    try:
        with Rootsift(data) as rs:
            summary = rs.collect_procfs("hosts", every=0.2, count=4, proc=proc, warn=said.append)
    finally:
        holder.communicate(timeout=30)
    assert summary.busy_retries >= 1 and len([s for s in said if "the store is busy" in s]) == 1
    assert (summary.stored_samples, summary.dropped_samples, summary.problem()) == (4, 0, None)
    assert rows(data, "hosts", None, "kind")[("meminfo",)] == 1 + 4


def test_the_samples_waiting_for_a_busy_store_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def busy(*args: object) -> None:
        raise StoreLockedError("held by another process")

    monkeypatch.setattr(collect, "_store", busy)
    monkeypatch.setattr(collect, "MAX_PENDING", 2)
    monkeypatch.setattr(collect, "RETRY_FIRST", 0.01)
    stop = threading.Event()
    threading.Timer(1.5, stop.set).start()
    with Rootsift(tmp_path / "data") as rs:
        summary = rs.collect_procfs("hosts", every=0.05, count=6, proc=fake_proc(tmp_path), stop=stop)
    assert (summary.samples, summary.dropped_samples, summary.unstored_samples) == (6, 4, 2)
    assert summary.problem() is not None and "6 sample(s) were not stored" in summary.problem()  # type: ignore[operator]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_commits_what_was_sampled(stop: signal.Signals, tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = fake_proc(tmp_path)
    run = subprocess.Popen(
        [sys.executable, "-m", "rootsift.cli", "collect", "procfs", "--data", str(data), "--proc", str(proc)]
        + ["--every", "0.3s", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list((data / "hosts" / "segments").glob("seg-*.duckdb")):
        time.sleep(0.2)
    time.sleep(1.0)
    run.send_signal(stop)
    out, errors = run.communicate(timeout=60)
    assert run.returncode == 0, errors
    summary = json.loads(out)
    assert summary["stopped_by"] == stop.name and summary["samples"] >= 2
    assert summary["stored_samples"] == summary["samples"] and summary["unstored_samples"] == 0
    assert rows(data, "hosts", None, "kind")[("meminfo",)] == summary["samples"]


def test_a_second_ingest_into_a_dataset_at_its_field_limit_keeps_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by collect: the named time field was moved past the limit into _overflow, so a
    second sample into a full dataset lost every line ("no time field")."""
    monkeypatch.setenv("ROOTSIFT_MAX_FIELDS", "4")
    src = tmp_path / "wide.jsonl"
    src.write_text(json.dumps({"timestamp": "2024-01-01T00:00:00Z", "a": 1, "b": 2, "c": 3, "d": 4, "e": 5}) + "\n")
    with Rootsift(tmp_path / "data") as rs:
        for _ in range(2):
            done = rs.ingest(src, "wide", format="jsonl", time_field="timestamp", time_format="rfc3339")
            assert (done.events, done.rejects) == (1, 0)
            done = rs.ingest(src, "auto")  # the time field detected
            assert (done.events, done.rejects) == (1, 0)
        assert rs.events("wide") == rs.events("auto") == 2
