"""Large files of formats parsed in Python, parsed by a child process (``ingest/textchild.py``):
the same events, rejects and errors as the reader thread's parse."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from rootsift import Rootsift
from rootsift.errors import RootsiftError
from rootsift.ingest import formats, textchild, textrun
from rootsift.ingest.formats.base import FormatOptions

ENTRY = (
    "# Time: 2024-03-01T10:00:{s:02d}.339563Z\n"
    "# User@Host: app[app] @ web{h} [10.0.0.{h}]  Id: {i}\n"
    "# Query_time: 0.{q:06d}  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: {i}\n"
    "SET timestamp={t};\n"
    "SELECT * FROM t{h} WHERE id = {i};\n"
)


def _slow_log(path: Path, n: int) -> Path:
    """``n`` entries after a line outside any entry (a reject), every 50th in another shape
    (``use``, two statement lines) and every 97th with an unreadable time (a reject)."""
    parts = ["stray text before the first entry\n"]
    for i in range(n):
        entry = ENTRY.format(s=i % 60, h=i % 7, i=i, q=(i * 7919) % 999_999, t=1709287200 + i)
        if i % 97 == 5:
            entry = entry.replace("2024-03-01T10", "margdl 10").replace(f"SET timestamp={1709287200 + i};\n", "")
        if i % 50 == 3:
            entry = entry.replace("SET timestamp", f"use db{i % 3};\nSET timestamp").replace(";\n", "\n  LIMIT 1;\n", 3)
        parts.append(entry)
    path.write_text("".join(parts))
    return path


def _ingest(tmp: Path, source: Path, child: bool, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Any, Any]:
    monkeypatch.setattr(textchild, "CHILD_PARSER", child)
    monkeypatch.setattr(textchild, "CHILD_MIN_BYTES", 0)
    calls: list[str] = []
    real = textchild.child_blocks

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr("rootsift.ingest.pipeline.child_blocks", counted)
    data = tmp / ("child" if child else "thread")
    with Rootsift(data) as rs:
        summary = rs.ingest(source, "db", format="mysql-slow", **kw)
        rows = rs.backend.execute_sql(
            "SELECT * FROM " + rs.backend.relation_text("db", None, None) + " ORDER BY 1, 2", []
        ).rows
    assert bool(calls) == child
    return summary, rows


@pytest.mark.parametrize("compressed", [False, True])
def test_child_parse_stores_what_the_reader_thread_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compressed: bool
) -> None:
    source = _slow_log(tmp_path / "slow.log", 3000)
    if compressed:
        gz = tmp_path / "slow.log.gz"
        gz.write_bytes(gzip.compress(source.read_bytes()))
        source = gz
    # small blocks, so that many pass through the pipe
    monkeypatch.setattr(textrun, "TEXT_BLOCK_BYTES", 64 << 10)
    thread, thread_rows = _ingest(tmp_path, source, False, monkeypatch)
    child, child_rows = _ingest(tmp_path, source, True, monkeypatch)
    assert thread.events == child.events == 3000 - len(range(5, 3000, 97))
    assert thread.rejects == child.rejects == 1 + len(range(5, 3000, 97))
    assert thread.first_rejects == child.first_rejects
    assert child_rows == thread_rows
    assert child.blocks == thread.blocks > 10


def test_child_parse_stops_at_the_first_reject_as_the_thread_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = _slow_log(tmp_path / "slow.log", 500)
    outcomes = []
    for child in (False, True):
        with pytest.raises(RootsiftError) as caught:
            _ingest(tmp_path / str(child), source, child, monkeypatch, strictness="raise")
        outcomes.append(str(caught.value))
    assert outcomes[0] == outcomes[1]
    assert "line" in outcomes[0]


def test_an_error_in_the_child_is_raised_in_the_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = _slow_log(tmp_path / "slow.log", 50)
    with pytest.raises(RootsiftError, match="Nowhere/Else"):
        _ingest(tmp_path, source, True, monkeypatch, tz="Nowhere/Else")


def test_a_child_that_dies_is_a_clear_error(tmp_path: Path) -> None:
    from rootsift.ingest.formats.base import FormatOptions

    missing = str(tmp_path / "gone.log")  # the child cannot open it: its error comes back
    with pytest.raises(RootsiftError, match="gone.log"):
        list(textchild.child_blocks(missing, "mysql-slow", FormatOptions(), str(tmp_path), 1 << 20, False))


def test_what_ctrl_c_becomes_is_an_interrupt() -> None:
    import duckdb

    from rootsift.cli.common import interrupted

    def raised_while(first: BaseException, then: BaseException) -> BaseException:
        try:
            try:
                raise first
            except BaseException:
                raise then  # noqa: B904 - the context is what is tested
        except BaseException as exc:
            return exc

    assert interrupted(KeyboardInterrupt())
    assert interrupted(duckdb.InterruptException("INTERRUPT Error: interrupted!"))
    assert interrupted(RuntimeError("Query interrupted"))  # DuckDB took the SIGINT itself
    assert interrupted(raised_while(KeyboardInterrupt(), BufferError("cannot close exported pointers exist")))
    wrapped = RootsiftError("query failed")
    wrapped.__cause__ = duckdb.InterruptException("interrupted")
    assert interrupted(wrapped)
    assert not interrupted(RuntimeError("Query failed"))
    assert not interrupted(raised_while(ValueError("x"), RootsiftError("y")))


def test_ctrl_c_during_a_large_ingest_ends_it_and_its_parser(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    entry = ENTRY.format(s=1, h=2, i=3, q=4, t=1709287200)
    source = tmp_path / "slow.log"
    with open(source, "w") as out:
        for _ in range((textchild.CHILD_MIN_BYTES // len(entry)) * 2):
            out.write(entry)

    def as_from_a_shell() -> None:
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    for delay in (1.5, 4.0):
        argv = [sys.executable, "-m", "rootsift.cli", "ingest", str(source), "--dataset", "db"]
        proc = subprocess.Popen(
            [*argv, "--data", str(tmp_path / f"data{delay}"), "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=as_from_a_shell,
        )
        time.sleep(delay)
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        parser = [int(p) for p in children.read_text().split()] if children.exists() else []
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # it finished first: nothing to interrupt
            continue
        assert proc.returncode == 130, err
        assert err.strip().splitlines() == ["interrupted (Ctrl-C)"]
        assert json.loads(out.strip().splitlines()[-1])["error"]["type"] == "Interrupted"
        for pid in parser:  # the parser process ended with the ingest
            deadline = time.monotonic() + 10
            state = Path(f"/proc/{pid}/status")
            while _running(state) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not _running(state)


def _running(status: Path) -> bool:
    try:
        return "zombie" not in status.read_text()
    except OSError:
        return False


def test_the_parser_process_imports_neither_duckdb_nor_numpy(tmp_path: Path) -> None:
    """The child only parses and writes blocks: its start-up is on an ingest's critical path
    (the store waits for its first block), and DuckDB and numpy were most of it."""
    import subprocess
    import sys

    source = _slow_log(tmp_path / "slow.log", 300)
    script = (
        "import sys, tempfile\n"
        "from rootsift.ingest import formats, textchild, textrun\n"
        "from rootsift.ingest.formats.base import FormatOptions\n"
        "fmt = formats.get('mysql-slow')\n"
        f"blocks = textrun.text_blocks(textrun.open_files([{str(source)!r}]), lambda i, h: fmt, FormatOptions(),"
        " tempfile.mkdtemp(), 1 << 20, name_files=False)\n"
        "print(sum(len(b.lines) for b in blocks), sorted(m for m in ('duckdb', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split()
    fmt = formats.get("mysql-slow")
    here = textrun.text_blocks(
        textrun.open_files([str(source)]), lambda i, h: fmt, FormatOptions(), str(tmp_path), 1 << 20, name_files=False
    )
    assert out == [str(sum(len(b.lines) for b in here)), "[]"]
    assert int(out[0]) > 250
