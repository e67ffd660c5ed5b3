"""Every statement an analysis runs is a sqlglot expression rendered by the backend's
dialect (docs/architecture.md, "How an analysis builds SQL"; ADR 0003).

Two checks. Statically: no module of ``rootsift.analysis`` writes SQL text (a string
that reads as SQL, a call of ``execute_sql``, a rendering hard-wired to DuckDB, or the
hand-quoting of ``store/sqltext``), except the modules listed in ``NOT_CONVERTED``, each
with its reason; that list only shrinks (a listed module that no longer writes SQL text
fails the test until it is taken off). Dynamically: every statement the converted
analyses hand to ``backend.execute``, recorded while they run on real data, renders for
ClickHouse without a DuckDB-only function, calls by name only the functions
``analysis/sql.py`` declares, and binds exactly as many values as it has placeholders.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlglot import exp

import rootsift.analysis
from rootsift import Rootsift
from rootsift.analysis import sql as q
from rootsift.analysis.frame import Frame
from rootsift.analysis.stalls import stall_events
from rootsift.store.base import QueryResult
from rootsift.store.dialects import number_placeholders, render

ANALYSIS = Path(rootsift.analysis.__file__).parent

NOT_CONVERTED: dict[str, str] = {}
"""Modules that still write SQL text, with why. Only shrinks."""

SQL_TEXT = re.compile(
    r"\b(SELECT|INSERT INTO|CREATE|DELETE FROM|UPDATE|WITH)\b.*|\bFROM\s|\bWHERE\b|\bGROUP BY\b|\bORDER BY\b"
    r"|\bCASE WHEN\b|\bFILTER \(|\bOVER \(|\bIS NOT NULL\b"
    r"|\bcount\(\*\)|\b(quantile_cont|quantile_disc|approx_count_distinct|coalesce|epoch|epoch_us|list"
    r"|var_samp|any_value|regr_slope|bool_and|log2|floor|hour|greatest|to_microseconds)\("
)
"""SQL text: a statement's keywords, or a call of a function only SQL has (``avg(x)`` and
the like are also the query language's calculations, written by users: not SQL)."""
DUCKDB_ONLY = ("QUANTILE_CONT", "QUANTILE_DISC", "LIST(", "USING SAMPLE", "EPOCH_US(", "TO_MICROSECONDS(")


def sql_text_in(path: Path) -> list[str]:
    """What in the module builds SQL by hand: (line, what) for each string that reads as
    SQL, each ``execute_sql`` call, each rendering fixed to one dialect, each use of the
    DuckDB store's hand-quoting."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    # a bare string after an assignment documents it (attribute docstrings)
    docstrings |= {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if SQL_TEXT.search(node.value):
                found.append(f"{node.lineno}: SQL text {node.value[:60]!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "execute_sql":
                found.append(f"{node.lineno}: execute_sql(...) runs SQL text")
            if node.func.attr == "sql" and any(
                k.arg == "dialect" and isinstance(k.value, ast.Constant) for k in node.keywords
            ):
                found.append(f"{node.lineno}: rendered for one dialect, not the backend's")
        elif isinstance(node, ast.ImportFrom) and node.module == "rootsift.store.sqltext":
            found.append(f"{node.lineno}: imports the DuckDB store's hand-quoting")
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def modules() -> list[str]:
    return sorted(str(p.relative_to(ANALYSIS)) for p in ANALYSIS.rglob("*.py"))


@pytest.mark.parametrize("module", modules())
def test_no_analysis_builds_sql_text(module: str) -> None:
    found = sql_text_in(ANALYSIS / module)
    if module in NOT_CONVERTED:
        assert found, f"{module} writes no SQL text any more: take it off NOT_CONVERTED"
    else:
        assert not found, f"{module} builds SQL by hand (use rootsift.analysis.sql):\n" + "\n".join(found)


def test_the_check_sees_sql_text(tmp_path: Path) -> None:
    """The static check is not vacuous: each way of writing SQL by hand is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""Docstrings may say SELECT x FROM y."""\n'
        "def f(frame, col):\n"
        '    """SELECT in a docstring is prose."""\n'
        '    a = f"SELECT {col} FROM t"\n'
        '    b = "count(*) FILTER (WHERE x)"\n'
        "    frame.backend.execute_sql(a, [])\n"
        '    return frame.relation.sql(dialect="duckdb")\n'
    )
    found = sql_text_in(bad)
    assert sorted({f.split(":")[0] for f in found}) == ["4", "5", "6", "7"], found


# -- the statements the converted analyses run, rendered for ClickHouse -----------------
START = datetime(2024, 3, 1, tzinfo=UTC)


def events(weighted: bool) -> list[dict[str, Any]]:
    """Four days of requests, one a minute: v2 slower in its tail, an upstream that stops
    at a 500 ms timeout but sometimes runs past it, a queue wait inside the duration, ids
    that repeat a little; with ``weighted``, sample rates and counts."""
    rng = np.random.default_rng(7)
    rows = []
    for i in range(4 * 24 * 60):
        version = "v1" if i % 2 else "v2"
        queue = float(rng.exponential(5))
        upstream = min(float(rng.lognormal(5, 0.6)), 500.0)
        if rng.random() < 0.01:
            upstream = 650.0 + float(rng.exponential(50))
        duration = queue + upstream + float(rng.exponential(3)) * (1.8 if version == "v2" else 1.0)
        row: dict[str, Any] = {
            "timestamp": (START + timedelta(minutes=i)).isoformat(),
            "version": version,
            "host": f"h{i % 4}",
            "endpoint": str(rng.choice(["/a", "/b", "/c"])),
            "user_id": f"u{int(rng.integers(0, 3000))}",
            "status": 503 if duration > 600 else 200,
            "duration_ms": round(duration, 3),
            "queue_ms": round(queue, 3),
            "upstream_ms": round(upstream, 3),
        }
        if weighted:
            row["samplerate"] = int(rng.choice([1, 2]))
            row["event_count"] = int(rng.choice([1, 1, 3]))
        rows.append(row)
    return rows


def folded(folder: Path, seed: int, slower: float) -> Path:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for i in range(3):
        counts = rng.multinomial(2000, [0.5, 0.3 * slower, 0.2] / np.sum([0.5, 0.3 * slower, 0.2]))
        stacks = ("main;serve;parse", "main;serve;store;fsync", "main;gc")
        (folder / f"p{i}.folded").write_text("".join(f"{s} {c}\n" for s, c in zip(stacks, counts, strict=True)))
    return folder


class Recorder:
    """Wraps ``backend.execute``: each statement with its parameters and the analysis
    module that built it."""

    def __init__(self, rs: Rootsift, weighted: bool) -> None:
        self.weighted = weighted
        self.seen: list[tuple[str, exp.Expr, list[Any]]] = []
        self._execute = rs.backend.execute
        rs.backend.execute = self  # type: ignore[method-assign]

    def __call__(self, query: exp.Expr, params: list[Any]) -> QueryResult:
        self.seen.append((self.caller(), query.copy(), list(params)))
        return self._execute(query, params)

    @staticmethod
    def caller() -> str:
        for frame in inspect.stack()[2:]:
            name = frame.frame.f_globals.get("__name__", "")
            if name.startswith("rootsift.analysis.") and name != q.__name__:
                return name.removeprefix("rootsift.analysis.").replace(".", "/") + ".py"
            if name.startswith("rootsift.") and not name.startswith("rootsift.store"):
                return name
        return "?"


@pytest.fixture(scope="module", params=[False, True], ids=["unweighted", "weighted"])
def recorded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Recorder:
    weighted = bool(request.param)
    tmp = tmp_path_factory.mktemp("built")
    lines = tmp / "events.jsonl"
    lines.write_text("".join(json.dumps(r) + "\n" for r in events(weighted)))
    with Rootsift(tmp / "data") as rs:
        rs.ingest(lines, "api")
        rs.ingest(folded(tmp / "a", 1, 1.0), "cpu", labels={"version": "1"})
        rs.ingest(folded(tmp / "b", 2, 1.6), "cpu", labels={"version": "2"})
        deploys = tmp / "deploys.jsonl"
        deploys.write_text(
            "".join(
                json.dumps(
                    {"timestamp": (START + timedelta(hours=h)).isoformat(), "service": "api", "change": "deploy"}
                )
                + "\n"
                for h in (30, 50, 70)
            )
        )
        rs.ingest(deploys, "deploys")
        slow = tmp / "slow.jsonl"  # the same requests, four times slower for three hours: a region to explain
        slow.write_text(
            "".join(
                json.dumps({**r, "duration_ms": r["duration_ms"] * (4 if 3600 <= i < 3780 else 1)}) + "\n"
                for i, r in enumerate(events(weighted))
            )
        )
        rs.ingest(slow, "slow")
        rec = Recorder(rs, weighted)
        rs.explain("api", select="duration_ms > 400")
        rs.explain("api", select="duration_ms > 400", sampled=True, baseline='endpoint != "/c"')
        rs.explain(
            "api",
            select_from=START + timedelta(days=2),
            select_to=START + timedelta(days=3),
            select_start_of="duration_ms",
        )
        metrics = "p50(duration_ms),p99(duration_ms),avg(duration_ms),max(duration_ms),rate(status = 503)"
        rs.compare("api", a='version = "v1"', b='version = "v2"', metrics=metrics)
        rs.compare(
            "api",
            a='version = "v1"',
            b='version = "v2"',
            metrics="p90(queue_ms),avg(queue_ms),slope(queue_ms)",
            per="host",
        )
        rs.trends("api", measure="avg(duration_ms)", by="host")
        rs.trends("api", by="host")
        rs.investigate("api", measure="duration_ms")
        rs.investigate("slow", measure="duration_ms")
        rs.changes("api", measure="p50(duration_ms)", events="deploys")
        stall_at = datetime(2024, 3, 2)  # what completes after a moment (naive UTC, as investigate passes): stalls.py
        stall_events(Frame(rs.backend, "api", None, None), stall_at, stall_at, timedelta(hours=1))
        rs.profile_diff("cpu", a='version = "1"', b='version = "2"')
    return rec


def test_the_converted_analyses_run_through_execute(recorded: Recorder) -> None:
    built = {module for module, _, _ in recorded.seen}
    expected = {"frame.py", "fields.py", "counts.py", "compare/cohorts.py", "compare/bins.py", "compare/means.py"}
    expected |= {"compare/units.py", "trends/series.py", "profiles/samples.py", "seasonal.py", "timeouts.py"}
    expected |= {"cells.py", "parts.py", "shifts.py", "onset.py", "changes/suspects.py"}
    expected |= {"investigate.py", "anomaly.py", "timescale.py", "stalls.py"}
    weighted_only = {"weighted.py", "causes.py", "decomposition.py", "saturation.py"}
    expected |= weighted_only if recorded.weighted else {"compare/fields.py"}
    assert expected <= built, expected - built
    assert not built & set(NOT_CONVERTED), "a module on NOT_CONVERTED runs statements built as expressions"


def test_each_statement_renders_for_clickhouse(recorded: Recorder) -> None:
    for module, query, params in recorded.seen:
        numbered, _ = number_placeholders(query, params)  # as the ClickHouse backends bind them
        text = render(numbered, "clickhouse")
        for spelling in DUCKDB_ONLY:
            assert spelling not in text.upper(), f"{module}: {spelling} in {text}"
        named = {f.name.lower() for f in query.find_all(exp.Anonymous)}
        assert named <= set(q.ENGINE_FUNCTIONS), f"{module} calls {named - set(q.ENGINE_FUNCTIONS)} by name"
        placeholders = len(list(query.find_all(exp.Placeholder)))
        assert placeholders == len(params), f"{module}: {placeholders} placeholders, {len(params)} values"
