"""Shared checks for log-format parsers: golden files and property-based fuzzing.

Golden cases live in ``tests/golden/formats/<family>/``: an input ``NAME.<ext>`` next to
``NAME.expected.json`` holding ``{"format": ..., "options": {...}, "events": [[line,
event], ...], "rejects": [[line, reason], ...]}``. ``ROOTSIFT_UPDATE_GOLDEN=1`` rewrites
the expected files from the parser (review the diff before committing it).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import orjson

from rootsift.ingest import formats
from rootsift.ingest.formats.base import Event, FormatOptions, TextFormat, parse_bytes
from rootsift.ingest.rejects import Reject

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "formats"
SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CORPORA = SHARED / "corpora"


def make(name: str, **options: Any) -> TextFormat:
    """An instance of the format ``name`` with the given FormatOptions fields."""
    return formats.get(name)(FormatOptions(**options))


def parse(name: str, data: bytes | str, **options: Any) -> tuple[list[tuple[int, Event]], list[Reject]]:
    raw = data.encode() if isinstance(data, str) else data
    return parse_bytes(make(name, **options), raw)


def jsonable(events: list[tuple[int, Event]]) -> list[list[Any]]:
    """Events as they will be stored as JSON (datetimes in RFC 3339)."""
    return [[line, orjson.loads(orjson.dumps(ev))] for line, ev in events]


def golden_cases(family: str) -> list[Path]:
    """The expected files of one family (parametrize a test over them)."""
    return sorted((GOLDEN / family).glob("*.expected.json"))


def check_golden(expected_path: Path) -> None:
    """Parse the input beside ``expected_path`` and compare with it (or rewrite it)."""
    stem = expected_path.name.removesuffix(".expected.json")
    inputs = [p for p in expected_path.parent.glob(stem + ".*") if not p.name.endswith(".expected.json")]
    assert len(inputs) == 1, f"one input named {stem}.* beside {expected_path.name}, found {inputs}"
    spec = json.loads(expected_path.read_text())
    options = spec.get("options", {})
    if "source" not in options:
        options = {**options, "source": str(inputs[0].name)}
    events, rejects = parse(spec["format"], inputs[0].read_bytes(), **options)
    got = {"events": jsonable(events), "rejects": [[r.line, r.reason] for r in rejects]}
    if os.environ.get("ROOTSIFT_UPDATE_GOLDEN"):
        spec.update(got)
        expected_path.write_text(_dump(spec))
        return
    assert got["events"] == spec["events"], f"{expected_path.name}: events differ"
    assert got["rejects"] == spec["rejects"], f"{expected_path.name}: rejects differ"


def check_items(events: list[tuple[int, Event]], rejects: list[Reject], n_lines: int) -> None:
    """What every parser promises on any input: numbered events with a time, numbered rejects,
    everything serialisable as JSON."""
    for line, ev in events:
        assert 1 <= line <= max(n_lines, 1), (line, n_lines)
        assert isinstance(ev, dict)
        assert "timestamp" in ev and getattr(ev["timestamp"], "tzinfo", None) is not None, ev
        orjson.dumps(ev)
    for rej in rejects:
        assert 1 <= rej.line <= max(n_lines, 1), (rej, n_lines)
        assert rej.reason


def _dump(spec: dict[str, Any]) -> str:
    """The expected file with one event or reject per line, so diffs show what changed."""
    parts = []
    for key, value in spec.items():
        if isinstance(value, list):
            rows = ",\n".join("  " + json.dumps(v, ensure_ascii=False) for v in value)
            parts.append(f" {json.dumps(key)}: [\n{rows}\n ]" if value else f" {json.dumps(key)}: []")
        else:
            parts.append(f" {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
