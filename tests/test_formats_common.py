"""What every registered log format promises, checked the same way for each.

- sniffing picks the format of each golden input (unless its expected file says
  ``"sniff": false``, for inputs that need an option such as --log-format);
- any mutation of a golden input parses without an exception, every event numbered and
  timed, every reject numbered;
- a long stream of garbage parses in bounded memory;
- every file of ../shared/corpora/ (decompressed, first 2 MiB) goes through every format
  without an exception.
"""

from __future__ import annotations

import io
import json
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, GOLDEN, check_items, make, parse
from rootsift.ingest import formats
from rootsift.ingest.formats.base import numbered_lines
from rootsift.ingest.sniff import sniff_head
from rootsift.ingest.sources import open_input

CASES = sorted(GOLDEN.glob("*/*.expected.json"))
NAMES = sorted(formats.all_formats())


def _input(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    return next(p for p in expected.parent.glob(stem + ".*") if not p.name.endswith(".expected.json"))


def _spec(expected: Path) -> dict[str, object]:
    return json.loads(expected.read_text())  # type: ignore[no-any-return]


def test_every_format_has_golden_files() -> None:
    covered = {_spec(c)["format"] for c in CASES}
    assert set(NAMES) <= covered, f"formats without golden files: {set(NAMES) - covered}"


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sniff_picks_the_format(case: Path) -> None:
    spec = _spec(case)
    if spec.get("sniff", True) is False or spec.get("options", {}).get("log_format"):  # type: ignore[union-attr]
        pytest.skip("this input needs an option to be read")
    src = _input(case)
    assert sniff_head(src.read_bytes()[: 64 << 10], src.name) == spec["format"]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    for _ in range(rng.randrange(1, 6)):
        if not lines:
            break
        i = rng.randrange(len(lines))
        op = rng.randrange(6)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif op == 2:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
        elif op == 3:
            lines[i] = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        elif op == 4 and lines[i]:
            j = rng.randrange(len(lines[i]))
            lines[i] = lines[i][:j] + bytes([rng.randrange(256)]) + lines[i][j + 1 :]
        else:
            lines[i] = lines[i] * rng.randrange(2, 5)
    return b"\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32))
def test_mutated_golden_inputs(case: Path, seed: int) -> None:
    spec = _spec(case)
    data = _mutate(_input(case).read_bytes(), random.Random(seed))
    events, rejects = parse(str(spec["format"]), data, **spec.get("options", {}))  # type: ignore[arg-type]
    check_items(events, rejects, data.count(b"\n") + 1)


@pytest.mark.parametrize("name", NAMES)
def test_garbage_in_bounded_memory(name: str) -> None:
    rng = random.Random(name)
    junk = [
        b"# Time: 240101 10:00:00",
        b'{"a": 1',
        b"2024-01-01 10:00:00 UTC [1] LOG:  statement: SELECT 1",
        b'metric{a="b"} 1',
        b"\t continuation",
        b"",
    ]
    lines = [rng.choice(junk) + bytes(rng.randrange(32, 127) for _ in range(rng.randrange(80))) for _ in range(60_000)]
    data = b"\n".join(lines)
    events, rejects = parse(name, data)
    check_items(events, rejects, len(lines))
    del events, rejects
    parser = make(name)

    def peak(items: Iterator[object]) -> int:
        # Items are dropped as they come, as the ingest does: what stays is the parser's own state.
        tracemalloc.start()
        try:
            for _ in items:
                pass
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    reading = peak(numbered_lines(io.BytesIO(data)))
    parsing = peak(parser.parse(numbered_lines(io.BytesIO(data))))
    assert parsing - reading < 4 << 20, f"{name}: {(parsing - reading) >> 20} MiB beyond reading the lines"


CORPUS_FILES = sorted(p for p in CORPORA.rglob("*") if p.is_file()) if CORPORA.exists() else []


@pytest.mark.skipif(not CORPORA.exists(), reason="../shared/corpora is not beside the checkout")
@pytest.mark.parametrize("name", NAMES)
def test_every_corpus_file_parses_without_a_crash(name: str) -> None:
    for path in CORPUS_FILES:
        inp = open_input(path)  # compressed files are read as their content, as ingest does
        try:
            data = inp.stream.read(2 << 20)
        finally:
            inp.close()
        events, rejects = parse(name, data, source=str(path))
        check_items(events, rejects, data.count(b"\n") + 1)
