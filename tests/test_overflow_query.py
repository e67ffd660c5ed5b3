"""Keys past the field limit, stored in ``_overflow``, queried by their own names.

A real dataset with thousands of distinct keys is ingested with a low field limit, and
every answer is checked against the same numbers computed from the generated events.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from rootsift.api import Rootsift
from rootsift.errors import UnknownFieldError, UsageError
from rootsift.query.engine import run_query
from rootsift.query.spec import Calculation, QuerySpec

EVENTS = 3000


def event(i: int) -> dict[str, Any]:
    """One event: three columns, then keys that land in the overflow (limit 4)."""
    return {
        "timestamp": 1_700_000_000 + i,
        "duration_ms": float(i % 100),
        "svc": "a" if i % 2 else "b",
        f"key_{i}": i,  # 3,000 distinct keys, one per event
        "lat": (i % 10) if i % 3 else "n/a",  # mostly numbers, some text
        "ctx.user/x~y": f"u{i % 4}",  # a dotted name with a slash and a tilde
        "flag": i % 5 == 0,
        'it\'s "q"; --': i % 7,  # quotes and SQL comment marks are part of a name, never SQL
    }


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Rootsift:
    tmp = tmp_path_factory.mktemp("overflow")
    src = tmp / "wide.jsonl"
    src.write_text("".join(json.dumps(event(i)) + "\n" for i in range(EVENTS)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROOTSIFT_MAX_FIELDS", "4")
        rs = Rootsift(tmp / "data")
        summary = rs.ingest(str(src), dataset="w")
    assert summary.events == EVENTS
    assert "lat" not in rs.backend.fields("w") and "_overflow" in rs.backend.fields("w")
    return rs


def count(rs: Rootsift, where: str) -> int:
    return int(run_query(rs.backend, QuerySpec("w", where=where)).rows[0][0])


def truth(test: Any) -> int:
    return sum(1 for i in range(EVENTS) if test(event(i)))


def num(e: dict[str, Any]) -> float | None:
    return e["lat"] if isinstance(e["lat"], int) else None


@pytest.mark.parametrize(
    ("where", "test"),
    [
        ("key_1500 = 1500", lambda e: e.get("key_1500") == 1500),
        ("key_1500 > 3", lambda e: e.get("key_1500", 0) > 3),
        ("key_1500 > 3000", lambda e: False),
        ("exists key_17", lambda e: "key_17" in e),
        ("not exists key_17", lambda e: "key_17" not in e),
        ("lat >= 5", lambda e: (num(e) or 0) >= 5),
        ("lat = 3", lambda e: num(e) == 3),
        ("lat != 3", lambda e: num(e) != 3),
        ("not (lat > 3)", lambda e: not ((num(e) or 0) > 3)),
        ("lat in (1, 2)", lambda e: num(e) in (1, 2)),
        ("lat not in (1, 2)", lambda e: num(e) not in (1, 2)),
        ('lat = "n/a"', lambda e: e["lat"] == "n/a"),
        ("lat contains n/", lambda e: e["lat"] == "n/a"),
        ("`ctx.user/x~y` = u1", lambda e: e["ctx.user/x~y"] == "u1"),
        ("`ctx.user/x~y` in (u1, u2) and svc = a", lambda e: e["ctx.user/x~y"] in ("u1", "u2") and e["svc"] == "a"),
        ("flag = true", lambda e: e["flag"]),
        ('`it\'s "q"; --` = 3', lambda e: e['it\'s "q"; --'] == 3),
    ],
)
def test_filters_on_overflow_keys_match_the_events(wide: Rootsift, where: str, test: Any) -> None:
    assert count(wide, where) == truth(test)


def test_calculations_cast_numbers_and_skip_text(wide: Rootsift) -> None:
    calcs = [Calculation.parse(c) for c in ("count", "avg(lat)", "max(lat)", "p50(lat)", "count_distinct(lat)")]
    out = run_query(wide.backend, QuerySpec("w", breakdowns=["svc"], calculations=calcs, order=["svc asc"]))
    for svc, n, avg, top, p50, distinct in out.rows:
        lats = [num(e) for e in map(event, range(EVENTS)) if e["svc"] == svc and num(e) is not None]
        assert n == EVENTS // 2
        assert math.isclose(avg, sum(lats) / len(lats)) and top == max(lats)
        assert p50 == sorted(lats)[math.ceil(0.5 * len(lats)) - 1]  # the inverted CDF
        assert distinct == len({str(x) for x in lats}) + 1  # "n/a" is a distinct value too


def test_breakdown_and_heatmap_by_overflow_key(wide: Rootsift) -> None:
    out = run_query(wide.backend, QuerySpec("w", breakdowns=["ctx.user/x~y"], order=["ctx.user/x~y asc"]))
    assert out.rows == [[f"u{k}", EVENTS // 4] for k in range(4)]
    heat = run_query(wide.backend, QuerySpec("w", calculations=[Calculation.parse("heatmap(lat)")])).heatmap
    assert heat is not None
    assert sum(map(sum, heat.counts)) + sum(heat.nonpositive) == truth(lambda e: num(e) is not None)


def test_unknown_names_are_still_unknown_with_suggestions(wide: Rootsift) -> None:
    with pytest.raises(UnknownFieldError, match="key_99999"):
        count(wide, "key_99999 = 1")
    with pytest.raises(UnknownFieldError) as caught:
        run_query(wide.backend, QuerySpec("w", calculations=[Calculation.parse("p99(duration)")]))
    assert "duration_ms" in str(caught.value)
    with pytest.raises(UsageError, match="numeric"):  # a column keeps its type checks
        run_query(wide.backend, QuerySpec("w", calculations=[Calculation.parse("p99(svc)")]))


def test_schema_says_how_many_keys_the_overflow_holds(wide: Rootsift) -> None:
    entry = next(f for f in wide.schema("w") if f["field"] == "_overflow")
    keys = entry["overflow_keys"]
    # key_0 became a column (the limit was not reached yet); every other key_i and the four named keys did not
    assert keys["count"] == EVENTS - 1 + 4
    assert keys["sample"] == sorted(keys["sample"]) and len(keys["sample"]) == 10
    assert "ctx.user/x~y" in keys["sample"]


def test_the_query_command_takes_overflow_keys(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    src = tmp_path / "wide.jsonl"
    src.write_text("".join(json.dumps(event(i)) + "\n" for i in range(300)))
    env = {**os.environ, "ROOTSIFT_MAX_FIELDS": "4"}

    def rootsift(*args: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "rootsift.cli", *args, "--data", str(tmp_path / "data")]
        return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)

    assert rootsift("ingest", str(src), "-d", "w").returncode == 0
    res = rootsift("query", "w", "--where", "key_150 > 3 or key_151 > 3", "-c", "p99(lat)", "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["rows"] == [[1]]  # key_150's event has lat "n/a", key_151's lat 1
    res = rootsift("query", "w", "--where", "key_9999 > 3")
    assert res.returncode == 2 and "unknown field 'key_9999'" in res.stderr
    assert "_overflow holds 303 keys past the field limit" in rootsift("schema", "w").stdout


def test_analyses_take_overflow_keys_in_their_filters(wide: Rootsift) -> None:
    """explain's selection and where, written on overflow keys, select the same events
    the query layer counts (the analyses compile filters through the same Compiler)."""
    result = wide.explain("w", select="lat > 5", where="exists lat")
    assert result.selection["events"] == count(wide, "lat > 5")
    assert result.selection["events"] + result.baseline["events"] == count(wide, "exists lat")
