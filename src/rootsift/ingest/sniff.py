"""Telling an input's format from its first lines, its name and the options given.

Every registered log format says how sure it is that the first lines are its own; the
surest wins if it is sure enough, else the input is JSON, JSON lines, CSV or TSV by its
first bytes. An option only some formats read narrows the choice: ``--log-format`` means
an access log (nginx for ``$variable`` syntax, Apache for ``%`` directives),
``--log-line-prefix`` a PostgreSQL stderr or syslog log, ``--host`` a snapshot format.
"""

from __future__ import annotations

from pathlib import Path

from rootsift.errors import InputFormatError, UsageError
from rootsift.ingest import formats
from rootsift.ingest.formats.base import FormatOptions
from rootsift.ingest.sources import open_input, sniff_format

HEAD_BYTES = 64 << 10
"""Bytes of an input's front that sniffing looks at."""
NARROWING = ("log_format", "log_line_prefix", "host")
"""Options that only some formats read, so giving one narrows the sniff to those."""


def sniff_head(head: bytes, name: str, options: FormatOptions | None = None) -> str:
    """The format of an input starting with ``head``: a log format sure of it, else a structured one.

    Raises InputFormatError for an empty input.
    """
    lines = head.decode("utf-8", "replace").split("\n")
    if len(head) >= HEAD_BYTES:
        lines = lines[:-1]  # the last line may be cut
    lines = [ln.removesuffix("\r") for ln in lines[:200]]
    given = [o for o in NARROWING if options is not None and getattr(options, o) is not None]
    if not given:
        return formats.sniff(lines, name) or sniff_format(head, name)
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
