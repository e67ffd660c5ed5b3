"""What the metrics of one field share, read once per comparison."""

from __future__ import annotations

from typing import Any

import numpy as np
from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis import weighted
from rootsift.analysis.compare.bins import binned_counts, bootstrap
from rootsift.analysis.compare.cohorts import totals, weight_of
from rootsift.analysis.compare.metrics import Metric
from rootsift.analysis.frame import Frame

CURVE = (0.5, 0.75, 0.85, 0.9, 0.95, 0.99, 0.999)
SPREAD = (0.1, 0.9)
"""The spread of a quantile field is log(p90 / p10): its width on a log scale."""


class Fields:
    """What the metrics of one field share, read once per comparison: its binned counts
    in each cohort, its exact quantiles (every one asked for, the curve's and the
    spread's), and one bootstrap of them. p50, p85 and p99 of a field cost one pass."""

    def __init__(self, fa: Frame, fb: Frame, metrics: list[Metric]) -> None:
        self.fa, self.fb = fa, fb
        self.qs: dict[str, list[float]] = {}
        for m in metrics:
            if m.kind == "quantile" and m.field is not None:
                self.qs[m.field] = sorted({*self.qs.get(m.field, [*CURVE, *SPREAD]), float(m.q or 0.5)})
        self.totals = {"a": totals(fa), "b": totals(fb)}
        """Each cohort's (stored, weighted, effective) events."""
        self._binned: dict[str, tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]] = {}
        self._quantiles: dict[str, Any] = {}

    def binned(self, field: str) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        if field not in self._binned:
            self._binned[field] = (binned_counts(self.fa, field), binned_counts(self.fb, field))
        return self._binned[field]

    def quantiles(self, field: str) -> Any:
        """(qs, (n_a, A's quantiles), (n_b, B's), A's draws, B's draws); draws None when
        a cohort has no values."""
        if field not in self._quantiles:
            col, qs = q.col(field), self.qs[field]
            exact: list[tuple[int, dict[float, float | None]]] = []
            for frame in (self.fa, self.fb):
                n, values = (
                    _weighted_quantiles(frame, col, qs) if frame.row_weights else _exact_quantiles(frame, col, qs)
                )
                got: list[float | None] = list(values) if values else [None] * len(qs)
                exact.append((int(n), dict(zip(qs, got, strict=True))))
            a, b = self.binned(field)
            draws = bootstrap(a, b, qs) if exact[0][0] and exact[1][0] else (None, None)
            self._quantiles[field] = (qs, exact[0], exact[1], *draws)
        return self._quantiles[field]


def _exact_quantiles(frame: Frame, col: exp.Column, qs: list[float]) -> tuple[int, list[float] | None]:
    query, params = frame.rows([exp.Count(this=col.copy()), q.quantile_cont(col.copy(), qs)])
    n, values = frame.backend.execute(query, params).rows[0]
    return int(n), values


def _weighted_quantiles(frame: Frame, col: exp.Column, qs: list[float]) -> tuple[int, list[float] | None]:
    """Quantiles of the events each row stands for (its sample rate times its count), as
    ``quantile_cont`` gives them over the same events written out one by one."""
    rows, params = frame.rows([q.alias(col.copy(), "v"), q.alias(weight_of(frame), "w")])
    return weighted.quantiles(frame.backend, rows, params, qs)
