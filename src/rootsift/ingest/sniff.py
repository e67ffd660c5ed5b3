"""Telling an input's format from its first lines, its name and the options given.

Every registered log format says how sure it is that the first lines are its own; the
surest wins if it is sure enough, else the input is JSON, JSON lines, CSV or TSV by its
first bytes. An option only some formats read narrows the choice: ``--log-format`` means
an access log (nginx for ``$variable`` syntax, Apache for ``%`` directives),
``--log-line-prefix`` a PostgreSQL stderr or syslog log, ``--host`` a snapshot format.
"""

from __future__ import annotations

import re
from pathlib import Path

from rootsift.errors import InputFormatError, UnknownFormatError, UsageError
from rootsift.ingest import formats
from rootsift.ingest.formats.base import FormatOptions
from rootsift.ingest.formats.pprof import is_pprof
from rootsift.ingest.protowire import varint
from rootsift.ingest.sources import open_input, sniff_format

HEAD_BYTES = 64 << 10
"""Bytes of an input's front that sniffing looks at."""
NARROWING = ("log_format", "log_line_prefix", "host")
"""Options that only some formats read, so giving one narrows the sniff to those."""


def sniff_head(head: bytes, name: str, options: FormatOptions | None = None, compression: str = "none") -> str:
    """The format of an input starting with ``head``: a log format sure of it, else a structured one.

    Raises InputFormatError for an empty input, and UsageError naming what the input looks
    like when it is none of them (binary data, a PgBouncer log...). A pprof profile is known
    by its protobuf fields (``head`` is decompressed), before any line is looked at.
    """
    if _is_binary(head) and is_pprof(head):  # binary: known by its protobuf fields, not by lines
        return "pprof"
    lines = head.decode("utf-8", "replace").split("\n")
    if len(head) >= HEAD_BYTES:
        lines = lines[:-1]  # the last line may be cut
    lines = [ln.removesuffix("\r") for ln in lines[:200]]
    given = [o for o in NARROWING if options is not None and getattr(options, o) is not None]
    if not given:
        found = formats.sniff(lines, name)
        if found:
            return found
        looks = looks_like(head, lines, compression)
        if looks is not None:
            what, hint = looks
            raise UnknownFormatError(
                f"{name} is in no format rootsift reads: it looks like {what}; {hint} "
                "(if it is a format rootsift knows, name it with --format; `rootsift formats` lists them)"
            )
        return sniff_format(head, name)
    if "log_format" in given and options is not None and options.log_format is not None:
        return "nginx" if "$" in options.log_format else "apache"
    among = [n for n, cls in formats.all_formats().items() if set(given) <= set(cls.reads)]
    found = formats.sniff(lines, name, among)
    if found:
        return found
    if "log_line_prefix" in given:
        return "postgres-stderr"
    flags = ", ".join("--" + o.replace("_", "-") for o in given)
    raise UsageError(
        f"{flags} is read by {', '.join(among) or 'no format'}, and {name} looks like none of them; "
        "name its format with --format"
    )


def sniff_directory(names: list[str], options: FormatOptions | None = None) -> str:
    """The log format of the first of ``names`` one is sure of (a directory may start with an
    empty or odd file), else what its first readable file looks like."""
    fallback: str | None = None
    for name in names:
        inp = open_input(name)
        try:
            kind = sniff_head(inp.stream.read(HEAD_BYTES), name, options)
        except InputFormatError:
            continue  # an empty file says nothing
        finally:
            inp.close()
        if kind in formats.all_formats():
            return kind
        fallback = fallback or kind
    if fallback is None:
        raise InputFormatError(f"cannot tell the format of {Path(names[0]).parent}: its first files are empty")
    return fallback


def sniff_file(head: bytes, name: str, options: FormatOptions, default: str) -> str:
    """One file of a directory: the log format sure of it, else the directory's ``default``."""
    try:
        kind = sniff_head(head, name, options)
    except (InputFormatError, UsageError):
        return default
    return kind if kind in formats.all_formats() else default


# -- inputs that are no format rootsift reads ------------------------------------------------

MAGIC = {
    b"\x7fELF": "an ELF executable",
    b"PK\x03\x04": "a ZIP archive",
    b"%PDF": "a PDF document",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"SQLite format 3\x00": "an SQLite database",
    b"PAR1": "a Parquet file",
    b"ARROW1": "an Arrow IPC file",
}
TEXT_CONTROLS = frozenset(b"\t\n\r\f\v\x1b")
PGBOUNCER = re.compile(
    r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?: [A-Z]{2,5}| [+-]\d\d:?\d\d)? "
    r"\[?\d+\]? (?:LOG|WARNING|ERROR|FATAL|DEBUG|NOISE|NOTICE) "
)
"""A PgBouncer log line: time, pid (bare or in brackets), level without PostgreSQL's colon."""
PERF_SAMPLE = re.compile(
    r"^\S.*?\s+\d+(?:/\d+)?\s+(?:\[\d+\]\s+)?(?:\d+\.\d+:\s+)?(?:\d+\s+)?[\w.\-/]+(?::[\w.\-/]+)*:(?:\s|$)"
)
"""A ``perf script`` sample header: ``comm pid[/tid] [cpu] time: [period] event:``."""
PERF_FRAME = re.compile(r"^(?:\s+[0-9a-f]+|[0-9a-f]{8,})\s+\S")
"""A ``perf script`` stack frame: address (indented since perf 3.x), symbol, (module)."""
FOLD_IT = "but its header lines are not perf's; if it is perf script output, name it with --format perf-script"


def looks_like(head: bytes, lines: list[str], compression: str = "none") -> tuple[str, str] | None:
    """What an input no reader claims looks like, and what to do with it: (description, hint).
    None when it may be JSON, CSV or TSV (text that no log format was sure of)."""
    for magic, what in MAGIC.items():
        if head.startswith(magic):
            return what, "rootsift reads telemetry as text (JSON lines, CSV, log formats)"
    if _is_binary(head):
        if _protobuf_fields(head) >= 3:
            packed = f"{compression}-compressed " if compression != "none" else ""
            if compression == "gzip" and _protobuf_fields(head, max_field=14) >= 3:
                return "a pprof profile (gzip-compressed protobuf)", (
                    "but not one whose fields read as pprof's; if it is one, name it with --format pprof"
                )
            return f"a {packed}protobuf message", "rootsift reads telemetry as text (JSON lines, CSV, log formats)"
        sample = " ".join(f"{b:02x}" for b in head[:8])
        return (
            f"binary data ({_non_text(head):.0%} of its first {len(head):,} bytes are not text; it starts {sample})",
            "rootsift reads text telemetry (JSON lines, CSV, log formats), plain or compressed",
        )
    text = [ln for ln in lines if ln.strip() and not ln.startswith("#")][:100]
    if not text or text[0].lstrip().startswith(("{", "[")):
        return None
    if sum(bool(PGBOUNCER.match(ln)) for ln in text) >= max(1, len(text) // 2):
        return "a PgBouncer log", "rootsift has no PgBouncer format yet"
    samples = sum(bool(PERF_SAMPLE.match(ln)) for ln in text)
    frames = sum(bool(PERF_FRAME.match(ln)) for ln in text)
    if samples and frames and samples + frames >= len(text) * 0.9:
        return "`perf script` output (samples with their stacks)", FOLD_IT
    return None


def _non_text(head: bytes) -> float:
    """The share of ``head`` that is not text: control bytes, or bytes that are not UTF-8."""
    if not head:
        return 0.0
    controls = sum(1 for b in head if b < 0x20 and b not in TEXT_CONTROLS)
    invalid = len(head) - len(head.decode("utf-8", "ignore").encode("utf-8"))
    return (controls + max(0, invalid - 3)) / len(head)  # the last character may be cut


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head or _non_text(head) > 0.05


def _protobuf_fields(data: bytes, max_field: int = 1 << 29) -> int:
    """How many protobuf fields (numbers up to ``max_field``) parse from the front of ``data``
    before it stops making sense; every field up to the end of ``data`` counts."""
    pos, fields = 0, 0
    while pos < len(data):
        tag, pos = varint(data, pos)
        if tag is None or not 1 <= tag >> 3 <= max_field:
            return fields
        wire = tag & 7
        if wire == 0:
            value, pos = varint(data, pos)
            if value is None:
                return fields
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        elif wire == 2:
            size, pos = varint(data, pos)
            if size is None:
                return fields
            pos += size
        else:
            return fields
        fields += 1
    return fields
