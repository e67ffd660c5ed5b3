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

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.frame import Frame
from rootsift.errors import QuerySpecError

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
    """The field summed: ``value`` if given, else the one ``sample_type`` the cohort's profiles
    name (pprof: its default sample type), else ``samples`` (folded stacks)."""
    fields = frame.fields
    if "stack" not in fields:
        raise QuerySpecError(
            f"dataset {frame.dataset!r} has no `stack` field: it holds no stack samples "
            "(ingest a profile: pprof, perf script, folded or speedscope; docs/profiles.md)"
        )
    if value is None:
        kinds: list[str] = []
        if "sample_type" in fields:  # what the profiles of the cohort say to sum (pprof: its default type)
            query, params = frame.rows([q.col("sample_type")], q.not_null(q.col("sample_type")))
            rows = frame.backend.execute(query.distinct(copy=False).limit(q.num(3), copy=False), params).rows
            kinds = [str(r[0]) for r in rows]
        if len(kinds) == 1:
            value = kinds[0]
        elif len(kinds) > 1:
            raise QuerySpecError(f"the profiles measure {', '.join(kinds)}: name the one to compare with --value")
        elif "samples" in fields:
            value = "samples"
        else:
            raise QuerySpecError("no `samples` field: name the field that holds each stack's value with --value")
    info = fields.get(value)
    if info is None or info.type.split("(")[0] not in NUMERIC:
        known = ", ".join(n for n, f in sorted(fields.items()) if f.type.split("(")[0] in NUMERIC) or "none"
        raise QuerySpecError(f"--value {value!r} is not a numeric field of {frame.dataset!r} (numeric fields: {known})")
    return value


def read_cohort(frame: Frame, value: str, focus: str | None) -> Cohort:
    """The cohort ``frame`` selects, summed over ``value``; with ``focus``, only stacks through
    that function, cut to start at it (its callers left out).

    DuckDB sums the value per profile and distinct stack and hands on one row per distinct
    stack (its profiles and values as lists); each stack is split once here, and the
    per-profile self and total of every function are two sparse products (stack → its leaf,
    stack → each function on it once) with that stack × profile table."""
    from scipy import sparse

    texts = [
        exp.Coalesce(this=exp.cast(q.col(n), "VARCHAR"), expressions=[exp.Literal.string("")])
        for n in UNIT_FIELDS
        if n in frame.fields
    ]
    unit: exp.Expr = texts[0] if texts else exp.Literal.string("")
    for text in texts[1:]:
        unit = exp.DPipe(this=exp.DPipe(this=unit, expression=exp.Literal.string("|")), expression=text)
    items = [q.alias(unit, "u"), q.alias(exp.cast(q.col("stack"), "VARCHAR"), "s")]
    items.append(q.alias(exp.Sum(this=exp.cast(q.col(value), "DOUBLE")), "v"))
    per_unit, params = frame.rows(items, q.not_null(q.col("stack")), q.col(value) > q.num(0))
    s, u, v = exp.column("s"), exp.column("u"), exp.column("v")
    lists = [s, exp.ArrayAgg(this=u), exp.ArrayAgg(this=v)]  # the same rows in the same order: paired
    rows = frame.backend.execute(
        q.select(lists, per_unit.group_by(q.num(1), q.num(2), copy=False), group=1), params
    ).rows
    stack_at: dict[tuple[str, ...], int] = {}
    kept: list[tuple[int, list[str], list[float]]] = []
    for text, us, vs in rows:  # one row per distinct stack: its profiles and their values
        frames = _frames(text, focus)
        if frames is not None:
            kept.append((stack_at.setdefault(frames, len(stack_at)), us, vs))
    stacks = sorted(stack_at, key=stack_at.__getitem__)
    if not kept:
        return Cohort([], np.zeros(0))
    names_arr, uid = np.unique(np.array([str(u) for _, us, _ in kept for u in us]), return_inverse=True)
    names = [str(n) for n in names_arr]
    sid = np.repeat([k for k, _, _ in kept], [len(us) for _, us, _ in kept])
    val = np.array([float(v) for _, _, vs in kept for v in vs])
    table = sparse.csr_matrix((val, (sid, uid)), shape=(len(stacks), len(names)))
    functions: dict[str, int] = {}
    leaf = [functions.setdefault(fr[-1], len(functions)) for fr in stacks]
    members = [[functions.setdefault(f, len(functions)) for f in dict.fromkeys(fr)] for fr in stacks]
    n_f = len(functions)
    on_leaf = sparse.csr_matrix((np.ones(len(stacks)), (leaf, range(len(stacks)))), shape=(n_f, len(stacks)))
    pairs = [(f, i) for i, fs in enumerate(members) for f in fs]
    on_stack = sparse.csr_matrix(
        (np.ones(len(pairs)), ([f for f, _ in pairs], [i for _, i in pairs])), shape=(n_f, len(stacks))
    )
    self_m, total_m = (on_leaf @ table).toarray(), (on_stack @ table).toarray()
    cohort = Cohort(names, np.asarray(table.sum(axis=0)).ravel())
    for name, i in functions.items():
        if self_m[i].any():
            cohort.self_values[name] = self_m[i]
        cohort.total_values[name] = total_m[i]
    by_stack = np.asarray(table.sum(axis=1)).ravel()
    cohort.stacks = {fr: float(by_stack[i]) for i, fr in enumerate(stacks)}
    return cohort


def _frames(stack: str, focus: str | None) -> tuple[str, ...] | None:
    """A stack's frames (empty ones dropped), from ``focus`` on when given (None: not through it)."""
    frames = tuple(f for f in stack.split(";") if f)
    if focus is not None:
        if focus not in frames:
            return None
        frames = frames[frames.index(focus) :]
    return frames or None
