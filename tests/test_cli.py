"""The CLI end to end, through a real subprocess, the way a user runs it."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EVENTS = [
    {"timestamp": "2026-11-20T10:00:00Z", "status": 200, "endpoint": "/a", "duration_ms": 10.0},
    {"timestamp": "2026-11-20T10:00:30Z", "status": 500, "endpoint": "/a", "duration_ms": 900.0},
    {"timestamp": "2026-11-20T10:01:10Z", "status": 503, "endpoint": "/b", "duration_ms": 1200.0},
    {"timestamp": "2026-11-20T10:02:00Z", "status": 200, "endpoint": "/b", "duration_ms": 20.0},
]


def rootsift(*args: str, data: Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rootsift.cli", *args, "--data", str(data)],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture()
def loaded(tmp_path: Path) -> Path:
    src = tmp_path / "req.jsonl.gz"
    with gzip.open(src, "wt") as fh:
        for e in EVENTS:
            fh.write(json.dumps(e) + "\n")
        fh.write("this line is broken\n")
    data = tmp_path / "data"
    res = rootsift("ingest", str(src), "--dataset", "api", "--json", data=data)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["events"] == 4 and summary["rejects"] == 1 and summary["compression"] == "gzip"
    assert summary["first_rejects"][0]["line"] == 5
    return data


def test_datasets_schema_and_query(loaded: Path) -> None:
    ds = json.loads(rootsift("datasets", "--json", data=loaded).stdout)["datasets"]
    assert [(d["name"], d["events"]) for d in ds] == [("api", 4)]
    fields = {f["field"]: f for f in json.loads(rootsift("schema", "api", "--json", data=loaded).stdout)["fields"]}
    assert fields["status"]["type"] == "double" and fields["endpoint"]["distinct_estimate"] == 2
    res = rootsift(
        "query",
        "api",
        "--where",
        "status >= 500",
        "-b",
        "endpoint",
        "-c",
        "count",
        "-c",
        "max(duration_ms)",
        "--order",
        "endpoint asc",
        "--json",
        data=loaded,
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["columns"] == ["endpoint", "count", "max(duration_ms)"]
    assert out["rows"] == [["/a", 1, 900.0], ["/b", 1, 1200.0]]


def test_time_series_and_heatmap(loaded: Path) -> None:
    out = json.loads(rootsift("query", "api", "-c", "count", "-g", "1m", "--json", data=loaded).stdout)
    assert out["rows"] == [["2026-11-20T10:00:00Z", 2], ["2026-11-20T10:01:00Z", 1], ["2026-11-20T10:02:00Z", 1]]
    heat = json.loads(rootsift("query", "api", "-c", "heatmap(duration_ms)", "-g", "1m", "--json", data=loaded).stdout)
    grid = heat["heatmap"]
    assert sum(map(sum, grid["counts"])) == 4 and len(grid["times"]) == 3
    drawn = rootsift("query", "api", "-c", "heatmap(duration_ms)", data=loaded)
    assert drawn.returncode == 0 and "heatmap of duration_ms" in drawn.stdout and "█" in drawn.stdout


def test_stdin_ingest_and_retention(tmp_path: Path) -> None:
    data = tmp_path / "data"
    lines = "".join(json.dumps({"ts": 1_700_000_000 + i * 86_400, "v": i}) + "\n" for i in range(10))
    res = rootsift("ingest", "-", "-d", "days", "--json", data=data, stdin=lines.encode())
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["time_format"] == "epoch_s"
    kept = json.loads(rootsift("retention", "days", "--keep", "100000d", "--json", data=data).stdout)
    assert kept["deleted_events"] == 0
    gone = json.loads(rootsift("retention", "days", "--keep", "1d", "--json", data=data).stdout)
    assert gone["deleted_events"] == 10 and gone["bytes_after"] < gone["bytes_before"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["query", "api", "--where", "status >>= 5"], "status >>= 5"),
        (["query", "api", "-c", "p99(nosuch)"], "unknown field 'nosuch'"),
        (["query", "nosuch"], "no dataset named 'nosuch'"),
        (["query", "api", "-c", "p99(endpoint)"], "numeric"),
        (["query", "api", "--from", "yesterday-ish"], "yesterday-ish"),
        (["query", "api", "-c", "heatmap(duration_ms)", "-b", "endpoint"], "heatmap"),
        (["query", "api", "--bogus-flag"], "--bogus-flag"),
        (["retention", "api", "--keep", "forever"], "forever"),
    ],
)
def test_usage_errors_exit_2_and_name_the_problem(loaded: Path, args: list[str], needle: str) -> None:
    res = rootsift(*args, data=loaded)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert needle in res.stderr


def test_json_error_envelope(loaded: Path) -> None:
    res = rootsift("query", "api", "-c", "p99(nosuch)", "--json", data=loaded)
    assert res.returncode == 2
    err = json.loads(res.stdout)["error"]
    assert err["type"] == "UnknownFieldError" and "nosuch" in err["message"]


def test_missing_input_is_a_failure(tmp_path: Path) -> None:
    res = rootsift("ingest", str(tmp_path / "absent.jsonl"), "-d", "x", data=tmp_path / "d")
    assert res.returncode == 1 and "not found" in res.stderr


def test_every_command_is_documented() -> None:
    from rootsift.cli import main

    doc = (ROOT / "docs" / "cli.md").read_text()
    for name, command in main.commands.items():
        assert command.name == name, f"COMMANDS names {name} for the command {command.name}"
        assert re.search(rf"^## `rootsift {name}", doc, re.M), f"docs/cli.md lacks a section for {name}"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in doc, f"docs/cli.md does not mention {opt} of rootsift {name}"
        assert "Example:" in (command.help or ""), f"rootsift {name} --help lacks an example"


HEAVY = ("scipy", "numpy", "duckdb", "sqlglot", "rich", "rootsift.analysis.explain", "rootsift.ingest.pipeline")


@pytest.mark.parametrize(
    ("argv", "unwanted"),
    [
        ([], HEAVY),  # import only
        (["--help"], HEAVY),
        (["query", "--help"], HEAVY),
        (["datasets"], ("scipy", "sqlglot", "rootsift.analysis.explain", "rootsift.ingest.pipeline")),
        (["retention", "api", "--keep", "1d", "--dry-run"], ("scipy", "sqlglot", "rootsift.ingest.pipeline")),
        (["schema", "api"], ("scipy", "sqlglot", "rootsift.analysis.explain", "rootsift.ingest.pipeline")),
        (["query", "api", "-c", "count"], ("scipy", "rootsift.analysis.explain", "rootsift.ingest.pipeline")),
        # --json prints no table: no rich, and no sqlglot parser run on the relation
        (["query", "api", "-c", "count", "--json"], ("scipy", "rich", "rootsift.analysis.explain")),
        (["datasets", "--json"], ("scipy", "sqlglot", "rich", "rootsift.analysis.explain")),
    ],
)
def test_start_up_imports_only_what_the_command_needs(loaded: Path, argv: list[str], unwanted: tuple[str, ...]) -> None:
    code = (
        "import sys, json; from rootsift.cli import main\n"
        "argv = json.loads(sys.argv[1])\n"
        "if argv:\n"
        "    try: main(argv, standalone_mode=False)\n"
        "    except SystemExit: pass\n"
        "print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)), file=sys.stderr)\n"
    )
    args = [*argv, "--data", str(loaded)] if argv and "--help" not in argv else argv
    res = subprocess.run(
        [sys.executable, "-c", code, json.dumps(args), json.dumps(unwanted)], capture_output=True, text=True, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stderr.strip().splitlines()[-1]) == []


def test_scenario_and_demo_print_only_commands_that_exist(tmp_path: Path) -> None:
    """A manifest's analyses are printed (and run by demo) only when the running command
    group has them, so it stays right as commands are added: the full group prints
    memleak's trends and compare; a group without them prints neither."""
    import click
    from click.testing import CliRunner

    from rootsift.cli import main

    runner = CliRunner()
    wrote = runner.invoke(main, ["scenario", "memleak", "--out", str(tmp_path / "m")])
    assert wrote.exit_code == 0, wrote.output
    assert "rootsift compare memleak_" in wrote.output and "rootsift trends memleak_" in wrote.output
    as_json = json.loads(runner.invoke(main, ["scenario", "memleak", "--out", str(tmp_path / "m"), "--json"]).stdout)
    assert [argv[0] for argv in as_json["analyses"]] == ["trends", "compare"]

    fewer = click.Group("rootsift", commands={n: main.commands[n] for n in ("scenario", "demo")})
    alone = runner.invoke(fewer, ["scenario", "memleak", "--out", str(tmp_path / "m")])
    assert alone.exit_code == 0 and "then ask" not in alone.output and "rootsift compare" not in alone.output
    demo = runner.invoke(fewer, ["demo", "memleak", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o")])
    assert demo.exit_code == 0, demo.output
    assert "what to ask" not in demo.output and "rootsift trends memleak" not in demo.output
    assert "not available yet: compare, trends" in demo.output


def test_demo_runs_each_analysis_as_its_command_would(tmp_path: Path) -> None:
    """demo runs the manifest's command lines through the commands themselves (on its open
    store): --json carries each one's JSON, the terminal shows each one's own output."""
    from click.testing import CliRunner

    from rootsift.cli import main

    runner = CliRunner()
    res = runner.invoke(
        main, ["demo", "memleak", "--data", str(tmp_path / "d"), "--out", str(tmp_path / "o"), "--json"]
    )
    assert res.exit_code == 0, res.output
    analyses = json.loads(res.stdout)["scenarios"][0]["analyses"]
    assert [a["command"].split()[1] for a in analyses] == ["trends", "compare"]
    assert all("error" not in a["result"] for a in analyses), analyses
    assert analyses[1]["result"]["verdict"] in ("improvement", "regression", "no change", "not enough data")
    text = runner.invoke(main, ["demo", "memleak", "--data", str(tmp_path / "d2"), "--out", str(tmp_path / "o2")])
    assert text.exit_code == 0, text.output
    assert "$ rootsift trends memleak_hosts" in text.output and "$ rootsift compare memleak_hosts" in text.output


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["investigate", "api", "--report", "{tmp}/missing/dir/x.html", "--data", "{data}"], 2, "--report"),
        (["investigate", "api", "--report", "{tmp}/a-file/x.html", "--data", "{data}"], 2, "--report"),
        (["investigate", "api", "--alpha", "-1", "--data", "{data}"], 2, "--alpha"),
        (["explain", "api", "--limit", "0", "--data", "{data}"], 2, "--limit"),
        (["retention", "api", "--keep", "99999999d", "--data", "{data}"], 2, "--keep"),
        (["retention", "api", "--keep", "99999999999999999d", "--data", "{data}"], 2, "--keep"),
        (["datasets", "--data", "{tmp}/a-file"], 2, "a-file is a file"),
        (["datasets", "--data", ""], 2, "--data"),
        (["scenario", "memleak", "--out", "{tmp}/a-file/sub"], 1, "--out"),
        (
            ["canary", "api", "--baseline", "a = 1", "--canary", "a = 2", "--every", "99999999d", "--for", "99999999d"],
            2,
            "--for",
        ),
    ],
)
def test_bad_paths_and_values_are_errors_not_tracebacks(
    loaded: Path, tmp_path: Path, args: list[str], code: int, needle: str
) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{data}", str(loaded)) for a in args]
    for flags in ([], ["--json"]):
        res = subprocess.run(
            [sys.executable, "-m", "rootsift", *argv, *flags], capture_output=True, text=True, timeout=120, cwd=ROOT
        )
        assert res.returncode == code, (res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and needle in res.stderr
        if flags:
            assert needle in json.loads(res.stdout)["error"]["message"]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["query", "api", "--bogus-flag"], "--bogus-flag"),
        (["query", "api", "--limit", "abc"], "--limit"),
        (["investigate", "api", "--timestamp-at", "middle"], "--timestamp-at"),
        (["query"], "DATASET"),
    ],
)
def test_click_usage_errors_give_the_json_envelope(loaded: Path, args: list[str], needle: str) -> None:
    res = rootsift(*args, "--json", data=loaded)
    assert res.returncode == 2, (res.stdout, res.stderr)
    error = json.loads(res.stdout)["error"]
    assert error["type"] == "UsageError" and needle in error["message"] and needle in res.stderr


def test_an_unexpected_error_is_one_line_not_a_traceback(loaded: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from rootsift.api import Rootsift
    from rootsift.cli import main

    def broken(self: Rootsift) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(Rootsift, "datasets", broken)
    res = CliRunner().invoke(main, ["datasets", "--data", str(loaded), "--json"])
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit)
    assert json.loads(res.stdout.splitlines()[0])["error"]["message"].startswith("unexpected RuntimeError: boom")
    monkeypatch.setenv("ROOTSIFT_DEBUG", "1")
    assert isinstance(CliRunner().invoke(main, ["datasets", "--data", str(loaded)]).exception, RuntimeError)


def test_retention_dry_run_counts_and_deletes_nothing(tmp_path: Path) -> None:
    import time

    data, now = tmp_path / "data", time.time()
    lines = "".join(json.dumps({"ts": now - (i + 0.5) * 86_400, "v": i}) + "\n" for i in range(10))
    assert rootsift("ingest", "-", "-d", "days", "--json", data=data, stdin=lines.encode()).returncode == 0
    dry = rootsift("retention", "days", "--keep", "5d", "--dry-run", "--json", data=data)
    assert dry.returncode == 0, dry.stderr
    would = json.loads(dry.stdout)
    assert would["dry_run"] is True and would["would_delete_events"] == 5  # the segment straddles the cutoff
    assert 0 < would["would_free_bytes"] < would["bytes_before"]
    assert json.loads(rootsift("datasets", "--json", data=data).stdout)["datasets"][0]["events"] == 10
    text = rootsift("retention", "days", "--keep", "5d", "--dry-run", data=data).stdout
    assert "would delete 5 events" in text and "nothing deleted" in text
    done = json.loads(rootsift("retention", "days", "--keep", "5d", "--json", data=data).stdout)
    assert done["dry_run"] is False and done["deleted_events"] == 5
    assert json.loads(rootsift("datasets", "--json", data=data).stdout)["datasets"][0]["events"] == 5


def test_cli_modules_import_no_sibling_in_a_cycle() -> None:
    """Each module of rootsift/cli imports ``common`` or a sibling whose helpers it reuses,
    never the package (which registers them all) and never in a cycle."""
    import ast

    package = ROOT / "src" / "rootsift" / "cli"
    uses: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        if path.stem in ("__init__", "__main__"):
            continue
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
        assert "rootsift.cli" not in {n for n in names if n.count(".") == 1}, f"{path.name} imports the package"
        uses[path.stem] = {n.split(".")[2] for n in names if n.startswith("rootsift.cli.")} & {
            p.stem for p in package.glob("*.py")
        }
    seen: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        for dep in uses.get(name, ()):
            visit(dep, (*path, name))
        seen.add(name)

    for name in uses:
        visit(name, ())
    assert {"common", "data", "query", "analyses", "judging", "scenarios"} <= seen


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "api", "--a", "endpoint = /a", "--b", "endpoint = /b", "--alpha", "0"],
        ["compare", "api", "--a", "endpoint = /a", "--b", "endpoint = /b", "--alpha", "1"],
        ["canary", "api", "--baseline", "endpoint = /a", "--canary", "endpoint = /b", "--alpha", "1.5"],
        ["explain", "api", "--where", "status >= 500", "--alpha", "-0.1"],
        ["investigate", "api", "--alpha", "nan"],
        ["investigate", "api", "--alpha", "often"],
    ],
)
def test_alpha_outside_zero_one_is_a_usage_error_naming_the_flag(loaded: Path, args: list[str]) -> None:
    res = rootsift(*args, data=loaded)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "'--alpha'" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    ("granularity", "needle"),
    [
        ("99999999999d", "--granularity (-g): duration '99999999999d' is out of range"),
        ("99999999d", "--granularity (-g) 99999999d is longer than the queried range (2m"),
        ("0s", "--granularity (-g) must be positive"),
    ],
)
def test_bad_granularity_is_a_usage_error_naming_g(loaded: Path, granularity: str, needle: str) -> None:
    res = rootsift("query", "api", "-g", granularity, data=loaded)
    assert res.returncode == 2 and needle in res.stderr, res.stderr
    assert "1970" not in res.stdout
    heat = rootsift("query", "api", "-c", "heatmap(duration_ms)", "-g", granularity, data=loaded)
    assert heat.returncode == 2 and needle in heat.stderr, heat.stderr
    ranged = ["--from", "2026-11-20T00:00:00Z", "--to", "2026-11-21T00:00:00Z"]
    assert rootsift("query", "api", "-g", "1d", *ranged, data=loaded).returncode == 0
    # longer than the range but not dating its bucket 1970: one bucket, as asked
    assert rootsift("query", "api", "-g", "25h", *ranged, data=loaded).returncode == 0
    assert rootsift("query", "api", "-g", "1h", data=loaded).returncode == 0


def test_ctrl_c_exits_130_with_one_line(loaded: Path) -> None:
    import os
    import signal

    argv = [sys.executable, "-m", "rootsift.cli", "canary", "api", "--baseline", "endpoint = /a"]
    argv += ["--canary", "endpoint = /b", "--every", "1s", "--for", "1h", "--json", "--data", str(loaded)]

    def as_from_a_shell() -> None:
        # A shell starts a command with SIGINT handled and unblocked; pytest's process may
        # not be in that state late in a full run (a disposition of SIG_IGN or a blocked
        # mask is inherited across exec, and Python then never raises KeyboardInterrupt).
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        preexec_fn=as_from_a_shell,
    )
    assert proc.stdout is not None
    first_look = proc.stdout.readline()  # a look a second, for an hour
    assert json.loads(first_look)["look"] == 1
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{proc.pid}/status").read_text()
        proc.kill()
        proc.communicate()
        signals = [line for line in status.splitlines() if line.startswith(("Sig", "Shd"))]
        raise AssertionError(f"canary did not stop within 60 s of SIGINT: {signals}") from None
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["interrupted (Ctrl-C)"]
    assert json.loads(out.strip().splitlines()[-1])["error"]["type"] == "Interrupted"


@pytest.mark.parametrize(
    "args",
    [
        ["query", "api", "--where", "endpoint > 5"],
        ["compare", "api", "--a", "status = 200", "--b", "status >= 500", "--metrics", "rate(endpoint > 5)"],
    ],
)
def test_text_field_ordered_against_a_number_is_a_usage_error(loaded: Path, args: list[str]) -> None:
    res = rootsift(*args, data=loaded)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "field 'endpoint' holds text (varchar)" in res.stderr
