"""Edge cases found in review: each was a silent loss, a wrong answer or a crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rootsift import Calculation, QuerySpec, Rootsift
from rootsift.errors import QuerySpecError

ROOT = Path(__file__).resolve().parents[1]


def rows(rs: Rootsift, dataset: str, *cols: str) -> list[tuple[object, ...]]:
    rel = rs.backend.relation(dataset, None, None).sql(dialect="duckdb")
    select = ", ".join(f'"{c}"' for c in cols)
    return rs.backend.execute_sql(f"SELECT {select} FROM {rel} ORDER BY timestamp", []).rows


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


T = '"timestamp":"2024-01-01T00:00:0{}Z"'


@pytest.mark.parametrize("block_bytes", [None, 60])
@pytest.mark.parametrize(
    "last",
    [
        '{%s,"msg":"cfg \\": null","user":"alice"}',  # a string holding '": null' beside a new key
        '{%s,"msg":"b","tags":[{"k" : 1}],"user":"alice"}',  # spaced nested JSON beside a new key
        '{%s,"msg":"b", "user" : "alice"}',  # a new key written with a space before the colon
    ],
)
def test_a_new_key_is_never_dropped(tmp_path: Path, last: str, block_bytes: int | None) -> None:
    first = "{" + T.format(0) + ',"msg":"ok","tags":["q"]}'
    lines = [first] * 3 + [last.replace("%s", T.format(1))]
    src = write(tmp_path / "in.jsonl", lines)
    with Rootsift(tmp_path / "d") as rs:
        summary = rs.ingest(src, dataset="x", block_bytes=block_bytes)
        assert summary.events == 4 and summary.rejects == 0
        assert rows(rs, "x", "user")[-1] == ("alice",)


def test_times_are_utc_whatever_the_machine_zone(tmp_path: Path) -> None:
    src = write(
        tmp_path / "in.jsonl",
        ['{"timestamp":"2024-06-01T00:00:00Z","a":1}', '{"timestamp":"2024-06-01 00:00:01","a":2}'],
    )
    code = (
        "import sys; from rootsift import Rootsift; rs = Rootsift(sys.argv[2]); rs.ingest(sys.argv[1], dataset='x');"
        "rel = rs.backend.relation('x', None, None).sql(dialect='duckdb');"
        "print([str(r[0]) for r in rs.backend.execute_sql(f'SELECT timestamp FROM {rel} ORDER BY 1', []).rows])"
    )
    env = {**os.environ, "TZ": "America/New_York", "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code, str(src), str(tmp_path / "d")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "['2024-06-01 00:00:00', '2024-06-01 00:00:01']"


@pytest.mark.parametrize("bad_line", [False, True])
def test_a_given_time_format_wins_on_every_path(tmp_path: Path, bad_line: bool) -> None:
    src = write(tmp_path / "in.jsonl", ['{"ts":"2024-01-02 10:00:00","a":1}'] + (["bad"] if bad_line else []))
    with Rootsift(tmp_path / "d") as rs:
        rs.ingest(src, dataset="x", time_format="%Y-%d-%m %H:%M:%S")
        assert str(rows(rs, "x", "timestamp")[0][0]) == "2024-02-01 10:00:00"


@pytest.mark.parametrize("bad_line", [False, True])
def test_non_finite_numbers_are_conflicts_on_every_path(tmp_path: Path, bad_line: bool) -> None:
    lines = ['{"ts":1700000000,"a":1.5}', '{"ts":1700000001,"a":NaN}', '{"ts":1700000002,"a":-Infinity}']
    src = write(tmp_path / "in.jsonl", lines + (["bad"] if bad_line else []))
    with Rootsift(tmp_path / "d") as rs:
        summary = rs.ingest(src, dataset="x")
        assert summary.events == 3 and summary.rejects == int(bad_line)
        assert [r[0] for r in rows(rs, "x", "a")] == [1.5, None, None]
        assert {f["field"]: f["conflicts"] for f in rs.schema("x")}["a"] == 2


def test_keys_differing_only_in_case_are_two_fields(tmp_path: Path) -> None:
    with Rootsift(tmp_path / "d") as rs:
        rs.ingest(write(tmp_path / "a.jsonl", ['{"timestamp":"2024-01-01T00:00:00Z","level":"info"}']), dataset="x")
        rs.ingest(write(tmp_path / "b.jsonl", ['{"timestamp":"2024-01-01T00:00:01Z","Level":"warn"}']), dataset="x")
        fields = {f["field"]: f["path"] for f in rs.schema("x")}
        assert fields["level"] == ["level"] and fields["Level~2"] == ["Level"]
        assert rows(rs, "x", "level", "Level~2") == [("info", None), (None, "warn")]


def test_a_range_in_an_older_segment_can_use_a_newer_field(tmp_path: Path) -> None:
    a = write(tmp_path / "a.jsonl", [json.dumps({"ts": 1_700_000_000 + i, "v": i}) for i in range(5)])
    b = write(tmp_path / "b.jsonl", [json.dumps({"ts": 1_700_100_000 + i, "v": i, "b": "x"}) for i in range(5)])
    with Rootsift(tmp_path / "d", segment_rows=5) as rs:
        rs.ingest(a, dataset="h")
        rs.ingest(b, dataset="h")
        spec = QuerySpec("h", start="1700000000", end="1700000010", breakdowns=["b"])
        assert rs.query(spec).rows == [[None, 5]]
        assert rs.query(QuerySpec("h", start="1700000000", end="1700000010", where='b = "x"')).rows == [[0]]


@pytest.mark.parametrize("spec", ["", "[1]", '{"calculations": [5]}', '{"limit": "abc"}', '{"where": 3}'])
def test_a_bad_spec_is_a_usage_error(tmp_path: Path, spec: str) -> None:
    src = write(tmp_path / "in.jsonl", ['{"ts":1700000000,"a":1}'])
    data = tmp_path / "d"
    with Rootsift(data) as rs:
        rs.ingest(src, dataset="x")
    (tmp_path / "spec.json").write_text(spec)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "rootsift.cli",
            "query",
            "x",
            "--spec",
            str(tmp_path / "spec.json"),
            "--data",
            str(data),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr and "spec" in res.stderr.lower()


def test_a_heatmap_with_too_many_columns_is_refused(tmp_path: Path) -> None:
    src = write(tmp_path / "in.jsonl", ['{"ts":1700000000,"a":1}', '{"ts":1731536000,"a":2}'])
    with Rootsift(tmp_path / "d") as rs:
        rs.ingest(src, dataset="h")
        with pytest.raises(QuerySpecError, match="columns"):
            rs.query(QuerySpec("h", calculations=[Calculation.parse("heatmap(a)")], granularity="1ms"))


def test_a_csv_header_with_a_nul_byte_is_named_not_a_crash(tmp_path: Path) -> None:
    """--format csv on a binary file: the header names the problem (it used to reach a
    NUL byte in a SQL literal and print "unexpected ValueError")."""
    src = tmp_path / "blob.csv"
    src.write_bytes(b"\x00\x01abc,def\n1,2\n")
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "rootsift",
            "ingest",
            str(src),
            "-d",
            "x",
            "--format",
            "csv",
            "--data",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert res.returncode == 1, res.stderr
    assert "NUL byte" in res.stderr and "unexpected" not in res.stderr
