"""A large file of a format parsed in Python, parsed by a child process.

The parser is pure Python, so in the ingest's reader thread it shares the GIL (and the two
cores) with the thread that stores its blocks: a 1M-entry slow log took 15.4 s to parse
alone and 23.7 s to ingest, the reader thread being the critical path throughout. In a
child process the parser has a core and a GIL of its own; the parent only stores the
blocks it hands over. The child runs the same ``text_blocks`` over the same file, so the
blocks (their JSON-lines files in the ingest's temporary folder, line numbers, rejects,
bytes read) are those the reader thread would have made.

Used for one regular file (not a stream, not a directory) of at least ``CHILD_MIN_BYTES``
whose lines are not parsed by DuckDB; a smaller file is not worth the child's start-up
(its interpreter and imports: the parsers, not DuckDB or numpy, which ``textrun`` imports
only where a path needs them; tests/test_textchild.py checks it). The child is ``python -m rootsift.ingest.textchild``, not a
``multiprocessing`` child: a spawned one re-runs the caller's main module, which a library
cannot ask of its callers, and a forked one would copy the parent's DuckDB threads
mid-flight. The job goes to its stdin; each block comes back on its stdout as a
length-prefixed pickle, so the pipe is the queue and the parser runs at most a pipe's
worth of blocks ahead of the store. The child ignores SIGINT (the parent decides what an
interrupt means, and ends the child); a write to a parent that has gone ends it.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rootsift.errors import RootsiftError
from rootsift.ingest import textrun
from rootsift.ingest.formats.base import FormatOptions

CHILD_PARSER = True
"""Parse large files of Python-parsed formats in a child process (tests turn it off to compare)."""
CHILD_MIN_BYTES = 64 << 20
"""Smallest file (bytes on disk) parsed in a child: about 3 s of slow-log parsing."""
SETTINGS = ("SQL_LINES", "SQL_SLOW_LOG", "TEXT_BLOCK_BYTES", "FIRST_BLOCK_BYTES", "MAX_EVENT_BYTES", "MAX_TEXT_CHARS")
"""``textrun``'s settings the child takes from its parent (a test may have changed them)."""
_FRAME = struct.Struct("<Q")


@dataclass
class _Job:
    name: str
    fmt: str
    options: FormatOptions
    tmp_dir: str
    block_bytes: int
    stop_at_reject: bool
    settings: dict[str, Any]


@dataclass
class _Failed:
    """The child's last frame when ``text_blocks`` raised: the error, raised in the parent."""

    error: BaseException


@dataclass
class _Ended:
    """The child's last frame when every block was handed over."""


def child_blocks(
    name: str, fmt: str, options: FormatOptions, tmp_dir: str, block_bytes: int, stop_at_reject: bool
) -> Iterator[Any]:
    """The ``TextBlock``s of ``text_blocks`` over the one file ``name`` in format ``fmt``,
    parsed by a child process; an error the child met is raised here."""
    job = _Job(name, fmt, options, tmp_dir, block_bytes, stop_at_reject, {k: getattr(textrun, k) for k in SETTINGS})
    # the child imports this rootsift, wherever it was imported from (a source tree in bench/)
    package_root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    said = Path(tmp_dir) / "parser.stderr"
    with open(said, "wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-m", "rootsift.ingest.textchild"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write(pickle.dumps(job))
        child.stdin.close()
        while True:
            item = _read(child.stdout)
            if isinstance(item, _Ended):
                return
            if isinstance(item, _Failed):
                raise item.error
            if item is None:
                code = child.wait()
                last = said.read_text(errors="replace").strip().splitlines()[-1:]
                why = f": {last[0]}" if last else ""
                raise RootsiftError(f"{name}: the parser process ended unexpectedly (exit code {code}){why}")
            yield item
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        child.stdout.close()


def _read(stream: IO[bytes]) -> Any:
    """The next frame's object; None when the stream ended before a whole one."""
    size = stream.read(_FRAME.size)
    if len(size) < _FRAME.size:
        return None
    (n,) = _FRAME.unpack(size)
    data = stream.read(n)
    return pickle.loads(data) if len(data) == n else None


def _write(stream: IO[bytes], item: object) -> None:
    data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_FRAME.pack(len(data)) + data)
    stream.flush()


def main() -> None:
    """The child: ``text_blocks`` over the job's file, each block written as it is sealed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    job: _Job = pickle.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    try:
        from rootsift.ingest import formats

        for key, value in job.settings.items():
            setattr(textrun, key, value)
        fmt = formats.get(job.fmt)
        blocks = textrun.text_blocks(
            textrun.open_files([job.name]),
            lambda _inp, _head: fmt,
            job.options,
            job.tmp_dir,
            job.block_bytes,
            name_files=False,
            stop_at_reject=job.stop_at_reject,
        )
        for block in blocks:
            _write(out, block)
    except BrokenPipeError:
        return  # the parent has gone
    except BaseException as exc:  # noqa: BLE001 - raised in the parent
        _write(out, _Failed(_portable(exc)))
        return
    _write(out, _Ended())


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (rootsift's errors do), else its message as a RootsiftError."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:  # noqa: BLE001 - any failure to pickle
        return RootsiftError(f"{type(exc).__name__}: {exc}")
    return exc


if __name__ == "__main__":
    # run as the importable module, so that what the child pickles names it, not __main__
    from rootsift.ingest import textchild

    textchild.main()
