"""Sampling this machine's /proc into a dataset on an interval: ``rootsift collect procfs``.

Each sample reads the chosen /proc files, parses them with the ``procfs`` format's own
readers (so a sample has exactly the fields an ingested snapshot has), stamps every
event with the sample's time, the host and the labels, and commits the sample as one
transaction through the JSON-lines ingest. Between samples the store is released, so
queries and analyses from other processes read it while the collector runs.

- **Busy store**: a commit that meets another process holding the store
  (``StoreLockedError`` after ``ROOTSIFT_LOCK_WAIT``) keeps the sample and retries with
  backoff (0.5 s doubling to 30 s); samples taken meanwhile queue behind it. At most
  ``MAX_PENDING`` samples wait: past that the oldest is dropped and counted, so memory
  stays bounded however long the store is busy.
- **Missing or unreadable files** (``/proc/slabinfo`` is root-only, containers hide
  ``/proc/pressure``): reported once, then skipped quietly; the other files are sampled.
  Lines a reader rejects are logged under the dataset's ``rejects/`` the first time a
  file has any, and counted every time.
- **Stopping**: SIGTERM or SIGINT ends the loop after the sample in progress; what is
  pending is committed before returning. ``count`` takes that many samples and returns.
"""

from __future__ import annotations

import contextlib
import io
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from rootsift.errors import StoreLockedError, UsageError
from rootsift.ingest.collect_send import Sender, ServerBusy
from rootsift.ingest.formats.base import FormatOptions, numbered_lines
from rootsift.ingest.formats.procfs import ProcfsFormat
from rootsift.ingest.pipeline import ingest_file, stopping_on_signals
from rootsift.ingest.rejects import Reject, RejectLog
from rootsift.ingest.textrun import dumped
from rootsift.store.duckdb import DuckDBBackend

DEFAULT_FILES = ("meminfo", "slabinfo", "cgroups", "pressure", "loadavg", "vmstat")
"""What ``collect procfs`` samples unless told otherwise (``pressure`` is every file of
/proc/pressure). vmstat comes last: its ~180 counters take a dataset past the field limit
(250, ``$ROOTSIFT_MAX_FIELDS``), and the keys past it go into ``_overflow``, so the others
are the ones that keep columns."""
KNOWN_FILES = (*DEFAULT_FILES, "stat", "diskstats", "zoneinfo", "net/sockstat", "net/sockstat6", "net/tcp", "net/tcp6")
"""The /proc files ``--files`` may name: the system-wide files the procfs format reads."""
PRESSURE = ("cpu", "memory", "io", "irq")
MAX_PENDING = 100
"""Samples held while the store is busy; past this the oldest is dropped (and counted)."""
RETRY_FIRST, RETRY_MAX = 0.5, 30.0
"""Seconds before the first retry of a busy store, and the most the backoff grows to."""

Warn = Callable[[str], None]


@dataclass
class CollectSummary:
    """What a collector did: samples taken and stored, events, what it could not read."""

    dataset: str
    host: str
    proc: str
    files: list[str]
    every_seconds: float
    samples: int = 0
    stored_samples: int = 0
    events: int = 0
    rejects: int = 0
    rejects_file: str | None = None
    unreadable: dict[str, str] = field(default_factory=dict)
    """Files that could not be read, with why (each reported once)."""
    busy_retries: int = 0
    dropped_samples: int = 0
    """Samples dropped because more than MAX_PENDING waited for a busy store."""
    unstored_samples: int = 0
    """Samples still waiting for the store when a stop signal ended the collector."""
    stopped_by: str | None = None
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    """What the store said about the first sample's fields (keys past the field limit)."""

    def problem(self) -> str | None:
        """Why this run counts as failed (exit code 1), or None."""
        if self.unstored_samples or self.dropped_samples:
            lost = self.unstored_samples + self.dropped_samples
            return f"{lost} sample(s) were not stored: the store stayed busy (see busy_retries)"
        if not self.events:
            if self.unreadable and len(self.unreadable) == len(self.files):
                return "none of the /proc files could be read: nothing was stored"
            return "nothing was stored"
        return None

    def as_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["problem"] = self.problem()
        return out


def proc_files(root: Path, names: list[str] | tuple[str, ...]) -> list[str]:
    """The files to sample, relative to ``root``: ``pressure`` becomes each resource file of
    ``root/pressure`` that exists (``pressure`` itself when there is none, to be reported
    missing). An unknown name is a usage error naming ``--files``."""
    files: list[str] = []
    for name in names:
        name = name.strip().strip("/")
        if name not in KNOWN_FILES and not (name.startswith("pressure/") and name[9:] in PRESSURE):
            raise UsageError(f"--files {name!r} is not one of {', '.join(KNOWN_FILES)} (or pressure/cpu …)")
        if name == "pressure":
            found = [f"pressure/{r}" for r in PRESSURE if (root / "pressure" / r).exists()]
            files += found or ["pressure"]
        elif name not in files:
            files.append(name)
    return files


@dataclass
class Sampler:
    """Reads one sample of the files into JSON lines, noting unreadable files and rejects once."""

    root: Path
    files: list[str]
    options: FormatOptions
    summary: CollectSummary
    log: RejectLog
    warn: Warn
    _logged: dict[str, int] = field(default_factory=dict)
    """The sample in which each file first had rejects: only those are logged."""
    _taken: int = 0

    def sample(self, at: datetime) -> list[bytes]:
        self._taken += 1
        lines: list[bytes] = []
        for name in self.files:
            path = self.root / name
            try:
                data = path.read_bytes()
            except OSError as exc:
                if name not in self.summary.unreadable:
                    why = "permission denied (root only?)" if isinstance(exc, PermissionError) else exc.strerror
                    self.summary.unreadable[name] = str(why or exc)
                    self.warn(f"{path}: {self.summary.unreadable[name]}; not sampled (said once)")
                continue
            parser = ProcfsFormat(self.options.for_file(str(path), at.timestamp()))
            for item in parser.parse(numbered_lines(io.BytesIO(data))):
                if isinstance(item, Reject):
                    self._reject(name, item)
                    continue
                line, event = item
                dumped_event = dumped({**self.options.labels, **event}, "procfs")
                if isinstance(dumped_event, str):
                    self._reject(name, Reject(line, dumped_event, ""))
                    continue
                lines.append(dumped_event)
        return lines

    def _reject(self, name: str, rej: Reject) -> None:
        self.summary.rejects += 1
        if self._logged.setdefault(name, self._taken) != self._taken:
            return  # logged once (a kernel's line procfs does not read would repeat every sample)
        self.log.add(Reject(rej.line, f"/proc/{name}: {rej.reason}", rej.text))
        self.summary.rejects_file = str(self.log.path)


def collect_procfs(
    backend: DuckDBBackend,
    dataset: str = "hosts",
    *,
    every: float = 60.0,
    count: int | None = None,
    root: str | Path = "/proc",
    files: list[str] | tuple[str, ...] = DEFAULT_FILES,
    host: str | None = None,
    labels: dict[str, str] | None = None,
    warn: Warn | None = None,
    stop: threading.Event | None = None,
    sender: Sender | None = None,
) -> CollectSummary:
    """Sample ``files`` of ``root`` every ``every`` seconds into ``dataset`` until ``count``
    samples are taken, ``stop`` is set, or SIGTERM/SIGINT arrives; return the summary.

    Every event carries ``host`` (default: this machine's name) and ``labels`` (the
    event's own value wins). A busy store is retried with backoff; see the module's doc.
    With ``sender`` the samples go to a server (collect_send.py) instead of ``backend``,
    which then only keeps the rejects log.
    """
    if not every > 0:
        raise UsageError(f"--every {every!r} must be a duration above 0 (e.g. 60s)")
    if count is not None and count < 1:
        raise UsageError(f"--count {count} must be 1 or more (leave it out to run until stopped)")
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"--proc {root} is not a directory (the /proc to sample)")
    chosen = proc_files(root, files)
    host = host or socket.gethostname()
    summary = CollectSummary(dataset, host, str(root), chosen, every)
    backend.dataset_dir(dataset)  # a bad dataset name fails before the first sample
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    log = RejectLog(backend.dataset_dir(dataset) / "rejects" / f"{stamp}-collect-procfs.jsonl")
    options = FormatOptions(host=host, labels=dict(labels or {}))
    sampler = Sampler(root, chosen, options, summary, log, warn or (lambda _: None))
    stop = stop or threading.Event()
    started = time.monotonic()
    tmp_root = backend.data_dir / ".tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        stack.callback(log.close)
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=tmp_root)))
        stack.enter_context(stopping_on_signals(stop, summary))

        def store(pending: deque[list[bytes]]) -> None:
            if sender is None:
                _store(backend, dataset, pending, summary, tmp)
            else:
                _send(sender, pending, summary)

        _loop(store, sampler, summary, every, count, stop)
    summary.seconds = time.monotonic() - started
    return summary


def _loop(
    store: Callable[[deque[list[bytes]]], None],
    sampler: Sampler,
    summary: CollectSummary,
    every: float,
    count: int | None,
    stop: threading.Event,
) -> None:
    """Take samples on a fixed schedule (missed ticks are skipped, not bunched) and store them."""
    pending: deque[list[bytes]] = deque()
    next_sample = time.monotonic()
    retry_at, backoff = 0.0, RETRY_FIRST
    while True:
        now = time.monotonic()
        wanted = count is None or summary.samples < count
        if wanted and not stop.is_set() and now >= next_sample:
            pending.append(sampler.sample(datetime.now(UTC)))
            summary.samples += 1
            if len(pending) > MAX_PENDING:
                pending.popleft()
                summary.dropped_samples += 1
                if summary.dropped_samples == 1:
                    sampler.warn(f"more than {MAX_PENDING} samples waited for the store: dropping the oldest")
            next_sample += every * max(1, int((now - next_sample) // every) + 1)
        if pending and (now >= retry_at or stop.is_set()):
            try:
                warned = bool(summary.warnings)
                store(pending)
                retry_at, backoff = 0.0, RETRY_FIRST
                for warning in summary.warnings if not warned else []:
                    sampler.warn(warning)
            except (StoreLockedError, ServerBusy) as exc:
                summary.busy_retries += 1
                if summary.busy_retries == 1:
                    sampler.warn(f"the store is busy, retrying with backoff: {exc}")
                retry_at, backoff = time.monotonic() + backoff, min(backoff * 2, RETRY_MAX)
                if stop.is_set():  # the last attempt (it waited ROOTSIFT_LOCK_WAIT) failed
                    summary.unstored_samples = len(pending)
                    return
        finished = count is not None and summary.samples >= count
        if (finished or stop.is_set()) and not pending:
            return
        deadlines = [retry_at] if pending else []
        if wanted:
            deadlines.append(next_sample)
        stop.wait(max(0.0, min(deadlines, default=now + every) - time.monotonic()))


def _store(
    backend: DuckDBBackend, dataset: str, pending: deque[list[bytes]], summary: CollectSummary, tmp: Path
) -> None:
    """Commit every pending sample in one transaction, then release the store."""
    path = tmp / "samples.jsonl"
    with open(path, "wb") as fh:
        for lines in pending:
            fh.writelines(lines)
    try:
        if path.stat().st_size:
            done = ingest_file(backend, dataset, path, format="jsonl", time_field="timestamp", time_format="rfc3339")
            summary.events += done.events
            summary.rejects += done.rejects
            if done.warnings and not summary.warnings:
                summary.warnings = done.warnings
        summary.stored_samples += len(pending)
        pending.clear()
    finally:
        backend.release(dataset)
        path.unlink(missing_ok=True)


def _send(sender: Sender, pending: deque[list[bytes]], summary: CollectSummary) -> None:
    """Post every pending sample in one request (durable on the server once it answers)."""
    accepted, refused = sender.send(line for lines in pending for line in lines)
    summary.events += accepted
    summary.rejects += refused
    summary.stored_samples += len(pending)
    pending.clear()
