"""File ingest: input stream → blocks → staged tables → committed segments.

A reader thread decompresses and cuts blocks into a queue of at most two, so memory
is bounded by a few blocks whatever the input's size; the calling thread stages and
commits each block. After each commit the rows are durable and ``on_commit`` is told.
"""

from __future__ import annotations

import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rootsift.errors import InputFormatError, UsageError
from rootsift.ingest.csv import CsvReader
from rootsift.ingest.jsonl import BlockStats, JsonLinesReader
from rootsift.ingest.rejects import RejectLog
from rootsift.ingest.sources import FORMATS, Input, line_blocks, open_input, sniff_format
from rootsift.ingest.staging import Stager
from rootsift.ingest.timefield import normalise_format
from rootsift.store.duckdb import DuckDBBackend

BLOCK_BYTES = 32 << 20
COMMIT_ROWS = 250_000
"""Rows per transaction: DuckDB writes transactions this large straight to the file."""
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
    if format not in FORMATS:
        raise UsageError(f"--format {format!r} is not one of {', '.join(FORMATS)}")
    if strictness not in STRICTNESS:
        raise UsageError(f"--on-error {strictness!r} is not one of {', '.join(STRICTNESS)}")
    fmt = normalise_format(time_format)
    started = time.perf_counter()
    inp = open_input(source)
    try:
        head = inp.stream.read(64 << 10)
        kind = sniff_format(head, inp.name) if format == "auto" else format
        backend.state(dataset, create=True)
        summary = IngestSummary(dataset, inp.name, kind, inp.compression)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        log = RejectLog(backend.dataset_dir(dataset) / "rejects" / f"{stamp}-{Path(inp.name).name or 'stdin'}.jsonl")
        tmp_root = backend.data_dir / ".tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=tmp_root) as tmp:
            cur = backend.cursor()
            try:
                _run(
                    backend,
                    cur,
                    dataset,
                    inp,
                    head,
                    kind,
                    tmp,
                    time_field,
                    fmt,
                    strictness,
                    block_bytes,
                    progress,
                    on_commit,
                    summary,
                    log,
                )
            finally:
                cur.close()
                log.close()
        summary.rejects = log.count
        summary.first_rejects = [r.as_dict() for r in log.first]
        summary.rejects_file = str(log.path) if log.count else None
        summary.seconds = time.perf_counter() - started
        return summary
    finally:
        inp.close()


def _run(
    backend,
    cur,
    dataset,
    inp: Input,
    head: bytes,
    kind: str,
    tmp: str,
    time_field,
    fmt,
    strictness,
    block_bytes,
    progress,
    on_commit,
    summary: IngestSummary,
    log: RejectLog,
) -> None:  # type: ignore[no-untyped-def]
    fields = backend.fields(dataset)
    stream = _rest(head, inp)
    if kind == "json":
        stream, kind = _array_to_lines(cur, head, inp, tmp), "jsonl"
    if kind in ("csv", "tsv"):
        header, _, rest = head.partition(b"\n")
        stream = _rest(rest, inp)
        reader: Stager = CsvReader(
            cur,
            fields,
            tmp,
            time_field,
            fmt,
            delimiter="," if kind == "csv" else "\t",
            header=header.lstrip(b"\xef\xbb\xbf"),
        )
        first_line = 2
    else:
        reader = JsonLinesReader(cur, fields, tmp, time_field, fmt)
        first_line = 1
    blocks: queue.Queue[tuple[bytes, int, BlockStats | None] | BaseException | None] = queue.Queue(maxsize=2)
    measure = kind == "jsonl"

    stop = threading.Event()

    def put(item: tuple[bytes, int, BlockStats | None] | BaseException | None) -> bool:
        while not stop.is_set():
            try:
                blocks.put(item, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        # Runs beside DuckDB (which releases the GIL): byte counts and the block's file cost little wall time.
        try:
            for block, line in line_blocks(stream, block_bytes):
                if not put((block, line + first_line - 1, BlockStats.of(block, tmp) if measure else None)):
                    return
            put(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer
            put(exc)

    producer = threading.Thread(target=produce, name="rootsift-ingest-reader", daemon=True)
    producer.start()
    writer = backend.writer(dataset, cur)

    def commit() -> None:
        summary.events += writer.commit()
        if on_commit:
            on_commit(summary.events)

    try:
        while (item := blocks.get()) is not None:
            if isinstance(item, BaseException):
                raise InputFormatError(f"{inp.name}: cannot read input: {item}") from item
            block, line, stats = item
            staged = reader.stage(block, line, stats)
            summary.blocks += 1
            summary.exact_blocks += staged.exact
            for rej in staged.rejects:
                log.add(rej)
            if staged.rejects and strictness == "raise":
                commit()
                first = staged.rejects[0]
                raise InputFormatError(f"{inp.name}: line {first.line}: {first.reason}")
            if staged.rows:
                writer.append(staged.table, staged.new_fields, staged.rows, staged.span)
            cur.execute(f"DROP TABLE IF EXISTS {staged.table}")
            summary.new_fields += [f.name for f in staged.new_fields]
            if writer.pending >= COMMIT_ROWS or writer.segment_full():
                commit()
            if progress:
                progress(inp.position(), inp.size, summary.events + writer.pending)
        commit()
    finally:
        writer.rollback()
        stop.set()  # an early exit must not leave the reader thread blocked on a full queue
        producer.join()
    if reader.time is not None:
        summary.time_field, summary.time_format = reader.time.field, reader.time.format


def _rest(head: bytes, inp: Input):  # type: ignore[no-untyped-def]
    import io

    from rootsift.ingest.sources import Prefetched

    return io.BufferedReader(Prefetched(head, inp.stream), buffer_size=1 << 20)


def _array_to_lines(cur, head: bytes, inp: Input, tmp: str):  # type: ignore[no-untyped-def]
    """Spool a JSON array to disk, then let DuckDB split it into one object per line."""
    import os

    from rootsift.store.sqltext import literal

    src = os.path.join(tmp, "array.json")
    with open(src, "wb") as fh:
        fh.write(head)
        while chunk := inp.stream.read(8 << 20):
            fh.write(chunk)
    out = os.path.join(tmp, "array.jsonl")
    try:
        rel = cur.execute(f"SELECT json FROM read_json_objects({literal(src)}, format='array')")
        with open(out, "wb") as fh:
            while batch := rel.fetchmany(50_000):
                fh.write(b"".join(str(row[0]).encode() + b"\n" for row in batch))
    except Exception as exc:
        raise InputFormatError(f"{inp.name}: not a valid JSON array: {str(exc).splitlines()[0]}") from exc
    finally:
        os.unlink(src)
    return open(out, "rb")  # noqa: SIM115
