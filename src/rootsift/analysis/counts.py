"""The one pass explain makes over the data: for every dimension, the events per value in
the selection and in the baseline (top values, the rest summed); for every measure, the
events per log-spaced bin; and the totals. One ``GROUP BY GROUPING SETS`` query.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.fields import FieldPlan
from rootsift.analysis.frame import SEL, W2, Column, Frame, W
from rootsift.analysis.stats import share_test

BIN_STEPS = 16
"""Log-spaced bins per doubling for measures: each 2^(1/16) ≈ 4.4 % wide."""
BIN_OFFSET = 20_000


@dataclass
class Cell:
    """Events of one value or bin: raw counts and weighted counts, selection and baseline."""

    sel_n: float = 0.0
    base_n: float = 0.0
    sel_w: float = 0.0
    base_w: float = 0.0
    sel_w2: float = 0.0
    base_w2: float = 0.0
    """Sums of squared weights (equal to the counts when events are not weighted)."""
    among_common: bool = True
    """Among its field's most common values overall; False: kept only for being common in the selection."""


@dataclass
class Counts:
    total: Cell
    sel_w2: float
    base_w2: float
    values: dict[str, list[tuple[Any, Cell]]] = field(default_factory=dict)
    distinct: dict[str, int] = field(default_factory=dict)
    bins: dict[str, list[tuple[int | None, Cell]]] = field(default_factory=dict)
    repeats: dict[str, list[tuple[Any, float]]] = field(default_factory=dict)
    """Heavy-hitter values the selection repeats (not among the pilot's), with their selected count."""


def bin_key(x: exp.Expr) -> exp.Expr:
    """The bin of a number: ordered keys, 0 for zero, negative keys for negative numbers, NULL when absent."""
    return q.log_bin(x, BIN_STEPS, BIN_OFFSET)


def bin_edges(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[low, high) of each bin key (see ``bin_key``)."""
    keys = np.asarray(keys, dtype=np.float64)
    mag = np.abs(keys) - BIN_OFFSET
    lo = np.exp2(mag / BIN_STEPS)
    hi = np.exp2((mag + 1) / BIN_STEPS)
    low = np.where(keys > 0, lo, np.where(keys < 0, -hi, 0.0))
    high = np.where(keys > 0, hi, np.where(keys < 0, -lo, 0.0))
    return low, high


REPEAT_LEVEL = 0.05
"""A value the selection repeats is counted in the baseline only if it could reach this p-value."""
SELECTION_TOP = 10
"""Values of a field kept for being among the most common in the selection, beyond the top overall."""


def count_pass(frame: Frame, plan: FieldPlan, top_values: int) -> Counts:
    """Run the pass. A dimension keeps its ``top_values`` most common values overall (a choice
    blind to the selection, so their tests stay valid) and its ``SELECTION_TOP`` most common
    in the selection (``among_common=False``: chosen by looking, so tested against every
    value of the field); ``distinct`` counts them all. A heavy-hitter field (fields.py)
    counts exactly only the values repeated in the pilot, and in the selection; values the
    selection repeats often enough to possibly be a finding get their baseline counted in
    a second, narrow pass (``_selection_repeats``)."""
    dims, measures, heavy = plan.dimensions, plan.measures, list(plan.heavy)
    cols: list[Column] = [(q.col(d), f"__d{i}", []) for i, d in enumerate(dims)]
    cols += [(bin_key(q.col(m)), f"__b{j}", []) for j, m in enumerate(measures)]
    for k, name in enumerate(heavy):
        col, candidates = q.col(name), plan.heavy[name]
        bound: list[Any] = []
        listed = q.case([(col.isin(*q.binds(bound, candidates)), col.copy())]) if candidates else exp.Null()
        cols += [
            (listed, f"__h{k}", bound),
            (exp.paren(q.is_null(col.copy())), f"__m{k}", []),
            (col.copy(), f"__x{k}", []),
        ]
    source, params = frame.sql(cols)
    keys = [a for _, a, _ in cols if not a.startswith("__x")] + [f"__s{k}" for k in range(len(heavy))]
    n = len(keys)
    first_heavy = len(dims) + len(measures)
    sets = [[k] for k in keys[:first_heavy]]
    sets += [[keys[first_heavy + 2 * k], keys[first_heavy + 2 * k + 1]] for k in range(len(heavy))]
    sets += [[k] for k in keys[first_heavy + 2 * len(heavy) :]]
    picked = [
        q.alias(q.case([(exp.column(q.name(SEL)), exp.column(q.name(f"__x{k}")))]), f"__s{k}")
        for k in range(len(heavy))
    ]

    def bit(i: int) -> int:
        return 1 << (n - 1 - i)

    all_ones = (1 << n) - 1
    owner = {all_ones ^ bit(i): ("d", i) for i in range(len(dims))}
    owner.update({all_ones ^ bit(len(dims) + j): ("b", j) for j in range(len(measures))})
    owner.update(
        {all_ones ^ bit(first_heavy + 2 * k) ^ bit(first_heavy + 2 * k + 1): ("h", k) for k in range(len(heavy))}
    )
    owner.update({all_ones ^ bit(first_heavy + 2 * len(heavy) + k): ("s", k) for k in range(len(heavy))})
    ranked = [g for g, (kind, _) in owner.items() if kind in ("d", "s")]
    query = _grouped(frame, source, keys, sets, picked)
    if ranked:
        g, rt, rs, sw = (exp.column(c) for c in ("__g", "__rt", "__rs", "sw"))
        among_top = rt <= q.num(int(top_values))
        in_selection = exp.paren(exp.and_(rs <= q.num(SELECTION_TOP + 1), sw > q.num(0)))
        query = query.where(
            exp.or_(exp.Not(this=g.isin(*[_gid_literal(r, n) for r in ranked])), among_top, in_selection),
            copy=False,
        )
    result = frame.backend.execute(query, params)
    counts = _parse(result, owner, n, frame, plan, top_values)
    _selection_repeats(frame, plan, counts)
    return counts


def _grouped(
    frame: Frame, source: exp.Expr, keys: list[str], sets: list[list[str]], picked: Sequence[exp.Expr] = ()
) -> exp.Select:
    """Counts per grouping set, each group ranked within its set by total and by selection."""
    aggs, derived = _aggregates(frame)
    key_cols = [exp.column(q.name(k)) for k in keys]
    grouping = q.alias(_grouping(key_cols), "__g")
    grouping_sets = exp.GroupingSets(
        expressions=[
            *(exp.Tuple(expressions=[exp.column(q.name(k)) for k in s]) for s in sets),
            exp.Tuple(expressions=[]),
        ]
    )
    # ties in count broken by the value itself, never by anything about the selection (and
    # in the selection's ranking too: an engine breaks ties its own way, DuckDB and ClickHouse apart)
    tie: exp.Expr = (
        exp.Ordered(
            this=exp.Coalesce(
                this=exp.cast(key_cols[0].copy(), "VARCHAR"),
                expressions=[exp.cast(k.copy(), "VARCHAR") for k in key_cols[1:]],
            ),
            nulls_first=True,
        )
        if keys
        else q.num(1)
    )
    g, sw, bw, sn, bn = (exp.column(c) for c in ("__g", "sw", "bw", "sn", "bn"))

    def rank(*order: exp.Expr) -> exp.Window:
        return exp.Window(this=exp.RowNumber(), partition_by=[g.copy()], order=exp.Order(expressions=list(order)))

    both = q.desc(exp.Add(this=sw.copy(), expression=bw.copy()))
    both_n = q.desc(exp.Add(this=sn.copy(), expression=bn.copy()))
    marked = exp.select(exp.Star(), *picked, copy=False).from_(exp.paren(source, copy=False), copy=False)
    grouped = exp.select(grouping, *key_cols, *aggs, copy=False).from_("m", copy=False)
    grouped.set("group", exp.Group(expressions=[grouping_sets]))
    ranked = exp.select(
        exp.Star(),
        q.alias(q.over(q.count_rows(), [g.copy()]), "__nv"),
        q.alias(rank(both, both_n, tie), "__rt"),
        q.alias(rank(q.desc(sw.copy()), q.desc(sn.copy()), tie.copy()), "__rs"),
        copy=False,
    ).from_("d", copy=False)
    return (
        exp.select(exp.Star(), copy=False)
        .from_("h", copy=False)
        .with_("m", as_=marked, copy=False)
        .with_("g", as_=grouped, copy=False)
        .with_("d", as_=exp.select(exp.Star(), *derived, copy=False).from_("g", copy=False), copy=False)
        .with_("h", as_=ranked, copy=False)
    )


GROUPING_MAX = 60
"""Keys per ``GROUPING()``: DuckDB and ClickHouse take at most 64 arguments. Past that a
grouping set's id is its chunks' ``GROUPING()`` values joined by dots (``_gid`` reads it)."""


def _grouping(key_cols: list[exp.Column]) -> exp.Expr:
    """The grouping set's id: ``GROUPING(keys)``, a bit per key (the first key highest)."""
    if not key_cols:
        return q.num(0)
    chunks = [key_cols[i : i + GROUPING_MAX] for i in range(0, len(key_cols), GROUPING_MAX)]
    if len(chunks) == 1:
        return exp.Grouping(expressions=[k.copy() for k in key_cols])
    parts: list[exp.Expr] = []
    for chunk in chunks:
        parts += [exp.Literal.string(".")] if parts else []
        parts.append(exp.cast(exp.Grouping(expressions=[k.copy() for k in chunk]), "VARCHAR"))
    return exp.Concat(expressions=parts)


def _gid(value: Any, n: int) -> int:
    """The bits of a grouping set's id as ``_grouping`` of ``n`` keys gives it."""
    if n <= GROUPING_MAX:
        return int(value)
    gid = 0
    for k, part in enumerate(str(value).split(".")):
        gid = (gid << min(GROUPING_MAX, n - k * GROUPING_MAX)) | int(part)
    return gid


def _gid_literal(gid: int, n: int) -> exp.Expr:
    """``gid`` as ``_grouping`` of ``n`` keys writes it, to compare with."""
    if n <= GROUPING_MAX:
        return q.num(gid)
    parts, shift = [], n
    for k in range(0, n, GROUPING_MAX):
        size = min(GROUPING_MAX, n - k)
        shift -= size
        parts.append(str((gid >> shift) & ((1 << size) - 1)))
    return exp.Literal.string(".".join(parts))


def _aggregates(frame: Frame) -> tuple[list[exp.Expr], list[exp.Expr]]:
    """(aggregates per group, the columns derived from them): each total once and its
    selected part once, the baseline part by difference — half the work of two filters."""
    sel = exp.column(q.name(SEL))
    n_all, sn = exp.column("n_all"), exp.column("sn")
    aggs: list[exp.Expr] = [q.alias(q.count_rows(), "n_all"), q.alias(q.where(q.count_rows(), sel.copy()), "sn")]
    derived: list[exp.Expr] = [q.alias(exp.Sub(this=n_all.copy(), expression=sn.copy()), "bn")]
    if not frame.row_weights:  # constant weights per group (frame.factors): counts times them
        f1, f0 = frame.factors
        rest = exp.paren(exp.Sub(this=n_all.copy(), expression=sn.copy()))
        return aggs, derived + [
            q.alias(exp.Mul(this=sn.copy(), expression=q.num(f1)), "sw"),
            q.alias(exp.Mul(this=rest, expression=q.num(f0)), "bw"),
        ]
    w, w2 = exp.column(q.name(W)), exp.column(q.name(W2))
    aggs += [
        q.alias(exp.Sum(this=w.copy()), "w_all"),
        q.alias(q.where(exp.Sum(this=w.copy()), sel.copy()), "sw_"),
        q.alias(exp.Sum(this=w2.copy()), "w2_all"),
        q.alias(q.where(exp.Sum(this=w2.copy()), sel.copy()), "sw2_"),
    ]

    def zero_if_null(c: str) -> exp.Expr:
        return exp.Coalesce(this=exp.column(c), expressions=[q.num(0)])

    derived += [
        q.alias(zero_if_null("sw_"), "sw"),
        q.alias(exp.Sub(this=exp.column("w_all"), expression=zero_if_null("sw_")), "bw"),
        q.alias(zero_if_null("sw2_"), "sw2"),
        q.alias(exp.Sub(this=exp.column("w2_all"), expression=zero_if_null("sw2_")), "bw2"),
    ]
    return aggs, derived


def _cell(row: Any, col: dict[str, int], frame: Frame) -> Cell:
    sn, bn = float(row[col["sn"]] or 0), float(row[col["bn"]] or 0)
    cell = Cell(sn, bn, float(row[col["sw"]] or 0), float(row[col["bw"]] or 0))
    if frame.row_weights:
        cell.sel_w2, cell.base_w2 = float(row[col["sw2"]] or 0), float(row[col["bw2"]] or 0)
    else:  # constant weights: the sum of squares is the count times the square
        f1, f0 = frame.factors
        cell.sel_w2, cell.base_w2 = sn * f1 * f1, bn * f0 * f0
    return cell


def _parse(
    result: Any, owner: dict[int, tuple[str, int]], n: int, frame: Frame, plan: FieldPlan, top_values: int
) -> Counts:
    col = {name: i for i, name in enumerate(result.columns)}
    counts = Counts(Cell(), 0.0, 0.0)
    values: dict[str, list[tuple[Any, Cell]]] = defaultdict(list)
    bins: dict[str, list[tuple[int | None, Cell]]] = defaultdict(list)
    heavy = list(plan.heavy)
    for row in result.rows:
        cell = _cell(row, col, frame)
        gid = _gid(row[col["__g"]], n)
        if gid not in owner:  # the grand total
            counts.total = cell
            counts.sel_w2, counts.base_w2 = cell.sel_w2, cell.base_w2
            continue
        kind, index = owner[gid]
        if kind == "d":
            name = plan.dimensions[index]
            cell.among_common = int(row[col["__rt"]]) <= top_values
            values[name].append((_plain(row[col[f"__d{index}"]]), cell))
            counts.distinct[name] = int(row[col["__nv"]])
        elif kind == "b":
            key = row[col[f"__b{index}"]]
            bins[plan.measures[index]].append((None if key is None else int(key), cell))
        elif kind == "h":
            name = heavy[index]
            value, missing = row[col[f"__h{index}"]], bool(row[col[f"__m{index}"]])
            counts.distinct[name] = 0  # unknown: counted only up to the candidates
            if value is not None or missing:  # the rest: summed into "other" by the callers
                values[name].append((None if missing else value, cell))
        else:
            value = row[col[f"__s{index}"]]
            if value is not None and cell.sel_n >= 2 and value not in plan.heavy[heavy[index]]:
                counts.repeats.setdefault(heavy[index], []).append((value, cell.sel_n))
    counts.values = dict(values)
    counts.bins = dict(bins)
    return counts


def _selection_repeats(frame: Frame, plan: FieldPlan, counts: Counts) -> None:
    """Count the baseline of heavy-hitter values the selection repeats, when they could be a finding.

    Such a value was chosen by looking at the selection, so it is tested against every
    event (explain multiplies its p-value by the events in range); one that could not
    reach ``REPEAT_LEVEL`` even with no baseline events at all is not counted.
    """
    n1, n0 = counts.total.sel_n, counts.total.base_n
    wanted: dict[str, list[Any]] = {}
    for name, seen in counts.repeats.items():
        c = np.array([s for _, s in seen])
        best = share_test(c, np.zeros_like(c), n1, n0) * (n1 + n0)
        wanted[name] = [v for (v, _), p in zip(seen, best) if p < REPEAT_LEVEL]
    wanted = {k: v for k, v in wanted.items() if v}
    if not wanted:
        return
    names = list(wanted)
    cols: list[Column] = []
    for j, name in enumerate(names):
        bound: list[Any] = []
        column = q.col(name)
        cols.append((q.case([(column.isin(*q.binds(bound, wanted[name])), column.copy())]), f"__f{j}", bound))
    source, params = frame.sql(cols)
    keys = [f"__f{k}" for k in range(len(names))]
    result = frame.backend.execute(_grouped(frame, source, keys, [[k] for k in keys]), params)
    col = {c: i for i, c in enumerate(result.columns)}
    index = {((1 << len(keys)) - 1) ^ (1 << (len(keys) - 1 - k)): k for k in range(len(keys))}
    for row in result.rows:
        k = index.get(_gid(row[col["__g"]], len(keys)))
        if k is None:
            continue
        value = row[col[f"__f{k}"]]
        if value is not None:
            cell = _cell(row, col, frame)
            cell.among_common = False
            counts.values.setdefault(names[k], []).append((value, cell))


def _plain(value: Any) -> Any:
    """Whole floats as ints (a status code 500.0 reads 500)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value
