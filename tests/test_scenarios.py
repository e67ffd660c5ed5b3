"""Scenario generators: deterministic by seed, varied across seeds, the mechanism visible in
what rootsift reads back, and ground truth kept away from everything but scenarios/ and tests."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from helpers.store import query_rows
from rootsift import Rootsift, scenarios
from rootsift.errors import UsageError
from rootsift.scenarios.base import MANIFEST_FILE, TRUTH_DIR, TRUTH_FILE

SRC = Path(__file__).resolve().parents[1] / "src" / "rootsift"


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(folder)).encode() + p.read_bytes())
    return h.hexdigest()


def test_no_module_outside_scenarios_reads_ground_truth() -> None:
    pattern = re.compile(r"ground_truth|TRUTH_FILE|TRUTH_DIR|scenarios\.base")
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "scenarios" not in p.relative_to(SRC).parts and pattern.search(p.read_text())
    ]
    assert offenders == []


@pytest.mark.parametrize("name", sorted(scenarios.all_scenarios()))
def test_same_seed_same_files_other_seed_other_files(name: str, tmp_path: Path) -> None:
    a = scenarios.generate(name, tmp_path / "a", seed=11)
    b = scenarios.generate(name, tmp_path / "b", seed=11)
    scenarios.generate(name, tmp_path / "c", seed=12)
    assert a == b and _digest(tmp_path / "a") == _digest(tmp_path / "b")
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")
    assert (tmp_path / "a" / TRUTH_DIR / TRUTH_FILE).exists()
    for src in a.sources:  # the manifest names only data, never the truth
        assert TRUTH_DIR not in Path(src.path).parts
        assert (tmp_path / "a" / src.path).exists()


def test_generate_refuses_a_folder_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(UsageError, match="not empty"):
        scenarios.generate("memleak", tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    with pytest.raises(UsageError, match="no scenario"):
        scenarios.generate("nope", tmp_path / "x")
    with pytest.raises(UsageError, match="--scale"):
        scenarios.generate("memleak", tmp_path / "x", scale="huge")


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_memleak_slab_and_cgroups_grow_only_on_the_leaking_kernel(seed: int, tmp_path: Path) -> None:
    out = tmp_path / "memleak"
    scenarios.generate("memleak", out, seed=seed)
    truth = json.loads((out / TRUTH_DIR / TRUTH_FILE).read_text())
    with Rootsift(tmp_path / "data") as rs:
        for summary in scenarios.ingest(rs, out):
            assert summary.rejects == 0, summary.first_rejects
        span = {"start": "2019-12-01", "end": "2020-06-01"}

        def growth(where: str, field: str) -> dict[str, float]:
            first = query_rows(
                rs, "memleak_hosts", f"min({field})", f"max({field})", breakdowns=["host"], where=where, **span
            )
            return {h: hi - lo for h, lo, hi in first}

        slab = growth('kind = "meminfo"', "sunreclaim_bytes")
        cgroups = growth('subsys_name = "memory"', "num_cgroups")
        cache = growth('kind = "meminfo"', "active_file_bytes")
        kernels = dict(
            (h, k) for h, k, _ in query_rows(rs, "memleak_capacity", "count", breakdowns=["host", "kernel"], **span)
        )
        labelled = dict(
            (h, k) for h, k, _ in query_rows(rs, "memleak_hosts", "count", breakdowns=["host", "kernel"], **span)
        )
    assert labelled == kernels  # every snapshot carries its host's kernel (the inventory label)
    for host in truth["leaking_hosts"]:
        assert kernels[host].startswith("5.0")
        assert slab[host] > 5 << 30 and cgroups[host] > 5000
    for host in truth["healthy_hosts"]:
        assert kernels[host].startswith("5.3")
        assert slab[host] < 1 << 30 and cgroups[host] < 200
    # page cache fills on every host: the decoy category that is not the leak
    assert min(cache.values()) > 10 << 30
    assert json.loads((out / MANIFEST_FILE).read_text())["scenario"] == "memleak"


def test_cli_lists_writes_and_reports_errors(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rootsift.cli import main

    runner = CliRunner()
    listed = runner.invoke(main, ["scenario", "--json"])
    assert listed.exit_code == 0 and "memleak" in [s["name"] for s in json.loads(listed.stdout)["scenarios"]]
    wrote = runner.invoke(main, ["scenario", "memleak", "--out", str(tmp_path / "m"), "--seed", "3", "--json"])
    assert wrote.exit_code == 0, wrote.output
    assert json.loads(wrote.stdout)["sources"][-1]["dataset"] == "memleak_capacity"
    unknown = runner.invoke(main, ["scenario", "nope", "--out", str(tmp_path / "n"), "--json"])
    assert unknown.exit_code == 2 and json.loads(unknown.stdout)["error"]["type"] == "UsageError"
    missing = runner.invoke(main, ["scenario", "memleak"])
    assert missing.exit_code == 2 and "--out is required" in missing.output


def test_event_loop_runs_in_time_order_ties_in_schedule_order() -> None:
    from rootsift.scenarios.sim import Loop

    loop, seen = Loop(), []
    loop.at(2.0, seen.append, "c")
    loop.at(1.0, seen.append, "a")
    loop.at(1.0, seen.append, "b")
    loop.at(1.0, lambda: loop.after(0.5, seen.append, "a+0.5"))
    loop.at(9.0, seen.append, "late")
    loop.run(until=5.0)
    assert seen == ["a", "b", "a+0.5", "c"] and loop.now == 5.0


def test_demo_generates_ingests_and_lists_what_to_ask(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from rootsift.cli import main

    args = ["demo", "memleak", "--data", str(tmp_path / "data"), "--seed", "2", "--json"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    (run,) = report["scenarios"]
    commands = [a["command"].split()[1] for a in run["analyses"]]
    assert commands == ["trends", "compare"]
    assert all(("result" in a) == a["available"] for a in run["analyses"])
    for analysis in run["analyses"]:
        assert analysis["available"] == (analysis["command"].split()[1] in main.commands)
        assert analysis["available"] or any(analysis["command"].split()[1] in w for w in report["warnings"])
    assert {s["dataset"] for s in run["ingested"]} == {"memleak_hosts", "memleak_capacity"}
    assert all(s["rejects"] == 0 and s["events"] > 0 for s in run["ingested"])
    again = json.loads(CliRunner().invoke(main, args).stdout)  # a second run replaces, not doubles
    with Rootsift(tmp_path / "data") as rs:
        events = {d.name: d.events for d in rs.datasets()}
    total = sum(s["events"] for s in again["scenarios"][0]["ingested"] if s["dataset"] == "memleak_hosts")
    assert events["memleak_hosts"] == total


def test_demo_runs_the_analyses_that_exist(tmp_path: Path) -> None:
    """cascade's manifest asks investigate of both datasets: the demo runs it on the open store."""
    from click.testing import CliRunner

    from rootsift.cli import main

    run = CliRunner().invoke(main, ["demo", "cascade", "--data", str(tmp_path / "data"), "--json"])
    assert run.exit_code == 0, run.output
    (scenario,) = json.loads(run.stdout)["scenarios"]
    results = {a["command"]: a["result"] for a in scenario["analyses"]}
    assert set(results) == {"rootsift investigate cascade_api", "rootsift investigate cascade_mysql"}
    assert results["rootsift investigate cascade_mysql"]["anomaly"]["kind"] == "stall"
    assert results["rootsift investigate cascade_api"]["findings"]
    text = CliRunner().invoke(main, ["demo", "cascade", "--data", str(tmp_path / "data")])
    assert text.exit_code == 0 and "$ rootsift investigate cascade_mysql" in text.output and "flush logs" in text.output
