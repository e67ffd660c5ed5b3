"""The analyses of the Python API: ``Rootsift`` (api.py) inherits these methods. Each is a
thin call into ``rootsift.analysis``, with its time arguments read as ``Moment``s; the
analyses (numpy, scipy) are imported by the methods that use them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from rootsift.analysis.defaults import ALPHA, TOP_VALUES
from rootsift.timeutil import parse_time

if TYPE_CHECKING:
    from rootsift.analysis.changes import Changes
    from rootsift.analysis.compare import Comparison, Metric
    from rootsift.analysis.explain import Explanation
    from rootsift.analysis.investigate import Investigation
    from rootsift.analysis.profiles import ProfileDiff
    from rootsift.analysis.trends import Trends
    from rootsift.store.duckdb import DuckDBBackend

Moment = str | datetime | None
"""A time argument: RFC 3339, epoch seconds, relative (``-2h``), or a datetime (naive = UTC)."""


def moment(value: Moment, now: datetime) -> datetime | None:
    """A time argument as a naive UTC datetime (how the store keeps time)."""
    if value is None:
        return None
    moment = parse_time(value, now) if isinstance(value, str) else value
    return moment.astimezone(UTC).replace(tzinfo=None) if moment.tzinfo else moment


class Analyses:
    """explain, investigate, compare, profile_diff, trends and changes on ``self.backend``."""

    backend: DuckDBBackend

    def explain(
        self,
        dataset: str,
        *,
        start: Moment = None,
        end: Moment = None,
        where: str | None = None,
        select: str | None = None,
        select_from: Moment = None,
        select_to: Moment = None,
        baseline: str | None = None,
        alpha: float = ALPHA,
        top_values: int = TOP_VALUES,
        sampled: bool = False,
        select_start_of: str | None = None,
        count_field: str | None = None,
        now: datetime | None = None,
    ) -> Explanation:
        """What is different about the selected events: ``select`` (a filter) and/or the
        ``select_from``…``select_to`` sub-range, against the rest of ``start``…``end`` (the
        whole dataset by default) or the events matching ``baseline``; ``sampled`` reads
        the baseline from the store's uniform sample; ``count_field``: each row stands for
        that many identical events (default: the dataset's setting). docs/explain.md."""
        from rootsift.analysis.explain import explain

        now = now or datetime.now(UTC)
        return explain(
            self.backend,
            dataset,
            start=moment(start, now),
            end=moment(end, now),
            where=where,
            select=select,
            select_from=moment(select_from, now),
            select_to=moment(select_to, now),
            baseline=baseline,
            alpha=alpha,
            top_values=top_values,
            sampled=sampled,
            select_start_of=select_start_of,
            count_field=count_field,
        )

    def compare(
        self,
        dataset: str,
        *,
        a: str | None = None,
        b: str | None = None,
        a_from: Moment = None,
        a_to: Moment = None,
        b_from: Moment = None,
        b_to: Moment = None,
        where: str | None = None,
        metrics: str | list[Metric] | None = None,
        tolerance: dict[str, float] | None = None,
        better: dict[str, str] | None = None,
        weights: dict[str, float] | None = None,
        per: str | None = None,
        alpha: float = ALPHA,
        count_field: str | None = None,
        now: datetime | None = None,
    ) -> Comparison:
        """Cohort A (filter ``a`` and/or ``a_from``…``a_to``) against cohort B on each metric
        (``p50(duration_ms),rate(status >= 500)``…), with a verdict; ``count_field``: each
        row stands for that many identical events (default: the dataset's setting).
        docs/compare.md."""
        from rootsift.analysis.compare import compare, parse_metrics

        now = now or datetime.now(UTC)
        return compare(
            self.backend,
            dataset,
            a=a,
            b=b,
            a_range=(moment(a_from, now), moment(a_to, now)),
            b_range=(moment(b_from, now), moment(b_to, now)),
            where=where,
            metrics=parse_metrics(metrics) if isinstance(metrics, str) else metrics,
            tolerance=tolerance,
            better=better,
            weights=weights,
            per=per,
            alpha=alpha,
            count_field=count_field,
        )

    def profile_diff(
        self,
        dataset: str,
        *,
        a: str | None = None,
        b: str | None = None,
        a_from: Moment = None,
        a_to: Moment = None,
        b_from: Moment = None,
        b_to: Moment = None,
        where: str | None = None,
        profile_type: str | None = None,
        value: str | None = None,
        focus: str | None = None,
        alpha: float = ALPHA,
        now: datetime | None = None,
    ) -> ProfileDiff:
        """Which functions take a different share of the stack samples in cohort B than in A,
        with a significance that treats each profile as a unit. docs/profiles.md."""
        from rootsift.analysis.profiles import profile_diff

        now = now or datetime.now(UTC)
        return profile_diff(
            self.backend,
            dataset,
            a=a,
            b=b,
            a_range=(moment(a_from, now), moment(a_to, now)),
            b_range=(moment(b_from, now), moment(b_to, now)),
            where=where,
            profile_type=profile_type,
            value=value,
            focus=focus,
            alpha=alpha,
        )

    def investigate(
        self,
        dataset: str,
        *,
        start: Moment = None,
        end: Moment = None,
        where: str | None = None,
        measure: str | None = None,
        timeouts: dict[str, float] | None = None,
        timestamp_at: str = "start",
        alpha: float = ALPHA,
        count_field: str | None = None,
        changes: str | None = None,
        now: datetime | None = None,
    ) -> Investigation:
        """Find the anomalous region of ``dataset`` (a latency or error-rate shift, or a
        stall) and explain it; ``timeouts`` are configured limits per duration field, in
        the field's own unit (else they are inferred); ``timestamp_at`` says whether an
        event's timestamp is its start or its end; ``count_field``: each row stands for
        that many identical events (default: the dataset's setting); ``changes``: a
        dataset of change events ranked as suspects of the onset. docs/investigate.md."""
        from rootsift.analysis.investigate import investigate

        now = now or datetime.now(UTC)
        return investigate(
            self.backend,
            dataset,
            start=moment(start, now),
            end=moment(end, now),
            where=where,
            measure=measure,
            timeouts=timeouts,
            timestamp_at=timestamp_at,
            alpha=alpha,
            count_field=count_field,
            changes=changes,
        )

    def trends(
        self,
        dataset: str,
        *,
        measure: str | None = None,
        by: str | None = "auto",
        limit: float | str | None = None,
        parts: list[str] | None = None,
        start: Moment = None,
        end: Moment = None,
        where: str | None = None,
        horizon: timedelta | None = None,
        alpha: float = ALPHA,
        now: datetime | None = None,
    ) -> Trends:
        """What is leaking, where, and when it runs out: the trend of ``measure`` (every
        numeric field when None) per group of ``by`` (``auto``: ``host`` when present;
        None: one series), the ``parts`` that drive it, the label values that separate the
        trending groups, and the time until ``limit`` (a number or a field) within
        ``horizon`` (default 90 days). docs/trends.md."""
        from rootsift.analysis.trends import HORIZON_HOURS, trends

        now = now or datetime.now(UTC)
        return trends(
            self.backend,
            dataset,
            measure=measure,
            by=by,
            limit=limit,
            parts=parts,
            start=moment(start, now),
            end=moment(end, now),
            where=where,
            horizon_hours=horizon.total_seconds() / 3600 if horizon is not None else HORIZON_HOURS,
            alpha=alpha,
        )

    def changes(
        self,
        dataset: str,
        *,
        measure: str = "count",
        by: str | None = None,
        events: str | None = None,
        related: str | None = None,
        start: Moment = None,
        end: Moment = None,
        where: str | None = None,
        granularity: str | None = None,
        alpha: float = ALPHA,
        now: datetime | None = None,
    ) -> Changes:
        """Change points of ``measure`` per bucket (``p50(duration_ms)``, ``rate(status >= 500)``,
        a bare field: its p50) per ``by`` group, the change events of dataset ``events``
        ranked as suspects of each, and the series of dataset ``related`` that changed
        near the largest shift. docs/changes.md."""
        from rootsift.analysis.changes import changes

        now = now or datetime.now(UTC)
        return changes(
            self.backend,
            dataset,
            measure=measure,
            by=by,
            events=events,
            related=related,
            start=moment(start, now),
            end=moment(end, now),
            where=where,
            granularity=granularity,
            alpha=alpha,
        )
