"""File ingest: the entry point, its options and its summary (the work is in runner.py)."""

from __future__ import annotations

import contextlib
import itertools
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rootsift.errors import InputFormatError, UsageError
from rootsift.ingest import COMMIT_EVERY, formats, textchild
from rootsift.ingest.formats.base import TIME_KEY, FormatOptions, TextFormat
from rootsift.ingest.jsonl import JsonLinesReader
from rootsift.ingest.rejects import Reject, RejectLog
from rootsift.ingest.runner import BLOCK_BYTES, IngestRun
from rootsift.ingest.sniff import sniff_directory, sniff_file, sniff_head
from rootsift.ingest.sources import FORMATS, Input, open_input
from rootsift.ingest.textchild import child_blocks
from rootsift.ingest.textrun import input_files, open_files, parsed_in_python, text_blocks
from rootsift.ingest.textsql import TextLinesReader
from rootsift.ingest.timefield import normalise_format
from rootsift.store.duckdb import DuckDBBackend

STRICTNESS = ("ignore", "warn", "raise")
NAME_THE_FORMAT = "if it is a log, name its format with --format; `rootsift formats` lists them"
SNIFF_FILES = 20
"""Files of a directory looked at to sniff its log format."""


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
    warnings: list[str] = field(default_factory=list)
    """Keys renamed or moved past the field limit (rootsift.ingest.keys), nothing lost."""
    truncated: str | None = None
    """Where a compressed input was cut short: what was before the cut is stored."""
    stopped_by: str | None = None
    """The signal (SIGTERM, SIGINT) that ended a stream; what had arrived was committed."""

    def problem(self) -> str | None:
        """Why this ingest counts as failed though it stored what it could (exit code 1), or None."""
        if self.truncated:
            return f"the input is truncated: {self.truncated}; the complete lines before the cut were ingested"
        if self.rejects and not self.events:
            return f"every line was rejected ({self.rejects:,}): nothing was ingested"
        return None

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["events_per_second"] = round(self.events_per_second, 1)
        out["problem"] = self.problem()
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
    parse: FormatOptions = field(default_factory=FormatOptions)
    """What a text log format is told (--log-format, --log-line-prefix, --host, --tz, --label)."""
    commit_every: float = COMMIT_EVERY
    """A stream (stdin, a pipe) is committed at least this often, in seconds (--commit-every)."""

    def check(self) -> None:
        names = (*FORMATS, *formats.all_formats())
        if self.format not in names:
            raise UsageError(f"--format {self.format!r} is not one of {', '.join(names)}")
        if self.strictness not in STRICTNESS:
            raise UsageError(f"--on-error {self.strictness!r} is not one of {', '.join(STRICTNESS)}")
        if not self.commit_every > 0:
            raise UsageError(f"--commit-every {self.commit_every!r} must be a number of seconds above 0 (e.g. 5)")
        self.time_format = normalise_format(self.time_format)
        self.parse.zone()  # a bad --tz fails before anything is read

    def check_options_for(self, kind: str) -> None:
        """Options only some formats read are an error for the others, naming the flag."""
        if kind not in formats.all_formats() and self.parse.labels:
            raise UsageError(
                f"--label applies to log formats (see `rootsift formats`), not to {kind}: put the field in the data"
            )
        reads = formats.get(kind).reads if kind in formats.all_formats() else ()
        for name in ("log_format", "log_line_prefix", "host", "tz"):
            if getattr(self.parse, name) is not None and name not in reads:
                flag = "--" + name.replace("_", "-")
                if self.format == "auto":
                    raise UsageError(
                        f"{flag} does not apply to the input, sniffed as {kind}; name its format with --format"
                    )
                raise UsageError(f"{flag} does not apply to --format {kind}")


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
    parse: FormatOptions | None = None,
    commit_every: float = COMMIT_EVERY,
) -> IngestSummary:
    """Ingest one file, a directory of files in a text log format, or ``-`` (stdin) into
    ``dataset``; return the summary.

    Bad lines are counted rejects saved under the dataset's ``rejects/`` folder; with
    ``strictness='raise'`` the first one stops the ingest (what was committed stays).

    A stream (stdin, a pipe) is committed every ``commit_every`` seconds and, when the
    process gets SIGTERM or SIGINT, once more with what has arrived before the ingest ends;
    between commits the store is released for other processes (docs/storage.md).
    """
    opts = IngestOptions(
        format, time_field, time_format, strictness, block_bytes, parse or FormatOptions(), commit_every
    )
    opts.check()
    started = time.perf_counter()
    names = input_files(str(source))
    is_dir = str(source) != "-" and Path(source).is_dir()
    with contextlib.ExitStack() as stack:
        inp = open_input(names[0])
        stack.callback(inp.close)
        head = inp.head()
        if opts.format != "auto":
            kind = opts.format
        elif is_dir:
            kind = sniff_directory(names[:SNIFF_FILES], opts.parse)
        else:
            kind = sniff_head(head, inp.name, opts.parse, inp.compression)
        opts.check_options_for(kind)
        text_format = formats.all_formats().get(kind)
        if is_dir and text_format is None:
            raise UsageError(
                f"{source} is a directory: only text log formats read directories "
                f"({', '.join(formats.all_formats())}); {names[0]} reads as {kind}"
            )
        backend.state(dataset, create=True)
        summary = IngestSummary(dataset, str(source) if is_dir else inp.name, kind, inp.compression)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        log = RejectLog(
            backend.dataset_dir(dataset)
            / "rejects"
            / f"{stamp}-{'stdin' if inp.name == '-' else Path(summary.source).name}.jsonl"
        )
        stack.callback(log.close)
        tmp_root = backend.data_dir / ".tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=tmp_root))
        cur = backend.cursor()
        stack.callback(cur.close)
        run = IngestRun(backend, cur, dataset, opts, tmp, summary, log, progress, on_commit, paced=inp.is_stream)
        if run.paced:
            stack.enter_context(stopping_on_signals(run.stop, summary))
        if text_format is not None:
            fields = backend.fields(dataset)
            # Parsers put an aware datetime under TIME_KEY; --time-field picks another field instead.
            when = (opts.time_field, opts.time_format) if opts.time_field else (TIME_KEY, "rfc3339")
            events = TextLinesReader(cur, fields, tmp, *when)  # JSON lines, and log lines DuckDB parses
            rest = (open_files(names[1:]) if is_dir else iter(()),)
            fmt = text_format

            def choose(one: Input, front: bytes) -> type[TextFormat]:
                # In a directory read with --format auto, each file may be its own format
                # (PostgreSQL's stderr and csvlog side by side).
                if not is_dir or opts.format != "auto":
                    return fmt
                return formats.get(sniff_file(front, one.name, opts.parse, kind))

            strict = opts.strictness == "raise"
            blocks: Iterator[Any]
            if _in_child(inp, head, fmt, opts.parse, is_dir, strict):
                blocks = child_blocks(inp.name, fmt.name, opts.parse, tmp, opts.block_bytes, strict)
            else:
                blocks = text_blocks(
                    itertools.chain([(inp, head)], *rest),
                    choose,
                    opts.parse,
                    tmp,
                    opts.block_bytes,
                    name_files=is_dir,
                    stop_at_reject=strict,
                    pace=(opts.commit_every, run.stop) if run.paced else None,
                )
            size = sum(_size(n) for n in names) if inp.name != "-" else None
            run.consume_text(blocks, events, str(source), size)
            summary.warnings = events.warnings()
            _note_cut(summary, log, inp, None)
            return _finish(summary, log, started)
        try:
            stream, reader = run.reader_for(inp, head, kind, stack)
            if not (isinstance(reader, JsonLinesReader) and run.whole_file(inp, head, reader)):
                run.consume(inp, stream, reader)
            summary.warnings = reader.warnings()
            _note_cut(summary, log, inp, run.next_line + (kind in ("csv", "tsv")))
        except (UsageError, InputFormatError) as exc:
            if opts.format != "auto" or summary.events:
                raise
            # Sniffing fell back to a structured format: the input may be a log no format was sure of.
            raise type(exc)(f"{exc} (the input was read as {kind}; {NAME_THE_FORMAT})") from exc
    return _finish(summary, log, started)


@contextlib.contextmanager
def stopping_on_signals(stop: threading.Event, summary: Any) -> Iterator[None]:
    """While a stream is read (or ``collect`` samples): SIGTERM and SIGINT set ``stop`` and
    ``summary.stopped_by`` (what arrived is committed, then the work ends) instead of
    killing the process with up to a block uncommitted. Python only lets the main thread
    set handlers; elsewhere the caller's own handling stands."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        summary.stopped_by = signal.Signals(signum).name
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _note_cut(summary: IngestSummary, log: RejectLog, inp: Input, line: int | None) -> None:
    """Report a compressed input cut short; its cut last line is a reject (when the reader knows its number:
    a text format's reader reads the cut line as a line of its own)."""
    summary.truncated = inp.truncated
    if summary.truncated and inp.cut is not None and inp.cut.cut_line and line is not None:
        text = inp.cut.cut_line.decode("utf-8", "replace")
        log.add(Reject(line, "cut short: the compressed input ends inside this line", text))


def _finish(summary: IngestSummary, log: RejectLog, started: float) -> IngestSummary:
    summary.rejects = log.count
    summary.first_rejects = [r.as_dict() for r in log.first]
    summary.rejects_file = str(log.path) if log.count else None
    summary.seconds = time.perf_counter() - started
    return summary


def _in_child(inp: Input, head: bytes, fmt: type[TextFormat], parse: FormatOptions, is_dir: bool, strict: bool) -> bool:
    """Whether this input is parsed by a child process (``textchild``): one large file, no
    stream, in a format whose lines Python parses."""
    if not textchild.CHILD_PARSER or is_dir or inp.is_stream or _size(inp.name) < textchild.CHILD_MIN_BYTES:
        return False
    return parsed_in_python(fmt(parse.for_file(inp.name, None)), head, strict)


def _size(name: str) -> int:
    try:
        return Path(name).stat().st_size
    except OSError:
        return 0
