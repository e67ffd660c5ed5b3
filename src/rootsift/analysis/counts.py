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
    value of the field); ``distinct`` counts them all."""
    dims, measures = plan.dimensions, plan.measures
    cols: list[tuple[str, str, list[Any]]] = [(ident(d), f"__d{i}", []) for i, d in enumerate(dims)]
    cols += [(bin_sql(ident(m)), f"__b{j}", []) for j, m in enumerate(measures)]
    source, params = frame.sql(cols)
    keys = [ident(alias) for _, alias, _ in cols]
    weighted = frame.weight is not None
    aggs = [f"count(*) FILTER (WHERE {SEL}) AS sn", f"count(*) FILTER (WHERE NOT {SEL}) AS bn"]
    if weighted:
        aggs += [
            f"sum({W}) FILTER (WHERE {SEL}) AS sw",
            f"sum({W}) FILTER (WHERE NOT {SEL}) AS bw",
            f"sum({W} * {W}) FILTER (WHERE {SEL}) AS sw2",
            f"sum({W} * {W}) FILTER (WHERE NOT {SEL}) AS bw2",
        ]
    else:
        aggs += [f"count(*) FILTER (WHERE {SEL}) AS sw", f"count(*) FILTER (WHERE NOT {SEL}) AS bw"]
    n = len(keys)
    grouping = f"GROUPING({', '.join(keys)})" if keys else "0"
    sets = ", ".join([f"({k})" for k in keys] + ["()"])
    key_list = "".join(f"{k}, " for k in keys)
    sql = (
        f"WITH m AS ({source}), "
        f"g AS (SELECT {grouping} AS __g, {key_list}{', '.join(aggs)} FROM m GROUP BY GROUPING SETS ({sets})), "
        "h AS (SELECT *, count(*) OVER p AS __nv, "
        "row_number() OVER (PARTITION BY __g ORDER BY sw + bw DESC, sn + bn DESC) AS __rt, "
        "row_number() OVER (PARTITION BY __g ORDER BY sw DESC, sn DESC) AS __rs "
        "FROM g WINDOW p AS (PARTITION BY __g)) "
        "SELECT * FROM h"
    )
    all_ones = (1 << n) - 1
    dim_gids = [all_ones ^ (1 << (n - 1 - i)) for i in range(len(dims))]
    if dims:
        sql += (
            f" WHERE __g NOT IN ({', '.join(map(str, dim_gids))}) OR __rt <= {int(top_values)} "
            f"OR (__rs <= {SELECTION_TOP} AND sw > 0)"
        )
    result = frame.backend.execute_sql(sql, params)
    col = {name: i for i, name in enumerate(result.columns)}
    owner = {gid: ("d", i) for i, gid in enumerate(dim_gids)}
    owner.update({all_ones ^ (1 << (n - 1 - len(dims) - j)): ("b", j) for j in range(len(measures))})
    counts = Counts(Cell(), 0.0, 0.0)
    values: dict[str, list[tuple[Any, Cell]]] = defaultdict(list)
    bins: dict[str, list[tuple[int | None, Cell]]] = defaultdict(list)
    for row in result.rows:
        sn, bn = float(row[col["sn"]] or 0), float(row[col["bn"]] or 0)
        cell = Cell(sn, bn, float(row[col["sw"]] or 0), float(row[col["bw"]] or 0))
        cell.sel_w2 = float(row[col["sw2"]] or 0) if weighted else sn
        cell.base_w2 = float(row[col["bw2"]] or 0) if weighted else bn
        gid = int(row[col["__g"]])
        if gid == all_ones:
            counts.total = cell
            counts.sel_w2, counts.base_w2 = cell.sel_w2, cell.base_w2
            continue
        kind, index = owner[gid]
        if kind == "d":
            name = dims[index]
            cell.among_common = int(row[col["__rt"]]) <= top_values
            values[name].append((_plain(row[col[f"__d{index}"]]), cell))
            counts.distinct[name] = int(row[col["__nv"]])
        else:
            key = row[col[f"__b{index}"]]
            bins[measures[index]].append((None if key is None else int(key), cell))
    counts.values = dict(values)
    counts.bins = dict(bins)
    return counts


def _plain(value: Any) -> Any:
    """Whole floats as ints (a status code 500.0 reads 500)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value
