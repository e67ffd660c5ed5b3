"""Backend.ingest_arrow (store/arrow_ingest.py): an Arrow table is stored exactly as the
JSON-lines ingest stores the same events, or not at all (None) when the JSON ingest would
convert its values, and the caller ingests them as JSON lines."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rootsift import Rootsift
from rootsift.store.arrow_ingest import JSON_TEXT
from rootsift.store.segment import SAMPLE_TABLE

EVENTS: list[dict[str, Any]] = [
    {
        "timestamp": f"2026-01-01T00:00:{i % 60:02d}.{i:06d}Z",
        "service.name": "api",
        "http.response.status_code": 200 + (i % 3) * 100,
        "duration_ms": 0.5 * i,
        "ok": i % 2 == 0,
        **({"user.id": f"u{i}"} if i % 4 else {}),
        **({"ratio": float("nan")} if i == 5 else {"ratio": i / 7}),
    }
    for i in range(3000)  # past the sample's 2048 rows and the stored one-in-N sample
]


def table_of(events: list[dict[str, Any]]) -> pa.Table:
    keys = list(dict.fromkeys(k for e in events for k in e))
    columns = {k: [e.get(k) for e in events] for k in keys}
    stamps = [datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).replace(tzinfo=None) for e in events]
    table = pa.table({k: pa.array(stamps, pa.timestamp("us")) if k == "timestamp" else v for k, v in columns.items()})
    if "ratio" in table.column_names:  # NaN as orjson writes it: null
        ratio = [None if v is not None and v != v else v for v in columns["ratio"]]
        table = table.set_column(table.column_names.index("ratio"), "ratio", pa.array(ratio, pa.float64()))
    return table


def stored(data: Path, dataset: str) -> tuple[dict[str, str], list[tuple[Any, ...]], int]:
    with Rootsift(data, read_only=True) as rs:
        fields = {name: info.type for name, info in rs.backend.fields(dataset).items()}
        names = sorted(fields)
        rel = rs.backend.relation_text(dataset, None, None)
        cols = ", ".join(f'"{n}"' for n in names)
        rows = rs.backend.execute_sql(f"SELECT {cols} FROM {rel} ORDER BY timestamp, duration_ms", []).rows
        sample = rs.backend.relation_text(dataset, None, None, SAMPLE_TABLE)
        sampled = rs.backend.execute_sql(f"SELECT count(*) FROM {sample}", []).rows[0][0]
    return fields, rows, int(sampled)


def ingest_json(data: Path, dataset: str, events: list[dict[str, Any]], tmp: Path) -> None:
    path = tmp / f"{dataset}.jsonl"
    path.write_text("".join(json.dumps({k: v for k, v in e.items() if v == v}) + "\n" for e in events))
    with Rootsift(data) as rs:
        rs.ingest(path, dataset, format="jsonl", time_field="timestamp")


def test_a_table_is_stored_as_the_json_lines_of_its_events(tmp_path: Path) -> None:
    with Rootsift(tmp_path / "arrow") as rs:
        half = len(EVENTS) // 2  # a second write meets the fields the first made
        assert rs.backend.ingest_arrow("spans", table_of(EVENTS[:half])) == half
        assert rs.backend.ingest_arrow("spans", table_of(EVENTS[half:])) == len(EVENTS) - half
    ingest_json(tmp_path / "json", "spans", EVENTS[:half], tmp_path)
    ingest_json(tmp_path / "json", "spans", EVENTS[half:], tmp_path)
    arrow, json_lines = stored(tmp_path / "arrow", "spans"), stored(tmp_path / "json", "spans")
    assert arrow[0] == json_lines[0]
    assert arrow[0]["ok"] == "VARCHAR" and arrow[0]["http.response.status_code"] == "DOUBLE"
    assert arrow[1] == json_lines[1] and len(arrow[1]) == len(EVENTS)
    assert arrow[2] == json_lines[2] > 0  # the same uniform sample
    with Rootsift(tmp_path / "arrow", read_only=True) as rs:
        assert rs.events("spans") == len(EVENTS)


@pytest.mark.parametrize(
    "case",
    ["text for a number field", "a number for a text field", "a time-like new text field", "json text", "empty key"],
)
def test_values_the_json_ingest_would_convert_are_left_to_it(tmp_path: Path, case: str) -> None:
    base = [{"timestamp": "2026-01-01T00:00:00Z", "n": 1.0, "s": "x"}]
    ingest_json(tmp_path / "d", "t", base, tmp_path)
    rows = [{"timestamp": "2026-01-01T00:00:01Z", "n": 2.0, "s": "y"}]
    table = table_of(rows)
    if case == "text for a number field":
        table = table.set_column(1, "n", pa.array(["2"]))
    elif case == "a number for a text field":
        table = table.set_column(2, "s", pa.array([2.0]))
    elif case == "a time-like new text field":
        table = table.append_column("when", pa.array(["2026-01-01T00:00:00Z"]))
    elif case == "json text":
        table = table.append_column(pa.field("mixed", pa.string(), metadata={JSON_TEXT: b"1"}), pa.array(["1"]))
    else:
        table = table.append_column("", pa.array(["e"]))
    with Rootsift(tmp_path / "d") as rs:
        assert rs.backend.ingest_arrow("t", table) is None
        assert rs.events("t") == 1  # nothing written


def test_past_the_field_limit_it_is_left_to_the_json_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROOTSIFT_MAX_FIELDS", "3")
    table = table_of([{"timestamp": "2026-01-01T00:00:00Z", "a": 1, "b": 2, "c": 3}])
    with Rootsift(tmp_path / "d") as rs:
        assert rs.backend.ingest_arrow("t", table) is None
        assert rs.backend.ingest_arrow("t", table.drop(["c"])) == 1


def test_a_time_like_text_field_is_checked_by_its_values_not_its_first_rows(tmp_path: Path) -> None:
    events = [{"timestamp": "2026-01-01T00:00:00Z", "n": float(i)} for i in range(3000)]
    table = table_of(events)
    late = [None] * 2900 + ["2026-01-01T00:00:00Z"] * 100  # none in the first 2,048 rows
    with Rootsift(tmp_path / "d") as rs:
        assert rs.backend.ingest_arrow("t", table.append_column("when", pa.array(late, pa.string()))) is None
        assert rs.backend.ingest_arrow("t", table.append_column("what", pa.array(["x"] * 3000))) == 3000
