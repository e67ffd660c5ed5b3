"""Folded (collapsed) stacks: one line per distinct stack, frames joined by ``;``, then the
sample count — what Brendan Gregg's ``stackcollapse-*.pl``, ``inferno-collapse``,
async-profiler's ``collapsed`` output, py-spy ``--format raw`` and Pyroscope exports write.

    main;server.Serve;db.Write;encoding.WriteBits 1734

Frames may hold spaces (C++ signatures, ``Builtin:A builtin``): the count is the last
blank-separated number on the line. A file whose first stack ends in two numbers is a
differential profile (``difffolded.pl``): ``samples_before`` then ``samples``. Lines
starting with ``#`` or ``//`` are comments. A profile carries no time, so every event
takes the file's modification time (now for stdin); name what the profile is of with
``--label``, e.g. ``--label version=1.6.0``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

COUNT = r"\d+(?:\.\d*)?"
ONE = re.compile(rf"(.*?)\s+({COUNT})")
TWO = re.compile(rf"(.*?)\s+({COUNT})\s+({COUNT})")
COMMENTS = ("#", "//")


@register
class Folded(TextFormat):
    name = "folded"
    summary = "folded/collapsed stacks (stackcollapse, inferno, async-profiler, py-spy): one event per stack"
    reads = ("host",)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        sample = [ln.rstrip() for ln in lines if ln.strip() and not ln.startswith(COMMENTS)][:20]
        if not sample:
            return 0.0
        stacks = [ln for ln in sample if (m := ONE.fullmatch(ln)) and m.group(1).strip(" ;")]
        framed = sum(1 for ln in stacks if ";" in ln)
        if len(stacks) * 5 < len(sample) * 4 or not framed:  # a stray bad line is a reject, not another format
            return 0.0
        return 0.9 if name.endswith((".folded", ".collapsed")) else 0.6

    def parse(self, lines: Lines) -> Iterator[Item]:
        when = self.options.file_time()
        profile = Path(self.options.source).name if self.options.source != "-" else None
        differential: bool | None = None
        for number, raw in lines:
            line = raw.rstrip()
            if not line or line.startswith(COMMENTS):
                continue
            if differential is None:
                differential = TWO.fullmatch(line) is not None
            match = (TWO if differential else ONE).fullmatch(line)
            frames = [frame for frame in match.group(1).strip().split(";") if frame] if match else []
            if match is None or not frames:
                kind = "two sample counts (before, after)" if differential else "a sample count"
                yield Reject(number, f"not a folded stack: expected `frame;frame;...` then {kind}", raw)
                continue
            try:
                samples = _number(match.group(match.lastindex or 2))
                before = _number(match.group(2)) if differential else None
            except ValueError as exc:
                yield Reject(number, f"not a folded stack: {exc}", raw)
                continue
            event: dict[str, object] = {
                TIME_KEY: when,
                "stack": match.group(1).strip(),
                "function": frames[-1],
                "root": frames[0],
                "depth": len(frames),  # empty frames (``a;;b``, a trailing ``;``) are not counted
                "samples": samples,
            }
            if before is not None:
                event["samples_before"] = before
            if profile:
                event["profile"] = profile
            if self.options.host:
                event["host"] = self.options.host
            yield number, event


def _number(text: str) -> int | float:
    """A sample count: an integer (a float beyond 64 bits, where JSON integers end: stored
    as a double either way); ValueError naming it when it is not a finite number."""
    if text.isdigit() and len(text) <= 19:
        value: int | float = int(text)
        return value if value < 1 << 63 else float(value)
    value = float(text)  # digits beyond int()'s 4,300-digit limit, or a decimal
    if not math.isfinite(value):
        raise ValueError(f"sample count {text[:40]!r} is not a finite number")
    return value
