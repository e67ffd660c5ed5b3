"""Property tests: every parser, given any bytes, gives events plus counted rejects or a
clear rootsift error, never another exception and never a hang.

Inputs are arbitrary bytes, lines built from tokens the formats look for, and real
lines (the golden inputs, the corpora of ../shared) with bytes flipped, cut, inserted
and lines repeated. Options are fuzzed too where a user types them (``--log-format``,
``--log-line-prefix``, ``--tz``). The JSON-lines, CSV and sniffing readers are driven
through the public ``Rootsift.ingest``.

Each example runs under a wall-clock limit (``HANG_SECONDS``, a SIGALRM timer): a
parser that loops forever or backtracks catastrophically fails the test instead of
hanging it. Hypothesis deadlines are off: on a shared two-core machine they would fail
on load, not on the parser.

Runs are derandomized by default (the same examples on every run, as CI needs);
``ROOTSIFT_HYPOTHESIS=explore`` draws new random examples, three times as many.
The whole file takes about 30-40 s on the shared two-core machine.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, GOLDEN, check_items, parse
from rootsift import Rootsift
from rootsift.errors import RootsiftError
from rootsift.ingest import formats
from rootsift.ingest.sources import open_input

EXPLORE = os.environ.get("ROOTSIFT_HYPOTHESIS") == "explore"
HANG_SECONDS = 10
"""Longest any one example may take (inputs are at most a few KiB; parsing one takes milliseconds)."""


def profile(examples: int) -> settings:
    """Derandomized ``examples`` per test (CI), or three times as many random ones (explore)."""
    return settings(
        max_examples=examples * (3 if EXPLORE else 1),
        derandomize=not EXPLORE,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


class Hang(BaseException):
    """Raised by the timer; a BaseException so no parser's ``except Exception`` can swallow it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def fire(signum: int, frame: object) -> None:
        raise Hang(f"no result after {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def outcome(name: str, data: bytes, **options: Any) -> str:
    """Parse ``data`` as ``name``: 'parsed' (checked events and rejects) or 'error' (a clear rootsift error)."""
    try:
        with time_limit(HANG_SECONDS):
            events, rejects = parse(name, data, **options)
    except Hang:
        raise AssertionError(f"{name} with {options} hangs on {data!r}") from None
    except RootsiftError as exc:
        assert str(exc).strip(), f"{type(exc).__name__} without a message"
        return "error"
    check_items(events, rejects, data.count(b"\n") + 1)
    return "parsed"


# -- inputs --------------------------------------------------------------------------

NAMES = sorted(formats.all_formats())
CASES = sorted(GOLDEN.glob("*/*.expected.json"))


def _input(expected: Path) -> Path:
    stem = expected.name.removesuffix(".expected.json")
    return next(p for p in expected.parent.glob(stem + ".*") if not p.name.endswith(".expected.json"))


def _options(expected: Path) -> dict[str, Any]:
    import json

    return dict(json.loads(expected.read_text()).get("options", {}))


def _real_lines() -> list[bytes]:
    """Lines of every golden input and of the corpora (first 64 KiB of each file)."""
    lines: list[bytes] = []
    for case in CASES:
        lines += _input(case).read_bytes().split(b"\n")
    if CORPORA.exists():
        for path in sorted(p for p in CORPORA.rglob("*") if p.is_file()):
            inp = open_input(path)
            try:
                lines += inp.stream.read(64 << 10).split(b"\n")[:200]
            finally:
                inp.close()
    return sorted({ln for ln in lines if ln.strip()})


REAL = _real_lines()
TOKENS = [
    b"# Time: ",
    b"# User@Host: ",
    b"# Query_time: ",
    b"SET timestamp=",
    b"use ",
    b"LOG:  duration: ",
    b"statement: ",
    b"\t",
    b"  ",
    b"# HELP ",
    b"# TYPE ",
    b"{",
    b"}",
    b'le="',
    b'"',
    b"\\",
    b"\\x",
    b"[",
    b"]",
    b" - - ",
    b"/Jan/",
    b":00:00 +0000",
    b"2024-01-01",
    b"T10:00:00Z",
    b" 1.5e308",
    b"-",
    b"=",
    b";",
    b",",
    b"\r",
    b"\x00",
    b"\xff",
    b"\xc3",
    b"9" * 30,
    b"NaN",
    b"inf",
    b"%",
    b"$",
]
token_lines = st.lists(
    st.lists(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=12)), max_size=14).map(b"".join),
    max_size=24,
).map(b"\n".join)


@st.composite
def mutated(draw: st.DrawFn, pool: list[bytes]) -> bytes:
    """A few lines of ``pool`` with bytes flipped, cut, inserted, lines repeated and swapped."""
    lines = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=12))
    for _ in range(draw(st.integers(0, 6))):
        i = draw(st.integers(0, len(lines) - 1))
        line = lines[i]
        op = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "swap", "join"]))
        at = draw(st.integers(0, len(line)))
        if op == "flip" and line:
            at = min(at, len(line) - 1)
            lines[i] = line[:at] + bytes([line[at] ^ draw(st.integers(1, 255))]) + line[at + 1 :]
        elif op == "cut":
            lines[i] = line[:at]
        elif op == "insert":
            lines[i] = line[:at] + draw(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=8))) + line[at:]
        elif op == "repeat":
            lines.insert(i, line)
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "join" and i + 1 < len(lines):
            lines[i : i + 2] = [line + lines[i + 1]]
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


# -- every registered format ---------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@profile(150)
@given(data=st.one_of(st.binary(max_size=2048), token_lines))
def test_any_bytes(name: str, data: bytes) -> None:
    outcome(name, data)


@pytest.mark.parametrize("name", NAMES)
@profile(100)
@given(data=mutated(REAL))
def test_mutated_real_lines(name: str, data: bytes) -> None:
    outcome(name, data)


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
@profile(30)
@given(seed=st.data())
def test_mutated_golden_input_with_its_options(case: Path, seed: st.DataObject) -> None:
    """The golden input's own lines, mutated, read with the options it was written for."""
    import json

    fmt = json.loads(case.read_text())["format"]
    own = [ln for ln in _input(case).read_bytes().split(b"\n") if ln.strip()] or [b""]
    outcome(fmt, seed.draw(mutated(own)), **_options(case))


# -- options a user types -------------------------------------------------------------

LOG_FORMAT_PIECES = st.sampled_from(
    ["$remote_addr", "$time_local", "$request", "$status", "$request_time", "$upstream_response_time", "$msec",
     "${var}", "$", "%h", "%t", "%r", "%>s", "%D", "%{ms}T", "%{%Y-%m-%d}t", "%{X}i", "%", "%%", '"', "'", "[", "]",
     " ", "log_format x ", "escape=json ", "LogFormat ", "\\", "{", "}", ";", "\n", "$time_iso8601", "%b", "%T"]
)  # fmt: skip


@pytest.mark.parametrize("name", [n for n, cls in formats.all_formats().items() if "log_format" in cls.reads])
@profile(200)
@given(
    log_format=st.one_of(st.lists(LOG_FORMAT_PIECES, max_size=12).map("".join), st.text(max_size=40)),
    data=st.one_of(mutated(REAL), token_lines),
)
def test_any_log_format(name: str, log_format: str, data: bytes) -> None:
    outcome(name, data, log_format=log_format)


PREFIX_PIECES = st.sampled_from(["%m", "%t", "%p", "%l", "%u", "%d", "%a", "%h", "%r", "%q", "%c", "%e", "%x", "%v",
                                 "%Q", "%n", "%s", "%i", "%%", "%", " ", "[", "]", "@", ":", "-", "%b", "%P", "%z"])  # fmt: skip


@pytest.mark.parametrize("name", [n for n, cls in formats.all_formats().items() if "log_line_prefix" in cls.reads])
@profile(200)
@given(
    prefix=st.one_of(st.lists(PREFIX_PIECES, max_size=10).map("".join), st.text(max_size=30)),
    data=st.one_of(mutated(REAL), token_lines),
)
def test_any_log_line_prefix(name: str, prefix: str, data: bytes) -> None:
    outcome(name, data, log_line_prefix=prefix)


@pytest.mark.parametrize("name", [n for n, cls in formats.all_formats().items() if "tz" in cls.reads])
@profile(20)
@given(
    tz=st.one_of(
        st.sampled_from(["UTC", "Europe/Berlin", "", "+02:00", "../etc", "Nowhere/Zone"]), st.text(max_size=20)
    )
)
def test_any_tz(name: str, tz: str) -> None:
    outcome(name, REAL[0] + b"\n" + REAL[-1], tz=tz)


# -- the public ingest API (JSON lines, CSV, sniffing) ---------------------------------

INGEST_FORMATS = ["jsonl", "csv", "tsv", "auto", "nginx", "mysql-slow"]
json_ish = st.lists(
    st.lists(st.sampled_from([b"{", b"}", b'"', b"a", b":", b",", b"1", b"null", b"[", b"]", b"\\u00e9", b" ",
                              b'"timestamp"', b'"2024-01-01T00:00:00Z"', b"1704067200", b"\xff", b"\t", b""]), max_size=20)
    .map(b"".join),
    max_size=10,
).map(b"\n".join)  # fmt: skip


@pytest.mark.parametrize("fmt", INGEST_FORMATS)
def test_ingest_api_any_bytes(fmt: str, tmp_path: Path) -> None:
    """Through ``Rootsift.ingest``: a summary with counted events and rejects, or a rootsift error."""
    store = Rootsift(tmp_path / "store")
    src = tmp_path / "input.log"
    seen: dict[str, int] = {}

    @profile(30)
    @given(data=st.one_of(st.binary(max_size=512), json_ish, mutated(REAL)))
    def check(data: bytes) -> None:
        src.write_bytes(data)
        try:
            with time_limit(HANG_SECONDS * 3):
                summary = store.ingest(src, "d", format=fmt)
        except RootsiftError as exc:
            assert str(exc).strip()
            seen["error"] = seen.get("error", 0) + 1
            return
        assert summary.events >= 0 and summary.rejects >= 0
        seen["ingested"] = seen.get("ingested", 0) + 1

    try:
        check()
    finally:
        store.close()
    assert seen, "no example ran"


# --- access logs with --log-format: DuckDB's split and casts give what the parser gives -------

_ACCESS_VARS = {
    "$remote_addr": st.sampled_from(["10.0.0.1", "::1", "-", "a b"]),
    "$status": st.sampled_from(["200", "-", "099", "99999999999999999999", "2x0", ""]),
    "$body_bytes_sent": st.sampled_from(["0", "512", "-", "123456789012345", "1234567890123456", "1.5"]),
    "$request_time": st.sampled_from(["0.001", "12.500", "-", "1.5", "0.0001", "abc", "999999999999.999"]),
    "$upstream_response_time": st.sampled_from(
        ["0.004", "-", "0.001, 0.002", "1.000 : 2.000", "0.001, -", ", 0.002", "0.0x1", "12345678901.000"]
    ),
    "$upstream_addr": st.sampled_from(["10.0.0.2:80", "-", "a:1, b:2", "a:1, b:2 : c:3", "a:1,, b", ""]),
    "$upstream_status": st.sampled_from(["200", "502, 200", "-", "99999999999999999999", "502 : 504"]),
    '"$request"': st.sampled_from(
        ['"GET /a?x=1 HTTP/1.1"', '"POST /b HTTP/2.0"', '"-"', '"\\x16\\x03\\x01"', '"GET /"', '"get /a HTTP/1.1"']
    ),
    '"$http_user_agent"': st.sampled_from(['"curl/8"', '"-"', '""', '"a \\"quoted\\" b"']),
}
_TIMES = st.sampled_from(
    [
        "01/Mar/2024:10:00:00 +0000",
        "31/Dec/2023:23:59:59 -0130",
        "31/Feb/2024:10:00:00 +0000",
        "1/Mar/2024:10:00:00 +0000",
    ]
)


@st.composite
def access_logs(draw: st.DrawFn) -> tuple[str, bytes]:
    """A ``log_format`` of some of ``_ACCESS_VARS`` after ``[$time_local]``, and lines for it
    whose values have the shapes the SQL reads and others (which Python reads or rejects)."""
    names = draw(st.lists(st.sampled_from(sorted(_ACCESS_VARS)), min_size=1, max_size=6, unique=True))
    seps = [draw(st.sampled_from([" ", " - ", " x="])) for _ in names]
    log_format = "[$time_local]" + "".join(sep + name for sep, name in zip(seps, names))
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        values = [draw(_ACCESS_VARS[name]) for name in names]
        line = f"[{draw(_TIMES)}]" + "".join(sep + value for sep, value in zip(seps, values))
        lines.append(line if draw(st.integers(0, 9)) else line[: draw(st.integers(0, len(line)))])
    return log_format, ("\n".join(lines) + "\n").encode()


@profile(30)
@given(case=access_logs())
def test_duckdb_casts_of_any_log_format_give_the_parsers_events(case: tuple[str, bytes], tmp_path: Path) -> None:
    import json
    import shutil
    from datetime import UTC

    from helpers.store import stored_rows
    from rootsift.ingest import textrun
    from rootsift.ingest.formats.access_nginx import compile_user
    from rootsift.ingest.formats.access_sql import sql_plan

    log_format, data = case
    assert sql_plan(compile_user(log_format, UTC)) is not None  # DuckDB reads this format
    src = tmp_path / "access.log"
    src.write_bytes(data)
    out = []
    for sql in (True, False):
        shutil.rmtree(tmp_path / "data", ignore_errors=True)
        textrun.SQL_LINES = sql
        try:
            with time_limit(HANG_SECONDS), Rootsift(tmp_path / "data") as rs:
                try:
                    summary = rs.ingest(src, "web", format="nginx", log_format=log_format)
                except RootsiftError as exc:  # every line rejected: the same error both ways
                    out.append(str(exc))
                    continue
                rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in stored_rows(rs, "web"))
                types = sorted((k, v.type) for k, v in rs.backend.fields("web").items())
                rejects = [(r["line"], r["reason"]) for r in summary.first_rejects]
                out.append(json.dumps([rows, types, summary.events, summary.rejects, rejects]))
        finally:
            textrun.SQL_LINES = True
    assert out[0] == out[1]
