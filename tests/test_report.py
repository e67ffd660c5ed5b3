"""investigate's HTML report, opened in headless Chromium: it loads with no console
errors and no network, shows the heatmap with the region marked, a chart per top
finding, and the command behind each number."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.sources import need
from rootsift import Rootsift
from rootsift.cli import main
from test_explain import write_events
from test_investigate import at, requests


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    rows = requests(7, minutes=60)
    for row in rows:  # from minute 20 to 35, endpoint /d on host h3 is slow
        if 1200 <= at(row) < 2100 and row["endpoint"] == "/d":
            row["duration_ms"] *= 25
    with Rootsift(tmp / "data") as rs:
        rs.ingest(write_events(tmp / "r.jsonl", rows), "api")
    out = tmp / "report.html"
    run = CliRunner().invoke(main, ["investigate", "api", "--data", str(tmp / "data"), "--report", str(out)])
    assert run.exit_code == 0, run.output
    assert "report written to" in run.output
    return out


def test_report_is_self_contained(report: Path) -> None:
    text = report.read_text()
    assert text.startswith("<!doctype html>")
    assert not re.search(r"""(src|href)=["']?https?:""", text), "the report must not load anything from the network"
    assert "<script" not in text
    assert text.count('class="cell"') > 100 and text.count('class="region"') == 1
    charts = text.count("<div class=finding>")
    assert charts >= 1 and text.count('class="bar"') >= 2 * charts  # selection and baseline, per finding
    assert "rootsift explain api --select" in text and "endpoint = /d" in text


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_opens_in_chromium(report: Path, tmp_path: Path) -> None:
    browser = chromium()
    need(browser is not None, "chromium")
    assert browser is not None
    base = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ]
    dom = subprocess.run([*base, "--dump-dom", report.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [], console
    assert dom.stdout.count('class="cell"') > 100 and 'class="region"' in dom.stdout  # rendered, not just sent
    shot = tmp_path / "report.png"
    run = subprocess.run(
        [*base, "--window-size=1200,1400", f"--screenshot={shot}", report.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 50_000  # a page with a drawn heatmap, not a blank one


@pytest.mark.parametrize(("p", "shown"), [(0.0, "< 1e-300"), (3.14e-7, "3.1e-07"), (0.05, "0.05"), (None, "∅")])
def test_probabilities_that_underflowed_are_not_printed_as_zero(p: float | None, shown: str) -> None:
    from rootsift.ui.findings import p_at_most
    from rootsift.ui.terminal import prob

    assert prob(p) == shown
    if p is not None:
        assert p_at_most(p) == ("p < 1e-300" if p == 0 else f"p ≤ {shown}")
