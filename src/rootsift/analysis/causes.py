"""The cause set: the fewest conjunctions of field values that together explain why the
selection differs from the baseline, each neither too specific nor too coarse.

The events are counted per *cell*, one combination of values of the fields that tell
the groups apart best (at most ``MAX_FIELDS`` fields spanning at most ``MAX_CUBE``
cells, ``MAX_VALUES`` values each; other values are a cell of their own that no cause
names). A cell with ``b`` baseline events is expected to hold ``k·b`` selected events,
``k`` being the ratio the *normal* cells share (``normal_ratio``: a weighted median,
robust while fewer than half the events are affected, so whichever reasonable baseline
the user picks shifts ``k`` and nothing else). How much a cell's excess ``s − k·b``
varies when nothing is wrong is fitted from the cells (``fit_noise``: independent
events plus a relative noise).

A candidate cause is any conjunction of 1 to all of those fields' values; its evidence is
its summed excess squared over its variance (that of its cells, plus its baseline times
``k``'s own error), a χ²₁ when nothing is wrong. It is a cause when over-represented
(against ``k`` and against the rest), above χ²₁'s critical value at ``alpha`` over the
number of conjunctions tried, and above the largest evidence of an equally deep
conjunction that is under-represented (noise goes both ways, a cause one way).

Causes are taken greedily, largest evidence first, each on the cells no earlier cause
covers, with ``k`` and the noise refitted on those: two disjoint causes are both found,
and no excess is explained twice. A conjunction that adds a value the excess does not
depend on keeps only its share of the excess, so the part has more evidence; a part
whose excess is all in one conjunction is diluted by the rest, and the conjunction has
more. The choice is then tested conditionally (``_coarsen``): a conjunction gives way to
a part of it (one value fewer) unless splitting that part into it and the rest fits
better than one ratio for the part, at ``alpha``. docs/explain.md, ADR 0013.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import distributions as dist
from rootsift.analysis import sql as q
from rootsift.analysis import stats
from rootsift.analysis.cells import count_coded
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame

if TYPE_CHECKING:
    from rootsift.analysis.counts import Counts
    from rootsift.analysis.singles import Scale

MAX_FIELDS = 6
MAX_VALUES = 50
MAX_CAUSES = 10
MAX_CELLS = 500_000
MAX_CUBE = 100_000
"""The most cells the chosen fields may span (their listed values plus "another" each)."""
DENSE_CELL = 10
"""A group has a ratio of its own when it would hold this many selected events at the overall ratio."""
NOISE_BIN = 40
"""Cells per size bin when fitting the noise: a median of fewer varies too much."""
CHI2_MEDIAN = 0.454936423119572
CAUSE_METHOD = (
    f"cells of up to {MAX_FIELDS} fields (the strongest singly, {MAX_VALUES} values each, {MAX_CUBE:,} cells at "
    "most); expected selected events per cell = the baseline's times the normal ratio (the median cell's, or the "
    "cells' outside values over-represented beyond chance); conjunctions of 1 to all those fields scored by excess "
    "squared over a variance fitted from the cells (a*m + c*m^2, plus the ratio's error), taken greedily on the "
    "cells left unexplained, kept above chi2(1) at alpha / conjunctions tried and above the largest "
    "under-represented conjunction as deep; a conjunction gives way to a part of it when splitting that part "
    "does not fit better at alpha"
)


@dataclass
class Cells:
    codes: np.ndarray
    """(cells, fields) value codes; -1: a value not among the field's listed ones."""
    sel: np.ndarray
    base: np.ndarray
    fields: list[str]
    values: list[list[Any]]
    events: bool
    """The counts are whole events (no count field, or one holding whole numbers only)."""


def find_causes(
    frame: Frame, counts: Counts, singles: list[Finding], scale: Scale, alpha: float, exclude: set[str] | None = None
) -> list[Finding]:
    """The cause set, strongest first (see the module docstring); empty when nothing stands
    out. ``exclude``: fields that are no cause (they restate the selection: parts.py)."""
    fields = _fields(counts, singles, exclude or set())
    if not fields or scale.sel_w <= 0 or scale.base_w <= 0:
        return []
    cells = _count_cells(frame, counts, fields, scale)
    if cells is None or len(cells.sel) == 0:
        return []
    return _greedy(cells, scale, alpha)


def _fields(counts: Counts, singles: list[Finding], exclude: set[str]) -> list[str]:
    """Dimension fields ranked by their most significant value (over- or under-represented),
    at most ``MAX_FIELDS``, taken in that order while the cube they span (each field's
    listed values and "another value") stays within ``MAX_CUBE`` cells."""
    best: dict[str, float] = {}
    for f in singles:
        if f.kind == "dimension" and f.field in counts.values and f.field not in exclude:
            best[str(f.field)] = min(best.get(str(f.field), 1.0), f.p_value)
    ranked = sorted(best, key=lambda n: (best[n], n))  # ties by name: the same fields whatever order counts came in
    rest = [n for n in counts.values if n not in best and n not in exclude and len(counts.values[n]) > 1]
    chosen: list[str] = []
    cube = 1
    for name in ranked + rest:
        size = min(len(counts.values[name]), MAX_VALUES) + 1
        if size > 2 and cube * size <= MAX_CUBE:
            chosen.append(name)
            cube *= size
        if len(chosen) == MAX_FIELDS:
            break
    return chosen


def _count_cells(frame: Frame, counts: Counts, fields: list[str], scale: Scale) -> Cells | None:
    listed = [
        sorted(counts.values[name], key=lambda vc: (-(vc[1].sel_w + vc[1].base_w), repr(vc[0])))[:MAX_VALUES]
        for name in fields
    ]
    values = [[v for v, _ in vals] for vals in listed]
    events = True
    if frame.count:  # whole counts are events; others (rollups of rates) are not
        col = q.col(frame.count)
        whole_count = exp.paren(exp.or_(q.is_null(col), exp.EQ(this=col.copy(), expression=exp.Round(this=col.copy()))))
        source, params = frame.sql([(whole_count, "__whole", [])])
        every = exp.Coalesce(this=exp.LogicalAnd(this=exp.column("__whole")), expressions=[exp.true()])
        whole = frame.backend.execute(q.select([every], source), params)
        events = bool(whole.rows[0][0])
    got = count_coded(frame, list(zip(fields, values)), MAX_CELLS)
    if got is None:
        return None
    # in effective events: the tests' scale (Kish's size under sample rates)
    sel = got.sel * scale.sel_eff / scale.sel_w
    base = got.base * scale.base_eff / scale.base_w
    return Cells(got.codes, sel, base, fields, values, events)


def weighted_median_ratio(sel: np.ndarray, base: np.ndarray) -> tuple[float, float, float]:
    """(the selection/baseline ratio of the median group weighted by baseline events, the
    events in that group, the median's standard error: 1.2533 times the ratios' weighted
    spread (1.4826 MADs) over the square root of the groups' effective number)."""
    have = base > 0
    ratio, w = sel[have] / base[have], base[have]
    order = np.argsort(ratio, kind="stable")
    cum = np.cumsum(w[order])
    i = order[int(np.searchsorted(cum, cum[-1] / 2))]
    k = float(ratio[i])
    spread = np.abs(ratio - k)
    o2 = np.argsort(spread, kind="stable")
    mad = float(spread[o2][int(np.searchsorted(np.cumsum(w[o2]), cum[-1] / 2))])
    n_eff = float(w.sum()) ** 2 / float((w * w).sum())
    return k, float(sel[have][i] + w[i]), 1.2533 * 1.4826 * mad / np.sqrt(n_eff)


def normal_ratio(cells: Cells, open_cells: np.ndarray, alpha: float) -> tuple[float, float]:
    """The ratio the normal events share, and its standard error, over ``open_cells``.

    Dense cells (the median one would hold ``DENSE_CELL`` selected events at the overall
    ratio): the median cell's ratio, weighted by baseline events. Sparse cells have no
    ratio of their own (most hold no selected event at all): then the single values of
    every field that are over-represented beyond chance (a Poisson test at ``alpha`` over
    the values) are set aside, repeatedly, and the ratio is that of the cells none of them
    holds; never below a hundredth of the overall ratio."""
    sel_all, base_all = cells.sel[open_cells], cells.base[open_cells]
    overall = float(sel_all.sum()) / float(base_all.sum())
    if not np.any(base_all > 0):
        return overall, 0.0
    k, events, se = weighted_median_ratio(sel_all, base_all)
    if events * overall / (1 + overall) >= DENSE_CELL:
        return max(k, overall / 100), se
    codes = cells.codes[open_cells]
    kept = np.ones(len(sel_all), dtype=bool)
    n_values = sum(len(v) for v in cells.values)
    critical = float(dist.chi2_isf(alpha / max(n_values, 1), 1))
    for _ in range(5):
        k = float(sel_all[kept].sum()) / max(float(base_all[kept].sum()), 1e-300)
        flagged = np.zeros(len(sel_all), dtype=bool)
        for f in range(len(cells.fields)):
            listed = codes[:, f] >= 0
            n = len(cells.values[f])
            s_v = np.bincount(codes[listed, f], weights=sel_all[listed], minlength=n)
            b_v = np.bincount(codes[listed, f], weights=base_all[listed], minlength=n)
            d = s_v - k * b_v
            z2 = np.where(d > 0, d * d / np.maximum((1 + k) * (s_v + k * b_v) / 2, 1e-300), 0.0)
            for code in np.flatnonzero(z2 > critical):
                flagged |= codes[:, f] == code
        if base_all[~flagged].sum() < 0.5 * base_all.sum() or np.array_equal(~flagged, kept):
            break
        kept = ~flagged
    k = float(sel_all[kept].sum()) / max(float(base_all[kept].sum()), 1e-300)
    se = float(np.sqrt(k * (1 + k) / max(float(base_all[kept].sum()), 1e-300)))
    return max(k, overall / 100), se


@dataclass
class Noise:
    """How much a cell's excess ``d = s − k·b`` varies when nothing is wrong: ``a·m + c·m²``
    with ``m = (s + k·b)/2`` its size in selected events (``a``: independent events, 1 + k
    for plain counts; ``c``: a relative noise, as in forecasts or bursty traffic)."""

    k: float
    a: float
    c: float

    def variance(self, m: np.ndarray, m_sq: np.ndarray) -> np.ndarray:
        """The variance of the summed excess of cells with Σm = ``m`` and Σm² = ``m_sq``."""
        return np.maximum(self.a * m + self.c * m_sq, 1e-300)


def fit_noise(sel: np.ndarray, base: np.ndarray, k: float, events: bool) -> Noise:
    """``a`` and ``c`` from the cells themselves: cells sorted by size into bins, each bin's
    median squared excess over χ²₁'s median is its variance, and ``a·m + c·m²`` is fitted to
    those by non-negative least squares on the relative error. Most cells being normal, the
    medians are the normal cells'. ``events``: the counts are whole events, which vary at
    least as independent events do (``a ≥ 1 + k``); other counts (rollups of rates, any unit)
    vary as much as they are seen to."""
    m = (sel + k * base) / 2
    d2 = (sel - k * base) ** 2
    have = m > 0
    m, d2 = m[have], d2[have]
    floor = (1.0 + k) if events else 0.0
    if len(m) < NOISE_BIN:
        return Noise(k, max(floor, 1.0), 0.0)
    order = np.argsort(m, kind="stable")
    bins = np.array_split(order, max(1, min(20, len(m) // NOISE_BIN)))
    size = np.array([float(np.mean(m[b])) for b in bins])
    var = np.array([float(np.median(d2[b])) / CHI2_MEDIAN for b in bins])
    scale = 1.0 / np.maximum(var, 1e-12 * max(float(var.max()), 1e-300))
    fitted = stats.nonnegative_least_squares(np.column_stack([size * scale, size * size * scale]), np.ones(len(size)))
    a, c = float(fitted[0]), float(fitted[1])
    if a < floor:  # refit the relative part with the independent events' part fixed
        a = floor
        rest = np.maximum(var - a * size, 0.0)
        c = float(np.sum(rest * size * size * scale * scale) / max(np.sum(size**4 * scale * scale), 1e-300))
    return Noise(k, a, c)


def _greedy(cells: Cells, scale: Scale, alpha: float) -> list[Finding]:
    n_fields = len(cells.fields)
    subsets = [s for r in range(1, n_fields + 1) for s in itertools.combinations(range(n_fields), r)]
    groups = [_group(cells.codes, s) for s in subsets]
    tried = sum(len(first) for _, first in groups)
    if tried == 0:
        return []
    critical = float(dist.chi2_isf(alpha / tried, 1))
    split_critical = float(dist.chi2_isf(alpha, 1))
    open_cells = np.ones(len(cells.sel), dtype=bool)
    chosen: list[tuple[tuple[int, ...], tuple[int, ...], float]] = []
    for _ in range(MAX_CAUSES):
        if not np.any(open_cells & (cells.base > 0)):
            break
        # the normal ratio and the noise of what is left unexplained
        k, k_se = normal_ratio(cells, open_cells, alpha)
        overall = float(cells.sel[open_cells].sum()) / float(cells.base[open_cells].sum())
        noise = fit_noise(cells.sel[open_cells], cells.base[open_cells], k, cells.events)
        excess = cells.sel - k * cells.base
        size = (cells.sel + k * cells.base) / 2
        # what noise alone reaches, per number of fields: the largest evidence of a
        # conjunction under-represented as much (noise goes both ways; a cause one way)
        floor = np.zeros(n_fields + 1)
        best: tuple[float, int, int] | None = None
        for si, (index, keys) in enumerate(groups):
            use = open_cells & (index >= 0)
            d = np.bincount(index[use], weights=excess[use], minlength=len(keys))
            m = np.bincount(index[use], weights=size[use], minlength=len(keys))
            m_sq = np.bincount(index[use], weights=size[use] ** 2, minlength=len(keys))
            b = np.bincount(index[use], weights=cells.base[use], minlength=len(keys))
            # the normal ratio is estimated too: a large conjunction must differ by more than its error
            evidence = d * d / (noise.variance(m, m_sq) + (b * k_se) ** 2)
            less = (d < 0) & (d + k * b < overall * b)
            if less.any():
                floor[len(subsets[si])] = max(floor[len(subsets[si])], float(np.max(evidence[less])))
            more = (d > 0) & (d + k * b > overall * b)  # over-represented against the normal and the rest
            evidence = np.where(more, evidence, 0.0)
            j = int(np.argmax(evidence)) if len(evidence) else -1
            if j >= 0 and evidence[j] > critical and (best is None or evidence[j] > best[0]):
                best = (float(evidence[j]), si, j)
        if best is None or best[0] <= floor[len(subsets[best[1]])]:
            break
        gain, si, j = best
        key = _decode(cells.codes, subsets[si], int(groups[si][1][j]))
        subset, key = _coarsen(cells, subsets[si], key, open_cells, noise, split_critical)
        members = _members(cells.codes, subset, key) & open_cells
        if not members.any():
            break
        chosen.append((subset, key, gain))
        open_cells &= ~members
    return [_finding(cells, subset, key, gain, scale, tried) for subset, key, gain in chosen]


def _group(codes: np.ndarray, subset: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's conjunction over ``subset`` as an index (-1 when a value is not a listed
    one), and the conjunctions, each coded as one integer (mixed radix; see ``_decode``)."""
    part = codes[:, list(subset)]
    listed = np.all(part >= 0, axis=1)
    index = np.full(len(codes), -1, dtype=np.int64)
    if not listed.any():
        return index, np.zeros(0, dtype=np.int64)
    radix = part[listed].max(axis=0) + 1
    flat = np.zeros(int(listed.sum()), dtype=np.int64)
    for column, base in zip(part[listed].T, radix):
        flat = flat * int(base) + column
    keys, inverse = np.unique(flat, return_inverse=True)
    index[listed] = inverse.reshape(-1)
    first = np.zeros(len(keys), dtype=np.int64)
    first[inverse.reshape(-1)] = np.flatnonzero(listed)  # a cell of each conjunction (any: they agree)
    return index, first


def _decode(codes: np.ndarray, subset: tuple[int, ...], cell: int) -> tuple[int, ...]:
    """The values of conjunction over ``subset`` that holds ``cell``."""
    return tuple(int(codes[cell, f]) for f in subset)


def _members(codes: np.ndarray, subset: tuple[int, ...], key: tuple[int, ...]) -> np.ndarray:
    return np.asarray(np.all(codes[:, list(subset)] == np.array(key), axis=1))


def _coarsen(
    cells: Cells,
    subset: tuple[int, ...],
    key: tuple[int, ...],
    open_cells: np.ndarray,
    noise: Noise,
    split_critical: float,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Give way to a part (one value fewer) while splitting that part into this
    conjunction and the rest does not fit better than the part's own single ratio. The
    part must itself be a cause a candidate could be: over-represented against the normal
    ratio and against the rest (a part rarer in the selection than in the baseline is not
    one, however noisy the cells)."""
    while len(subset) > 1:
        inner = _members(cells.codes, subset, key) & open_cells
        overall = float(cells.sel[open_cells].sum()) / max(float(cells.base[open_cells].sum()), 1e-300)
        best: tuple[float, tuple[int, ...], tuple[int, ...]] | None = None
        for drop in range(len(subset)):
            part = subset[:drop] + subset[drop + 1 :]
            part_key = key[:drop] + key[drop + 1 :]
            rest = _members(cells.codes, part, part_key) & open_cells & ~inner
            s_part = float(cells.sel[inner].sum() + cells.sel[rest].sum())
            b_part = float(cells.base[inner].sum() + cells.base[rest].sum())
            if b_part <= 0 or s_part <= max(noise.k, overall) * b_part or not rest.any():
                continue  # a part over-represented against neither the normal nor the rest is no cause
            rate = s_part / b_part
            split = 0.0
            for group in (inner, rest):
                d = float((cells.sel[group] - rate * cells.base[group]).sum())
                m = (cells.sel[group] + rate * cells.base[group]) / 2
                split += d * d / float(noise.variance(np.array(m.sum()), np.array((m * m).sum())))
            if split < split_critical and (best is None or split < best[0]):
                best = (split, part, part_key)
        if best is None:
            break
        _, subset, key = best
    return subset, key


def _finding(
    cells: Cells, subset: tuple[int, ...], key: tuple[int, ...], gain: float, scale: Scale, tried: int
) -> Finding:
    members = _members(cells.codes, subset, key)
    a = float(cells.sel[members].sum())
    b = float(cells.base[members].sum())
    p_sel, p_base = a / scale.sel_eff, b / scale.base_eff
    diff, score = stats.share_score(np.array([p_sel]), np.array([p_base]), scale.sel_eff, scale.base_eff)
    p = min(1.0, float(dist.chi2_sf(gain, 1)) * tried)
    conditions = [{"field": cells.fields[f], "value": cells.values[f][c]} for f, c in zip(subset, key)]
    common: dict[str, Any] = {
        "selection_fraction": p_sel,
        "baseline_fraction": p_base,
        "selection_count": a * scale.sel_w / scale.sel_eff,
        "baseline_count": b * scale.base_w / scale.base_eff,
        "effect": float(diff[0]),
        "detail": {"cause_set": True, "evidence": float(f"{gain:.4g}")},
    }
    if len(conditions) == 1:
        return Finding(
            "dimension", float(score[0]), p, field=conditions[0]["field"], value=conditions[0]["value"], **common
        )
    return Finding("combination", float(score[0]), p, conditions=conditions, **common)
