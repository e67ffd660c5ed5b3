"""profile-diff: shares, per-profile significance, FDR, paths and callees, the flame graph."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.cli import main
from rootsift.errors import QuerySpecError, UsageError

STACKS = {
    "main;serve;handle;parse": 0.20,
    "main;serve;handle;encode": 0.15,
    "main;serve;handle;store;write": 0.25,
    "main;serve;handle;store;fsync": 0.10,
    "main;gc;mark": 0.20,
    "main;gc;sweep": 0.10,
}


def write_profiles(
    folder: Path,
    seed: int,
    n: int,
    prefix: str,
    stacks: dict[str, float] = STACKS,
    samples: int = 3000,
    spread: float = 0.08,
) -> None:
    """``n`` folded CPU profiles of one build: each run's stack weights vary by ``spread``
    (log-normal, the run-to-run variation), then ``samples`` are drawn from them."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = list(stacks)
    base = np.array([stacks[s] for s in names])
    for i in range(n):
        weights = base * np.exp(rng.normal(0, spread, len(base)))
        counts = rng.multinomial(samples, weights / weights.sum())
        text = "".join(f"{s} {c}\n" for s, c in zip(names, counts, strict=True) if c)
        (folder / f"{prefix}{i}.folded").write_text(text)


def diff(rs: Rootsift, a: str, b: str, **kw: object) -> dict:
    return rs.profile_diff("cpu", a=a, b=b, **kw).as_dict()  # type: ignore[arg-type]


def test_a_slower_function_is_first_with_its_path(rs: Rootsift, tmp_path: Path) -> None:
    slower = {**STACKS, "main;serve;handle;store;fsync": 0.30}
    write_profiles(tmp_path / "a", 1, 4, "a")
    write_profiles(tmp_path / "b", 2, 4, "b", slower)
    rs.ingest(tmp_path / "a", "cpu", labels={"version": "1.0"})
    rs.ingest(tmp_path / "b", "cpu", labels={"version": "1.1"})
    out = diff(rs, 'version = "1.0"', 'version = "1.1"')
    top = out["findings"][0]
    assert out["method"] == "welch" and out["cohorts"]["a"]["profiles"] == 4
    assert top["kind"] == "function" and top["function"] == "fsync" and top["direction"] == "grew"
    assert top["basis"] == "self" and top["q_value"] < 0.05
    assert top["change_points"]["self"] == pytest.approx(100 * (0.30 / 1.2 - 0.10), abs=2.5)
    assert top["paths"][0]["path"] == "main;serve;handle;store;fsync"
    # its callers grew in total, not in self: listed after every self change
    bases = [f["basis"] for f in out["findings"]]
    assert bases == sorted(bases, key=lambda b: b != "self")
    store = next(f for f in out["findings"] if f["function"] == "store")
    assert store["basis"] == "total" and store["change_points"]["total"] > 0


def test_an_a_a_split_of_one_build_finds_nothing(tmp_path: Path) -> None:
    """Profiles of one build split at random into A and B: the FDR is 5 %, so at most a
    rare seed may call anything significant."""
    flagged = []
    for seed in range(20):
        folder = tmp_path / f"s{seed}"
        write_profiles(folder / "p", seed, 6, "p")
        with Rootsift(folder / "data") as rs:
            rs.ingest(folder / "p", "cpu", labels={"version": "1.0"})
            pick = np.random.default_rng(seed).permutation(6)
            names = lambda idx: ", ".join(f'"p{i}.folded"' for i in idx)  # noqa: E731
            out = diff(rs, f"profile in ({names(pick[:3])})", f"profile in ({names(pick[3:])})")
        assert out["method"] == "welch"
        if out["findings"]:
            flagged.append(seed)
    assert len(flagged) <= 1, flagged


def test_a_real_change_is_found_where_an_a_a_split_is_not(rs: Rootsift, tmp_path: Path) -> None:
    """The same design as the A/A test with a 3-point change: the test has the power to see it."""
    write_profiles(tmp_path / "a", 5, 3, "a")
    write_profiles(tmp_path / "b", 6, 3, "b", {**STACKS, "main;gc;sweep": 0.15})
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    out = diff(rs, 'v = "a"', 'v = "b"')
    assert out["findings"] and out["findings"][0]["function"] == "sweep"


def test_one_profile_per_cohort_falls_back_and_says_so(rs: Rootsift, tmp_path: Path) -> None:
    write_profiles(tmp_path / "a", 1, 1, "a")
    write_profiles(tmp_path / "b", 2, 1, "b", {**STACKS, "main;gc;mark": 0.40})
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    out = diff(rs, 'v = "a"', 'v = "b"')
    assert out["method"] == "binomial"
    assert any("run-to-run variation" in w for w in out["warnings"])
    assert out["findings"][0]["function"] == "mark"


def test_a_function_whose_callee_changed_names_it(rs: Rootsift, tmp_path: Path) -> None:
    slower = {**STACKS, "main;serve;handle;store;compress": 0.15}
    write_profiles(tmp_path / "a", 1, 5, "a")
    write_profiles(tmp_path / "b", 2, 5, "b", slower)
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    by = {f["function"]: f for f in diff(rs, 'v = "a"', 'v = "b"')["findings"]}
    assert by["store"]["new_callees"] == ["compress"] and by["store"]["vanished_callees"] == []


def test_new_and_vanished_callees_and_functions(rs: Rootsift, tmp_path: Path) -> None:
    new = {**{k: v for k, v in STACKS.items() if "fsync" not in k}, "main;serve;handle;store;compress": 0.10}
    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", new)
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    out = diff(rs, 'v = "a"', 'v = "b"')
    by = {f["function"]: f for f in out["findings"]}
    assert by["compress"]["status"] == "new" and by["fsync"]["status"] == "vanished"
    assert by["compress"]["paths"][0]["path"] == "main;serve;handle;store;compress"
    assert out["new_calls"][0] == {"caller": "store", "callee": "compress", "share": pytest.approx(0.1, abs=0.02)}
    assert [(c["caller"], c["callee"]) for c in out["vanished_calls"]] == [("store", "fsync")]


def test_focus_keeps_stacks_through_the_function_from_it_down(rs: Rootsift, tmp_path: Path) -> None:
    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", {**STACKS, "main;serve;handle;store;fsync": 0.30})
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    out = diff(rs, 'v = "a"', 'v = "b"', focus="store")
    fsync = next(f for f in out["findings"] if f["function"] == "fsync")
    # within store: fsync is 10/35 of A and 30/55 of B
    assert fsync["a"]["self_share"] == pytest.approx(10 / 35, abs=0.03)
    assert fsync["b"]["self_share"] == pytest.approx(30 / 55, abs=0.03)
    assert {f["function"] for f in out["findings"]} <= {"store", "write", "fsync"}
    assert all(p["path"].startswith("store") for f in out["findings"] for p in f["paths"])


def test_bad_requests_are_named(rs: Rootsift, tmp_path: Path) -> None:
    write_profiles(tmp_path / "a", 1, 1, "a")
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    (tmp_path / "e.jsonl").write_text('{"timestamp": "2024-01-01T00:00:00Z", "x": 1}\n')
    rs.ingest(tmp_path / "e.jsonl", "events")
    with pytest.raises(UsageError, match="--a and --b"):
        rs.profile_diff("cpu", a='v = "a"')
    with pytest.raises(QuerySpecError, match="no `stack` field"):
        rs.profile_diff("events", a="x = 1", b="x = 2")
    with pytest.raises(QuerySpecError, match="--value 'stack' is not a numeric field"):
        rs.profile_diff("cpu", a='v = "a"', b='v = "b"', value="stack")
    with pytest.raises(QuerySpecError, match="--type cpu"):
        rs.profile_diff("cpu", a='v = "a"', b='v = "b"', profile_type="cpu")
    empty = rs.profile_diff("cpu", a='v = "a"', b='v = "zzz"')
    assert not empty.findings and "cohort B has no stack samples" in empty.warnings[0]


def test_cli_json_table_and_report(rs: Rootsift, data_dir: Path, tmp_path: Path) -> None:
    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", {**STACKS, "main;serve;handle;store;fsync": 0.30})
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    rs.close()
    args = ["profile-diff", "cpu", "--a", 'v = "a"', "--b", 'v = "b"', "--data", str(data_dir)]
    run = CliRunner().invoke(main, [*args, "--json", "--report", str(tmp_path / "d.html")])
    assert run.exit_code == 0, run.output
    out = json.loads(run.stdout)
    assert out["findings"][0]["function"] == "fsync" and out["report"] == str(tmp_path / "d.html")
    page = (tmp_path / "d.html").read_text()
    assert "<svg" in page and "fsync" in page and "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "src=" not in page and "<link" not in page  # self-contained
    table = CliRunner().invoke(main, args)
    assert table.exit_code == 0 and "fsync" in table.stdout and "Δ self" in table.stdout
    bad = CliRunner().invoke(main, ["profile-diff", "cpu", "--a", 'v = "a"', "--data", str(data_dir), "--json"])
    assert bad.exit_code == 2 and "--a and --b" in json.loads(bad.stdout)["error"]["message"]


def test_flame_graph_colours_growth_red_and_shrinkage_blue(rs: Rootsift, tmp_path: Path) -> None:
    from rootsift.ui import flamegraph

    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", {**STACKS, "main;serve;handle;store;fsync": 0.40})
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    page = flamegraph.render(rs.profile_diff("cpu", a='v = "a"', b='v = "b"'), "test")

    def fill(name: str) -> tuple[int, ...]:
        at = page.index(f'data-n="{name}"')
        colour = page[page.index('fill="rgb(', at) + 10 : page.index(')"', page.index('fill="rgb(', at))]
        return tuple(int(c) for c in colour.split(","))

    grew, shrank = fill("fsync"), fill("mark")
    assert grew[0] > grew[2] and shrank[2] > shrank[0]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.mark.skipif(chromium() is None, reason="no chromium to render the page (apt-get install -y chromium)")
def test_flame_graph_renders_in_headless_chromium(rs: Rootsift, tmp_path: Path) -> None:
    from rootsift.ui import flamegraph

    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", {**STACKS, "main;serve;handle;store;fsync": 0.40})
    rs.ingest(tmp_path / "a", "cpu", labels={"v": "a"})
    rs.ingest(tmp_path / "b", "cpu", labels={"v": "b"})
    html = tmp_path / "diff.html"
    html.write_text(flamegraph.render(rs.profile_diff("cpu", a='v = "a"', b='v = "b"'), "test"))
    shot = tmp_path / "shot.png"
    browser = [str(chromium()), "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1250,500"]
    subprocess.run([*browser, f"--screenshot={shot}", html.as_uri()], capture_output=True, timeout=120, check=False)
    if not shot.exists():
        pytest.skip("chromium ran but wrote no screenshot (no display support here)")
    pixels = [p for row in _png_rows(shot.read_bytes()) for p in row]
    reds = sum(1 for r, g, b in pixels if r > 180 and g < 90 and b < 90)
    blues = sum(1 for r, g, b in pixels if b > 160 and r < 120)
    assert reds > 500 and blues > 500  # grown and shrunk frames drawn, not a blank page
    # a click on fsync (it grew: red) zooms to it: some row of the graph is red almost across
    click = (
        "<script>addEventListener('load', () => document.querySelector('g.f[data-n=\"fsync\"]')"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true})));</script></body>"
    )
    zoomed = tmp_path / "zoomed.html"
    zoomed.write_text(html.read_text().replace("</body>", click))
    subprocess.run([*browser, f"--screenshot={shot}", zoomed.as_uri()], capture_output=True, timeout=120, check=False)
    widest = max(
        sum(1 for r, g, b in row if r > 180 and g < 90 and b < 90) / len(row) for row in _png_rows(shot.read_bytes())
    )
    assert widest > 0.9


def _png_rows(data: bytes) -> list[list[tuple[int, int, int]]]:
    """Rows of RGB pixels of an 8-bit RGB or RGBA PNG (what chromium writes): every 4th pixel
    of every 4th row."""
    import struct
    import zlib

    pos, chunks, header = 8, b"", b""
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + size]
        header = body if kind == b"IHDR" else header
        chunks += body if kind == b"IDAT" else b""
        pos += size + 12
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(chunks), width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return [[tuple(rows[y][x * bpp : x * bpp + 3]) for x in range(0, width, 4)] for y in range(0, height, 4)]  # type: ignore[misc]


def test_compare_attaches_the_profile_diff_on_a_regression(rs: Rootsift, data_dir: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    lines = [
        json.dumps({"timestamp": 1_700_000_000 + i, "version": v, "duration_ms": float(rng.lognormal(3, 0.3)) * k})
        for i in range(4000)
        for v, k in ((("1.0", 1.0),) if i % 2 else (("1.1", 1.6),))
    ]
    (tmp_path / "req.jsonl").write_text("\n".join(lines) + "\n")
    rs.ingest(tmp_path / "req.jsonl", "req")
    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", {**STACKS, "main;serve;handle;store;fsync": 0.30})
    rs.ingest(tmp_path / "a", "cpu", labels={"version": "1.0"})
    rs.ingest(tmp_path / "b", "cpu", labels={"version": "1.1"})
    rs.close()
    base = ["compare", "req", "--a", 'version = "1.0"', "--b", 'version = "1.1"', "--data", str(data_dir)]
    run = CliRunner().invoke(main, [*base, "--profiles", "cpu", "--json"])
    out = json.loads(run.stdout)
    assert out["verdict"] == "regression" and out["profile_diff"]["findings"][0]["function"] == "fsync"
    same = CliRunner().invoke(main, [*base[:4], "--b", 'version = "1.0"', *base[6:], "--profiles", "cpu", "--json"])
    assert json.loads(same.stdout)["profile_diff"] is None  # A against A: no regression, no diff
    table = CliRunner().invoke(main, [*base, "--profiles", "cpu"])
    assert "profile-diff of cpu" in table.stdout and "fsync" in table.stdout
    bad = CliRunner().invoke(main, [*base, "--profiles", "req", "--json"])
    assert bad.exit_code == 2 and "--profiles req" in json.loads(bad.stdout)["error"]["message"]


def test_canary_attaches_the_profile_diff_at_the_look_that_regresses(
    rs: Rootsift, data_dir: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(4)
    t0 = 1_700_000_000
    lines = [
        json.dumps({"timestamp": t0 + i, "version": v, "duration_ms": float(rng.lognormal(3, 0.3)) * k})
        for i in range(3600)
        for v, k in ((("1.0", 1.0),) if i % 2 else (("1.1", 1.8),))
    ]
    (tmp_path / "req.jsonl").write_text("\n".join(lines) + "\n")
    rs.ingest(tmp_path / "req.jsonl", "req")
    write_profiles(tmp_path / "a", 1, 3, "a")
    write_profiles(tmp_path / "b", 2, 3, "b", {**STACKS, "main;serve;handle;store;fsync": 0.30})
    for i, path in enumerate(sorted((tmp_path / "a").iterdir()) + sorted((tmp_path / "b").iterdir())):
        os.utime(path, (t0 + 60 + i, t0 + 60 + i))  # profiles taken early in the watch
    rs.ingest(tmp_path / "a", "cpu", labels={"version": "1.0"})
    rs.ingest(tmp_path / "b", "cpu", labels={"version": "1.1"})
    rs.close()
    run = CliRunner().invoke(
        main,
        ["canary", "req", "--baseline", 'version = "1.0"', "--canary", 'version = "1.1"', "--from", str(t0)]
        + ["--every", "10m", "--for", "60m", "--replay", "--profiles", "cpu", "--data", str(data_dir), "--json"],
    )
    looks = [json.loads(line) for line in run.stdout.splitlines()]
    assert run.exit_code == 1 and looks[-1]["profile_diff"]["findings"][0]["function"] == "fsync"
    assert all(look["profile_diff"] is None for look in looks[:-1])
