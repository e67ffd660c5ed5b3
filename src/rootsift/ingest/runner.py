"""One ingest in progress: choosing the reader, reading in place or in blocks, committing.

A reader thread decompresses and cuts blocks into a queue of at most two, so memory is
bounded by a few blocks whatever the input's size; the calling thread stages each block
(the JSON fast path commits it at once) and commits exact-path rows every ~250k rows.
An input of more than one block is committed into pending segments, published when it
is whole (docs/adr/0010-bounded-ingest-transactions.md); a stream's blocks also end every
``commit_every`` seconds and each is committed into the head. ``on_commit`` is told the
rows that are durable and visible: after each commit of the head, or at the publish.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

import duckdb

from rootsift.errors import InputFormatError, RootsiftError
from rootsift.ingest.csv import CsvReader
from rootsift.ingest.jsonarray import array_to_lines
from rootsift.ingest.jsonl import BlockStats, JsonLinesReader
from rootsift.ingest.rejects import Reject, RejectLog
from rootsift.ingest.sources import BOM, Input, Prefetched, line_blocks, line_buffers
from rootsift.ingest.staging import Stager, write_file
from rootsift.ingest.streams import paced_buffers
from rootsift.ingest.textrun import TextBlock
from rootsift.store.duckdb import DuckDBBackend
from rootsift.store.writer import SegmentWriter

if TYPE_CHECKING:
    from rootsift.ingest.pipeline import IngestOptions, IngestSummary, Progress

BLOCK_BYTES = 128 << 20
"""Largest block: DuckDB reads and commits blocks this big about as fast as a whole file."""
IN_PLACE_BYTES = 2 << 30
"""Largest plain JSON-lines file read in place, in one checked transaction (a failed
check costs one more read, in blocks; nothing is acknowledged until the commit). One
transaction's memory grows with its size (0.53 GiB at 0.5 GB, 0.85 GiB at 5 GB): a larger
file goes in blocks, each its own transaction, into pending segments (docs/adr/0010)."""
GZIP_IN_PLACE_BYTES = IN_PLACE_BYTES // 8
"""Largest gzip file read in place: its size is compressed, and JSON lines shrink 5-10x,
so this keeps the one transaction's input near IN_PLACE_BYTES; a larger one goes in
blocks into pending segments, its memory bounded."""
COUNT_WINDOW = 8 << 20
"""Bytes of a block counted at a time for the fast path's key check."""
IN_PLACE_MEMORY_LIMIT = "1GB"
"""DuckDB's memory limit while a file is read in place (the store opens with 512 MB)."""
COMMIT_ROWS = 250_000
"""Rows per exact-path transaction: DuckDB writes transactions this large straight to the file."""

Item = tuple[bytes | None, int, BlockStats | None] | TextBlock | BaseException | None


@dataclass
class IngestRun:
    """One ingest in progress: picks the reader, runs the block queue, commits."""

    backend: DuckDBBackend
    cur: duckdb.DuckDBPyConnection
    dataset: str
    opts: IngestOptions
    tmp: str
    summary: IngestSummary
    log: RejectLog
    progress: Progress | None
    on_commit: Callable[[int], None] | None
    next_line: int = 1
    """The number of the first input line not yet cut into a block (after the header, for CSV)."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set on SIGTERM/SIGINT while a stream is read: what arrived is committed, then the ingest ends."""
    paced: bool = False
    """A stream: blocks end every ``opts.commit_every`` seconds, each is committed at once and the
    store is released between commits."""

    def reader_for(self, inp: Input, head: bytes, kind: str, stack: contextlib.ExitStack) -> tuple[BinaryIO, Stager]:
        """The byte stream to cut into blocks (after the header, for CSV) and its reader."""
        fields = self.backend.fields(self.dataset)
        if kind == "json":
            stream: BinaryIO = stack.enter_context(array_to_lines(self.cur, head, inp, self.tmp))
            return stream, JsonLinesReader(self.cur, fields, self.tmp, self.opts.time_field, self.opts.time_format)
        if kind in ("csv", "tsv"):
            header, _, rest = head.partition(b"\n")
            reader: Stager = CsvReader(
                self.cur,
                fields,
                self.tmp,
                self.opts.time_field,
                self.opts.time_format,
                delimiter="," if kind == "csv" else "\t",
                header=header.removeprefix(BOM),
            )
            return _rest(rest, inp), reader
        return _rest(head.removeprefix(BOM), inp), JsonLinesReader(
            self.cur, fields, self.tmp, self.opts.time_field, self.opts.time_format
        )

    def whole_file(self, inp: Input, head: bytes, reader: JsonLinesReader) -> bool:
        """Try a plain JSON-lines file in one checked transaction, read in place by DuckDB.

        Reading the file where it lies avoids copying it into blocks; if the check fails
        (a bad line, a key the sample missed) nothing was written and the caller goes
        block by block. Returns True when the file is in.
        """
        # gzip too: DuckDB decompresses it as it reads, the byte counts decompress it beside.
        if inp.compression not in ("none", "gzip") or inp.name == "-" or head.startswith(BOM) or not inp.size:
            return False
        # A caller asking for smaller blocks (durable progress, tests) gets blocks.
        limit = GZIP_IN_PLACE_BYTES if inp.compression == "gzip" else IN_PLACE_BYTES
        if inp.size > limit or self.opts.block_bytes < BLOCK_BYTES:
            return False
        counted: list[BlockStats] = []
        counter = threading.Thread(target=lambda: counted.append(BlockStats.of_file(inp.name)), daemon=True)
        counter.start()

        def stats() -> BlockStats:
            counter.join()
            return counted[0] if counted else BlockStats(0, True)

        done = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(inp.size, done), daemon=True)
        ticker.start()
        reader.writer = self.backend.writer(self.dataset, self.cur)
        try:
            # One long statement streams the file: more room for DuckDB is faster here
            # (10M events: 25.2 s at 512 MB, 21.5 s at 1 GB) and stays under 1 GiB.
            with self.backend.raised_memory_limit(IN_PLACE_MEMORY_LIMIT):
                staged = reader.stage_whole(inp.name, stats)
        finally:
            done.set()
            ticker.join()
            counter.join()
        if staged is None:
            return False
        self.summary.blocks = 1
        self.summary.events = staged.rows
        self.summary.new_fields = [f.name for f in staged.new_fields]
        if self.on_commit:
            self.on_commit(staged.rows)
        if self.progress:
            self.progress(inp.size, inp.size, staged.rows)
        if reader.time is not None:
            self.summary.time_field, self.summary.time_format = reader.time.field, reader.time.format
        return True

    def _tick(self, size: int, done: threading.Event) -> None:
        """Report DuckDB's progress through a long statement as bytes of the input."""
        while self.progress and not done.wait(0.25):
            pct = self.cur.query_progress()
            if pct >= 0:
                self.progress(int(size * pct / 100), size, 0)

    def consume(self, inp: Input, stream: BinaryIO, reader: Stager) -> None:
        """Stage every block; commit every COMMIT_ROWS rows, at a segment's end and at the end."""
        first_line = 2 if isinstance(reader, CsvReader) else 1
        measure = isinstance(reader, JsonLinesReader)

        def produce(put: Callable[[Item], bool]) -> None:
            # Runs beside DuckDB (which releases the GIL): byte counts and block files cost little
            # wall time. JSON blocks travel as files, so the queue holds no block in memory.
            size, every = self.opts.block_bytes, self.opts.commit_every
            if measure:
                buffers = paced_buffers(stream, size, every, self.stop) if self.paced else line_buffers(stream, size)
                for buf, end, line in buffers:
                    self.next_line = line + buf.count(b"\n", 0, end)
                    path = write_file(memoryview(buf)[:end], self.tmp)
                    del buf  # written to a file: free it before the next block is read
                    # Counted from the file in small windows: numpy's temporaries over a whole
                    # 128 MiB block took several times its size (docs/adr/0010).
                    stats = BlockStats.of_file(path, chunk=COUNT_WINDOW)
                    if not put((None, line, stats)):
                        return
            else:
                blocks = (
                    ((bytes(b[:e]), n) for b, e, n in paced_buffers(stream, size, every, self.stop, quoted=True))
                    if self.paced
                    else line_blocks(stream, size, quoted=True)
                )
                for block, line in blocks:
                    self.next_line = line + block.count(b"\n")
                    if not put((block, line + first_line - 1, None)):
                        return

        def handle(writer: SegmentWriter, item: Item) -> None:
            assert isinstance(item, tuple)
            self._block(reader, writer, *item, where=(inp.name, inp.position(), inp.size))

        self._drive(inp.name, reader, produce, handle)

    def consume_text(self, blocks: Iterator[TextBlock], reader: JsonLinesReader, name: str, size: int | None) -> None:
        """Store the blocks of a text log format (parsed in the reader thread) through the JSON reader."""

        def produce(put: Callable[[Item], bool]) -> None:
            for block in blocks:
                if not put(block):
                    return

        def handle(writer: SegmentWriter, block: Item) -> None:
            assert isinstance(block, TextBlock)
            where = (name, block.bytes_read, size)
            if block.prepares:
                reader.stage(None, 1, block.stats)  # the front of a block, probed before the block comes
                return
            if block.counted() is None:
                self._rejected(block.traced([]), writer, name)
                return
            self._block(reader, writer, None, 1, block.stats, where=where, origin=block)

        self._drive(name, reader, produce, handle)

    def _drive(
        self,
        name: str,
        reader: Stager,
        produce: Callable[[Callable[[Item], bool]], None],
        handle: Callable[[SegmentWriter, Item], None],
    ) -> None:
        """Run ``produce`` in a reader thread feeding a queue of at most two blocks; ``handle`` each."""
        blocks: queue.Queue[Item] = queue.Queue(maxsize=2)
        stop = threading.Event()

        def put(item: Item) -> bool:
            while not stop.is_set():
                try:
                    blocks.put(item, timeout=0.2)
                    return True
                except queue.Full:
                    continue
            return False

        def run() -> None:
            try:
                produce(put)
                put(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                put(exc)

        def take() -> Item:
            item = blocks.get()
            if isinstance(item, RootsiftError):
                raise item
            if isinstance(item, BaseException):
                raise InputFormatError(f"{name}: cannot read input: {item}") from item
            return item

        producer = threading.Thread(target=run, name="rootsift-ingest-reader", daemon=True)
        producer.start()
        writer = self.backend.writer(self.dataset, self.cur)
        if isinstance(reader, JsonLinesReader):
            reader.writer = writer
        try:
            first = take()
            # A block that knows more follow (a text log's block DuckDB parses, cut by its reader
            # thread one read ahead) is stored at once; any other waits for the next to tell.
            followed = isinstance(first, TextBlock) and first.followed
            second = take() if first is not None and not self.paced and not followed else None
            if second is not None or followed:
                # More than one block: each is its own bounded transaction, into pending
                # segments that become part of the dataset only when the input is complete.
                writer.begin_pending()
            more = second is not None or followed or (self.paced and first is not None)
            ahead: list[Item] = [i for i in (first, second) if i is not None]
            rest: Iterator[Item] = iter(take, None) if more else iter(())
            for item in itertools.chain(ahead, rest):
                handle(writer, item)
            self._commit(writer)
            self._publish(writer)
        finally:
            writer.discard()
            writer.abandon()  # nothing of a failed input becomes visible
            stop.set()  # an early exit must not leave the reader thread blocked on a full queue
            producer.join()
        if reader.time is not None:
            self.summary.time_field, self.summary.time_format = reader.time.field, reader.time.format

    def _block(
        self,
        reader: Stager,
        writer: SegmentWriter,
        block: bytes | None,
        line: int,
        stats: BlockStats | None,
        where: tuple[str, int, int | None],
        origin: TextBlock | None = None,
    ) -> None:
        """Stage one block and queue or count its rows; ``where`` is (input name, bytes read, size)."""
        if writer.pending and isinstance(reader, JsonLinesReader):
            self._commit(writer)  # the fast path commits on its own; queued rows go first
        staged = reader.stage(block, line, stats)
        self.summary.blocks += 1
        self.summary.exact_blocks += staged.exact
        rejects = origin.traced(staged.rejects) if origin is not None else staged.rejects
        if rejects:
            staged.rejects = []
            self._rejected(rejects, writer, where[0], staged.table)
        if staged.committed:
            self.summary.events += staged.rows
            self.summary.new_fields += [f.name for f in staged.new_fields]
            self._acknowledge(writer)
        elif staged.rows:
            writer.append(staged.table, staged.new_fields, staged.rows, staged.span)
            self.summary.new_fields += [f.name for f in staged.new_fields]
        else:
            self.cur.execute(f"DROP TABLE IF EXISTS {staged.table}")
        if writer.pending >= COMMIT_ROWS or writer.segment_full() or self.paced:
            self._commit(writer)
        if self.progress:
            self.progress(where[1], where[2], self.summary.events + writer.pending)

    def _rejected(self, rejects: list[Reject], writer: SegmentWriter, name: str, table: str | None = None) -> None:
        """Log rejects; under ``--on-error raise`` keep what came before and stop at the first."""
        for rej in rejects:
            self.log.add(rej)
        if rejects and self.opts.strictness == "raise":
            if table:  # a committed fast-path block has no table left
                self.cur.execute(f"DROP TABLE IF EXISTS {table}")
            self._commit(writer)
            self._publish(writer)  # what came before the first reject stays, as documented
            first = rejects[0]
            raise InputFormatError(f"{name}: line {first.line}: {first.reason}")

    def _commit(self, writer: SegmentWriter) -> None:
        self.summary.events += writer.commit()
        self._acknowledge(writer)

    def _acknowledge(self, writer: SegmentWriter) -> None:
        """After a commit: tell ``on_commit`` what is durable and visible (not rows in pending
        segments: those are told when published), and release a stream's store."""
        if writer.targets is None and self.on_commit:
            self.on_commit(self.summary.events)
        if self.paced:
            self.backend.release(self.dataset)

    def _publish(self, writer: SegmentWriter) -> None:
        if writer.targets is not None:
            writer.publish()
            self._acknowledge(writer)


def _rest(head: bytes, inp: Input) -> BinaryIO:
    return io.BufferedReader(Prefetched(head, inp.stream), buffer_size=1 << 20)  # type: ignore[type-var]
