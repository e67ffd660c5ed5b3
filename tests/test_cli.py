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
        assert re.search(rf"^## `rootsift {name}", doc, re.M), f"docs/cli.md lacks a section for {name}"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--"):
                    assert opt in doc, f"docs/cli.md does not mention {opt} of rootsift {name}"
        assert "Example:" in (command.help or ""), f"rootsift {name} --help lacks an example"
