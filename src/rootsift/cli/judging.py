"""The judging commands: compare (cohort A against cohort B, with a verdict) and canary (a
rollout gate re-running compare every interval); the options they share are declared once."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rootsift.analysis.defaults import ALPHA, BOUNDARIES
from rootsift.cli.common import (
    Probability,
    backend_option,
    clickhouse_url_option,
    cohort_options,
    common,
    data_option,
    emit_json,
    engine_of,
    fail,
    out,
)
from rootsift.errors import RootsiftError, UsageError
from rootsift.timeutil import parse_duration, parse_time

if TYPE_CHECKING:
    from rootsift.api import Rootsift


def judging_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """What compare and canary share: the events compared, the metrics, and how each is
    judged (``--where --metrics --tolerance --better --weight --per --count-field``); see ``judged``."""
    options = [
        click.option("--where", default=None, help="Only compare events matching this filter."),
        click.option(
            "--metrics",
            default=None,
            help="Comma-separated: pNN(field), shift(field), avg(field), max(field), min(field), slope(field), "
            "rate(filter) (default: p50/p90/p99 of the duration field and the 5xx rate).",
        ),
        click.option(
            "--tolerance",
            "tolerances",
            multiple=True,
            metavar="METRIC=PCT",
            help="A relative change that does not matter, e.g. 'p99(duration_ms)=10%' (repeatable).",
        ),
        click.option(
            "--better",
            "betters",
            multiple=True,
            metavar="METRIC=higher|lower",
            help="Which way is better for a metric, e.g. 'avg(throughput)=higher' (default: lower, for every metric).",
        ),
        click.option(
            "--weight",
            "weights",
            multiple=True,
            metavar="METRIC=W",
            help="A metric's weight in the score, e.g. 'p99(duration_ms)=3' (default 1; the verdict does not use it).",
        ),
        click.option(
            "--per", default=None, help="Compare one value per unit of this field (default: host for max/min)."
        ),
        click.option(
            "--count-field",
            metavar="FIELD",
            default=None,
            help="Each row stands for this many identical events (default: the dataset's, or event_count).",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def judged(
    *,
    where: str | None,
    metrics: str | None,
    tolerances: tuple[str, ...],
    betters: tuple[str, ...],
    weights: tuple[str, ...],
    per: str | None,
    count_field: str | None = None,
) -> dict[str, Any]:
    """``judging_options``' values (click passes them by name: a command takes them as
    ``**judging``) as ``Rootsift.compare``'s keyword arguments (a malformed flag is a
    usage error naming it)."""
    return {
        "where": where,
        "metrics": metrics,
        "tolerance": parse_tolerances(tolerances),
        "better": parse_betters(betters),
        "weights": parse_weights(weights),
        "per": per,
        "count_field": count_field,
    }


@click.command()
@click.argument("dataset")
@cohort_options
@judging_options
@click.option(
    "--alpha", type=Probability(), default=ALPHA, show_default=True, help="Significance over all the metrics."
)
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when the verdict is a regression.")
@click.option(
    "--profiles",
    metavar="DATASET",
    default=None,
    help="Stack samples of the same cohorts: on a regression, attach their profile-diff (docs/profiles.md).",
)
@common(read_only=True)
def compare(
    rs: Rootsift,
    as_json: bool,
    dataset: str,
    a: str | None,
    b: str | None,
    a_from: str | None,
    a_to: str | None,
    b_from: str | None,
    b_to: str | None,
    alpha: float,
    fail_on_regression: bool,
    profiles: str | None,
    **judging: Any,
) -> None:
    """Cohort A against cohort B, metric by metric: values, change, interval, test and a
    verdict (improvement, regression, no change, not enough data).

    Example: rootsift compare api --a 'version = "1.4"' --b 'version = "1.5"'
    """
    result = rs.compare(
        dataset,
        a=a,
        b=b,
        a_from=a_from,
        a_to=a_to,
        b_from=b_from,
        b_to=b_to,
        alpha=alpha,
        **judged(**judging),
    )
    cohorts = {"a": a, "b": b, "a_from": a_from, "a_to": a_to, "b_from": b_from, "b_to": b_to}
    diff = profile_diff_of(rs, profiles, cohorts) if profiles and result.verdict == "regression" else None
    if as_json:
        extra = {"profile_diff": diff.as_dict() if diff else None} if profiles else {}
        emit_json({**result.as_dict(), **extra})
    else:
        from rootsift.ui import findings as view

        view.comparison(out, result)
        if diff is not None:
            from rootsift.cli.profiles import show

            out.print(f"\n[bold]profile-diff of {profiles}[/bold] (the same cohorts)")
            show(diff, 10)
    if fail_on_regression and result.verdict == "regression":
        sys.exit(1)


def profile_diff_of(rs: Rootsift, profiles: str, cohorts: dict[str, Any]) -> Any:
    """``profile-diff`` of the stack samples in dataset ``profiles`` for compare's cohorts; an
    error in it is a usage error naming --profiles."""
    try:
        return rs.profile_diff(profiles, **cohorts)
    except RootsiftError as exc:
        raise UsageError(f"--profiles {profiles}: {exc}") from exc


@click.command()
@click.argument("dataset")
@click.option("--baseline", "baseline", required=True, help="The baseline's events, a filter (e.g. the old version).")
@click.option("--canary", "canary", required=True, help="The canary's events, a filter.")
@click.option("--from", "start", default=None, help="Compare events from this time (default: when the command starts).")
@click.option("--every", default="1m", show_default=True, help="How often to re-evaluate.")
@click.option("--for", "duration", default="30m", show_default=True, help="How long to watch.")
@judging_options
@click.option(
    "--alpha", type=Probability(), default=ALPHA, show_default=True, help="False alarm rate over the whole watch."
)
@click.option(
    "--boundary",
    type=click.Choice(BOUNDARIES),
    default="pocock",
    show_default=True,
    help="How alpha is spent over the looks (docs/compare.md).",
)
@click.option(
    "--replay",
    is_flag=True,
    help="Run the watch on stored events from --from, look k seeing events up to --from + k × --every, without waiting.",
)
@click.option(
    "--profiles",
    metavar="DATASET",
    default=None,
    help="Stack samples of the same cohorts: at a regression, attach their profile-diff (docs/profiles.md).",
)
@data_option
@backend_option
@clickhouse_url_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per evaluation (JSON lines).")
def canary(
    dataset: str,
    baseline: str,
    canary: str,
    start: str | None,
    every: str,
    duration: str,
    alpha: float,
    boundary: str,
    replay: bool,
    profiles: str | None,
    data_dir: Path | None,
    backend: str | None,
    clickhouse_url: str | None,
    as_json: bool,
    **judging: Any,
) -> None:
    """A rollout gate: compare the canary with the baseline every interval, and exit 1 as
    soon as a regression is certain (0 when the watch ends without one).

    Each evaluation opens the store read-only, compares everything since --from and
    closes it, so an ingest can write in between (a look retries while one is writing).
    The false alarm rate is held over the whole watch by a group-sequential boundary
    (docs/compare.md).

    Example: rootsift canary api --baseline 'version = "1.4"' --canary 'version = "1.5"' --every 1m --for 30m
    """
    from rootsift.analysis.canary import began_now, watch
    from rootsift.api import Rootsift, default_data_dir
    from rootsift.ui import findings as view

    try:
        step, total = parse_duration(every), parse_duration(duration)
        if step.total_seconds() <= 0 or total < step:
            raise UsageError(f"--every {every} must be positive and no longer than --for {duration}")
        if replay and not start:
            raise UsageError("--replay needs --from: the time the watch would have started")
        how = judged(**judging)
        engine, url = engine_of(backend, clickhouse_url)
        began = parse_time(start) if start else began_now()
        try:
            began + total
        except OverflowError:
            raise UsageError(f"--for {duration} from {began:%Y-%m-%d} ends after year 9999") from None

        def run(level: float, upto: datetime | None) -> Any:
            with Rootsift(data_dir or default_data_dir(), read_only=True, engine=engine, clickhouse_url=url) as rs:
                return rs.compare(
                    dataset,
                    a=baseline,
                    b=canary,
                    a_from=began,
                    b_from=began,
                    a_to=upto,
                    b_to=upto,
                    alpha=level,
                    **how,
                )

        for look in watch(run, start=began, every=step, total=total, alpha=alpha, boundary=boundary, replay=replay):
            diff = None
            if profiles and look.regressed:
                cohorts = {"a": baseline, "b": canary, "a_from": began, "b_from": began}
                with Rootsift(data_dir or default_data_dir(), read_only=True, engine=engine, clickhouse_url=url) as rs:
                    diff = profile_diff_of(rs, profiles, {**cohorts, "a_to": look.upto, "b_to": look.upto})
            if as_json:
                extra = {"profile_diff": diff.as_dict() if diff else None} if profiles else {}
                emit_json({**look.as_dict(), **extra})
            else:
                seen = f"events to {look.upto:%Y-%m-%d %H:%M:%S}" if look.upto else f"{datetime.now(UTC):%H:%M:%S}"
                out.print(f"[bold]look {look.look} of {look.of}[/bold] ({seen}, level {look.level:.3g})")
                if look.result is not None:
                    view.comparison(out, look.result)
                else:
                    out.print(f"[yellow]skipped: {look.skipped}[/yellow]")
                if diff is not None:
                    from rootsift.cli.profiles import show

                    out.print(f"\n[bold]profile-diff of {profiles}[/bold] (the same cohorts, to this look)")
                    show(diff, 10)
            if look.regressed:
                sys.exit(1)
    except RootsiftError as exc:
        fail(exc, as_json)


def metric_flags(items: tuple[str, ...], flag: str, form: str, value: Callable[[str], Any]) -> dict[str, Any]:
    """``METRIC=VALUE`` flags as a dict; ``value`` converts the text and returns None (or
    raises ValueError) when it is not acceptable, which is a usage error naming the flag."""
    out: dict[str, Any] = {}
    for item in items:
        name, eq, text = item.rpartition("=")
        try:
            got = value(text.strip()) if eq and name.strip() else None
        except ValueError:
            got = None
        if got is None:
            raise UsageError(f"{flag} {item!r} is not {form}")
        out[name.strip()] = got
    return out


def parse_betters(items: tuple[str, ...]) -> dict[str, str]:
    """``METRIC=higher|lower`` flags: which way is better."""
    return metric_flags(
        items, "--better", "METRIC=higher or METRIC=lower", lambda t: t if t in ("higher", "lower") else None
    )


def parse_weights(items: tuple[str, ...]) -> dict[str, float]:
    """``METRIC=W`` flags (a positive number) as the metrics' weights in the score."""
    return metric_flags(
        items,
        "--weight",
        "METRIC=W with W a positive number (e.g. 'p99(duration_ms)=3')",
        lambda t: float(t) if 0 < float(t) < float("inf") else None,
    )


def parse_tolerances(items: tuple[str, ...]) -> dict[str, float]:
    """``METRIC=PCT`` flags (``p99(duration_ms)=10%`` or ``=0.1``) as relative tolerances."""

    def fraction(text: str) -> float | None:
        got = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        return got if got >= 0 else None

    return metric_flags(items, "--tolerance", "METRIC=PCT (e.g. 'p99(duration_ms)=10%')", fraction)
