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
    "rfc3339, epoch, epoch_s, epoch_ms, epoch_us, epoch_ns, or a strptime pattern such as '%d/%b/%Y:%H:%M:%S %z'"
)


@dataclass(frozen=True)
class TimeSpec:
    """Which field holds the time and how to read it."""

    field: str
    format: str  # rfc3339 | epoch_s | epoch_ms | epoch_us | epoch_ns | a strptime pattern

    def sql(self, expr: str, source_type: str = "VARCHAR") -> str:
        """SQL turning ``expr`` (of ``source_type``) into a UTC TIMESTAMP, NULL when unreadable."""
        text = f"({expr} ->> '$')" if source_type == "JSON" else f"CAST({expr} AS VARCHAR)"
        if self.format.startswith("epoch"):
            num = expr if source_type == "DOUBLE" else f"TRY_CAST({text} AS DOUBLE)"
            scale = EPOCH_SCALE[self.format]
            return f"make_timestamp(TRY_CAST(round({num} * {scale!r}) AS BIGINT))"
        if source_type.startswith("TIMESTAMP"):
            return f"CAST({expr} AS TIMESTAMP)"
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
    if lowered in ("epoch", *EPOCH_SCALE):
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
    """Decide the time format from sample values of the time field (as text)."""
    if fmt is not None and fmt != "epoch":
        return fmt
    rows = values[:1000]
    if not rows:
        return fmt or "rfc3339"
    nums = [_number(v) for v in rows]
    if sum(n is not None for n in nums) * 2 > len(nums) or fmt == "epoch":
        mags = sorted(abs(n) for n in nums if n is not None)
        mid = mags[len(mags) // 2] if mags else 0
        return "epoch_s" if mid < 1e11 else "epoch_ms" if mid < 1e14 else "epoch_us" if mid < 1e17 else "epoch_ns"
    # The format that reads most of the sample wins; values it cannot read become rejects.
    best, best_ok = None, 0
    for cand in ("rfc3339", *STRPTIME_GUESSES):
        spec = TimeSpec("v", cand)
        ok = con.execute(
            f"SELECT count(*) FROM (SELECT unnest(?::VARCHAR[]) AS v) WHERE {spec.sql('v')} IS NOT NULL", [rows]
        ).fetchone()
        if ok and ok[0] > best_ok:
            best, best_ok = cand, ok[0]
    if best is not None and best_ok * 2 > len(rows):
        return best
    raise UsageError(f"cannot tell the time format of values like {rows[0]!r}; pass --time-format ({FORMAT_HELP})")


def _number(value: object) -> float | None:
    try:
        return float(str(value))
    except ValueError:
        return None
