"""Finding the time field of an input and turning its values into UTC timestamps."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from rootsift.errors import UsageError
from rootsift.store.sqltext import literal

CANDIDATES = (
    "timestamp",
    "time",
    "ts",
    "@timestamp",
    "Timestamp",
    "Time",
    "datetime",
    "date",
    "eventTime",
    "event_time",
    "_time",
    "@t",
    "t",
    "time_local",
    "start_time",
    "startTime",
    "time_unix_nano",
    "timeUnixNano",
)
EPOCH_SCALE = {"epoch_s": 1e6, "epoch_ms": 1e3, "epoch_us": 1.0, "epoch_ns": 1e-3}
STRPTIME_GUESSES = (
    "%d/%b/%Y:%H:%M:%S %z",  # common log format
    "%Y-%m-%d %H:%M:%S,%f",  # log4j
    "%Y-%m-%d %H:%M:%S.%f %Z",
    "%Y/%m/%d %H:%M:%S",
    "%d/%b/%Y %H:%M:%S",
    "%b %d %Y %H:%M:%S",
)
FORMAT_HELP = (
    "rfc3339, epoch, epoch_s, epoch_ms, epoch_us, epoch_ns, mixed, or a strptime pattern such as '%d/%b/%Y:%H:%M:%S %z'"
)
MIXED = "mixed"
"""Several formats in one field: each value read by the first that reads it (numbers as
epoch seconds, milliseconds, microseconds or nanoseconds by their magnitude, then RFC
3339, then the strptime guesses)."""
EPOCH_BOUNDS = ((1e11, "epoch_s"), (1e14, "epoch_ms"), (1e17, "epoch_us"))
"""An epoch number below each bound is in that unit (2001-2286 in seconds); above all, ns."""


@dataclass(frozen=True)
class TimeSpec:
    """Which field holds the time and how to read it."""

    field: str
    format: str  # rfc3339 | epoch_s | epoch_ms | epoch_us | epoch_ns | mixed | a strptime pattern
    detected: bool = False
    """The format was detected, not given: a value it cannot read is tried by the others
    (numbers by their magnitude), so a field that mixes formats loses no line."""

    def sql(self, expr: str, source_type: str = "VARCHAR") -> str:
        """SQL turning ``expr`` (of ``source_type``) into a UTC TIMESTAMP, NULL when unreadable."""
        if not self.detected or self.format == MIXED or source_type.startswith("TIMESTAMP"):
            return self._sql(expr, source_type)
        mixed = TimeSpec(self.field, MIXED)._sql(expr, source_type)
        if self.format.startswith("epoch"):
            return mixed  # each number in the unit its magnitude says, as detection does
        # COALESCE evaluates the mixture only for the rows the detected format left NULL.
        return f"coalesce({self._sql(expr, source_type)}, {mixed})"

    def _sql(self, expr: str, source_type: str) -> str:
        text = f"({expr} ->> '$')" if source_type == "JSON" else f"CAST({expr} AS VARCHAR)"
        num = expr if source_type == "DOUBLE" else f"TRY_CAST({text} AS DOUBLE)"
        if self.format.startswith("epoch"):
            scale = EPOCH_SCALE[self.format]
            return f"make_timestamp(TRY_CAST(round({num} * {scale!r}) AS BIGINT))"
        if source_type.startswith("TIMESTAMP"):
            return f"CAST({expr} AS TIMESTAMP)"
        if self.format == MIXED:
            by_size = " ".join(f"WHEN abs({num}) < {b!r} THEN {EPOCH_SCALE[u]!r}" for b, u in EPOCH_BOUNDS)
            epoch = f"make_timestamp(TRY_CAST(round({num} * CASE {by_size} ELSE {EPOCH_SCALE['epoch_ns']!r} END) AS BIGINT))"
            texts = [TimeSpec(self.field, f).sql(expr, source_type) for f in ("rfc3339", *STRPTIME_GUESSES)]
            return f"(CASE WHEN {num} IS NOT NULL THEN {epoch} ELSE coalesce({', '.join(texts)}) END)"
        if self.format == "rfc3339":
            # RFC 3339 allows lower-case 't' and 'z'; DuckDB's parser does not.
            return f"CAST(TRY_CAST(upper({text}) AS TIMESTAMPTZ) AS TIMESTAMP)"
        return f"CAST(try_strptime({text}, {literal(self.format)}) AS TIMESTAMP)"


def normalise_format(fmt: str | None) -> str | None:
    """Check a --time-format value; None means detect."""
    if fmt is None or fmt == "auto":
        return None
    lowered = fmt.lower()
    if lowered in ("rfc3339", "iso8601", "iso"):
        return "rfc3339"
    if lowered in ("epoch", MIXED, *EPOCH_SCALE):
        return lowered
    if "%" in fmt:
        return fmt
    raise UsageError(f"--time-format {fmt!r} is not understood; use {FORMAT_HELP}")


def pick_field(names: list[str], wanted: str | None) -> str:
    """The time field among top-level ``names``: ``wanted`` if given, else the first candidate."""
    names = [n for n in names if not n.startswith("__rootsift_")]
    if wanted:
        if wanted not in names:
            raise UsageError(f"--time-field {wanted!r} is not a field of the input (fields: {', '.join(names[:20])})")
        return wanted
    for cand in CANDIDATES:
        if cand in names:
            return cand
    lowered = {n.lower(): n for n in names}
    for cand in CANDIDATES:
        if cand.lower() in lowered:
            return lowered[cand.lower()]
    raise UsageError(
        "no time field found in the input (looked for " + ", ".join(CANDIDATES[:8]) + ", …); name it with --time-field"
    )


def detect_format(con: duckdb.DuckDBPyConnection, values: list[str], fmt: str | None) -> str:
    """Decide the time format from sample values of the time field (as text).

    One format when it reads as many of the sample as any mixture does; ``mixed`` when
    the values mix formats (each value is then read by the first that reads it). Values
    no format reads become rejects, counted with their lines; the field is refused only
    when no value of the sample reads at all.
    """
    if fmt is not None and fmt != "epoch":
        return fmt
    rows = values[:1000]
    if not rows:
        return fmt or "rfc3339"
    nums = [_number(v) for v in rows]
    numbers = sum(n is not None for n in nums)
    if numbers * 2 > len(rows) or fmt == "epoch":
        mags = sorted(abs(n) for n in nums if n is not None)
        mid = mags[len(mags) // 2] if mags else 0
        unit = next((u for b, u in EPOCH_BOUNDS if mid < b), "epoch_ns")
        units = {next((u for b, u in EPOCH_BOUNDS if abs(n) < b), "epoch_ns") for n in nums if n is not None}
        if (numbers == len(rows) or fmt == "epoch") and len(units) == 1:
            return unit
        if fmt == "epoch":  # said by the user: values it does not read are rejects, not a reason to guess
            return unit if not units else MIXED
        if numbers == len(rows):
            return MIXED  # seconds beside milliseconds: each read by its magnitude
        best, best_ok = unit, _reads(con, unit, rows)
    else:
        best, best_ok = None, 0
    # The format that reads most of the sample wins, unless a mixture reads more.
    for cand in ("rfc3339", *STRPTIME_GUESSES):
        ok = _reads(con, cand, rows)
        if ok > best_ok:
            best, best_ok = cand, ok
    if best is not None and best_ok == len(rows):
        return best
    mixed = _reads(con, MIXED, rows)
    if mixed > best_ok:
        return MIXED
    if best is not None and best_ok:
        return best
    raise UsageError(f"cannot tell the time format of values like {rows[0]!r}; pass --time-format ({FORMAT_HELP})")


def _reads(con: duckdb.DuckDBPyConnection, fmt: str, rows: list[str]) -> int:
    """How many of ``rows`` (text) the format ``fmt`` reads."""
    spec = TimeSpec("v", fmt)
    ok = con.execute(
        f"SELECT count(*) FROM (SELECT unnest(?::VARCHAR[]) AS v) WHERE {spec.sql('v')} IS NOT NULL", [rows]
    ).fetchone()
    return int(ok[0]) if ok else 0


def _number(value: object) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None
