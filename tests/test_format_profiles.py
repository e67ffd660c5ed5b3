"""Profile formats: pprof (the corpus's real profiles and a Go program built and run here),
perf script and speedscope; every profile format takes --label."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.formats import check_golden, golden_cases
from rootsift import Rootsift
from rootsift.ingest.formats import get
from rootsift.ingest.formats.base import FormatOptions
from rootsift.ingest.sniff import sniff_head

CORPUS = Path("/work/shared/corpora/profiles")
PPROF = CORPUS / "google_pprof"
LARGE = PPROF / "internal/proftest/testdata/large.cpu"
needs_corpus = pytest.mark.skipif(not LARGE.exists(), reason="the shared profile corpus is not on this machine")


def rows(rs: Rootsift, sql: str) -> list[tuple]:
    return rs.backend.execute_sql(sql, []).rows


@needs_corpus
def test_a_real_go_cpu_profile_gzipped_or_not(rs: Rootsift, tmp_path: Path) -> None:
    raw = tmp_path / "large.pb"
    raw.write_bytes(gzip.decompress(LARGE.read_bytes()))
    for source, dataset in ((LARGE, "gz"), (raw, "plain")):
        summary = rs.ingest(source, dataset, labels={"version": "1.19"})
        assert summary.format == "pprof" and summary.rejects == 0 and summary.events == 20430
    rel = rs.backend.relation_text("gz", None, None)
    ((n, samples, cpu_ms, kinds, types, first, dur, version),) = rows(
        rs,
        f"SELECT count(*), sum(samples), sum(cpu_ms), string_agg(DISTINCT sample_type), "
        f"string_agg(DISTINCT profile_type), min(timestamp), min(profile_duration_ms), min(version) FROM {rel}",
    )
    assert kinds == "samples" and types == "cpu" and version == "1.19"
    assert cpu_ms == pytest.approx(samples * 10, rel=0.01)  # 100 Hz: 10 ms a sample
    assert str(first).startswith("2022-10-18") and dur == pytest.approx(240359.136, abs=0.01)
    ((stack, function, root),) = rows(
        rs, f"SELECT stack, function, root FROM {rel} ORDER BY samples DESC, stack LIMIT 1"
    )
    assert stack.split(";")[-1] == function and stack.split(";")[0] == root and ";" in stack
    plain = rs.backend.relation_text("plain", None, None)
    assert rows(rs, f"SELECT sum(samples) FROM {plain}") == [(samples,)]


@needs_corpus
def test_pprof_is_sniffed_by_content_and_other_bytes_are_not() -> None:
    data = gzip.decompress(LARGE.read_bytes())
    assert sniff_head(data[: 64 << 10], "whatever.bin") == "pprof"
    sample = (PPROF / "internal/report/testdata/sample.cpu").read_bytes()
    assert sniff_head(gzip.decompress(sample), "sample.cpu") == "pprof"
    text = b"2024-01-01 12:00:00 level=info msg=hello\n" * 20
    assert sniff_head(text, "app.log") != "pprof"


def test_a_damaged_profile_is_a_counted_reject(rs: Rootsift, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pprof"
    bad.write_bytes(b"\x0a\x04\x08\x01\x10\x02\x12\xff\xff\xff\x0f\x01")  # a sample longer than the file
    summary = rs.ingest(bad, "p", format="pprof")
    assert summary.events == 0 and summary.rejects == 1
    assert "not a readable pprof profile" in str(summary.first_rejects[0])


def test_inlined_frames_labels_mappings_and_units() -> None:
    """A profile built with the protobuf module: a location with an inlined call, a numeric
    and a text label, a mapping without symbols, heap sample types."""
    from rootsift.ingest.formats.pprof_pb import profile_pb2 as pb

    strings = ["", "alloc_objects", "count", "alloc_space", "bytes", "inuse_space", "main", "helper", "inlined",
               "/usr/bin/app", "handler", "write", "size", "space"]  # fmt: skip
    prof = pb.Profile(string_table=strings, time_nanos=1_700_000_000 * 10**9, default_sample_type=5)
    prof.sample_type.extend([pb.ValueType(type=1, unit=2), pb.ValueType(type=3, unit=4), pb.ValueType(type=5, unit=4)])
    prof.period_type.CopyFrom(pb.ValueType(type=13, unit=4))
    prof.mapping.add(id=1, memory_start=0x1000, filename=9)
    prof.function.add(id=1, name=6)
    prof.function.add(id=2, name=7)
    prof.function.add(id=3, name=8)
    prof.location.add(id=1, mapping_id=1, line=[pb.Line(function_id=1)])
    prof.location.add(id=2, mapping_id=1, line=[pb.Line(function_id=3), pb.Line(function_id=2)])  # inlined into helper
    prof.location.add(id=3, mapping_id=1, address=0x1234)  # no symbol
    prof.sample.add(
        location_id=[2, 1], value=[3, 300, 100], label=[pb.Label(key=10, str=11), pb.Label(key=12, num=64, num_unit=4)]
    )
    prof.sample.add(location_id=[3, 1], value=[1, 10, 0])
    fmt = get("pprof")(FormatOptions(source="/x/heap.pb", labels={"version": "2"}))
    import io

    items = list(fmt.read(io.BytesIO(prof.SerializeToString())))
    (n1, e1), (n2, e2) = items
    assert (n1, n2) == (1, 1)  # a binary file has no lines
    assert e1["stack"] == "main;helper;inlined" and e1["function"] == "inlined" and e1["module"] == "app"
    assert e1["alloc_objects"] == 3 and e1["alloc_space_bytes"] == 300 and e1["inuse_space_bytes"] == 100
    assert e1["sample_type"] == "inuse_space_bytes" and e1["profile_type"] == "heap"
    assert e1["label.handler"] == "write" and e1["label.size_bytes"] == 64
    assert e2["stack"] == "main;app+0x1234" and e1["profile"] == "heap.pb"
    assert e1["timestamp"].year == 2023


# -- a real Go program, two builds -----------------------------------------------------------

GO_PROGRAM = Path(__file__).parent / "helpers" / "slowfn.go"


def go_build(out: Path, factor: int) -> Path:
    src = out / "src"
    src.mkdir(parents=True, exist_ok=True)
    shutil.copy(GO_PROGRAM, src / "main.go")
    (src / "go.mod").write_text("module rootsift.test/slowfn\n\ngo 1.21\n")
    binary = out / f"build{factor}" / "slowfn"  # one name for both builds: perf's stacks start with it
    env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
    subprocess.run(["go", "build", "-ldflags", f"-X main.factor={factor}", "-o", str(binary), "."],
                   cwd=src, check=True, capture_output=True, env=env, timeout=300)  # fmt: skip
    return binary


@pytest.fixture(scope="module")
def go_profiles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five runs of each build: build ``b`` has ``main.compact`` made four times slower."""
    if shutil.which("go") is None:
        pytest.skip("go is not installed: the real-program pprof test needs it")
    root = tmp_path_factory.mktemp("go")
    for build, factor in (("a", 1), ("b", 4)):
        binary = go_build(root, factor)
        for i in range(5):
            run = root / build / f"run{i}"
            run.mkdir(parents=True)
            files = [str(run / f"{kind}.pprof") for kind in ("cpu", "heap", "goroutine")]
            # no asynchronous preemption: its handler would take the samples of the loops it interrupts
            env = {**os.environ, "GODEBUG": "asyncpreemptoff=1"}
            subprocess.run([str(binary), *files], check=True, capture_output=True, timeout=120, env=env)
    return root


@pytest.fixture(scope="module")
def perf_scripts(go_profiles: Path) -> Path:
    """``perf record -g`` of three runs of each build, written out by ``perf script``."""
    if shutil.which("perf") is None:
        pytest.skip("perf is not installed")
    out = go_profiles / "perf"
    for build, factor in (("a", 1), ("b", 4)):
        for i in range(3):
            data, run = out / f"{build}{i}.data", out / f"{build}{i}"
            run.mkdir(parents=True)
            files = [str(run / f"{kind}.pprof") for kind in ("cpu", "heap", "goroutine")]
            binary = go_profiles / f"build{factor}" / "slowfn"
            env = {**os.environ, "GODEBUG": "asyncpreemptoff=1"}
            record = ["perf", "record", "-F", "499", "-g", "-o", str(data), "--", str(binary), *files]
            done = subprocess.run(record, capture_output=True, timeout=120, env=env, check=False)
            if done.returncode != 0 or not data.exists():
                pytest.skip(f"perf record does not work here: {done.stderr.decode(errors='replace')[-300:]}")
            script = subprocess.run(["perf", "script", "-i", str(data)], capture_output=True, timeout=120, check=False)
            if script.returncode != 0:
                pytest.skip(f"perf script failed: {script.stderr.decode(errors='replace')[-300:]}")
            (out / f"{build}{i}.txt").write_bytes(script.stdout)
    return out


def test_perf_script_of_a_go_program_made_slower(perf_scripts: Path, rs: Rootsift) -> None:
    for build in ("a", "b"):
        for i in range(3):
            summary = rs.ingest(perf_scripts / f"{build}{i}.txt", "perf", labels={"build": build})
            assert summary.format == "perf-script" and summary.rejects == 0
    out = rs.profile_diff("perf", a='build = "a"', b='build = "b"', where='comm = "slowfn"').as_dict()
    seen = [(f["function"], f["excess_points"], f["q_value"]) for f in out["findings"][:4]]
    assert out["method"] == "welch" and out["findings"][0]["function"] == "main.compact", seen


def test_a_go_program_made_slower_shows_its_function_first(go_profiles: Path, rs: Rootsift) -> None:
    for build in ("a", "b"):
        for i in range(5):
            run = go_profiles / build / f"run{i}"
            summary = rs.ingest(run / "cpu.pprof", "go", labels={"build": build, "host": f"run{i}"})
            assert summary.format == "pprof" and summary.rejects == 0
    out = rs.profile_diff("go", a='build = "a"', b='build = "b"', profile_type="cpu").as_dict()
    assert out["method"] == "welch" and out["cohorts"]["a"]["profiles"] == 5
    seen = [(f["function"], f["change_points"], f["q_value"]) for f in out["findings"][:4]]
    top = out["findings"][0]
    assert top["function"] == "main.compact" and top["direction"] == "grew" and top["q_value"] < 0.05, seen
    rel = rs.backend.relation_text("go", None, None)
    assert ("write",) in rows(rs, f'SELECT DISTINCT "label.handler" FROM {rel}')  # samples under pprof.Do


def test_go_heap_and_goroutine_profiles(go_profiles: Path, rs: Rootsift) -> None:
    run = go_profiles / "a" / "run0"
    for name in ("heap", "goroutine"):
        assert rs.ingest(run / f"{name}.pprof", "mem", labels={"build": "a"}).rejects == 0
    rel = rs.backend.relation_text("mem", None, None)
    kinds = dict(rows(rs, f"SELECT profile_type, min(sample_type) FROM {rel} GROUP BY 1"))
    assert kinds == {"heap": "inuse_space_bytes", "goroutine": "goroutine"}
    assert rows(rs, f"SELECT sum(alloc_space_bytes) > 0 FROM {rel} WHERE profile_type = 'heap'") == [(True,)]


# -- golden files ------------------------------------------------------------------------------


@pytest.mark.parametrize("expected", golden_cases("profiles"), ids=lambda p: p.name.removesuffix(".expected.json"))
def test_golden(expected: Path) -> None:
    check_golden(expected)


@needs_corpus
@pytest.mark.parametrize(
    ("path", "fmt", "events"),
    [
        ("google_pprof/internal/report/testdata/sample.cpu", "pprof", 76),
        ("flamegraph/test/perf-cycles-instructions-01.txt", "perf-script", 444),
        ("flamegraph/test/perf-java-stacks-02.txt", "perf-script", 2),
        ("flamegraph/test/perf-funcab-pid-01.txt", "perf-script", 228),
        ("speedscope/sample/profiles/linux-perf/system-wide.linux-perf.txt", "perf-script", 556),
    ],
)
def test_real_profiles_are_sniffed_and_read(path: str, fmt: str, events: int, rs: Rootsift) -> None:
    """Inputs rootsift used to refuse ("it looks like a pprof profile / perf script output")."""
    summary = rs.ingest(CORPUS / path, "p", labels={"host": "h1"})
    assert (summary.format, summary.events, summary.rejects) == (fmt, events, 0)
    rel = rs.backend.relation_text("p", None, None)
    assert rows(rs, f"SELECT DISTINCT host FROM {rel}") == [("h1",)]


@needs_corpus
@pytest.mark.parametrize(
    "name", ["dd-stacks-01", "funcab-cmd-01", "iperf-stacks-pidtid-01", "rust-Yamakaky-dcpu", "mirageos-stacks-01"]
)
def test_perf_stacks_fold_as_stackcollapse_perf_does(name: str) -> None:
    """Every stack of stackcollapse-perf.pl's expected output (its kernel/JIT annotations
    taken off) is one of ours."""
    import re

    from helpers.formats import parse

    base = CORPUS / "flamegraph/test"
    events, rejects = parse("perf-script", (base / f"perf-{name}.txt").read_bytes())
    ours = {ev["stack"] for _, ev in events}
    truth = (base / "results" / f"perf-{name}-collapsed-all.txt").read_text().splitlines()
    stacks = {re.sub(r"_\[[kji]\]", "", line.rsplit(" ", 1)[0]) for line in truth if line.strip()}
    assert not rejects and stacks <= ours


# -- Python through py-spy -----------------------------------------------------------------------

PY_PROGRAM = """
import sys, time
def parse(n):
    return sum(i * i for i in range(n))
def render(n):
    return sum(i % 7 for i in range(n * FACTOR))
end = time.time() + 1.2
while time.time() < end:
    parse(20000)
    render(20000)
"""


def _py_spy() -> str | None:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return found if Path(found).exists() else None


@pytest.mark.skipif(_py_spy() is None, reason="py-spy is not installed (pip install py-spy)")
def test_py_spy_speedscope_of_a_python_program_made_slower(rs: Rootsift, tmp_path: Path) -> None:
    """Two versions of a script, ``render`` four times slower in the second, five py-spy
    runs of each (``--format speedscope``): render's work is first."""
    for version, factor in (("1", 1), ("2", 4)):
        script = tmp_path / version / "app.py"
        script.parent.mkdir()
        script.write_text(PY_PROGRAM.replace("FACTOR", str(factor)))
        for i in range(5):
            out = tmp_path / version / f"run{i}.json"
            record = [str(_py_spy()), "record", "--format", "speedscope", "--rate", "200", "-o", str(out)]
            done = subprocess.run([*record, "--", sys.executable, str(script)], capture_output=True, timeout=120)
            if done.returncode != 0 or not out.exists():
                pytest.skip(f"py-spy cannot sample here: {done.stderr.decode(errors='replace')[-300:]}")
            summary = rs.ingest(out, "py", labels={"version": version})
            assert summary.format == "speedscope" and summary.rejects == 0
    result = rs.profile_diff("py", a='version = "1"', b='version = "2"').as_dict()
    seen = [(f["function"], f["excess_points"], f["q_value"]) for f in result["findings"][:4]]
    assert result["method"] == "welch" and result["findings"][0]["function"].startswith("render"), seen
