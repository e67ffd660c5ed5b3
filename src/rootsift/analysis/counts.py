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
from rootsift.analysis.frame import SEL, Frame, W
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


SELECTION_TOP = 10
"""Values of a field kept for being among the most common in the selection, beyond the top overall."""


def count_pass(frame: Frame, plan: FieldPlan, top_values: int) -> Counts:
    """Run the pass. A dimension keeps its ``top_values`` most common values overall (a choice
    blind to the selection, so their tests stay valid) and its ``SELECTION_TOP`` most common
    in the selection (``among_common=False``: chosen by looking, so tested against every
    value of the field); ``distinct`` counts them all. A heavy-hitter field (fields.py)
    counts only its candidates exactly, the rest as one "other" value."""
    dims, measures = plan.dimensions, plan.measures
    heavy = _heavy_candidates(frame, plan)
    cols: list[tuple[str, str, list[Any]]] = [(ident(d), f"__d{i}", []) for i, d in enumerate(dims)]
    cols += [(bin_sql(ident(m)), f"__b{j}", []) for j, m in enumerate(measures)]
    for k, (name, (candidates, _)) in enumerate(heavy.items()):
        col = ident(name)
        listed = f"CASE WHEN {col} IN ({', '.join('?' * len(candidates))}) THEN {col} END" if candidates else "NULL"
        cols += [(listed, f"__h{k}", list(candidates)), (f"({col} IS NULL)", f"__m{k}", [])]
    source, params = frame.sql(cols)
    keys = [ident(alias) for _, alias, _ in cols]
    n = len(keys)
    single = [f"({k})" for k in keys[: len(dims) + len(measures)]]
    pairs = [f"({keys[i]}, {keys[i + 1]})" for i in range(len(dims) + len(measures), n, 2)]
    grouping = f"GROUPING({', '.join(keys)})" if keys else "0"
    key_list = "".join(f"{k}, " for k in keys)
    sql = (
        f"WITH m AS ({source}), "
        f"g AS (SELECT {grouping} AS __g, {key_list}{', '.join(_aggregates(frame))} FROM m "
        f"GROUP BY GROUPING SETS ({', '.join([*single, *pairs, '()'])})), "
        "h AS (SELECT *, count(*) OVER p AS __nv, "
        "row_number() OVER (PARTITION BY __g ORDER BY sw + bw DESC, sn + bn DESC) AS __rt, "
        "row_number() OVER (PARTITION BY __g ORDER BY sw DESC, sn DESC) AS __rs "
        "FROM g WINDOW p AS (PARTITION BY __g)) "
        "SELECT * FROM h"
    )
    all_ones = (1 << n) - 1

    def bit(i: int) -> int:
        return 1 << (n - 1 - i)

    dim_gids = [all_ones ^ bit(i) for i in range(len(dims))]
    if dims:
        sql += (
            f" WHERE __g NOT IN ({', '.join(map(str, dim_gids))}) OR __rt <= {int(top_values)} "
            f"OR (__rs <= {SELECTION_TOP} AND sw > 0)"
        )
    result = frame.backend.execute_sql(sql, params)
    owner = {gid: ("d", i) for i, gid in enumerate(dim_gids)}
    owner.update({all_ones ^ bit(len(dims) + j): ("b", j) for j in range(len(measures))})
    first_heavy = len(dims) + len(measures)
    owner.update(
        {all_ones ^ bit(first_heavy + 2 * k) ^ bit(first_heavy + 2 * k + 1): ("h", k) for k in range(len(heavy))}
    )
    return _parse(result, owner, frame, plan, heavy, top_values)


def _aggregates(frame: Frame) -> list[str]:
    sel, base = f"FILTER (WHERE {SEL})", f"FILTER (WHERE NOT {SEL})"
    out = [f"count(*) {sel} AS sn", f"count(*) {base} AS bn"]
    if frame.weight:
        return out + [
            f"sum({W}) {sel} AS sw",
            f"sum({W}) {base} AS bw",
            f"sum({W} * {W}) {sel} AS sw2",
            f"sum({W} * {W}) {base} AS bw2",
        ]
    return out + [f"count(*) {sel} AS sw", f"count(*) {base} AS bw"]


def _heavy_candidates(frame: Frame, plan: FieldPlan) -> dict[str, tuple[list[Any], set[Any]]]:
    """Per heavy-hitter field: (candidate values, those chosen blind to the selection)."""
    if not plan.heavy:
        return {}
    names = list(plan.heavy)
    source, params = frame.sql([(ident(name), f"__x{k}", []) for k, name in enumerate(names)])
    keys = [ident(f"__x{k}") for k in range(len(names))]
    sql = (
        f"WITH m AS ({source}) SELECT GROUPING({', '.join(keys)}) AS g, {', '.join(keys)}, count(*) AS c "
        f"FROM m WHERE {SEL} GROUP BY GROUPING SETS ({', '.join(f'({k})' for k in keys)}) "
        f"QUALIFY row_number() OVER (PARTITION BY g ORDER BY c DESC) <= {SELECTION_TOP} AND c >= 2"
    )
    n = len(keys)
    index = {((1 << n) - 1) ^ (1 << (n - 1 - k)): k for k in range(n)}
    chosen: dict[str, list[Any]] = {name: [] for name in names}
    for row in frame.backend.execute_sql(sql, params).rows:
        k = index[int(row[0])]
        if row[1 + k] is not None:
            chosen[names[k]].append(row[1 + k])
    out = {}
    for name in names:
        blind = list(plan.heavy[name])
        out[name] = (list(dict.fromkeys(blind + chosen[name])), set(blind))
    return out


def _parse(
    result: Any,
    owner: dict[int, tuple[str, int]],
    frame: Frame,
    plan: FieldPlan,
    heavy: dict[str, tuple[list[Any], set[Any]]],
    top_values: int,
) -> Counts:
    col = {name: i for i, name in enumerate(result.columns)}
    weighted = frame.weight is not None
    counts = Counts(Cell(), 0.0, 0.0)
    values: dict[str, list[tuple[Any, Cell]]] = defaultdict(list)
    bins: dict[str, list[tuple[int | None, Cell]]] = defaultdict(list)
    heavy_names = list(heavy)
    for row in result.rows:
        sn, bn = float(row[col["sn"]] or 0), float(row[col["bn"]] or 0)
        cell = Cell(sn, bn, float(row[col["sw"]] or 0), float(row[col["bw"]] or 0))
        cell.sel_w2 = float(row[col["sw2"]] or 0) if weighted else sn
        cell.base_w2 = float(row[col["bw2"]] or 0) if weighted else bn
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
        else:
            name = heavy_names[index]
            value, missing = row[col[f"__h{index}"]], bool(row[col[f"__m{index}"]])
            if value is None and not missing:
                continue  # every other value: summed into "other" by the callers
            cell.among_common = missing or value in heavy[name][1]
            values[name].append((None if missing else value, cell))
            counts.distinct[name] = 0  # unknown: counted only up to the candidates
    counts.values = dict(values)
    counts.bins = dict(bins)
    return counts


def _plain(value: Any) -> Any:
    """Whole floats as ints (a status code 500.0 reads 500)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value
