"""The one pass explain makes over the data: for every dimension, the events per value in
the selection and in the baseline (top values, the rest summed); for every measure, the
events per log-spaced bin; and the totals. One ``GROUP BY GROUPING SETS`` query.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rootsift.analysis.fields import FieldPlan
from rootsift.analysis.frame import SEL, W2, Frame, W
from rootsift.analysis.stats import share_test
from rootsift.store.sqltext import ident

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


def bin_sql(col: str) -> str:
    """The bin of a number: ordered keys, 0 for zero, negative keys for negative numbers, NULL when absent."""
    steps, off = BIN_STEPS, BIN_OFFSET
    return (
        f"(CASE WHEN {col} > 0 THEN CAST(floor(log2({col}) * {steps}) AS BIGINT) + {off} "
        f"WHEN {col} < 0 THEN -(CAST(floor(log2(-{col}) * {steps}) AS BIGINT) + {off}) "
        f"WHEN {col} = 0 THEN 0 END)"
    )


def bin_edges(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[low, high) of each bin key (see ``bin_sql``)."""
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
    cols: list[tuple[str, str, list[Any]]] = [(ident(d), f"__d{i}", []) for i, d in enumerate(dims)]
    cols += [(bin_sql(ident(m)), f"__b{j}", []) for j, m in enumerate(measures)]
    for k, name in enumerate(heavy):
        col, candidates = ident(name), plan.heavy[name]
        listed = f"CASE WHEN {col} IN ({', '.join('?' * len(candidates))}) THEN {col} END" if candidates else "NULL"
        cols += [(listed, f"__h{k}", list(candidates)), (f"({col} IS NULL)", f"__m{k}", []), (col, f"__x{k}", [])]
    source, params = frame.sql(cols)
    keys = [ident(a) for _, a, _ in cols if not a.startswith("__x")] + [ident(f"__s{k}") for k in range(len(heavy))]
    n = len(keys)
    first_heavy = len(dims) + len(measures)
    sets = [f"({k})" for k in keys[:first_heavy]]
    sets += [f"({keys[first_heavy + 2 * k]}, {keys[first_heavy + 2 * k + 1]})" for k in range(len(heavy))]
    sets += [f"({k})" for k in keys[first_heavy + 2 * len(heavy) :]]
    picked = "".join(f", CASE WHEN {SEL} THEN {ident(f'__x{k}')} END AS {ident(f'__s{k}')}" for k in range(len(heavy)))

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
    where = ""
    if ranked:
        where = (
            f" WHERE __g NOT IN ({', '.join(map(str, ranked))}) OR __rt <= {int(top_values)} "
            f"OR (__rs <= {SELECTION_TOP + 1} AND sw > 0)"
        )
    result = frame.backend.execute_sql(_grouped_sql(frame, source, keys, sets, picked) + where, params)
    counts = _parse(result, owner, frame, plan, top_values)
    _selection_repeats(frame, plan, counts)
    return counts


def _grouped_sql(frame: Frame, source: str, keys: list[str], sets: list[str], picked: str = "") -> str:
    """Counts per grouping set, each group ranked within its set by total and by selection."""
    aggs, derived = _aggregates(frame)
    grouping = f"GROUPING({', '.join(keys)})" if keys else "0"
    key_list = "".join(f"{k}, " for k in keys)
    # ties in count broken by the value itself, never by anything about the selection
    tie = f"coalesce({', '.join(f'CAST({k} AS VARCHAR)' for k in keys)}) NULLS FIRST" if keys else "1"
    return (
        f"WITH m AS (SELECT *{picked} FROM ({source})), "
        f"g AS (SELECT {grouping} AS __g, {key_list}{', '.join(aggs)} FROM m "
        f"GROUP BY GROUPING SETS ({', '.join([*sets, '()'])})), "
        f"d AS (SELECT *, {', '.join(derived)} FROM g), "
        "h AS (SELECT *, count(*) OVER p AS __nv, "
        f"row_number() OVER (PARTITION BY __g ORDER BY sw + bw DESC, sn + bn DESC, {tie}) AS __rt, "
        "row_number() OVER (PARTITION BY __g ORDER BY sw DESC, sn DESC) AS __rs "
        "FROM d WINDOW p AS (PARTITION BY __g)) "
        "SELECT * FROM h"
    )


def _aggregates(frame: Frame) -> tuple[list[str], list[str]]:
    """(aggregates per group, the columns derived from them): each total once and its
    selected part once, the baseline part by difference — half the work of two filters."""
    sel = f"FILTER (WHERE {SEL})"
    aggs = ["count(*) AS n_all", f"count(*) {sel} AS sn"]
    derived = ["n_all - sn AS bn"]
    if not frame.row_weights:  # constant weights per group (frame.factors): counts times them
        f1, f0 = frame.factors
        return aggs, derived + [f"sn * {f1} AS sw", f"(n_all - sn) * {f0} AS bw"]
    aggs += [
        f"sum({W}) AS w_all",
        f"sum({W}) {sel} AS sw_",
        f"sum({W2}) AS w2_all",
        f"sum({W2}) {sel} AS sw2_",
    ]
    derived += [
        "coalesce(sw_, 0) AS sw",
        "w_all - coalesce(sw_, 0) AS bw",
        "coalesce(sw2_, 0) AS sw2",
        "w2_all - coalesce(sw2_, 0) AS bw2",
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


def _parse(result: Any, owner: dict[int, tuple[str, int]], frame: Frame, plan: FieldPlan, top_values: int) -> Counts:
    col = {name: i for i, name in enumerate(result.columns)}
    counts = Counts(Cell(), 0.0, 0.0)
    values: dict[str, list[tuple[Any, Cell]]] = defaultdict(list)
    bins: dict[str, list[tuple[int | None, Cell]]] = defaultdict(list)
    heavy = list(plan.heavy)
    for row in result.rows:
        cell = _cell(row, col, frame)
        gid = int(row[col["__g"]])
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
    cols = [
        (
            f"CASE WHEN {ident(name)} IN ({', '.join('?' * len(wanted[name]))}) THEN {ident(name)} END",
            f"__f{k}",
            wanted[name],
        )
        for k, name in enumerate(names)
    ]
    source, params = frame.sql(cols)
    keys = [ident(f"__f{k}") for k in range(len(names))]
    result = frame.backend.execute_sql(_grouped_sql(frame, source, keys, [f"({k})" for k in keys]), params)
    col = {c: i for i, c in enumerate(result.columns)}
    index = {((1 << len(keys)) - 1) ^ (1 << (len(keys) - 1 - k)): k for k in range(len(keys))}
    for row in result.rows:
        k = index.get(int(row[col["__g"]]))
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
