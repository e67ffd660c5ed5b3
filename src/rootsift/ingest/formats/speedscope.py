"""speedscope JSON (``https://www.speedscope.app/file-format-schema.json``): what py-spy
(``--format speedscope``), rbspy, Austin and speedscope's own export write. Each profile of
the file (py-spy: one per thread) gives one event per distinct stack.

- ``sampled`` profiles: ``samples`` (how many samples had the stack) and ``weight`` (their
  weights summed: ``time_ms`` when the unit is a time, ``weight_bytes`` for bytes, else
  ``weight``);
- ``evented`` profiles (open/close events): the time each stack was on top, ``time_ms``
  (or ``weight``…), replayed from the events.

Stacks are root first, joined by ``;``: each frame's ``name``, with the base name of its
``file`` when it has one (``render (app.py)``). ``thread`` is the profile's
name, ``profile`` the file name, ``sample_type`` the field a diff sums by default
(``samples`` for sampled profiles). The format carries no wall-clock time: every event
takes the file's modification time; name what the profile is of with ``--label``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Item, Lines, TextFormat, numbered_lines
from rootsift.ingest.formats.pprof import TIME_UNITS
from rootsift.ingest.rejects import Reject
from rootsift.ingest.sources import Readable

SCHEMA = "speedscope.app/file-format-schema"
MAX_BYTES = 1 << 30
HEAD_CHARS = 64 << 10
"""A document with no sign of speedscope (its schema, ``shared``) this far in is refused, not held."""


@register
class Speedscope(TextFormat):
    name = "speedscope"
    summary = "speedscope JSON (py-spy, rbspy, Austin): one stack-sample event per distinct stack of each profile"
    # no --host: name the host, like anything else a profile is of, with --label host=...

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        head = "\n".join(lines[:50])
        return 0.95 if head.lstrip().startswith("{") and SCHEMA in head else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        """The lines of one JSON document, refused at its first line when that does not open
        an object, or after 64 KiB without a sign of speedscope, so other text is not held whole."""
        text: list[str] = []
        size = 0
        for _, line in lines:
            if not text and not line.strip():
                continue
            if not text and not line.lstrip().startswith("{"):
                yield Reject(1, "not a speedscope file: it does not start with a JSON object", line[:200])
                return
            text.append(line)
            size += len(line) + 1
            if size >= HEAD_CHARS and size - len(line) - 1 < HEAD_CHARS and not _looks_speedscope(text):
                yield Reject(1, f"not a speedscope file: no `shared` frames in its first {HEAD_CHARS >> 10} KiB", "")
                return
            if size > MAX_BYTES:
                yield Reject(1, f"speedscope file larger than {MAX_BYTES >> 20} MiB: not read", "")
                return
        if text:
            yield from self.read_text("\n".join(text).encode())

    def read(self, stream: Readable) -> Iterator[Item]:
        return self.parse(numbered_lines(stream))

    def read_text(self, data: bytes) -> Iterator[Item]:
        try:
            doc = orjson.loads(data)
            frames = [_frame(f) for f in doc["shared"]["frames"]]
            profiles = doc["profiles"]
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
            yield Reject(
                1, f"not a speedscope file: {type(exc).__name__} {exc} (expected shared.frames and profiles)", ""
            )
            return
        common: dict[str, object] = {TIME_KEY: self.options.file_time()}
        if self.options.source != "-":
            common["profile"] = Path(self.options.source).name
        for number, prof in enumerate(profiles, 1):
            try:
                stacks = _sampled(prof, frames) if prof.get("type") == "sampled" else _evented(prof, frames)
            except (KeyError, TypeError, IndexError, ValueError, AttributeError) as exc:
                yield Reject(1, f"profile {number} ({prof.get('name', '?') if isinstance(prof, dict) else '?'}) "
                             f"is not a readable speedscope profile: {type(exc).__name__} {exc}", "")  # fmt: skip
                continue
            unit = str(prof.get("unit", "none"))
            value = "time_ms" if unit in TIME_UNITS else "weight_bytes" if unit == "bytes" else "weight"
            scale = TIME_UNITS.get(unit, 1.0)
            sampled = prof.get("type") == "sampled"
            for stack, (count, weight) in stacks.items():  # numbered 1: a JSON document's profiles have no lines
                event = {
                    **common,
                    "stack": ";".join(stack),
                    "function": stack[-1],
                    "root": stack[0],
                    "depth": len(stack),
                }
                if sampled:
                    event["samples"] = count
                event[value] = weight * scale
                event.update(
                    sample_type="samples" if sampled else value, profile_type="cpu" if unit in TIME_UNITS else unit
                )
                event["thread"] = str(prof.get("name", number))
                yield 1, event


def _frame(frame: dict[str, Any]) -> str:
    """A frame's name, with its file's base name when it has one (``render (app.py)``): py-spy
    names every module's top level ``<module>``; the line is left out, so a function is one
    frame however many lines of it were sampled."""
    name = str(frame.get("name", "?"))
    file = frame.get("file")
    return (f"{name} ({Path(str(file)).name})" if file else name).replace(";", ",")


def _looks_speedscope(text: list[str]) -> bool:
    head = "\n".join(text)[:HEAD_CHARS]
    return SCHEMA in head or '"shared"' in head


def _sampled(prof: dict[str, Any], frames: list[str]) -> dict[tuple[str, ...], list[float]]:
    samples, weights = prof["samples"], prof.get("weights") or [1.0] * len(prof["samples"])
    if len(weights) != len(samples):
        raise ValueError(f"{len(samples)} samples but {len(weights)} weights")
    out: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0, 0.0])
    for stack, weight in zip(samples, weights, strict=True):
        if stack:
            key = tuple(frames[i] for i in stack)
            out[key][0] += 1
            out[key][1] += float(weight)
    return out


def _evented(prof: dict[str, Any], frames: list[str]) -> dict[tuple[str, ...], list[float]]:
    """Replay open/close events: the time between two events goes to the stack open then."""
    out: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0, 0.0])
    stack: list[str] = []
    last = float(prof.get("startValue", 0))
    for ev in prof["events"]:
        at = float(ev["at"])
        if stack and at > last:
            out[tuple(stack)][1] += at - last
        last = at
        if ev["type"] == "O":
            stack.append(frames[ev["frame"]])
        elif ev["type"] == "C":
            if not stack or stack[-1] != frames[ev["frame"]]:
                raise ValueError(f"close of {frames[ev['frame']]!r} at {at} does not match the open frame")
            stack.pop()
    return out
