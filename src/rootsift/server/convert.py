"""Sealed write-ahead log files into Arrow files (OTLP events) and JSON-lines files per
dataset, for the applier's ingest. OTLP requests are logged as received (protobuf) and converted here, in bulk, in a
child process: the conversion is Python and holds a core, so it runs beside the server's
event loop (which only checks and logs requests) instead of sharing its interpreter lock.

The child (``python -m rootsift.server.convert``) says ``{"ready": true}`` once it has
imported what it needs, then reads one request per line on stdin,
``{"files": [...], "out": DIR, "arrow": BOOL}``, and answers one line on stdout: ``{"datasets": {NAME:
[PATH, LINES, SKIPPED]}}`` or ``{"error": WHY}``. It ends when stdin closes, as it does
when the server exits, even by kill -9.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import logging
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, NamedTuple

from rootsift.server.wal import JSONL, OTLP_TRACES, records

log = logging.getLogger("rootsift.server")


class Poison(OSError):
    """A record the conversion fails on (not the disk): ``path``'s record ending at ``end``.
    The applier retries it, then moves it out of the log (applier.py, ``POISON_TRIES``)."""

    def __init__(self, why: str, path: Path, end: int) -> None:
        super().__init__(why)
        self.path, self.end = path, end


ARROW = "arrow:"
"""The prefix of a dataset's Arrow part in ``convert_files``' answer (and in apply.state)."""


class Converted(NamedTuple):
    path: Path
    """A JSON-lines file of the dataset's events, or an Arrow IPC file of its OTLP events
    (the caller deletes it)."""
    lines: int
    """Events in it."""
    skipped: int
    """OTLP items without a time: already counted as rejected when they were received."""


def convert_files(files: list[Path], out: Path, arrow: bool = True) -> dict[str, Converted]:
    """Every record of ``files`` (in order), into the directory ``out``: JSON lines (Honeycomb
    events, metric points) appended to one file per dataset (``DATASET.jsonl``, answered
    under the dataset's name), and each dataset's OTLP spans and log records as one Arrow IPC
    file of this call (``DATASET.N.arrow``, answered under ``ARROW + dataset``:
    otlp_columns.py); the events and skipped items of this call. Without ``arrow`` (a store
    with no Arrow path) OTLP events are written as JSON lines too (otlp_lines.py)."""
    import pyarrow as pa

    from rootsift.server import otlp_lines, otlp_types
    from rootsift.server.otlp_columns import Columns

    memo = _memo()
    sinks: dict[str, tuple[IO[bytes], str, list[int]]] = {}
    gathered: dict[str, tuple[Columns, list[int]]] = {}
    try:
        for path in files:
            for record in records(path):
                if record.kind == JSONL or not arrow:
                    if record.dataset not in sinks:
                        name = str(out / f"{record.dataset}.jsonl")
                        sinks[record.dataset] = (open(name, "ab", buffering=1 << 20), name, [0, 0])  # noqa: SIM115
                    sink, _, counts = sinks[record.dataset]
                    payload = record.payload
                if record.kind == JSONL:
                    sink.write(payload if payload.endswith(b"\n") else payload + b"\n")
                    counts[0] += payload.count(b"\n") + (not payload.endswith(b"\n"))
                    continue
                if arrow:
                    columns, counts = gathered.get(record.dataset) or gathered.setdefault(
                        record.dataset, (Columns(), [0])
                    )
                signal = "traces" if record.kind == OTLP_TRACES else "logs"
                try:
                    # the real message parsed it when it was received: the lazy ones can
                    if not arrow:
                        request = otlp_types.lazy_request(signal).FromString(payload)
                        to_lines = otlp_lines.span_lines if record.kind == OTLP_TRACES else otlp_lines.log_lines
                        lines, skipped = to_lines(request, memo)
                        sink.writelines(lines)
                        counts[0] += len(lines)
                        counts[1] += skipped
                    elif record.kind == OTLP_TRACES:
                        counts[0] += columns.add_spans(record.payload, memo)
                    else:
                        counts[0] += columns.add_logs(record.payload, memo)
                except Exception as exc:  # this record, every time: not the disk (OSError is raised as is)
                    why = f"{type(exc).__name__}: {exc}"
                    raise Poison(
                        f"{path.name}: the record ending at byte {record.end}: {why}", path, record.end
                    ) from exc
    finally:  # on an error the caller cuts the files back (applier.py)
        for sink, _, _ in sinks.values():
            sink.close()
    done = {d: Converted(Path(name), counts[0], counts[1]) for d, (_, name, counts) in sinks.items()}
    for dataset, (columns, counts) in gathered.items():
        if not len(columns) and not counts[0]:
            continue
        n = sum(1 for _ in out.glob(f"{dataset}.*.arrow"))
        target = out / f"{dataset}.{n + 1}.arrow"
        table = columns.table()
        with pa.OSFile(str(target), "wb") as sink_file, pa.ipc.new_file(sink_file, table.schema) as writer:
            writer.write_table(table)
        done[ARROW + dataset] = Converted(target, table.num_rows, counts[0])
    return done


@functools.cache
def _memo() -> Any:
    """The decoded attributes, kept from one batch to the next (bounded: otlp_lines.Decoded)."""
    from rootsift.server import otlp_lines

    return otlp_lines.Decoded()


class Converter:
    """The child process that converts, started when first needed and again after it dies."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def convert(self, files: list[Path], out: Path, arrow: bool = True) -> dict[str, Converted]:
        """``convert_files`` in the child; OSError when the child fails (the applier retries)."""
        if not any(r.kind != JSONL for path in files for r in _kinds(path)):
            return convert_files(files, out)  # nothing to convert: no need for the child
        with self._lock:
            proc = self._child()
            assert proc.stdin is not None and proc.stdout is not None
            try:
                ask = {"files": [str(f) for f in files], "out": str(out), "arrow": arrow}
                proc.stdin.write(json.dumps(ask).encode() + b"\n")
                proc.stdin.flush()
                answer = proc.stdout.readline()
            except OSError:
                answer = b""
            if not answer:
                self.close()
                raise OSError("the converter process stopped")
        reply = json.loads(answer)
        if "poison" in reply:
            raise Poison(f"the converter failed: {reply['error']}", Path(reply["poison"][0]), reply["poison"][1])
        if "error" in reply:
            raise OSError(f"the converter failed: {reply['error']}")
        return {d: Converted(Path(p), n, s) for d, (p, n, s) in reply["datasets"].items()}

    def start(self) -> None:
        """Start the child now and wait until it is ready (it takes a second or more to import
        what it needs)."""
        with self._lock:
            self._child()

    def _child(self) -> subprocess.Popen[bytes]:
        """The running child; a new one is waited for until it says it is ready (its imports
        done), so that it does not take the CPU from the requests the server answers then."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "rootsift.server.convert"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
            assert self._proc.stdout is not None
            if not self._proc.stdout.readline():
                self.close()
                raise OSError("the converter process stopped before it was ready")
        return self._proc

    def close(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(OSError):
                if self._proc.stdin:
                    self._proc.stdin.close()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.stdout:
                self._proc.stdout.close()
            self._proc = None


def _kinds(path: Path) -> Iterator[Any]:
    """The file's records, stopping at the first that needs converting (a cheap look)."""
    for record in records(path):
        yield record
        if record.kind != JSONL:
            return


def _prepare() -> None:
    """Import what converting needs and build the lazy message classes, while the child
    starts with the server, rather than during its first batch."""
    import numpy  # noqa: F401
    import pyarrow.compute  # noqa: F401
    import pyarrow.ipc  # noqa: F401

    from rootsift.server import native, otlp_columns, otlp_types

    for signal_name in ("traces", "logs"):
        otlp_types.lazy_request(signal_name)
    native.span_scanner()  # the native scanner's import, where it is installed
    otlp_columns.Columns().table()


def main() -> None:
    # Ctrl-C and a service manager's SIGTERM reach the whole process group: the server
    # stops gracefully and closes our stdin, which ends this loop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _prepare()
    gc.freeze()  # what the imports made is never garbage: out of every collection's way
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            # a conversion makes millions of containers and no cycles: collecting while it
            # runs cost a sixth of its time (measured); what it leaves is collected after
            gc.disable()
            try:
                done = convert_files(
                    [Path(f) for f in request["files"]], Path(request["out"]), request.get("arrow", True)
                )
            finally:
                gc.enable()
            reply: dict[str, Any] = {"datasets": {d: [str(c.path), c.lines, c.skipped] for d, c in done.items()}}
        except Poison as exc:
            reply = {"error": str(exc), "poison": [str(exc.path), exc.end]}
        except Exception as exc:  # answered, not raised: the server logs it and retries
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
