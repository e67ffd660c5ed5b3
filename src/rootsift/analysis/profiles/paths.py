"""Where in the call graph a change sits: the call paths to a function whose share grew or
shrank most, its callees that are new or gone, and the merged call tree both cohorts'
stacks make (what the differential flame graph draws)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

Stacks = dict[tuple[str, ...], float]


def caller_paths(func: str, a: Stacks, a_total: float, b: Stacks, b_total: float, top: int = 3) -> list[dict[str, Any]]:
    """The call paths (root … ``func``, at its outermost call) whose share of the cohort's
    samples changed most, in the direction of the largest change, with their shares."""
    share: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for side, stacks, total in ((0, a, a_total), (1, b, b_total)):
        for frames, value in stacks.items():
            if func in frames and total > 0:
                share[frames[: frames.index(func) + 1]][side] += value / total
    changes = sorted(share.items(), key=lambda kv: kv[1][1] - kv[1][0])
    net = sum(s[1] - s[0] for s in share.values())
    ordered = changes[::-1] if net >= 0 else changes
    return [
        {
            "path": ";".join(path),
            "a_share": round(s[0], 6),
            "b_share": round(s[1], 6),
            "change_points": round(100 * (s[1] - s[0]), 4),
        }
        for path, s in ordered[:top]
    ]


def callees(a: Stacks, b: Stacks) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(callees of each function in A, in B): who a function calls in each cohort's stacks."""
    out: tuple[dict[str, set[str]], dict[str, set[str]]] = (defaultdict(set), defaultdict(set))
    for side, stacks in enumerate((a, b)):
        for frames in stacks:
            for caller, callee in zip(frames, frames[1:], strict=False):
                out[side][caller].add(callee)
    return out


@dataclass
class Node:
    """One frame of the merged call tree: its value below it in A and in B, and its callees."""

    name: str
    a: float = 0.0
    b: float = 0.0
    children: dict[str, Node] = field(default_factory=dict)

    def child(self, name: str) -> Node:
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node


def call_tree(a: Stacks, b: Stacks) -> Node:
    """Both cohorts' stacks merged into one tree under a root ``all`` (values: totals per cohort)."""
    root = Node("all")
    for side, stacks in enumerate((a, b)):
        for frames, value in stacks.items():
            node = root
            node.a, node.b = (node.a + value, node.b) if side == 0 else (node.a, node.b + value)
            for name in frames:
                node = node.child(name)
                if side == 0:
                    node.a += value
                else:
                    node.b += value
    return root


def call_changes(
    a: Stacks, a_total: float, b: Stacks, b_total: float, top: int = 20
) -> dict[str, list[dict[str, Any]]]:
    """Calls (caller → callee) made only in B (``new``) or only in A (``vanished``), with the
    share of the cohort's samples under them, largest first."""
    edges: tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]] = (defaultdict(float), defaultdict(float))
    for side, stacks in enumerate((a, b)):
        for frames, value in stacks.items():
            for edge in set(zip(frames, frames[1:], strict=False)):
                edges[side][edge] += value
    out: dict[str, list[dict[str, Any]]] = {}
    for name, have, lack, total in (("new", edges[1], edges[0], b_total), ("vanished", edges[0], edges[1], a_total)):
        only = sorted(((v, e) for e, v in have.items() if e not in lack), reverse=True)[:top]
        out[name] = [{"caller": e[0], "callee": e[1], "share": round(v / total, 6) if total else 0.0} for v, e in only]
    return out
