"""The declarative query spec: the one object behind the CLI, the HTTP API and the web page.

A spec is plain data and round-trips through JSON::

    {"dataset": "api", "start": "-2h", "end": null, "where": "status >= 500",
     "breakdowns": ["endpoint"], "calculations": ["count", "p99(duration_ms)"],
     "granularity": "1m", "order": ["count desc"], "limit": 100}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from rootsift.errors import QuerySpecError

OPS = ("count", "count_distinct", "sum", "avg", "min", "max", "percentile", "heatmap")
HEAT_STEPS_PER_DOUBLING = 4
"""Heatmap value buckets are log-scaled: four per doubling, each 2^(1/4) ≈ 1.19× wide."""
_CALC = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*(?:\((.*)\))?\s*$", re.S)
_PCT = re.compile(r"^p(\d+(?:\.\d+)?)$", re.I)


@dataclass(frozen=True)
class Calculation:
    """One calculation: ``count``, ``sum(x)``, ``p99.9(x)``, ``heatmap(x)`` …"""

    op: str
    field: str | None = None
    q: float | None = None

    @property
    def label(self) -> str:
        """The column name of the calculation in results, as the user would write it."""
        if self.op == "count" and self.field is None:
            return "count"
        if self.op == "percentile":
            assert self.q is not None
            return f"p{_num(self.q * 100)}({self.field})"
        return f"{self.op}({self.field})"

    @staticmethod
    def parse(text: str) -> Calculation:
        """Parse ``count``, ``count_distinct(f)``, ``sum(f)``, ``avg(f)``, ``min(f)``, ``max(f)``,
        ``p50(f)`` … ``p99.9(f)``, ``percentile(f, 0.95)`` or ``heatmap(f)``."""
        m = _CALC.match(text)
        if not m:
            raise QuerySpecError(
                f"cannot read calculation {text!r}; write e.g. count, p99(duration_ms), heatmap(duration_ms)"
            )
        name, arg = m.group(1).lower(), m.group(2)
        if arg is not None:
            arg = arg.strip()
            if arg.startswith("`") and arg.endswith("`") and len(arg) >= 2:
                arg = arg[1:-1].replace("``", "`")
        if name == "count" and not arg:
            return Calculation("count")
        if not arg:
            raise QuerySpecError(f"calculation {text!r} needs a field, e.g. {name}(duration_ms)")
        pct = _PCT.match(name)
        if pct:
            q = float(pct.group(1)) / 100
            if not 0 <= q <= 1:
                raise QuerySpecError(f"percentile in {text!r} must be between p0 and p100")
            return Calculation("percentile", arg, q)
        if name == "percentile":
            fld, _, qtext = arg.rpartition(",")
            try:
                q = float(qtext)
            except ValueError:
                raise QuerySpecError(f"write percentile(field, 0.95), not {text!r}") from None
            q = q / 100 if q > 1 else q
            if not fld.strip() or not 0 <= q <= 1:
                raise QuerySpecError(f"write percentile(field, 0.95), not {text!r}")
            return Calculation("percentile", fld.strip(), q)
        if name == "count":
            name = "count"
        if name not in OPS:
            raise QuerySpecError(
                f"unknown calculation {name!r}; use one of: count, count_distinct, sum, avg, min, max, "
                "p50/p90/p99/p99.9 …, heatmap"
            )
        return Calculation(name, arg)


def _num(x: float) -> str:
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    return text or "0"


@dataclass
class QuerySpec:
    """What to compute over which events; serialisable with ``to_dict`` / ``from_dict``."""

    dataset: str
    start: str | None = None
    end: str | None = None
    where: str | None = None
    breakdowns: list[str] = field(default_factory=list)
    calculations: list[Calculation] = field(default_factory=lambda: [Calculation("count")])
    granularity: str | None = None
    order: list[str] = field(default_factory=list)
    limit: int = 1000

    def __post_init__(self) -> None:
        if not self.calculations:
            self.calculations = [Calculation("count")]
        if self.limit < 1:
            raise QuerySpecError(f"--limit must be at least 1, not {self.limit}")
        heat = [c for c in self.calculations if c.op == "heatmap"]
        if heat and (len(self.calculations) > 1 or self.breakdowns):
            raise QuerySpecError("heatmap(...) is a calculation of its own: no other calculation or breakdown with it")

    @property
    def heatmap(self) -> Calculation | None:
        """The heatmap calculation, when this is a heatmap query."""
        return self.calculations[0] if self.calculations[0].op == "heatmap" else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "start": self.start,
            "end": self.end,
            "where": self.where,
            "breakdowns": list(self.breakdowns),
            "calculations": [c.label for c in self.calculations],
            "granularity": self.granularity,
            "order": list(self.order),
            "limit": self.limit,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> QuerySpec:
        """Build a spec from its JSON form, naming any key that is not understood."""
        known = {"dataset", "start", "end", "where", "breakdowns", "calculations", "granularity", "order", "limit"}
        extra = set(data) - known
        if extra:
            raise QuerySpecError(f"unknown query key(s): {', '.join(sorted(extra))}")
        if "dataset" not in data:
            raise QuerySpecError("a query needs a dataset")
        for key in ("dataset", "start", "end", "where", "granularity"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise QuerySpecError(f"query spec key {key!r} must be a string, not {data[key]!r}")
        for key in ("breakdowns", "calculations", "order"):
            items = data.get(key) or []
            if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                raise QuerySpecError(f"query spec key {key!r} must be a list of strings, not {items!r}")
        limit = data.get("limit", 1000)
        if not isinstance(limit, int) or isinstance(limit, bool):
            raise QuerySpecError(f"query spec key 'limit' must be a whole number, not {limit!r}")
        return cls(
            dataset=data["dataset"],
            start=data.get("start"),
            end=data.get("end"),
            where=data.get("where"),
            breakdowns=list(data.get("breakdowns") or []),
            calculations=[Calculation.parse(c) for c in data.get("calculations") or []],
            granularity=data.get("granularity"),
            order=list(data.get("order") or []),
            limit=limit,
        )
