"""The analyses on every backend: each reference incident's telemetry (seed 1) ingested
once into DuckDB, once into chdb and once into the server backend (``clickhouse``:
over HTTP to the run's ClickHouse server, helpers/backends.py), every command its manifest asks
for, the hand-drawn explains of ``test_cases.py`` (one per scenario) and a replayed canary
run on each through the CLI, and the JSON compared with DuckDB's. Scenarios at half their CI size (the CI budget); gateway,
the most expensive, is ``slow``.

What must agree, and the tolerances:
- the anomaly investigate finds (kind, from, to) and its regions: equal;
- the first ``TOP`` findings (compare: the metrics) name the same thing in the same order
  (kind, field, value, conditions, event, function, series, metric), with the same verdict;
- their numbers (scores, p-values, shares, counts, effects) within ``REL`` relative
  (``ABS`` absolute): the engines add in other orders (sums and averages agree to 1e-9)
  and a p-value carries that through a distribution's tail. Every other field of the
  output is compared too, with the same tolerance (distinct-value estimates within 5 %);
  findings of equal score may swap places.

chdb is in the ``dev`` extra; where it is missing the module is skipped with the reason.
chdb opens one data directory per process: each store is opened, used and closed in turn.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from helpers.backends import HAVE_CLICKHOUSE_CONNECT, cli_env, needs_chdb, opened
from rootsift import scenarios
from rootsift.cli import main
from rootsift.scenarios.base import MANIFEST_FILE, TRUTH_DIR, TRUTH_FILE
from test_cases import CASES

pytestmark = needs_chdb

SEED = 1
TOP = 5
REL = 1e-6
ABS = 1e-9
SCALE = 0.5
"""Of the scenarios' CI size: half the events, the same mechanisms (the CI budget: the
chdb half of this module adds under a minute on a quiet machine)."""
DRAWN = 1
"""Drawn explains per scenario (the CI budget; explain is explain whatever the box)."""
EXTRA: dict[str, list[list[str]]] = {
    "upgrade": [
        [
            "canary",
            "upgrade_requests",
            "--baseline",
            'version = "1.3.1"',
            "--canary",
            'version = "1.6.0"',
            "--where",
            'op = "write"',
            "--from",
            "2024-03-02T00:00:00Z",
            "--every",
            "1h",
            "--for",
            "6h",
            "--replay",
        ],
    ],
}
"""Commands beyond the manifests' and the drawn cases': canary (a replayed watch: one JSON
object per look)."""


def commands(name: str, out: Path) -> list[list[str]]:
    """The manifest's command lines, the drawn cases' (``test_cases.CASES``), ``EXTRA``."""
    asked = [list(a) for a in json.loads((out / MANIFEST_FILE).read_text())["analyses"]]
    truth = json.loads((out / TRUTH_DIR / TRUTH_FILE).read_text())
    drawn = [[c.command, c.dataset, *c.drawn(truth)] for c in CASES if c.scenario == name and c.drawn is not None]
    return asked + drawn[:DRAWN] + EXTRA.get(name, [])


ENGINES = ("duckdb", "chdb", "clickhouse") if HAVE_CLICKHOUSE_CONNECT else ("duckdb", "chdb")
"""DuckDB (the reference), then the ClickHouse backends compared with it."""


def run(argv: list[str], data: Path, engine: str) -> Any:
    """The command's JSON (a list of objects when it prints JSON lines)."""
    result = CliRunner(env=cli_env(engine, data)).invoke(main, [*argv, "--data", str(data), "--json"])
    assert result.exit_code in (0, 1), f"{engine}: rootsift {' '.join(argv)}\n{result.output}"
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else lines


@pytest.fixture(
    scope="module",
    params=["cascade", "consul", "memleak", "upgrade", pytest.param("gateway", marks=pytest.mark.slow)],
)
def ran(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``argv``: the command lines; per engine, their JSON in the same order, on one
    scenario's telemetry."""
    name = str(request.param)
    root = tmp_path_factory.mktemp(f"both-{name}")
    scenarios.generate(name, root / "out", SEED, scale=SCALE)
    argvs = commands(name, root / "out")
    found: dict[str, Any] = {"argv": argvs}
    for engine in ENGINES:
        with opened(root / engine, engine) as rs:
            for summary in scenarios.ingest(rs, root / "out"):
                assert summary.rejects == 0, summary.first_rejects
        found[engine] = [run(argv, root / engine, engine) for argv in argvs]
    yield found


@pytest.mark.parametrize("engine", ENGINES[1:])
def test_every_analysis_finds_the_same_on_chdb(ran: dict[str, Any], engine: str) -> None:
    for argv, duck, ch in zip(ran["argv"], ran["duckdb"], ran[engine], strict=True):
        where = "rootsift " + " ".join(argv)
        looks = duck if isinstance(duck, list) else [duck]
        assert looks and all(x.get("findings") or x.get("metrics") for x in looks), f"{where}: nothing to compare"
        differences = compare(duck, ch, "")
        assert not differences, f"{where}: {engine} differs from DuckDB\n" + "\n".join(differences[:20])


def test_conditions_and_epochs_read_the_same_on_chdb(tmp_path: Path) -> None:
    """A condition selected as a column is a boolean on both engines (ClickHouse's own are
    UInt8 0/1: the dialect casts them), and epoch seconds and microseconds are the same."""
    from sqlglot import exp

    from rootsift.analysis import sql as q

    rows = [{"timestamp": "2024-06-01T00:00:00.250000Z", "x": 1.5}, {"timestamp": "2024-06-01T00:00:01Z", "x": 1.5}]
    path = tmp_path / "e.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = {}
    for engine in ENGINES:
        with opened(tmp_path / engine, engine) as rs:
            rs.ingest(path, dataset="e")
            x, ts = q.col("x"), q.col("timestamp")
            items = [
                exp.EQ(this=exp.Min(this=x), expression=exp.Max(this=x.copy())),
                q.alias(exp.paren(exp.Max(this=x.copy()) > q.num(2)), "above"),
                exp.Min(this=exp.UnixMicros(this=ts)),
                exp.Max(this=exp.TimeToUnix(this=ts.copy())),
            ]
            got[engine] = rs.backend.execute(q.select(items, rs.backend.relation("e", None, None)), []).rows[0]
    assert got["duckdb"] == (True, False, 1717200000250000, 1717200001.0)
    for engine in ENGINES[1:]:
        assert got[engine] == got["duckdb"]
        assert [type(v) for v in got[engine]] == [type(v) for v in got["duckdb"]]


# -- comparing two outputs ----------------------------------------------------------------
LISTS = ("findings", "metrics", "regions", "cause_set")
"""Lists of findings: compared entry by entry, allowing ties (equal score) to swap."""
NAMES = ("kind", "field", "value", "conditions", "event", "function", "series", "metric", "verdict")
IGNORED = ("elapsed_seconds",)
ESTIMATES = ("distinct_in_pilot", "distinct_estimate")
"""Distinct counts that are estimates on both engines (DuckDB's HyperLogLog, ClickHouse's
``uniq``): within ``ESTIMATE_REL``."""
ESTIMATE_REL = 0.05


def compare(a: Any, b: Any, path: str) -> list[str]:
    """Where ``b`` differs from ``a`` beyond the tolerances (paths and both values)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key in IGNORED:
                continue
            if key not in a or key not in b:
                out.append(f"{path}.{key}: only in {'DuckDB' if key in a else 'ClickHouse'}")
            elif key in ESTIMATES and _number(a[key]) and _number(b[key]):
                if not math.isclose(a[key], b[key], rel_tol=ESTIMATE_REL):
                    out.append(f"{path}.{key}: {a[key]} on DuckDB, {b[key]} on ClickHouse (estimates, beyond 5 %)")
            elif key in LISTS and isinstance(a[key], list) and isinstance(b[key], list):
                out += compare_findings(a[key], b[key], f"{path}.{key}")
            else:
                out += compare(a[key], b[key], f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} entries on DuckDB, {len(b)} on ClickHouse"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in compare(x, y, f"{path}[{i}]")]
    if _number(a) and _number(b):
        return [] if math.isclose(a, b, rel_tol=REL, abs_tol=ABS) else [f"{path}: {a!r} on DuckDB, {b!r} on ClickHouse"]
    return [] if a == b else [f"{path}: {a!r} on DuckDB, {b!r} on ClickHouse"]


def compare_findings(a: list[Any], b: list[Any], path: str) -> list[str]:
    """The first ``TOP`` entries name the same things in the same order; all entries agree
    in their numbers, entries of equal score matched by name (a tie may swap)."""
    if len(a) != len(b):
        return [
            f"{path}: {len(a)} on DuckDB, {len(b)} on ClickHouse: {[_name(x) for x in a]} / {[_name(x) for x in b]}"
        ]
    out = []
    if not _ties_only(a[:TOP], b[:TOP]):
        top_a, top_b = [_name(x) for x in a[:TOP]], [_name(x) for x in b[:TOP]]
        out.append(f"{path}: the first {TOP} differ: {top_a} on DuckDB, {top_b} on ClickHouse")
    by_name = {_name(y): y for y in b}
    for i, x in enumerate(a):
        y = b[i] if _name(b[i]) == _name(x) else by_name.get(_name(x))
        if y is None:
            out.append(f"{path}[{i}]: {_name(x)} not on ClickHouse (there: {_name(b[i])})")
        else:
            out += compare(x, y, f"{path}[{i}]")
    return out


def _ties_only(a: list[Any], b: list[Any]) -> bool:
    """Each place holds the same entry, or two entries of the same score (a tie swapped)."""
    for x, y in zip(a, b, strict=True):
        if _name(x) != _name(y) and not (isinstance(x, dict) and isinstance(y, dict) and _tie(x, y)):
            return False
    return True


def _tie(x: dict[str, Any], y: dict[str, Any]) -> bool:
    sx, sy = x.get("score"), y.get("score")
    return _number(sx) and _number(sy) and math.isclose(sx, sy, rel_tol=REL, abs_tol=ABS)


def _name(entry: Any) -> str:
    if not isinstance(entry, dict):
        return json.dumps(entry, sort_keys=True, default=str)
    return json.dumps([entry.get(k) for k in NAMES], sort_keys=True, default=str)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
