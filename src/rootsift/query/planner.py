"""A QuerySpec compiled into the statements that answer it: sqlglot trees, each rendered
once by the backend when its plan is kept (``rootsift.query.plan``).

This is the only part of a query that needs sqlglot; ``rootsift.query.engine`` imports it
when no kept plan answers the query.
"""

from __future__ import annotations

from datetime import datetime

from sqlglot import exp

from rootsift.query import compile as qc
from rootsift.query.plan import Inputs, Plan, Statement
from rootsift.query.spec import QuerySpec


def plan_query(inputs: Inputs, granularity_us: int | None, order: list[tuple[str, bool]]) -> Plan:
    """The statements of the query over its range and how their rows are shaped.

    ``granularity_us`` is the time bucket (None: totals; a heatmap always has one) and
    ``order`` the resolved ``--order`` of a table.
    """
    spec, span = inputs.spec, inputs.span
    compiler = _compiler(inputs)
    where = compiler.where(*span, spec.where)
    compiler.where_clause = where
    if spec.heatmap is not None:
        assert granularity_us is not None
        tree = qc.heatmap(compiler, spec.heatmap, granularity_us, where)
        return Plan("heatmap", Statement(tree, compiler.params), heatmap_field=spec.heatmap.field or "")
    return _table(compiler, spec, granularity_us, span, order)


def compile_up_to(inputs: Inputs, *, breakdowns: bool) -> None:
    """Compile the query's filter (and with ``breakdowns`` its group keys), raising what
    that raises: the errors compiling meets before the engine's checks."""
    compiler = _compiler(inputs)
    compiler.where(*inputs.span, inputs.spec.where)
    if breakdowns:
        qc.group_keys(compiler, inputs.spec.breakdowns, None)


def _compiler(inputs: Inputs) -> qc.Compiler:
    """A compiler over the query's relation (keys past the field limit resolved by a query)."""
    backend = inputs.backend
    relation = backend.relation(inputs.spec.dataset, *inputs.span)
    holds = None
    if qc.overflow.OVERFLOW_FIELD in inputs.fields:
        holds = qc.overflow.key_checker(backend.execute, relation)
    return qc.Compiler(inputs.fields, relation, inputs.weight, overflow_holds=holds)


def _table(
    compiler: qc.Compiler,
    spec: QuerySpec,
    granularity_us: int | None,
    span: tuple[datetime | None, datetime | None],
    order: list[tuple[str, bool]],
) -> Plan:
    """A (possibly time-bucketed) breakdown; weighted percentiles are separate window queries.

    Result columns are aliased by position (k0…, v0…) so a field named like a label
    (``time``, ``count``) can never capture an ORDER BY.
    """
    keys = qc.group_keys(compiler, spec.breakdowns, granularity_us)
    key_items = [(f"k{i}", e) for i, (_, e) in enumerate(keys)]
    labels = [k for k, _ in keys] + [c.label for c in spec.calculations]
    weighted = [c for c in spec.calculations if c.op == "percentile" and compiler.weight]
    plain = [c for c in spec.calculations if c not in weighted]
    values = [(f"v{i}", compiler.aggregate(c)) for i, c in enumerate(plain)] or [("v0", exp.Count(this=exp.Star()))]
    query = qc.select(key_items, values, compiler.relation, compiler.where_clause)
    percentiles = []
    for calc in weighted:  # compiled before anything runs, so a bad field is a usage error
        sub = qc.Compiler(compiler.fields, compiler.relation, compiler.weight, overflow_holds=compiler.overflow_holds)
        where = sub.where(*span, spec.where)
        percentiles.append((calc.label, Statement(qc.weighted_percentile(sub, keys, calc, where), sub.params)))
    if not weighted:
        positions = [
            exp.Ordered(this=exp.Literal.number(labels.index(lab) + 1), desc=desc, nulls_first=False)
            for lab, desc in order
        ]
        query = query.order_by(*positions, copy=False).limit(spec.limit, copy=False)
    return Plan(
        "table",
        Statement(query, list(compiler.params)),
        labels=labels,
        keys=len(keys),
        plain=[c.label for c in plain],
        percentiles=percentiles,
    )
