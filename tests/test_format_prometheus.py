"""prometheus: golden files, family and time rules, label quirks, and what any input does."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import GOLDEN, check_golden, check_items, golden_cases, parse
from rootsift.ingest.formats import sniff

SCRAPE = "scrapes/web01/metrics_2024-01-01T10:00:00Z.prom"


@pytest.mark.parametrize("case", golden_cases("prometheus"), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    check_golden(case)


def one(text: str, **options: object) -> dict[str, object]:
    events, rejects = parse("prometheus", text, **options)
    assert not rejects, rejects
    assert len(events) == 1, events
    return events[0][1]


def test_histogram_family_and_le_value() -> None:
    text = '# TYPE lat histogram\nlat_bucket{le="0.25"} 3\nlat_bucket{le="+Inf"} 9\nlat_sum 1.5\nlat_count 9\n'
    events, rejects = parse("prometheus", text, source=SCRAPE)
    assert not rejects
    assert {ev["family"] for _, ev in events} == {"lat"} and {ev["type"] for _, ev in events} == {"histogram"}
    first, inf = events[0][1], events[1][1]
    assert first["le"] == "0.25" and first["le_value"] == 0.25 and first["value"] == 3.0
    assert inf["le"] == "+Inf" and "le_value" not in inf


def test_suffix_only_joins_the_family_its_type_allows() -> None:
    text = "# TYPE g gauge\ng_total 1\n# TYPE c counter\nc_total 2\nc_bucket 3\n"
    events, _ = parse("prometheus", text)
    got = [(ev["metric"], ev["family"], ev["type"]) for _, ev in events]
    assert got == [("g_total", "g_total", "untyped"), ("c_total", "c", "counter"), ("c_bucket", "c_bucket", "untyped")]


def test_non_finite_values_are_text() -> None:
    for raw, text in (("NaN", "NaN"), ("+Inf", "+Inf"), ("-Inf", "-Inf"), ("inf", "+Inf")):
        ev = one(f"m {raw}\n")
        assert "value" not in ev and ev["value_text"] == text
        orjson.dumps(ev)


def test_timestamps_milliseconds_and_openmetrics_seconds() -> None:
    ms = one("m 1 1704103200123\n")["timestamp"]
    assert ms == datetime(2024, 1, 1, 10, 0, 0, 123000, tzinfo=UTC)
    seconds = one("m 1 1704103200\n")["timestamp"]
    assert seconds == datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
    fraction = one("m 1 1704103200.5\n")["timestamp"]
    assert fraction == datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=UTC)
    early = one("m 1 -3982045\n")["timestamp"]  # the exposition docs' "before the epoch" example, in ms
    assert early == datetime(1969, 12, 31, 22, 53, 37, 955000, tzinfo=UTC)


def test_scrape_time_from_name_then_mtime() -> None:
    assert one("m 1\n", source=SCRAPE)["timestamp"] == datetime(2024, 1, 1, 10, tzinfo=UTC)
    naive = one("m 1\n", source="node1_20240101T100000.txt", tz="Europe/Berlin")["timestamp"]
    assert naive == datetime(2024, 1, 1, 9, tzinfo=UTC)
    assert one("m 1\n", source="plain.prom", mtime=1704103200.0)["timestamp"] == datetime(2024, 1, 1, 10, tzinfo=UTC)


def test_host_from_option_then_directory() -> None:
    assert one("m 1\n", source=SCRAPE)["host"] == "web01"
    assert one("m 1\n", source=SCRAPE, host="db9")["host"] == "db9"
    assert "host" not in one("m 1\n", source="metrics.prom")
    assert "host" not in one('m{instance="10.0.0.1:9100"} 1\n', source="-")


def test_label_escapes_and_reserved_names() -> None:
    ev = one('m{a="q\\"x\\\\y\\nz",type="t",value="v",le_value="w"} 1\n')
    assert ev["a"] == 'q"x\\y\nz'
    assert ev["label_type"] == "t" and ev["label_value"] == "v" and ev["label_le_value"] == "w"
    assert ev["type"] == "untyped" and ev["value"] == 1.0


def test_exemplar_fields() -> None:
    ev = one('# TYPE f histogram\nf_bucket{le="1"} 11 # {trace_id="abc",span_id="d"} 0.67 1520879607.789\n')
    assert ev["exemplar_trace_id"] == "abc" and ev["exemplar_span_id"] == "d"
    assert ev["exemplar_value"] == 0.67
    assert ev["exemplar_timestamp"] == datetime(2018, 3, 12, 18, 33, 27, 789000, tzinfo=UTC)


def test_after_eof_is_rejected() -> None:
    events, rejects = parse("prometheus", "a 1\n# EOF\nb 2\n")
    assert len(events) == 1 and [(r.line, r.reason) for r in rejects] == [(3, "text after '# EOF' (line 2)")]


def test_rejects_name_line_and_problem() -> None:
    events, rejects = parse("prometheus", 'ok 1\nx{a="1" 2\ny abc\nz{a="\\t"} 1\nok 2\n')
    assert [ev["value"] for _, ev in events] == [1.0, 2.0]
    assert [r.line for r in rejects] == [2, 3, 4]
    assert "neither ',' nor '}'" in rejects[0].reason and "'abc' is not a number" in rejects[1].reason
    assert "escape" in rejects[2].reason


def test_sniff() -> None:
    example = (GOLDEN / "prometheus" / "exposition_example.prom").read_text().splitlines()
    assert sniff(example, "metrics.txt") == "prometheus"
    assert sniff(["node_load1 0.5", "node_load5 0.4", "node_load15 0.3"], "node.prom") == "prometheus"
    assert sniff(["MemTotal:       16303088 kB", "MemFree:  1 kB"], "meminfo") != "prometheus"
    assert sniff(["GET /index.html 200", "hello world"], "access.log") != "prometheus"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from('ab_{}="\\, #\t01.+-eInfTYPE\n'), max_size=50), max_size=30))
def test_any_input(lines: list[str]) -> None:
    text = "\n".join(lines)
    events, rejects = parse("prometheus", text, source=SCRAPE)
    check_items(events, rejects, text.count("\n") + 1)
    for _, ev in events:
        value = ev.get("value", 0.0)
        assert isinstance(value, float) and math.isfinite(value)


GOLDEN_INPUTS = sorted(p for p in (GOLDEN / "prometheus").glob("*") if not p.name.endswith(".json"))


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(GOLDEN_INPUTS),
    st.lists(st.tuples(st.integers(0, 4000), st.sampled_from(['"', "{", "}", "\\", " ", "#", "\n", "=", ",", "x"]))),
)
def test_mutated_golden_inputs(path: Path, edits: list[tuple[int, str]]) -> None:
    text = path.read_text()
    for at, ch in edits:
        at %= len(text) + 1
        text = text[:at] + ch + text[at + 1 :]
    events, rejects = parse("prometheus", text, source=SCRAPE)
    check_items(events, rejects, text.count("\n") + 1)
