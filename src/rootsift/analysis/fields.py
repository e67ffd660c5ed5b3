"""Which fields an analysis looks at, and how: as dimensions (counted per value), as
measures (compared as distributions), or not at all, with the reason.

A look at the first rows of the range (``PILOT_ROWS``) tells low-cardinality numbers
(a status code: a dimension) from quantities (a duration: a measure) and marks id-like
fields (nearly every value distinct). Counting every value of an id-like text field
(a user or trace id) is what makes this kind of query slow, and almost all of its values
are too rare to ever be a finding: such a field is a *heavy-hitter* field, for which
only candidate values are counted exactly: those repeated in the pilot (chosen blind to
the selection) and those the selection repeats. A text field with no value repeated in
the pilot at all (a request id) is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from rootsift.analysis import sql as q
from rootsift.analysis.frame import Frame
from rootsift.store.base import TIME_COLUMN

PILOT_ROWS = 20_000
CATEGORICAL_MAX = 1000
"""A number with at most this many distinct values in the pilot, each seen 20 times on
average (or at most 50 values), is also counted per value: a status code or a port, not
a duration that is mostly 0."""
QUANTITY_MIN = 20
"""A number with at least this many distinct values in the pilot is also compared as a distribution."""
HEAVY_CANDIDATES = 50
HEAVY_MIN_PILOT = 3
"""Values of a heavy-hitter field taken from the pilot: its most common, seen at least this
often (twice in 20,000 events happens by chance among a million ids; a value that common
cannot be a finding on its share of the baseline)."""
NUMERIC = ("DOUBLE", "BIGINT")
TEXT = ("VARCHAR", "BOOLEAN")


@dataclass
class FieldPlan:
    dimensions: list[str] = field(default_factory=list)
    measures: list[str] = field(default_factory=list)
    id_like: list[str] = field(default_factory=list)
    heavy: dict[str, list[object]] = field(default_factory=dict)
    """Id-like text fields, with their values repeated in the pilot (most common first)."""
    skipped: dict[str, str] = field(default_factory=dict)
    distinct_in_pilot: dict[str, int] = field(default_factory=dict)


def plan_fields(frame: Frame) -> FieldPlan:
    """Roles for every field of the frame's dataset (see the module docstring)."""
    plan = FieldPlan()
    defining = frame.selection_fields()
    candidates = []
    for name, info in sorted(frame.fields.items()):
        if name == TIME_COLUMN:
            continue
        if name == frame.weight:
            plan.skipped[name] = "sample rate (used as the weight)"
        elif name == frame.count:
            plan.skipped[name] = "count (each row stands for that many events)"
        elif name in defining:
            plan.skipped[name] = "defines the selection or baseline"
        elif info.type in NUMERIC or info.type in TEXT:
            candidates.append((name, info.type))
        else:
            plan.skipped[name] = f"{info.type.lower()} values are not compared"
    if not candidates:
        return plan
    pilot = frame.first(q.select([q.col(n) for n, _ in candidates], frame.relation.copy()), PILOT_ROWS)
    stats: list[exp.Expr] = []
    for n, _ in candidates:
        stats += [exp.ApproxDistinct(this=q.col(n)), exp.Count(this=q.col(n))]
    row = frame.backend.execute(q.select(stats, pilot), []).rows[0]
    for i, (name, ftype) in enumerate(candidates):
        distinct, present = int(row[2 * i] or 0), int(row[2 * i + 1] or 0)
        plan.distinct_in_pilot[name] = distinct
        if present >= 100 and distinct > 0.5 * present and distinct > 200:
            plan.id_like.append(name)
        if ftype in TEXT:
            if name in plan.id_like:
                plan.heavy[name] = []
            else:
                plan.dimensions.append(name)
            continue
        if distinct <= CATEGORICAL_MAX and (distinct <= 50 or distinct <= 0.05 * present):
            plan.dimensions.append(name)
        if distinct >= QUANTITY_MIN or distinct > CATEGORICAL_MAX:
            plan.measures.append(name)
    for name in list(plan.heavy):
        col = q.col(name)
        pilot = frame.first(q.select([col], frame.relation.copy()), PILOT_ROWS)
        common = q.select([col.copy(), q.alias(q.count_rows(), "c")], pilot, q.not_null(col.copy()), group=1)
        common = common.order_by(q.desc(exp.column("c")), q.num(1), copy=False).limit(
            q.num(HEAVY_CANDIDATES), copy=False
        )
        found = frame.backend.execute(common, []).rows
        if not found or found[0][1] < 2:
            del plan.heavy[name]
            plan.skipped[name] = f"a different value in each of the first {PILOT_ROWS:,} events (a unique id)"
        else:
            plan.heavy[name] = [value for value, c in found if c >= HEAVY_MIN_PILOT]
    return plan
