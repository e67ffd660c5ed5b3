"""Which hosts leak and why: the label value that separates trending groups from the rest.

Each group (host) is trending or not; each label (kernel, version, region…) splits the
groups by value. For each value, the share of trending groups that carry it is tested
against the share of the others (the exact hypergeometric test explain uses, Fisher's,
``stats.share_test``), q-values over every value tested. With few hosts the test cannot
be small (4 leaking hosts all on one kernel and 4 healthy on another: p = 0.029), and
the finding says how many hosts each side has.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from rootsift.analysis import stats


def separating(labels: dict[Any, dict[str, Any]], trending: set[Any]) -> list[dict[str, Any]]:
    """For each label, its value most enriched among trending groups (when any is), with
    its test; most significant first."""
    groups = [g for g in labels if labels[g]]
    sel = [g for g in groups if g in trending]
    base = [g for g in groups if g not in trending]
    if not sel or not base:
        return []
    tested: list[dict[str, Any]] = []
    names = sorted({n for g in groups for n in labels[g]})
    for name in names:
        in_sel = Counter(labels[g].get(name) for g in sel)
        in_base = Counter(labels[g].get(name) for g in base)
        for value in set(in_sel) | set(in_base):
            a, b = in_sel[value], in_base[value]
            tested.append({"field": name, "value": value, "a": a, "b": b})
    if not tested:
        return []
    with_a = np.array([t["a"] for t in tested], dtype=np.float64)
    with_b = np.array([t["b"] for t in tested], dtype=np.float64)
    p = stats.share_test(with_a, with_b, float(len(sel)), float(len(base)))
    q = stats.q_values(p)
    diff, score = stats.share_score(with_a / len(sel), with_b / len(base), float(len(sel)), float(len(base)))
    best: dict[str, dict[str, Any]] = {}
    for t, pi, qi, d, s in zip(tested, p, q, diff, score, strict=True):
        if d <= 0:
            continue
        entry = {
            "field": t["field"],
            "value": t["value"],
            "trending_with_value": int(t["a"]),
            "trending": len(sel),
            "others_with_value": int(t["b"]),
            "others": len(base),
            "difference": float(d),
            "score": float(s),
            "p_value": float(pi),
            "q_value": float(qi),
        }
        held = best.get(t["field"])
        if held is None or (entry["p_value"], -entry["difference"]) < (held["p_value"], -held["difference"]):
            best[t["field"]] = entry
    return sorted(best.values(), key=lambda e: (e["p_value"], -e["difference"]))
