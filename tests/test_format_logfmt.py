"""logfmt: golden files, quoting, and what any input does."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import check_golden, check_items, golden_cases, parse


@pytest.mark.parametrize("case", golden_cases("logfmt"), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    check_golden(case)


def test_values_and_escapes() -> None:
    events, rejects = parse("logfmt", 'time=2024-01-01T00:00:00Z a="x \\"y\\" \\\\ z" b=1.5 c=7 d flag=true\n')
    assert not rejects
    (line, ev) = events[0]
    assert line == 1
    assert ev["a"] == 'x "y" \\ z'
    assert ev["b"] == 1.5 and ev["c"] == 7 and ev["d"] is True
    assert ev["flag"] == "true"  # text stays text: only a bare key is a flag


def test_rejects_name_the_problem() -> None:
    _, rejects = parse("logfmt", 'time=2024-01-01T00:00:00Z a="open\nlevel=info\ntime=nope x=1\n')
    assert [(r.line, r.reason.split(" ")[0]) for r in rejects] == [(1, "not"), (2, "no"), (3, "no")]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from('ab= "\\\tt:0123456789-TZ.'), max_size=60), max_size=30))
def test_any_input(lines: list[str]) -> None:
    text = "\n".join(lines)
    events, rejects = parse("logfmt", text)
    check_items(events, rejects, text.count("\n") + 1)
