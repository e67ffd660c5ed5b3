"""File ingest: the entry point, its options and its summary (the work is in runner.py)."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rootsift.errors import UsageError
from rootsift.ingest.jsonl import JsonLinesReader
from rootsift.ingest.rejects import RejectLog
from rootsift.ingest.runner import BLOCK_BYTES, IngestRun
from rootsift.ingest.sources import (
    FORMATS,
    open_input,
    sniff_format,
)
from rootsift.ingest.timefield import normalise_format
from rootsift.store.duckdb import DuckDBBackend

STRICTNESS = ("ignore", "warn", "raise")


@dataclass
class IngestSummary:
    """What an ingest did: counts, time, where the rejects are."""

    dataset: str
    source: str
    format: str
    compression: str
    events: int = 0
    rejects: int = 0
    rejects_file: str | None = None
    first_rejects: list[dict[str, object]] = field(default_factory=list)
    seconds: float = 0.0
    new_fields: list[str] = field(default_factory=list)
    time_field: str | None = None
    time_format: str | None = None
    exact_blocks: int = 0
    blocks: int = 0

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["events_per_second"] = round(self.events_per_second, 1)
        return out


Progress = Callable[[int, int | None, int], None]
"""progress(bytes_read, total_bytes_or_None, events_so_far)"""


@dataclass
class IngestOptions:
    """How to read one input."""

    format: str = "auto"
    time_field: str | None = None
    time_format: str | None = None
    strictness: str = "warn"
    block_bytes: int = BLOCK_BYTES

    def check(self) -> None:
        if self.format not in FORMATS:
            raise UsageError(f"--format {self.format!r} is not one of {', '.join(FORMATS)}")
        if self.strictness not in STRICTNESS:
            raise UsageError(f"--on-error {self.strictness!r} is not one of {', '.join(STRICTNESS)}")
        self.time_format = normalise_format(self.time_format)


def ingest_file(
    backend: DuckDBBackend,
    dataset: str,
    source: str | Path,
    *,
    format: str = "auto",
    time_field: str | None = None,
    time_format: str | None = None,
    strictness: str = "warn",
    block_bytes: int = BLOCK_BYTES,
    progress: Progress | None = None,
    on_commit: Callable[[int], None] | None = None,
) -> IngestSummary:
    """Ingest one file (or ``-`` for stdin) into ``dataset``; return the summary.

    Bad lines are counted rejects saved under the dataset's ``rejects/`` folder; with
    ``strictness='raise'`` the first one stops the ingest (what was committed stays).
    """
    opts = IngestOptions(format, time_field, time_format, strictness, block_bytes)
    opts.check()
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        inp = open_input(source)
        stack.callback(inp.close)
        head = inp.stream.read(64 << 10)
        kind = sniff_format(head, inp.name) if opts.format == "auto" else opts.format
        backend.state(dataset, create=True)
        summary = IngestSummary(dataset, inp.name, kind, inp.compression)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        log = RejectLog(
            backend.dataset_dir(dataset)
            / "rejects"
            / f"{stamp}-{'stdin' if inp.name == '-' else Path(inp.name).name}.jsonl"
        )
        stack.callback(log.close)
        tmp_root = backend.data_dir / ".tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=tmp_root))
        cur = backend.cursor()
        stack.callback(cur.close)
        run = IngestRun(backend, cur, dataset, opts, tmp, summary, log, progress, on_commit)
        stream, reader = run.reader_for(inp, head, kind, stack)
        if not (isinstance(reader, JsonLinesReader) and run.whole_file(inp, head, reader)):
            run.consume(inp, stream, reader)
    summary.rejects = log.count
    summary.first_rejects = [r.as_dict() for r in log.first]
    summary.rejects_file = str(log.path) if log.count else None
    summary.seconds = time.perf_counter() - started
    return summary
