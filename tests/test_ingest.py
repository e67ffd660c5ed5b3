"""Ingest: golden input/expected pairs for every reader, dynamic schema, type conflicts,
the fast path's key check, exact strings, stdin and bounded memory.

Golden pairs live in ``tests/golden``: ``<name>.input.<jsonl|json|csv|tsv>`` and
``<name>.expected.json``. Adding a pair adds tests. The expected file holds:

``events``      the stored events in input order, as dicts of their non-NULL columns, the
                time as ISO text with a Z (the ``timestamp`` column)
``rejects``     ``[{"line": n, "reason": "substring"}]``, every reject of the input
``options``     keyword arguments for ``Rootsift.ingest`` (``time_field``, ``time_format``, ``format``)
``time_field``, ``time_format``, ``format``   what the summary must report (optional)
``types``       ``{field: type}`` the schema must show (optional)
``xfail``       a known src bug that makes the pair fail (marks every variant strict-xfail)
``xfail_small_blocks``  the same, only for the small-block variants

Each pair runs plain and compressed (gzip, zstd: generated here from the plain input),
with the default block size and with tiny blocks so line numbers cross block boundaries.
"""

from __future__ import annotations

import gc
import gzip
import json
import random
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import zstandard

from helpers.store import column, columns_of, iso, run_python, schema_map, stored_rows, write_jsonl
from rootsift import Calculation, QuerySpec, Rootsift
from rootsift.errors import InputFormatError, UsageError

GOLDEN = Path(__file__).parent / "golden"
SMALL_BLOCK = 64
"""Bytes per block for the tiny-block variants: a block holds about one line."""


# -- golden pairs --------------------------------------------------------------------


@dataclass(frozen=True)
class Golden:
    name: str
    input: Path
    expected: dict[str, Any]


def _load_goldens() -> dict[str, Golden]:
    out = {}
    for exp in sorted(GOLDEN.glob("*.expected.json")):
        name = exp.name.removesuffix(".expected.json")
        inputs = sorted(GOLDEN.glob(f"{name}.input.*"))
        assert len(inputs) == 1, f"golden {name}: want exactly one {name}.input.* file, found {inputs}"
        out[name] = Golden(name, inputs[0], json.loads(exp.read_text(encoding="utf-8")))
    return out


GOLDENS = _load_goldens()
VARIANTS = [("plain", None), ("plain", SMALL_BLOCK), ("gzip", None), ("zstd", SMALL_BLOCK)]


def _marks(case: Golden, small: bool) -> list[pytest.MarkDecorator]:
    reasons = [case.expected.get("xfail")]
    if small:
        reasons.append(case.expected.get("xfail_small_blocks"))
    reasons = [r for r in reasons if r]
    marks = [pytest.mark.xfail(strict=True, reason=" | ".join(reasons))] if reasons else []
    return marks


def _golden_params() -> list[Any]:
    return [
        pytest.param(
            name,
            comp,
            block,
            id=f"{name}-{comp}-{'tiny' if block else 'default'}",
            marks=_marks(case, block is not None),
        )
        for name, case in GOLDENS.items()
        for comp, block in VARIANTS
    ]


def _compressed(src: Path, compression: str, tmp_path: Path) -> Path:
    """The plain golden input, or a gzip/zstd copy of it made here (no binaries in the repo)."""
    data = src.read_bytes()
    if compression == "plain":
        return src
    if compression == "gzip":
        out = tmp_path / (src.name + ".gz")
        out.write_bytes(gzip.compress(data))
    else:
        out = tmp_path / (src.name + ".zst")
        out.write_bytes(zstandard.ZstdCompressor().compress(data))
    return out


def _rejects_in_file(summary: dict[str, Any]) -> list[dict[str, Any]]:
    path = summary["rejects_file"]
    if not path:
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def check_golden(
    rs: Rootsift, dataset: str, summary: dict[str, Any], expected: dict[str, Any], compression: str
) -> None:
    want_events = sorted(expected["events"], key=lambda e: e["timestamp"])
    assert stored_rows(rs, dataset) == want_events
    assert summary["events"] == len(want_events)

    want_rejects = expected.get("rejects", [])
    got_rejects = _rejects_in_file(summary)
    assert summary["rejects"] == len(want_rejects) == len(got_rejects), got_rejects
    assert [r["line"] for r in got_rejects] == [r["line"] for r in want_rejects], got_rejects
    for got, want in zip(got_rejects, want_rejects):
        assert want["reason"] in got["reason"], (got, want)
    assert summary["first_rejects"] == got_rejects[:5]

    for key in ("time_field", "time_format", "format"):
        if key in expected:
            assert summary[key] == expected[key], key
    assert summary["compression"] == {"plain": "none"}.get(compression, compression)
    if "types" in expected:
        schema = schema_map(rs, dataset)
        assert {f: schema[f]["type"] for f in expected["types"] if f in schema} == expected["types"]
        assert schema["timestamp"]["type"] == "timestamp"


@pytest.mark.parametrize(("name", "compression", "block_bytes"), _golden_params())
def test_golden(name: str, compression: str, block_bytes: int | None, tmp_path: Path) -> None:
    case = GOLDENS[name]
    source = _compressed(case.input, compression, tmp_path)
    with Rootsift(tmp_path / "data") as rs:
        summary = rs.ingest(source, dataset="golden", block_bytes=block_bytes, **case.expected.get("options", {}))
        if block_bytes is not None and case.input.stat().st_size > 2 * SMALL_BLOCK:
            assert summary.blocks > 1
        check_golden(rs, "golden", summary.as_dict(), case.expected, compression)


def test_golden_set_covers_every_reader() -> None:
    """The pairs cover each input format; a pair without events or with stray files is a mistake."""
    kinds = {case.input.name.rsplit(".", 1)[1] for case in GOLDENS.values()}
    assert kinds >= {"jsonl", "json", "csv", "tsv"}
    for case in GOLDENS.values():
        assert case.expected["events"], case.name
    stray = {p.name for p in GOLDEN.iterdir() if p.is_file()} - {
        n for case in GOLDENS.values() for n in (case.input.name, f"{case.name}.expected.json")
    }
    assert not stray


def test_json_array_ingest_closes_its_spool_file(tmp_path: Path) -> None:
    source = GOLDENS["json_array_compact"].input
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Rootsift(tmp_path / "data") as rs:
            summary = rs.ingest(source, dataset="arr", time_format="rfc3339")
        gc.collect()
    assert summary.events == 3
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


STDIN_CHILD = """
import json, sys
from rootsift import Rootsift
with Rootsift(sys.argv[1]) as rs:
    summary = rs.ingest("-", dataset="golden", **json.loads(sys.argv[2]))
print(json.dumps(summary.as_dict()))
"""


@pytest.mark.parametrize(
    ("name", "compression"),
    [
        pytest.param(name, comp, id=f"{name}-{comp}", marks=_marks(GOLDENS[name], False))
        for name, comp in [
            ("jsonl_basic", "plain"),
            ("jsonl_rejects", "gzip"),
            ("json_array_compact", "zstd"),
            ("epoch_ns", "plain"),
            ("csv_basic", "plain"),
        ]
    ],
)
def test_golden_from_stdin(name: str, compression: str, tmp_path: Path) -> None:
    """``ingest('-')`` in a child process with the input piped to its stdin."""
    case = GOLDENS[name]
    data = _compressed(case.input, compression, tmp_path).read_bytes()
    proc = run_python(STDIN_CHILD, str(tmp_path / "data"), json.dumps(case.expected.get("options", {})), stdin=data)
    summary = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert summary["source"] == "-"
    with Rootsift(tmp_path / "data") as rs:
        check_golden(rs, "golden", summary, case.expected, compression)


# -- dynamic schema --------------------------------------------------------------------


def _dt(i: int) -> datetime:
    """The time of row ``i`` of the generated inputs: one row a second from 2024-03-01."""
    return datetime(2024, 3, 1) + timedelta(seconds=i)


def _ts(i: int) -> str:
    return iso(_dt(i))


def _count(rs: Rootsift, dataset: str, where: str | None = None) -> int:
    out = rs.query(QuerySpec(dataset, where=where))
    return int(out.rows[0][0]) if out.rows else 0


def test_new_fields_in_a_later_file_leave_old_rows_null(rs: Rootsift, tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", ({"timestamp": _ts(i), "a": i, "b": f"b{i}"} for i in range(50)))
    second = write_jsonl(
        tmp_path / "b.jsonl",
        ({"timestamp": _ts(100 + i), "a": i, "b": "x", "c": f"c{i}", "d": {"e": i * 0.5}} for i in range(30)),
    )
    third = write_jsonl(tmp_path / "c.jsonl", ({"timestamp": _ts(200 + i), "c": "only-c"} for i in range(7)))

    s1 = rs.ingest(first, dataset="dyn")
    assert s1.events == 50 and sorted(s1.new_fields) == ["a", "b"]
    s2 = rs.ingest(second, dataset="dyn")
    assert s2.events == 30 and sorted(s2.new_fields) == ["c", "d.e"]
    s3 = rs.ingest(third, dataset="dyn")
    assert s3.events == 7 and s3.new_fields == []

    assert rs.events("dyn") == 87
    schema = schema_map(rs, "dyn")
    assert {f: schema[f]["type"] for f in ("a", "b", "c", "d.e")} == {
        "a": "double",
        "b": "varchar",
        "c": "varchar",
        "d.e": "double",
    }
    assert schema["d.e"]["path"] == ["d", "e"]
    assert (schema["a"]["present"], schema["c"]["present"], schema["d.e"]["present"]) == (80, 37, 30)
    assert _count(rs, "dyn", "not exists c") == 50
    assert _count(rs, "dyn", "exists `d.e`") == 30
    assert _count(rs, "dyn", "not exists a") == 7
    # the old rows are untouched
    old = stored_rows(rs, "dyn", 'WHERE "timestamp" < ?', [_dt(100)])
    assert old == [{"timestamp": _ts(i), "a": float(i), "b": f"b{i}"} for i in range(50)]
    out = rs.query(QuerySpec("dyn", calculations=[Calculation.parse("sum(d.e)"), Calculation.parse("sum(a)")]))
    assert out.rows == [[sum(i * 0.5 for i in range(30)), float(sum(range(50)) + sum(range(30)))]]


# -- type conflicts --------------------------------------------------------------------


def _conflict_rows() -> tuple[list[dict[str, Any]], dict[int, str]]:
    rows = [{"timestamp": _ts(i), "latency": i * 1.5, "code": f"E{i}"} for i in range(60)]
    strings = {31: "slow", 47: "n/a", 58: "1.5ms"}
    for i, text in strings.items():
        rows[i]["latency"] = text
    rows[52]["code"] = 404  # a number in a text field is kept as its text
    return rows, strings


def _check_conflicts(rs: Rootsift, rows: list[dict[str, Any]], strings: dict[int, str]) -> None:
    assert "latency#raw" in columns_of(rs, "conf")
    schema = schema_map(rs, "conf")
    assert schema["latency"]["type"] == "double"
    assert schema["latency"]["conflicts"] == len(strings)
    assert schema["code"]["type"] == "varchar" and schema["code"]["conflicts"] == 0
    assert "latency#raw" not in schema

    latency, raw = column(rs, "conf", "latency"), column(rs, "conf", "latency#raw")
    assert len(latency) == len(rows)
    for i in range(len(rows)):
        if i in strings:
            assert (latency[i], raw[i]) == (None, strings[i])
        else:
            assert (latency[i], raw[i]) == (i * 1.5, None)
    assert column(rs, "conf", "code")[52] == "404"
    numeric = [i * 1.5 for i in range(len(rows)) if i not in strings]
    out = rs.query(
        QuerySpec(
            "conf",
            calculations=[
                Calculation.parse("sum(latency)"),
                Calculation.parse("count"),
                Calculation.parse("max(latency)"),
            ],
        )
    )
    assert out.rows == [[pytest.approx(sum(numeric)), len(rows), max(numeric)]]


def test_type_conflicts_in_later_files_go_to_raw(rs: Rootsift, tmp_path: Path) -> None:
    """A field typed DOUBLE by the first file keeps later strings in ``field#raw``, counted as conflicts."""
    rows, strings = _conflict_rows()
    first = min(strings)
    rs.ingest(write_jsonl(tmp_path / "a.jsonl", rows[:first]), dataset="conf")
    for i in range(first, len(rows), 5):  # later files of a few rows each
        rs.ingest(write_jsonl(tmp_path / f"f{i}.jsonl", rows[i : i + 5]), dataset="conf")
    _check_conflicts(rs, rows, strings)


def test_type_conflict_in_a_later_block_goes_to_raw(rs: Rootsift, tmp_path: Path) -> None:
    rows, strings = _conflict_rows()
    summary = rs.ingest(write_jsonl(tmp_path / "c.jsonl", rows), dataset="conf", block_bytes=200)
    assert summary.blocks >= 10 and summary.events == 60 and summary.rejects == 0
    _check_conflicts(rs, rows, strings)


def test_malformed_line_in_a_later_block_is_a_reject(rs: Rootsift, tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text(
        '{"timestamp": "2024-03-01T00:00:00Z", "n": 1}\n{"timestamp": "2024-03-01T00:00:01Z", "n": 2}\n'
        '{broken\n{"timestamp": "2024-03-01T00:00:03Z", "n": 4}\n'
    )
    summary = rs.ingest(path, dataset="m", block_bytes=90)
    assert summary.blocks >= 2
    assert (summary.events, summary.rejects) == (3, 1)
    assert summary.first_rejects[0]["line"] == 3
    assert column(rs, "m", "n") == [1.0, 2.0, 4.0]


def test_boolean_in_a_numeric_field_is_a_conflict(rs: Rootsift, tmp_path: Path) -> None:
    rs.ingest(
        write_jsonl(
            tmp_path / "a.jsonl", [{"timestamp": _ts(0), "latency": 1.5}, {"timestamp": _ts(1), "latency": 2.5}]
        ),
        dataset="b",
    )
    rs.ingest(
        write_jsonl(
            tmp_path / "b.jsonl", [{"timestamp": _ts(2), "latency": True}, {"timestamp": _ts(3), "latency": False}]
        ),
        dataset="b",
    )
    assert column(rs, "b", "latency") == [1.5, 2.5, None, None]
    assert column(rs, "b", "latency#raw") == [None, None, "true", "false"]
    assert schema_map(rs, "b")["latency"]["conflicts"] == 2


# -- the fast path's key check: nothing deep in a big block may be lost ------------------

RARE_AT = 4999
RARE_ROWS = 6000


def _base_row(i: int) -> dict[str, Any]:
    return {"timestamp": _ts(i), "status": 200 + i % 5, "k8s": {"pod": f"p{i % 7}"}, "msg": f"m{i}"}


RARE_CASES = {
    "new_top_level_field": (lambda o: o.update(rare_field="needle"), {"rare_field": "needle"}),
    "new_key_in_known_object": (lambda o: o["k8s"].update(node="n1"), {"k8s.node": "n1"}),
    "new_nested_object": (lambda o: o.update(deep={"er": {"x": 7}}), {"deep.er.x": 7.0}),
    "new_empty_array": (lambda o: o.update(ea=[]), {"ea": "[]"}),
    "new_array_of_objects": (lambda o: o.update(spans=[{"id": 1}]), {"spans": '[{"id":1}]'}),
    "new_boolean": (lambda o: o.update(flag=False), {"flag": "false"}),
    "string_with_key_token": (lambda o: o.update(msg='x":1, "y":null'), {"msg": 'x":1, "y":null'}),
}


@pytest.mark.parametrize("existing", [False, True], ids=["fresh", "known-fields"])
@pytest.mark.parametrize("case", list(RARE_CASES))
def test_rare_field_deep_in_a_block_is_kept(case: str, existing: bool, rs: Rootsift, tmp_path: Path) -> None:
    mutate, want = RARE_CASES[case]
    if existing:  # the dataset already knows every common field (no type sampling needed)
        rs.ingest(write_jsonl(tmp_path / "seed.jsonl", (_base_row(i) for i in range(100))), dataset="rare")
    rows = [_base_row(i) for i in range(RARE_ROWS)]
    mutate(rows[RARE_AT])
    summary = rs.ingest(write_jsonl(tmp_path / "big.jsonl", rows), dataset="rare")
    assert summary.events == RARE_ROWS and summary.blocks == 1 and summary.rejects == 0

    stored = stored_rows(rs, "rare", 'WHERE "timestamp" = ?', [_dt(RARE_AT)])
    expected = {
        "timestamp": _ts(RARE_AT),
        "status": 200.0 + RARE_AT % 5,
        "k8s.pod": f"p{RARE_AT % 7}",
        "msg": f"m{RARE_AT}",
        **want,
    }
    assert stored == [expected]
    schema = schema_map(rs, "rare")
    for name in want:
        if name != "msg":
            assert schema[name]["present"] == 1
    assert rs.events("rare") == RARE_ROWS + 100 * existing


def test_type_conflict_deep_in_a_big_block_is_kept(rs: Rootsift, tmp_path: Path) -> None:
    """With ``status`` already DOUBLE, one string deep in a big block goes to ``status#raw``."""
    rs.ingest(write_jsonl(tmp_path / "seed.jsonl", (_base_row(i) for i in range(100))), dataset="rare")
    rows = [_base_row(i) for i in range(RARE_ROWS)]
    rows[RARE_AT]["status"] = "oops"
    rs.ingest(write_jsonl(tmp_path / "big.jsonl", rows), dataset="rare")
    status, raw = column(rs, "rare", "status"), column(rs, "rare", "status#raw")
    assert len(status) == RARE_ROWS + 100
    assert raw.count("oops") == 1 and raw.count(None) == RARE_ROWS + 99
    assert status.count(None) == 1
    assert schema_map(rs, "rare")["status"]["conflicts"] == 1
    out = rs.query(QuerySpec("rare", calculations=[Calculation.parse("sum(status)")]))
    assert out.rows == [
        [float(sum(200 + i % 5 for i in range(100)) + sum(200 + i % 5 for i in range(RARE_ROWS)) - (200 + RARE_AT % 5))]
    ]


# -- strings round-trip exactly ----------------------------------------------------------

TRICKY_STRINGS = [
    'he said "stop": now',
    '":',
    '\\":',
    '{"a":null,"b":"c"}',
    '":null',
    "ends with a backslash \\",
    "caf\u00e9 \u2603 \U0001f680",
    "new\nline\ttab\r",
    "",
]


@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf8", "escaped"])
def test_tricky_strings_round_trip_in_a_big_block(ascii_only: bool, rs: Rootsift, tmp_path: Path) -> None:
    rows = [{"timestamp": _ts(i), "n": i, "s": f"plain {i}"} for i in range(3000)]
    at = {2500 + k: text for k, text in enumerate(TRICKY_STRINGS)}
    for i, text in at.items():
        rows[i]["s"] = text
        rows[i]["extra"] = text
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=ascii_only) + "\n" for r in rows), encoding="utf-8")
    summary = rs.ingest(path, dataset="str")
    assert summary.events == 3000 and summary.rejects == 0
    assert column(rs, "str", "s") == [at.get(i, f"plain {i}") for i in range(3000)]
    assert column(rs, "str", "extra") == [at.get(i) for i in range(3000)]
    assert column(rs, "str", "n") == [float(i) for i in range(3000)]


# -- errors, strictness, progress --------------------------------------------------------


def test_input_errors(rs: Rootsift, tmp_path: Path) -> None:
    with pytest.raises(InputFormatError, match="not found"):
        rs.ingest(tmp_path / "missing.jsonl", dataset="e")
    with pytest.raises(InputFormatError, match="directory"):
        rs.ingest(tmp_path, dataset="e")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputFormatError, match="empty"):
        rs.ingest(empty, dataset="e")
    good = write_jsonl(tmp_path / "g.jsonl", [{"timestamp": _ts(0)}])
    with pytest.raises(UsageError, match="format"):
        rs.ingest(good, dataset="e", format="xml")
    with pytest.raises(UsageError):
        rs.ingest(good, dataset="e", strictness="loud")
    with pytest.raises(UsageError, match="time-format"):
        rs.ingest(good, dataset="e", time_format="yesterday")
    with pytest.raises(UsageError, match="time-field"):
        rs.ingest(good, dataset="e", time_field="when")
    notime = write_jsonl(tmp_path / "n.jsonl", [{"x": 1}, {"y": 2}])
    with pytest.raises(UsageError, match="no time field"):
        rs.ingest(notime, dataset="e2")


def test_strictness_raise_stops_at_the_first_reject_and_keeps_what_was_committed(rs: Rootsift, tmp_path: Path) -> None:
    rows = [{"timestamp": _ts(i), "n": i} for i in range(40)]
    rows[30]["timestamp"] = "not a time"
    path = write_jsonl(tmp_path / "r.jsonl", rows)
    with pytest.raises(InputFormatError, match="line 31"):
        rs.ingest(path, dataset="strict", strictness="raise", block_bytes=100)
    kept = rs.events("strict")
    assert 0 < kept <= 30
    assert column(rs, "strict", "n") == [float(i) for i in range(kept)]
    # warn (the default) and ignore both keep going and count the reject
    for strictness in ("warn", "ignore"):
        summary = rs.ingest(path, dataset=f"s-{strictness}", strictness=strictness, block_bytes=100)
        assert (summary.events, summary.rejects) == (39, 1)


def test_on_commit_reports_a_growing_total(rs: Rootsift, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "p.jsonl", ({"timestamp": _ts(i), "n": i} for i in range(500)))
    seen: list[int] = []
    summary = rs.ingest(path, dataset="p", block_bytes=1000, on_commit=seen.append)
    assert seen and seen == sorted(seen) and seen[-1] == summary.events == 500
    assert rs.events("p") == 500


# -- bounded memory ----------------------------------------------------------------------

BIG_MB = 150
MEMORY_CHILD = """
import json, resource, sys, time
from rootsift import Rootsift
t = time.perf_counter()
with Rootsift(sys.argv[1]) as rs:
    summary = rs.ingest(sys.argv[2], dataset="big")
    stored = rs.events("big")
# VmHWM is this address space's own peak; ru_maxrss would carry over the peak of the
# process that started this one (pytest's, past 1 GiB in a full run) across fork and exec
hwm = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")]
print(json.dumps({"events": summary.events, "stored": stored, "seconds": time.perf_counter() - t,
                  "maxrss_kib": hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _write_big_jsonl(path: Path, target_bytes: int) -> int:
    """About ``target_bytes`` of varied JSON lines, written in chunks; returns the line count."""
    rnd = random.Random(7)
    services = ["api", "db", "worker", "cache", "auth"]
    lines = []
    for i in range(20_000):
        lines.append(
            json.dumps(
                {
                    "timestamp": f"2024-03-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z",
                    "service": rnd.choice(services),
                    "status": rnd.choice([200, 200, 200, 404, 500]),
                    "duration_ms": round(rnd.expovariate(1 / 80), 3),
                    "user": f"u{rnd.randrange(10_000)}",
                    "k8s": {"pod": f"pod-{rnd.randrange(50)}", "node": f"n{rnd.randrange(8)}"},
                    "msg": "request handled " + "x" * rnd.randrange(40),
                    "samplerate": rnd.choice([1, 1, 10]),
                }
            )
        )
    chunk = ("\n".join(lines) + "\n").encode()
    count = 0
    with open(path, "wb") as fh:
        while fh.tell() < target_bytes:
            fh.write(chunk)
            count += len(lines)
    return count


def test_ingest_of_a_large_file_keeps_memory_bounded(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    lines = _write_big_jsonl(big, BIG_MB << 20)
    assert big.stat().st_size >= BIG_MB << 20
    proc = run_python(MEMORY_CHILD, str(tmp_path / "data"), str(big), timeout=600)
    result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    assert result["events"] == lines
    assert result["stored"] > lines  # weighted by samplerate
    peak = result["maxrss_kib"] * 1024
    assert peak < 1 << 30, f"peak RSS {peak / 2**20:.0f} MiB while ingesting {BIG_MB} MB"
