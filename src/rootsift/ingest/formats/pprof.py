"""pprof profiles: the protobuf ``profile.proto`` that Go's ``runtime/pprof`` and
``net/http/pprof``, ``pprof`` itself, async-profiler, py-spy and Pyroscope write, gzipped
(as on disk) or not. CPU, heap (alloc and inuse), goroutine, threadcreate, mutex/block
(contention) profiles alike: one event per sample.

    {"timestamp": <time_nanos>, "stack": "main.main;main.work;main.hash", "function": "main.hash",
     "samples": 12, "cpu_ms": 120.0, "sample_type": "samples", "profile_type": "cpu", ...}

- ``stack``: the frames root first, joined by ``;`` (a ``;`` in a name becomes ``,``). A
  location with inlined calls gives one frame per line, the caller first; a location
  without a symbol is ``module+0xADDRESS`` (or ``0xADDRESS``).
- One field per sample type: ``samples`` for samples/count, ``{type}_ms`` for a time
  (nanoseconds… seconds, converted), ``{type}_bytes``, ``{type}`` for a count, else
  ``{type}_{unit}``. ``sample_type`` names the field a diff sums by default: ``samples``
  when the profile has it, else its default sample type (the last one when unset).
- ``profile_type`` (cpu, heap, goroutine, threadcreate, contention, or the period type),
  ``period``, ``period_type``, ``profile_duration_ms``; ``module`` (the leaf's mapping);
  sample labels as ``label.KEY`` (numeric labels with their unit: ``label.KEY_UNIT``).
- The time is the profile's ``time_nanos``, else the file's modification time; ``profile``
  is the file name. A binary file has no lines: its events and rejects are numbered 1 (a
  reject names its sample).

The protobuf runtime is imported only here, when a profile is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Item, Lines, TextFormat
from rootsift.ingest.protowire import varint
from rootsift.ingest.rejects import Reject
from rootsift.ingest.sources import Readable

TIME_UNITS = {"nanoseconds": 1e-6, "microseconds": 1e-3, "milliseconds": 1.0, "seconds": 1e3}
"""Milliseconds in one unit of a time-valued sample type."""
WIRE = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 0, 8: 0, 9: 0, 10: 0, 11: 2, 12: 0, 13: (0, 2), 14: 0}
"""Profile's fields and their protobuf wire types (13 may be packed), for sniffing."""
MAX_BYTES = 1 << 30


@register
class Pprof(TextFormat):
    name = "pprof"
    summary = "pprof profiles (protobuf, gzipped or not): CPU, heap, goroutine, mutex/block; one event per sample"
    # no --host: name the host, like anything else a profile is of, with --label host=...

    def parse(self, lines: Lines) -> Iterator[Item]:  # a binary format: ``read`` takes the bytes
        yield Reject(1, "a pprof profile is binary: read it with read(), not as lines", "")

    def read(self, stream: Readable) -> Iterator[Item]:
        data = bytearray()
        while chunk := stream.read(1 << 20):
            data += chunk
            if len(data) > MAX_BYTES:
                yield Reject(1, f"profile larger than {MAX_BYTES >> 20} MiB decompressed: not read", "")
                return
        from google.protobuf.message import DecodeError

        from rootsift.ingest.formats.pprof_pb import profile_pb2

        prof = profile_pb2.Profile()  # type: ignore[attr-defined]  # generated: protoc builds it at import
        try:
            prof.ParseFromString(bytes(data))
        except DecodeError as exc:
            yield Reject(1, f"not a readable pprof profile (protobuf: {exc})", bytes(data[:40]).hex())
            return
        yield from Reader(prof, self.options.file_time(), self.options).events()


class Reader:
    """One decoded profile's samples as events."""

    def __init__(self, prof: Any, file_time: datetime, options: Any) -> None:
        self.prof = prof
        self.strings = list(prof.string_table)
        self.functions = {f.id: f for f in prof.function}
        self.mappings = {m.id: m for m in prof.mapping}
        self.locations = {loc.id: loc for loc in prof.location}
        self.frames: dict[int, tuple[str, ...]] = {}
        self.time = datetime.fromtimestamp(prof.time_nanos / 1e9, UTC) if prof.time_nanos > 0 else file_time
        self.options = options

    def s(self, index: int) -> str:
        return self.strings[index] if 0 <= index < len(self.strings) else ""

    def events(self) -> Iterator[Item]:
        prof = self.prof
        types = [(self.s(t.type), self.s(t.unit)) for t in prof.sample_type]
        fields = [value_name(t, u) for t, u in types]
        scales = [TIME_UNITS.get(u, 1.0) for _, u in types]
        common = self.common(types, fields)
        for number, sample in enumerate(prof.sample, 1):
            if len(sample.value) != len(fields):
                yield Reject(1, f"sample {number} has {len(sample.value)} values for {len(fields)} sample types", "")
                continue
            if not any(sample.value):
                continue
            try:
                frames = [f for loc in reversed(sample.location_id) for f in self.location(loc)]
            except KeyError as exc:
                yield Reject(1, f"sample {number} names location {exc.args[0]}, which the profile does not have", "")
                continue
            if not frames:
                frames = ["(no frames)"]
            event: dict[str, object] = {TIME_KEY: self.time, "stack": ";".join(frames), "function": frames[-1]}
            event.update(root=frames[0], depth=len(frames), **common)
            for name, scale, value in zip(fields, scales, sample.value, strict=True):
                event[name] = value * scale if scale != 1.0 else value
            module = self.module(sample.location_id[0]) if sample.location_id else None
            if module:
                event["module"] = module
            for label in sample.label:
                key = re.sub(r"\W+", "_", self.s(label.key)) or "_"
                if label.str:
                    event[f"label.{key}"] = self.s(label.str)
                else:
                    unit = re.sub(r"\W+", "_", self.s(label.num_unit))
                    event[f"label.{key}_{unit}" if unit else f"label.{key}"] = label.num
            yield 1, event  # a binary file has no lines: every event is of "line" 1, the file

    def common(self, types: list[tuple[str, str]], fields: list[str]) -> dict[str, object]:
        """What every event of the profile carries: its kind, period, duration and name."""
        prof = self.prof
        default = self.s(prof.default_sample_type)
        named = [f for (t, _), f in zip(types, fields, strict=True) if t == default]
        main = "samples" if "samples" in fields else (named[0] if named else (fields[-1] if fields else None))
        out: dict[str, object] = {
            "sample_type": main,
            "profile_type": profile_type(types, self.s(prof.period_type.type)),
        }
        if prof.period:
            out["period"] = prof.period
        if prof.HasField("period_type"):
            out["period_type"] = f"{self.s(prof.period_type.type)}/{self.s(prof.period_type.unit)}"
        if prof.duration_nanos > 0:
            out["profile_duration_ms"] = prof.duration_nanos / 1e6
        if self.options.source != "-":
            out["profile"] = Path(self.options.source).name
        return out

    def location(self, loc_id: int) -> tuple[str, ...]:
        """A location's frames, the caller first (its lines are innermost first)."""
        frames = self.frames.get(loc_id)
        if frames is not None:
            return frames
        loc = self.locations[loc_id]
        names = []
        for line in reversed(loc.line):
            func = self.functions.get(line.function_id)
            name = (self.s(func.name) or self.s(func.system_name)) if func is not None else ""
            if name:
                names.append(name.replace(";", ","))
        if not names:
            module = self.module(loc_id)
            names.append(f"{module}+0x{loc.address:x}" if module else f"0x{loc.address:x}")
        frames = self.frames[loc_id] = tuple(names)
        return frames

    def module(self, loc_id: int) -> str | None:
        loc = self.locations.get(loc_id)
        mapping = self.mappings.get(loc.mapping_id) if loc is not None else None
        return Path(self.s(mapping.filename)).name or None if mapping is not None else None


def value_name(kind: str, unit: str) -> str:
    """The event field of a sample type: ``samples``, ``cpu_ms``, ``inuse_space_bytes``, ``goroutine``…"""
    base = re.sub(r"\W+", "_", kind.lower()).strip("_") or "value"
    if unit in TIME_UNITS:
        return f"{base}_ms"
    if unit in ("", "count"):
        return base
    suffix = re.sub(r"\W+", "_", unit.lower()).strip("_")
    return base if base.endswith(f"_{suffix}") else f"{base}_{suffix}"


def profile_type(types: list[tuple[str, str]], period: str) -> str:
    """What the profile is of, from its sample types and period type."""
    names = {t for t, _ in types}
    if names & {"inuse_space", "alloc_space", "inuse_objects", "alloc_objects"} or period == "space":
        return "heap"
    for kind in ("goroutine", "threadcreate"):
        if kind in names or period == kind:
            return kind
    if "contentions" in names or period == "contentions":
        return "contention"
    if period == "cpu" or "cpu" in names:
        return "cpu"
    return period or (types[0][0] if types else "unknown")


def is_pprof(head: bytes) -> bool:
    """Whether ``head`` (decompressed) starts like a pprof Profile message: every field up to
    its end is one of Profile's, with its wire type, and there are at least three, or the
    message ends exactly."""
    pos, fields = 0, 0
    while pos < len(head):
        tag, pos = varint(head, pos)
        if tag is None:
            return False
        number, wire = tag >> 3, tag & 7
        expected = WIRE.get(number)
        if expected is None or wire not in (expected if isinstance(expected, tuple) else (expected,)):
            return False
        if wire == 0:
            value, pos = varint(head, pos)
            if value is None:
                return fields >= 3
        else:
            size, pos = varint(head, pos)
            if size is None:
                return fields >= 3
            pos += size
        fields += 1
    return fields >= 3 or (fields >= 1 and pos == len(head))
