"""The web page in a real headless Chromium (DevTools protocol): every view loads without
console errors, a box dragged on the heatmap is explained, a permalink reloads the same
state. Screenshots of each view go to the test's folder (tests look at their numbers;
people look at the pictures)."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers.cdp import Browser, chromium
from helpers.server import Server, start, stop
from rootsift import Rootsift

if chromium() is None and os.environ.get("ROOTSIFT_REQUIRE_SOURCES") == "1":  # scripts/test.sh: no skipping
    raise RuntimeError("no chromium on PATH: scripts/sources/install.sh installs it")
pytestmark = pytest.mark.skipif(chromium() is None, reason="no chromium (scripts/sources/install.sh installs it)")

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def events(path: Path) -> None:
    """30 minutes of requests; from minute 12 to 18, host web-3's are 40x slower."""
    rng = random.Random(5)
    with path.open("w") as f:
        for i in range(24_000):
            t = T0 + timedelta(seconds=i * 0.075)
            host = f"web-{rng.randrange(1, 6)}"
            slow = host == "web-3" and 12 <= (t - T0).total_seconds() / 60 < 18
            ms = rng.lognormvariate(3, 0.4) * (40 if slow else 1)
            row = {"timestamp": t.isoformat(), "host": host, "endpoint": rng.choice(["/cart", "/pay", "/home"]),
                   "version": "1.4" if i % 2 else "1.5", "duration_ms": round(ms, 2)}  # fmt: skip
            f.write(json.dumps(row) + "\n")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("web")
    events(root / "api.jsonl")
    with Rootsift(root / "data") as rs:
        rs.ingest(root / "api.jsonl", "api")
        for version, slow in (("1.0", 10), ("1.1", 60)):  # one function takes 6x the samples in 1.1
            folded = root / f"cpu-{version}.folded"
            folded.write_text(f"main;serve;parse 100\nmain;serve;encode {slow}\nmain;gc 40\n")
            rs.ingest(folded, "cpu", format="folded", labels={"version": version})
    server = start(root / "data")
    yield server
    assert stop(server) == 0


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    yield b
    b.close()


VIEWS = [
    ("datasets", "view=datasets&dataset=api", "document.querySelectorAll('table').length >= 2"),
    ("query", "view=query&dataset=api&c=count&c=p99(duration_ms)&b=host&g=1m", "document.querySelector('.uplot') && document.querySelector('table')"),
    ("heatmap", "view=heatmap&dataset=api", "document.querySelector('.heat-wrap canvas')"),
    ("investigate", "view=investigate&dataset=api&run=1", "document.querySelectorAll('.findings li').length > 0"),
    ("trends", "view=trends&dataset=api&run=1&measure=avg(duration_ms)", "document.querySelector('table')"),
    ("changes", "view=changes&dataset=api&run=1&measure=p50(duration_ms)&by=host", "document.querySelector('.uplot') && document.querySelector('table')"),
    ("profiles", "view=profiles&dataset=cpu&a=version%20%3D%20%221.0%22&bb=version%20%3D%20%221.1%22", "document.querySelector('table') && document.querySelector('iframe')"),
    ("compare", "view=compare&dataset=api&a=version%20%3D%20%221.4%22&bb=version%20%3D%20%221.5%22", "document.querySelector('.verdict-no\\\\ change, .verdict-regression, .verdict-improvement, td span')"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "query", "drawn"), VIEWS, ids=[v[0] for v in VIEWS])
def test_every_view_loads_without_console_errors(
    served: Server, browser: Browser, tmp_path: Path, name: str, query: str, drawn: str
) -> None:
    browser.errors.clear()
    browser.goto(f"{served.url}/?{query}")
    browser.wait(drawn)
    assert browser.eval("document.querySelector('.status.error') === null"), browser.eval("document.body.innerText")
    assert browser.errors == []
    cli = browser.eval("document.getElementById('cli').textContent")
    shown = "cpu" if name == "profiles" else "api"
    assert cli.startswith("rootsift ") and f" {shown}" in cli
    link = browser.eval("document.getElementById('json-link').getAttribute('href')")
    assert link.startswith("/api/")
    browser.screenshot(tmp_path / f"{name}.png")


def test_a_box_dragged_on_the_heatmap_is_explained_and_its_permalink_reloads(
    served: Server, browser: Browser, tmp_path: Path
) -> None:
    browser.errors.clear()
    browser.goto(f"{served.url}/?view=heatmap&dataset=api")
    browser.wait("document.querySelector('.heat-wrap canvas')")
    box = browser.eval(
        "(() => { const c = document.querySelector('.heat-wrap canvas'); const r = c.getBoundingClientRect();"
        " return {left: r.left, top: r.top, width: r.width, plot: JSON.parse(c.dataset.plot)}; })()"
    )
    scale = box["width"] / box["plot"]["canvas"]  # CSS pixels per canvas pixel
    left, width = box["left"] + box["plot"]["left"] * scale, box["plot"]["width"] * scale
    top, height = box["top"] + box["plot"]["top"] * scale, box["plot"]["height"] * scale
    # the slow band: minutes 12-18 of 30, values far above the usual ~20 ms (the plot's top half)
    x0, x1 = left + width * 12.3 / 30, left + width * 17.7 / 30
    browser.drag(x0, top + 2, x1, top + height * 0.4)
    browser.wait("document.querySelectorAll('.findings li').length > 0")
    first = browser.eval("document.querySelector('.findings li .what').textContent")
    assert 'host = "web-3"' in first
    url = browser.eval("location.href")
    assert "sf=" in url and "lo=" in url
    browser.screenshot(tmp_path / "heatmap-explained.png")
    findings = browser.eval("document.querySelector('.findings').innerText")

    again = Browser()
    try:
        again.goto(url)
        again.wait("document.querySelectorAll('.findings li').length > 0")
        assert again.eval("document.querySelector('.findings').innerText") == findings
        assert again.errors == []
    finally:
        again.close()
    # a finding becomes a filter: the state (and so the URL) carries it
    browser.eval("document.querySelector('.findings li .what button').click()")
    browser.wait("new URLSearchParams(location.search).get('where')")
    assert 'host = "web-3"' in browser.eval("new URLSearchParams(location.search).get('where')")
    assert browser.errors == []
