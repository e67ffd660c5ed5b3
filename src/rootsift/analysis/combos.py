"""Conjunctions of field values (``upstream = spectator and az = us-west-1a``) that explain
a selection better than their parts.

The search is bounded and stated: the strongest over-represented single values (at
most ``MAX_CANDIDATES``, ``PER_FIELD`` per field, from ``MAX_FIELDS`` fields) are coded
in a second pass that counts every combination of them at once; pairs and triples are
then read from those counts. A conjunction is kept when it scores above each of its
parts (and, for a triple, each of its pairs) and each condition still matters given the
others: among the events matching the other conditions, the value is more common in the
selection (at ``alpha``; the conjunction's own test joins the run's false-discovery
correction like every other).

The same counts show **nesting**: a value all of whose events have another field's value
(a host inside its availability zone). When it is no more common in the selection than
the rest of that enclosing value (the same conditional test), it adds nothing to it: it
is marked ``within`` the enclosing value and listed after the findings that are not.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

import numpy as np

from rootsift.analysis import stats
from rootsift.analysis.cells import count_coded
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame

if TYPE_CHECKING:
    from rootsift.analysis.singles import Scale

MAX_CANDIDATES = 12
PER_FIELD = 3
MAX_FIELDS = 6
MAX_SHOWN = 10
COMBO_METHOD = (
    f"pairs and triples of the {MAX_CANDIDATES} strongest over-represented values ({PER_FIELD} per field, "
    f"{MAX_FIELDS} fields at most), counted exactly in a second pass; kept when scoring above each part and "
    "each condition still matters among the events matching the others (one-sided hypergeometric test at "
    "alpha); every conjunction tried joins the false-discovery correction"
)


def search_combinations(
    frame: Frame, significant: list[Finding], scale: Scale, alpha: float
) -> tuple[list[Finding], list[Finding]]:
    """(conjunctions kept, every conjunction tested); see the module docstring. Candidates
    nested in another that explains them get ``detail["within"]``."""
    candidates = _candidates(significant)
    fields = list(dict.fromkeys(str(f.field) for f in candidates))
    if len(fields) < 2:
        return [], []
    codes, sel_w, base_w = _cube(frame, fields, candidates)
    items = [(fields.index(str(f.field)), code, f) for code, f in _coded(candidates)]
    masks = [codes[:, fi] == code for fi, code, _ in items]
    combos = [c for r in (2, 3) for c in itertools.combinations(range(len(items)), r)]
    combos = [c for c in combos if len({items[i][0] for i in c}) == len(c)]
    if not combos:
        return [], []
    _mark_nested(items, masks, sel_w, base_w, scale, alpha)
    tested: list[Finding] = []
    kept: list[Finding] = []
    pair_scores: dict[tuple[int, ...], float] = {}
    level = alpha
    for combo in combos:
        mask = np.logical_and.reduce([masks[i] for i in combo])
        a_w, b_w = float(sel_w[mask].sum()), float(base_w[mask].sum())
        finding = _finding([items[i][2] for i in combo], a_w, b_w, scale)
        tested.append(finding)
        if len(combo) == 2:
            pair_scores[combo] = finding.score
        parts = [items[i][2].score for i in combo]
        if len(combo) == 3:
            parts += [pair_scores.get(p, 0.0) for p in itertools.combinations(combo, 2)]
        if finding.effect <= 0 or finding.score <= max(parts):
            continue
        worst = max(_still_matters(combo, i, masks, sel_w, base_w, a_w, b_w, scale) for i in combo)
        if worst < level:
            finding.detail["conditional_p_max"] = float(f"{worst:.4g}")
            kept.append(finding)
    kept.sort(key=lambda f: -f.score)
    return kept[:MAX_SHOWN], tested


def _mark_nested(
    items: list[tuple[int, int, Finding]],
    masks: list[np.ndarray],
    sel_w: np.ndarray,
    base_w: np.ndarray,
    scale: Scale,
    alpha: float,
) -> None:
    """Mark each candidate whose events all share another field's candidate value and
    that adds nothing within it (``detail["within"]``); the enclosing one scores higher."""
    seen = (sel_w + base_w) > 0
    for i, (fi, _, inner) in enumerate(items):
        for j, (fj, _, outer) in enumerate(items):
            if fi == fj or outer.score < inner.score or "within" in inner.detail:
                continue
            if np.any(masks[i] & ~masks[j] & seen):
                continue  # not nested
            a_w, b_w = float(sel_w[masks[i]].sum()), float(base_w[masks[i]].sum())
            if _still_matters((i, j), i, masks, sel_w, base_w, a_w, b_w, scale) >= alpha:
                inner.detail["within"] = {"field": outer.field, "value": outer.value}


def _candidates(significant: list[Finding]) -> list[Finding]:
    # equal scores by field and value: the same candidates whatever order the engine listed them in
    ranked = sorted(
        (f for f in significant if f.kind == "dimension" and f.effect > 0),
        key=lambda f: (-f.score, f.p_value, str(f.field), repr(f.value)),
    )
    chosen: list[Finding] = []
    per_field: dict[str, int] = {}
    for f in ranked:
        name = str(f.field)
        if per_field.get(name, 0) >= PER_FIELD or (name not in per_field and len(per_field) >= MAX_FIELDS):
            continue
        per_field[name] = per_field.get(name, 0) + 1
        chosen.append(f)
        if len(chosen) == MAX_CANDIDATES:
            break
    return chosen


def _coded(candidates: list[Finding]) -> list[tuple[int, Finding]]:
    """Each candidate's code within its field (0, 1, 2 in candidate order)."""
    seen: dict[str, int] = {}
    out = []
    for f in candidates:
        code = seen.get(str(f.field), 0)
        seen[str(f.field)] = code + 1
        out.append((code, f))
    return out


def _cube(frame: Frame, fields: list[str], candidates: list[Finding]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Selected and baseline weight per combination of codes (-1: another value)."""
    coded = _coded(candidates)
    listed = [(name, [f.value for _, f in coded if f.field == name]) for name in fields]
    got = count_coded(frame, listed)
    assert got is not None  # no limit
    return got.codes, got.sel, got.base


def _finding(parts: list[Finding], a_w: float, b_w: float, scale: Scale) -> Finding:
    p_sel, p_base = a_w / scale.sel_w, b_w / scale.base_w
    a_eff = a_w * scale.sel_eff / scale.sel_w
    b_eff = b_w * scale.base_eff / scale.base_w
    p = stats.share_test(np.array([a_eff]), np.array([b_eff]), scale.sel_eff, scale.base_eff)[0]
    diff, score = stats.share_score(np.array([p_sel]), np.array([p_base]), scale.sel_eff, scale.base_eff)
    return Finding(
        "combination",
        float(score[0]),
        float(p),
        conditions=[{"field": f.field, "value": f.value} for f in parts],
        selection_fraction=p_sel,
        baseline_fraction=p_base,
        selection_count=a_w,
        baseline_count=b_w,
        effect=float(diff[0]),
    )


def _still_matters(
    combo: tuple[int, ...],
    i: int,
    masks: list[np.ndarray],
    sel_w: np.ndarray,
    base_w: np.ndarray,
    a_w: float,
    b_w: float,
    scale: Scale,
) -> float:
    """p-value that condition ``i`` adds nothing among the events matching the others (one-sided: more common)."""
    others = np.logical_and.reduce([masks[j] for j in combo if j != i])
    r_sel = float(sel_w[others].sum()) * scale.sel_eff / scale.sel_w
    r_base = float(base_w[others].sum()) * scale.base_eff / scale.base_w
    a_eff = a_w * scale.sel_eff / scale.sel_w
    b_eff = b_w * scale.base_eff / scale.base_w
    if r_sel <= 0 or r_base <= 0:
        return 1.0
    if a_eff / r_sel <= b_eff / r_base:
        return 1.0
    return float(stats.share_test(np.array([a_eff]), np.array([b_eff]), r_sel, r_base)[0])
