"""``perf script`` output: Linux perf's samples as text, with their call stacks (``perf
record -g``) or without (one frame on the header line), old and new layouts alike.

    dd 29776 [001] 666709.771979:   10101010 cpu-clock:
    \t          414b3b fsnotify (/lib/modules/4.1.0-virtual/build/vmlinux)
    \t           e5f70 read (/lib/x86_64-linux-gnu/libc-2.15.so)

One event per sample: ``stack`` (the command name, then the frames from the outermost
call in, as ``stackcollapse-perf.pl`` folds them), ``function`` (the leaf), ``samples``
(1), ``period``, ``event``, ``comm``, ``pid``, ``tid``, ``cpu``, ``profile`` (the file
name), ``profile_type`` (``cpu`` for cycles/cpu-clock/task-clock, else the event). A
symbol's ``+0x…`` offset is dropped; an unknown symbol is its module in brackets
(``[libc-2.15.so]``). perf's sample times count from boot: events are placed at the
header's ``captured on`` time (read as UTC), else the file's modification time, plus
each sample's time since the first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

HEADER = re.compile(
    r"(?P<comm>\S.*?)\s+(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?:(?P<time>\d+\.\d+):\s+)?(?:(?P<period>\d+)\s+)?"
    r"(?P<event>[A-Za-z_][\w\-.]*(?::[\w\-.=/,]+)*(?:/[^/\s]*/\w*)?):(?:\s+(?P<rest>.*?))?\s*"
)
FRAME = re.compile(r"\s*(?P<addr>[0-9a-fA-F]+)\s+(?P<sym>.+?)(?:\s+\((?P<dso>[^()]*)\))?\s*")
OFFSET = re.compile(r"\+0x[0-9a-fA-F]+$")
CAPTURED = re.compile(r"#\s*captured on\s*:\s*(.+?)\s*$")
CPU_EVENTS = ("cycles", "cpu-clock", "task-clock", "cpu-cycles", "ref-cycles", "instructions")


@register
class PerfScript(TextFormat):
    name = "perf-script"
    summary = "`perf script` samples with or without call stacks: one stack-sample event per sample"
    # no --host: name the host, like anything else a profile is of, with --label host=...

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        text = [ln for ln in lines if ln.strip() and not ln.startswith("#")][:100]
        if not text:
            return 0.0
        headers = sum(1 for ln in text if not ln[0].isspace() and HEADER.fullmatch(ln))
        frames = sum(1 for ln in text if FRAME.fullmatch(ln) and (ln[0].isspace() or not HEADER.fullmatch(ln)))
        if not headers or headers + frames < len(text) * 0.9:
            return 0.0
        return 0.85

    def parse(self, lines: Lines) -> Iterator[Item]:
        profile = Path(self.options.source).name if self.options.source != "-" else None
        base: datetime | None = None
        first: float | None = None
        head: tuple[int, re.Match[str]] | None = None
        frames: list[str] = []
        for number, raw in lines:
            line = raw.rstrip()
            if not line or line.startswith("#"):
                if line.startswith("#") and base is None and (m := CAPTURED.match(line)):
                    base = _captured(m.group(1))
                if head is not None and not line:
                    yield head[0], self._event(head[1], frames, base, first, profile)
                    head, frames = None, []
                continue
            header = None if line[0].isspace() else HEADER.fullmatch(line)
            if header is not None:
                if head is not None:
                    yield head[0], self._event(head[1], frames, base, first, profile)
                head, frames = (number, header), []
                if base is None:
                    base = self.options.file_time()
                if first is None and header.group("time"):
                    first = float(header.group("time"))
                rest = header.group("rest")
                if rest and (inline := FRAME.fullmatch(rest)):
                    frames.append(_symbol(inline))
                continue
            frame = FRAME.fullmatch(line)
            if frame is None or head is None:
                what = (
                    "a frame before any sample header" if frame is not None else "neither a sample header nor a frame"
                )
                yield Reject(
                    number,
                    f"not perf script output: {what} (`comm pid [cpu] time: period event:` then `address symbol (module)` lines)",
                    raw,
                )
                continue
            frames.append(_symbol(frame))
        if head is not None:
            yield head[0], self._event(head[1], frames, base, first, profile)

    def _event(
        self, header: re.Match[str], frames: list[str], base: datetime | None, first: float | None, profile: str | None
    ) -> dict[str, object]:
        comm = header.group("comm").strip()
        stack = [comm, *reversed(frames)]  # perf lists the leaf first
        when = base or self.options.file_time()
        if header.group("time") and first is not None:
            when = when + timedelta(seconds=float(header.group("time")) - first)
        event_name = header.group("event")
        event: dict[str, object] = {
            TIME_KEY: when,
            "stack": ";".join(f.replace(";", ",") for f in stack),
            "function": stack[-1],
            "root": comm,
            "depth": len(stack),
            "samples": 1,
            "sample_type": "samples",
            "profile_type": "cpu" if event_name.split(":")[0].split("/")[0] in CPU_EVENTS else event_name,
            "event": event_name,
            "comm": comm,
            "pid": int(header.group("pid")),
        }
        for key in ("tid", "cpu", "period"):
            if header.group(key) is not None:
                event[key] = int(header.group(key))
        if profile:
            event["profile"] = profile
        return event


def _symbol(frame: re.Match[str]) -> str:
    sym = OFFSET.sub("", frame.group("sym").strip())
    if sym in ("[unknown]", ""):
        dso = frame.group("dso") or ""
        return f"[{Path(dso).name}]" if dso and dso != "[unknown]" else "[unknown]"
    return sym


def _captured(text: str) -> datetime | None:
    """perf's ``captured on`` line (``Thu Aug 17 14:14:43 2017``, the local time of the host: read as UTC)."""
    try:
        return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y").replace(tzinfo=UTC)
    except ValueError:
        return None
