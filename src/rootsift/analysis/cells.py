"""Events counted per combination of listed values: the pass the combinations
(``combos.py``) and the cause set (``causes.py``) both read.

Each field's listed values are coded 0, 1, 2… (``None`` is the missing value); any other
value is -1. One ``GROUP BY`` over the frame gives, per combination of codes that
occurs, the selected and the baseline weight (events, times their sample rate and
count, times the stored sample's factor for a group read from it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.frame import SEL, Column, Frame, W


@dataclass
class CodedCounts:
    codes: np.ndarray
    """(cells, fields) value codes; -1: a value not among the field's listed ones."""
    sel: np.ndarray
    """Selected weight per cell."""
    base: np.ndarray
    """Baseline weight per cell."""


def count_coded(frame: Frame, listed: list[tuple[str, list[Any]]], limit: int | None = None) -> CodedCounts | None:
    """The frame's events per combination of the fields' listed values, cells in the
    order of their codes (the same cells in the same order each run). ``listed``: (field,
    its values to code). None when more than ``limit`` cells occur."""
    columns: list[Column] = []
    for i, (name, values) in enumerate(listed):
        col = q.col(name)
        whens: list[tuple[exp.Expr, exp.Expr]] = []
        params: list[Any] = []
        for code, value in enumerate(values):
            if value is None:
                whens.append((q.is_null(col.copy()), q.num(code)))
            else:
                whens.append((exp.EQ(this=col.copy(), expression=q.bind(params, value)), q.num(code)))
        columns.append((q.case(whens, q.num(-1)) if whens else q.num(-1), f"__k{i}", params))
    source, params = frame.sql(columns)
    keys = [exp.column(q.name(f"__k{i}")) for i in range(len(listed))]
    weight = exp.Sum(this=exp.column(q.name(W))) if frame.row_weights else q.count_rows()
    f1, f0 = (1.0, 1.0) if frame.row_weights else frame.factors
    selected = exp.column(q.name(SEL))
    per_group = [
        exp.Coalesce(this=q.where(weight.copy(), selected.copy()), expressions=[q.num(0)]),
        exp.Coalesce(this=q.where(weight.copy(), exp.Not(this=selected.copy())), expressions=[q.num(0)]),
    ]
    query = q.select([*keys, *per_group], source, group=len(keys))
    if limit is not None:
        query = query.limit(q.num(limit + 1), copy=False)
    rows = frame.backend.execute(query, params).rows
    if limit is not None and len(rows) > limit:
        return None
    n = len(listed)
    codes = np.array([r[:n] for r in rows], dtype=np.int64).reshape(len(rows), n)
    order = np.lexsort(codes.T[::-1]) if n and len(rows) else np.arange(len(rows))
    codes, rows = codes[order], [rows[i] for i in order]
    sel = np.array([float(r[n]) * f1 for r in rows])
    base = np.array([float(r[n + 1]) * f0 for r in rows])
    return CodedCounts(codes, sel, base)
