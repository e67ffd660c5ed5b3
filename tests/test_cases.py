"""Case tests: the five reference incidents × five seeds; each analysis must put the
ground truth first. The checks live in ``rootsift.scenarios.checks`` (``bench/first_finding.py``
applies the same ones over fresh seeds).

Two kinds of case:
- **asked**: a command line from the scenario's own manifest (``Manifest.analyses``):
  what a user would run without knowing the answer, and what ``rootsift demo`` shows;
- **drawn**: a hand-drawn selection (a time box, a predicate) as an engineer would draw
  it on the heatmap; the box comes from the truth, the answer must still come out first.

Each runs the CLI with ``--json`` and reads the contract of docs/cli.md and the brief:
``findings`` most explanatory first, each naming its ``field``/``value`` (or
``conditions``, ``event``, ``function``), ``anomaly`` for investigate, ``metrics`` with
a ``verdict`` each for compare. A case whose command does not exist yet is a **strict
xfail**: it fails for that reason alone (the command is checked before any data is
made) and it stops being expected to fail the moment the command lands.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from rootsift import Rootsift, scenarios
from rootsift.cli import main
from rootsift.query.filters import parse_filter
from rootsift.scenarios.base import TRUTH_DIR, TRUTH_FILE, Manifest
from rootsift.scenarios.checks import (
    Result,
    Truth,
    cascade_latency,
    cascade_stall,
    cascade_stampede,
    cascade_wait,
    cascade_window,
    consul_changepoint,
    consul_culprit,
    gateway_box,
    gateway_slow,
    gateway_upstream,
    memleak_compare,
    memleak_trends,
    upgrade_latency,
    upgrade_memory,
    upgrade_profile,
)

SEEDS = [1, 2, 3, 4, 5]


@dataclass(frozen=True)
class Case:
    name: str
    scenario: str
    command: str
    dataset: str
    check: Callable[[Result, Truth], None]
    drawn: Callable[[Truth], list[str]] | None = None
    """The hand-drawn arguments (from the truth); None: the manifest's own command line."""

    def argv(self, manifest: Manifest, truth: Truth) -> list[str]:
        """The command line the case runs (without ``--data`` and ``--json``)."""
        if self.drawn is None:
            (argv,) = [a for a in manifest.analyses if a[:2] == [self.command, self.dataset]]
            return list(argv)
        return [self.command, self.dataset, *self.drawn(truth)]


CASES = [
    Case("cascade-api-latency", "cascade", "investigate", "cascade_api", cascade_latency),
    Case("cascade-mysql-stall", "cascade", "investigate", "cascade_mysql", cascade_stall),
    Case("cascade-window-wait", "cascade", "explain", "cascade_api", cascade_wait, cascade_window),
    Case("cascade-window-stampede", "cascade", "explain", "cascade_mysql", cascade_stampede, cascade_window),
    Case("gateway-investigate", "gateway", "investigate", "gateway_access", gateway_slow),
    Case("gateway-slow-box", "gateway", "explain", "gateway_access", gateway_upstream, gateway_box),
    Case("memleak-trends", "memleak", "trends", "memleak_hosts", memleak_trends),
    Case("memleak-kernels", "memleak", "compare", "memleak_hosts", memleak_compare),
    Case("consul-changepoint", "consul", "investigate", "consul_kv_requests", consul_changepoint),
    Case("consul-culprit", "consul", "changes", "consul_kv_requests", consul_culprit),
    Case("upgrade-latency", "upgrade", "compare", "upgrade_requests", upgrade_latency),
    Case("upgrade-memory", "upgrade", "compare", "upgrade_hosts", upgrade_memory),
    Case("upgrade-profile", "upgrade", "profile-diff", "upgrade_profiles", upgrade_profile),
]


KNOWN: dict[tuple[str, int], str] = {}
"""Cases whose command exists but does not yet find the truth: strict xfail with the reason."""


def _param(case: Case, seed: int) -> Any:
    missing = case.command not in main.commands
    known = KNOWN.get((case.name, seed))
    reason = f"rootsift {case.command} does not exist yet" if missing else known
    mark = pytest.mark.xfail(missing or known is not None, reason=reason or "", strict=True)
    return pytest.param(case, seed, id=f"{case.name}-{seed}", marks=mark)


Made = tuple[Path, Manifest, Truth]


@pytest.fixture(scope="session")
def made(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, int], Made]:
    """Scenario × seed generated and ingested once per session: (data dir, manifest, truth)."""
    cache: dict[tuple[str, int], Made] = {}

    def get(name: str, seed: int) -> Made:
        if (name, seed) not in cache:
            root = tmp_path_factory.mktemp(f"{name}-{seed}")
            manifest = scenarios.generate(name, root / "out", seed)
            with Rootsift(root / "data") as rs:
                for summary in scenarios.ingest(rs, root / "out"):
                    assert summary.rejects == 0, summary.first_rejects
            truth = json.loads((root / "out" / TRUTH_DIR / TRUTH_FILE).read_text())
            cache[(name, seed)] = (root / "data", manifest, truth)
        return cache[(name, seed)]

    return get


@pytest.mark.parametrize(("case", "seed"), [_param(c, s) for c in CASES for s in SEEDS])
def test_case(case: Case, seed: int, made: Callable[[str, int], Made]) -> None:
    assert case.command in main.commands, f"rootsift {case.command} does not exist yet"
    data, manifest, truth = made(case.scenario, seed)
    run = CliRunner().invoke(main, [*case.argv(manifest, truth), "--data", str(data), "--json"])
    assert run.exit_code in (0, 1), run.output
    case.check(json.loads(run.stdout), truth)


@pytest.mark.parametrize("name", ["cascade", "consul", "gateway", "memleak", "upgrade"])
def test_every_case_and_manifest_analysis_agree(name: str, tmp_path: Path) -> None:
    """Each command line a manifest asks for names its own datasets and filters that parse,
    and has a case checking it; each asked case has its command line."""
    manifest = scenarios.generate(name, tmp_path / name, seed=1)
    datasets = {s.dataset for s in manifest.sources}
    asked = {(c.command, c.dataset) for c in CASES if c.scenario == name and c.drawn is None}
    assert {(a[0], a[1]) for a in manifest.analyses} == asked
    for argv in manifest.analyses:
        assert argv[1] in datasets
        for flag, value in zip(argv[2:], argv[3:], strict=False):
            if flag == "--events":
                assert value in datasets
            if flag in ("--where", "--a", "--b", "--select"):
                parse_filter(value)
