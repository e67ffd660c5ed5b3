"""The results table: one markdown row per metric and size, ratios against same-run baselines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

INGEST_RATE_MIN = 0.7  # rootsift rows/s ÷ DuckDB read_json rows/s
RSS_MAX_MIB = 1024.0  # rootsift ingest peak RSS
QUERY_RATIO_MAX = 1.2  # rootsift.query ÷ hand-written SQL on the same segments


@dataclass
class Row:
    """One line of the table; ``ok`` is None for context rows without a target."""

    metric: str
    n: int
    rootsift: str
    baseline: str
    ratio: float
    target: str
    ok: bool | None


def _num(x: float) -> str:
    return f"{x:,.0f}"


def _ms(x: float) -> str:
    return f"{x * 1e3:,.1f} ms"


def rows_for(n: int, result: dict[str, Any]) -> list[Row]:
    """Table rows for one size's results (as stored in results.json)."""
    ing = result["ingest"]
    rs, base = ing["rootsift"], ing["baseline"]
    out = [
        Row(
            "ingest rows/s (median)",
            n,
            _num(rs["rows_per_s"]),
            _num(base["rows_per_s"]),
            ing["rate_ratio"],
            f">= {INGEST_RATE_MIN}",
            ing["rate_ratio"] >= INGEST_RATE_MIN,
        ),
        Row(
            "ingest seconds (median)",
            n,
            f"{rs['seconds']:.2f} s",
            f"{base['seconds']:.2f} s",
            rs["seconds"] / base["seconds"],
            "-",
            None,
        ),
        Row(
            "ingest peak RSS",
            n,
            f"{_num(rs['peak_rss_mib'])} MiB",
            f"{_num(base['peak_rss_mib'])} MiB",
            rs["peak_rss_mib"] / base["peak_rss_mib"],
            f"rootsift < {RSS_MAX_MIB:.0f} MiB",
            rs["peak_rss_mib"] < RSS_MAX_MIB,
        ),
        Row(
            "bytes on disk",
            n,
            f"{rs['bytes_on_disk'] / 2**20:,.1f} MiB",
            f"{base['bytes_on_disk'] / 2**20:,.1f} MiB",
            rs["bytes_on_disk"] / base["bytes_on_disk"],
            "-",
            None,
        ),
    ]
    for name, q in result["queries"].items():
        same = "" if q["same_as_handwritten"] else " (RESULTS DIFFER)"
        out.append(
            Row(
                f"query {name} vs hand-written{same}",
                n,
                _ms(q["rootsift"]),
                _ms(q["handwritten"]),
                q["ratio"],
                f"<= {QUERY_RATIO_MAX}",
                q["ratio"] <= QUERY_RATIO_MAX and not same,
            )
        )
        out.append(
            Row(
                f"query {name} vs plain table (context)",
                n,
                _ms(q["rootsift"]),
                _ms(q["plain_table"]),
                q["plain_ratio"],
                "-",
                None,
            )
        )
    return out


def markdown(rows: list[Row]) -> str:
    """The rows as a markdown table."""
    head = ["metric", "N", "rootsift", "baseline", "ratio", "target", "ok"]
    body = [
        [
            r.metric,
            f"{r.n:,}",
            r.rootsift,
            r.baseline,
            f"{r.ratio:.2f}",
            r.target,
            "-" if r.ok is None else ("yes" if r.ok else "NO"),
        ]
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]
    right = {1, 2, 3, 4}

    def fmt(cells: list[str]) -> str:
        return (
            "| "
            + " | ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))
            + " |"
        )

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([fmt(head), rule, *[fmt(b) for b in body]])
