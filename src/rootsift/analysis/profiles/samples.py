"""Reading one cohort of stack samples out of the store: per profile and function the
value in the function itself (self) and in it or anything it calls (total), and the
cohort's stacks.

A stack-sample event (docs/profiles.md) has a ``stack`` (frames root first, joined by
``;``) and a value (``samples`` by default: how many samples, or the CPU time, bytes…
the profile measured). A *profile* is the unit the significance counts: the events that
share a ``profile`` name, a ``host`` and a ``timestamp`` (one file ingested once: a
profile's events all take its time). DuckDB does the grouping; only the per-profile
table and the distinct stacks reach Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rootsift.analysis.frame import Frame
from rootsift.errors import QuerySpecError
from rootsift.store.sqltext import ident

NUMERIC = ("DOUBLE", "BIGINT", "INTEGER", "HUGEINT", "FLOAT", "DECIMAL", "UBIGINT")
UNIT_FIELDS = ("profile", "host", "timestamp")
"""Fields that together tell one profile from another, those the dataset has."""


@dataclass
class Cohort:
    """One side of the diff: per-profile self and total values of each function, and its stacks."""

    units: list[str]
    unit_totals: np.ndarray
    """Value of each profile (all its samples), in ``units`` order."""
    self_values: dict[str, np.ndarray] = field(default_factory=dict)
    """Function → value in the function itself, per profile."""
    total_values: dict[str, np.ndarray] = field(default_factory=dict)
    """Function → value in the function or below it (a recursive function counted once per stack)."""
    stacks: dict[tuple[str, ...], float] = field(default_factory=dict)
    """Frames (root first) → value, over every profile of the cohort."""

    @property
    def total(self) -> float:
        return float(self.unit_totals.sum())


def value_field(frame: Frame, value: str | None) -> str:
    """The field summed: ``value`` if given, else ``samples``, else the profiles' one ``sample_type``."""
    fields = frame.fields
    if "stack" not in fields:
        raise QuerySpecError(
            f"dataset {frame.dataset!r} has no `stack` field: it holds no stack samples "
            "(ingest a profile: pprof, perf script, folded or speedscope; docs/profiles.md)"
        )
    if value is None:
        if "samples" in fields:
            value = "samples"
        elif "sample_type" in fields:
            where, params = frame.range_filter()
            rows = frame.backend.execute_sql(
                f"SELECT DISTINCT sample_type FROM {frame.relation_sql} WHERE ({where}) LIMIT 3", params
            ).rows
            kinds = [r[0] for r in rows if r[0]]
            if len(kinds) != 1:
                raise QuerySpecError(
                    f"the profiles measure {', '.join(map(str, kinds)) or 'nothing'}: name one with --value"
                )
            value = str(kinds[0])
        else:
            raise QuerySpecError("no `samples` field: name the field that holds each stack's value with --value")
    info = fields.get(value)
    if info is None or info.type.split("(")[0] not in NUMERIC:
        known = ", ".join(n for n, f in sorted(fields.items()) if f.type.split("(")[0] in NUMERIC) or "none"
        raise QuerySpecError(f"--value {value!r} is not a numeric field of {frame.dataset!r} (numeric fields: {known})")
    return value


def read_cohort(frame: Frame, value: str, focus: str | None) -> Cohort:
    """The cohort ``frame`` selects, summed over ``value``; with ``focus``, only stacks through
    that function, cut to start at it (its callers left out)."""
    where, params = frame.range_filter()
    units = [ident(n) for n in UNIT_FIELDS if n in frame.fields]
    unit = " || '|' || ".join(f"coalesce(CAST({u} AS VARCHAR), '')" for u in units) or "''"
    frames = "list_filter(string_split(s, ';'), lambda x: x <> '')"
    base = (
        f"SELECT {unit} AS u, CAST(stack AS VARCHAR) AS s, sum(CAST({ident(value)} AS DOUBLE)) AS v "
        f"FROM {frame.relation_sql} WHERE ({where}) AND stack IS NOT NULL AND {ident(value)} > 0 GROUP BY ALL"
    )
    split = f"SELECT u, {frames} AS fr, v FROM ({base})"
    args: list[Any] = list(params)
    if focus is not None:
        split = f"SELECT u, fr[list_position(fr, ?):] AS fr, v FROM ({split}) WHERE list_contains(fr, ?)"
        args = [focus, *params, focus]  # in the order the placeholders appear
    split = f"SELECT * FROM ({split}) WHERE len(fr) > 0"
    run = frame.backend.execute_sql
    totals = run(f"SELECT u, sum(v) FROM ({split}) GROUP BY u ORDER BY u", args).rows
    names = [str(r[0]) for r in totals]
    at = {n: i for i, n in enumerate(names)}
    cohort = Cohort(names, np.array([float(r[1]) for r in totals], dtype=np.float64))
    self_rows = run(f"SELECT u, fr[-1], sum(v) FROM ({split}) GROUP BY ALL", args).rows
    total_rows = run(
        f"SELECT u, f, sum(v) FROM (SELECT u, unnest(list_distinct(fr)) AS f, v FROM ({split})) GROUP BY ALL", args
    ).rows
    for rows, into in ((self_rows, cohort.self_values), (total_rows, cohort.total_values)):
        for u, func, v in rows:
            values = into.get(func)
            if values is None:
                values = into[func] = np.zeros(len(names))
            values[at[str(u)]] += float(v)
    for fr, v in run(f"SELECT fr, sum(v) FROM ({split}) GROUP BY fr", args).rows:
        cohort.stacks[tuple(fr)] = float(v)
    return cohort
