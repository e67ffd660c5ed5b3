"""Findings implied by a higher-ranked one: listed after the rest, never dropped.

A value can be over-represented in the selection only because it lies within, or
mostly overlaps, a value that explains the selection: a host inside the slow zone, a
client library used mostly by the slow service. Walking down the ranked single values
(the first ``MAX_CHECKED`` that are over-represented dimension culprits), a value is
tested *given* the values already kept: its events and the others are split into strata
by which kept values they hold, and the Cochran–Mantel–Haenszel test asks whether,
within those strata, the value is still more common in the selection (one-sided, at
``alpha`` over the number of values checked: a value keeps its place only on evidence
that it adds something, as strong as a finding's). When it is not, it is **implied by** the kept value it shares the most selected events with:
marked ``implied_by`` and listed after every finding that is not.

The reverse order too (a proxy ranked above its cause): a kept value that adds nothing
given the new one (and the other kept values), while the new one still adds given it,
gives way: the new one takes its place and it is implied by the new one.

One grouped count over the checked values' fields (``cells.count_coded``) gives every
stratum of every test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from rootsift.analysis import stats
from rootsift.analysis.cells import count_coded
from rootsift.analysis.findings import Finding
from rootsift.analysis.frame import Frame

if TYPE_CHECKING:
    from rootsift.analysis.singles import Scale

MAX_CHECKED = 20
MAX_CELLS = 200_000
REDUNDANCY_METHOD = (
    f"walking down the first {MAX_CHECKED} over-represented single values, each is tested given the values "
    "kept above it (Cochran-Mantel-Haenszel, strata = which kept values an event holds, one-sided at alpha / values checked); "
    "one that is not more common in the selection within those strata is implied by the kept value it shares "
    "the most selected events with and listed after the findings that are not; a kept value that adds nothing "
    "given a later one that adds given it gives way to it"
)


def demote_implied(
    frame: Frame,
    findings: list[Finding],
    scale: Scale,
    alpha: float,
    eligible: Callable[[Finding], bool],
    tail: Callable[[Finding], bool],
) -> list[Finding]:
    """``findings`` (in printed order) with the implied single values moved after every
    finding that is not implied, just before the ``tail`` ones (values nested, restatements);
    each implied one gets ``detail["implied_by"]``. ``eligible``: the findings that may be
    tested (over-represented single values of dimension culprits)."""
    checked = [f for f in findings if eligible(f)][:MAX_CHECKED]
    if len(checked) < 2:
        return findings
    masks = _masks(frame, checked)
    if masks is None:
        return findings
    member, sel, base = masks
    sel = sel * scale.sel_eff / scale.sel_w
    base = base * scale.base_eff / scale.base_w

    def adds(i: int, given: list[int]) -> float:
        """p-value that value ``i`` is no more common in the selection within the strata of ``given``."""
        key = np.zeros(len(sel), dtype=np.int64)
        for g in given:
            key = key * 2 + member[g]
        strata, index = np.unique(key, return_inverse=True)
        index = index.reshape(-1)
        n = len(strata)
        held = member[i]
        a = np.bincount(index[held], weights=sel[held], minlength=n)
        m = a + np.bincount(index[held], weights=base[held], minlength=n)
        n1 = np.bincount(index, weights=sel, minlength=n)
        n0 = np.bincount(index, weights=base, minlength=n)
        return stats.stratified_share_test(np.rint(a), np.rint(n1), np.rint(n0), np.rint(m))

    level = alpha / len(checked)  # Bonferroni over the values checked
    kept: list[int] = []
    implied: dict[int, tuple[int, float]] = {}
    promoted: dict[int, int] = {}  # the new one -> the kept one it replaced
    for x in range(len(checked)):
        p = adds(x, kept) if kept else 0.0
        if p >= level:
            overlap = [float(sel[member[x] & member[k]].sum()) for k in kept]
            best = int(np.argmax(overlap))
            if overlap[best] > 0:
                implied[x] = (kept[best], p)
                continue
        replaced = False
        for y in list(kept):
            others = [k for k in kept if k != y] + [x]
            p_y = adds(y, others)
            if p_y >= level and float(sel[member[x] & member[y]].sum()) > 0 and adds(x, [y]) < level:
                implied[y] = (x, p_y)
                for z, (by, pz) in implied.items():
                    if by == y:
                        implied[z] = (x, pz)
                if not replaced:
                    kept[kept.index(y)] = x
                    promoted[x] = y
                    replaced = True
                else:
                    kept.remove(y)
        if not replaced:
            kept.append(x)
    if not implied:
        return findings
    for i, (by, p) in implied.items():
        checked[i].detail["implied_by"] = checked[by].describe()
        checked[i].detail["conditional_p"] = float(f"{p:.4g}")
    position = {id(f): float(n) for n, f in enumerate(findings)}
    for x, y in promoted.items():
        position[id(checked[x])] = position[id(checked[y])]
        if checked[y].detail.get("cause_set"):
            checked[x].detail["cause_set"] = True
    gone = {id(checked[i]) for i in implied}
    shown = sorted((f for f in findings if id(f) not in gone), key=lambda f: position[id(f)])
    head = [f for f in shown if not tail(f)]
    return head + [checked[i] for i in sorted(implied)] + [f for f in shown if tail(f)]


def _masks(frame: Frame, checked: list[Finding]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(which checked value each cell holds: (values, cells) booleans, selected weight per
    cell, baseline weight per cell) from one grouped count; None when too many cells."""
    fields = list(dict.fromkeys(str(f.field) for f in checked))
    values: dict[str, list[object]] = {name: [] for name in fields}
    for f in checked:
        if f.value not in values[str(f.field)]:
            values[str(f.field)].append(f.value)
    got = count_coded(frame, [(name, values[name]) for name in fields], MAX_CELLS)
    if got is None:
        return None
    member = np.array(
        [got.codes[:, fields.index(str(f.field))] == values[str(f.field)].index(f.value) for f in checked]
    ).reshape(len(checked), len(got.sel))
    return member, got.sel, got.base
