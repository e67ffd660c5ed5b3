"""rootsift changes: change points on series of the query model, their false-alarm rate on
series without change, suspects ranked by precedence, and the CLI end to end."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rootsift import Rootsift
from rootsift.analysis.changes import detect as det
from rootsift.analysis.changes import suspects as sus
from rootsift.analysis.changes.series import parse_measure
from rootsift.cli import main
from rootsift.errors import QuerySpecError

T0 = datetime(2026, 3, 2)


def no_change(kind: str, n: int, rng: np.random.Generator) -> tuple[np.ndarray, int | None]:
    """A series without change: white noise, AR(1) with rho 0.6, a daily cycle (24 buckets
    a day, four days and more), Student-t tails with 2 degrees of freedom, counts of rare
    events (Poisson, 0.05 a bucket: mostly 0, a value that ties)."""
    if kind == "white":
        return rng.normal(size=n), None
    if kind == "ar1":
        e, x = rng.normal(size=n), np.zeros(n)
        for i in range(n):
            x[i] = 0.6 * x[i - 1] + e[i] if i else e[i]
        return x, None
    if kind == "daily":
        t = np.arange(n)
        return 3 * np.sin(2 * np.pi * t / 24) + rng.normal(size=n), 24
    if kind == "counts":
        return rng.poisson(0.05, n).astype(float), None
    return rng.standard_t(2, size=n), None


@pytest.mark.parametrize("kind", ["white", "ar1", "daily", "heavy", "counts"])
def test_false_alarm_rate_holds_on_series_without_change(kind: str) -> None:
    """Over many seeds, a change point (in level or in spread) is found in at most the
    stated share of no-change series (with the binomial slack of 60 draws: 3 standard errors)."""
    seeds = 60
    found = [det.detect(*no_change(kind, 120, np.random.default_rng(s))) for s in range(seeds)]
    alarms = sum(bool(d.points or d.spread) for d in found)
    rate = det.FALSE_ALARM_RATE
    assert alarms / seeds <= rate + 3 * (rate * (1 - rate) / seeds) ** 0.5


def test_a_planted_step_is_found_at_its_time_with_values_either_side() -> None:
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.lognormal(np.log(300), 0.3, 200), rng.lognormal(np.log(2000), 0.3, 100)])
    found = det.detect(x)
    assert len(found.points) == 1
    (p,) = found.points
    assert abs(p.index - 200) <= 2
    assert 250 < p.before < 350 and 1700 < p.after < 2300
    assert p.effect > 0 and p.p_value < 1e-6


def test_a_step_in_a_count_of_rare_events_is_found() -> None:
    """The test that keeps a spell of tied values from passing as a step still finds a real
    one: errors from 0.05 to 1 a bucket."""
    x = np.r_[np.random.default_rng(7).poisson(0.05, 200), np.random.default_rng(8).poisson(1.0, 100)]
    (p,) = det.detect(x.astype(float)).points
    assert abs(p.index - 200) <= 2 and p.p_value < 1e-6


def test_two_steps_in_heavy_tailed_autocorrelated_noise() -> None:
    rng = np.random.default_rng(3)
    e, noise = rng.standard_t(3, size=600), np.zeros(600)
    for i in range(1, 600):
        noise[i] = 0.4 * noise[i - 1] + e[i]
    x = noise + np.r_[np.zeros(250), np.full(200, 6.0), np.full(150, 2.0)]
    at = sorted(p.index for p in det.detect(x).points)
    assert len(at) == 2 and abs(at[0] - 250) <= 3 and abs(at[1] - 450) <= 3


@pytest.mark.parametrize("seed", range(5))
def test_binseg_makes_ruptures_cuts(seed: int) -> None:
    """The numpy binary segmentation proposes exactly ruptures' Binseg cuts (l2)."""
    ruptures = pytest.importorskip("ruptures")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=300) + np.r_[np.zeros(100), np.full(30, 1.5), np.zeros(70), np.full(100, -1.0)]
    expected = ruptures.Binseg(model="l2", min_size=3, jump=1).fit(x).predict(n_bkps=12)[:-1]
    assert sorted(det.binseg(x, 12, 3)) == expected


def test_a_short_spell_in_the_middle_is_found() -> None:
    """20 raised buckets in the middle of 360 (a 20-minute incident in 6 hours): binary
    segmentation stopped at the first split below the penalty misses it; the penalised
    choice among its first splits finds both edges."""
    rng = np.random.default_rng(2)
    x = rng.lognormal(3, 0.6, 360)
    x[190:210] *= 30
    assert sorted(p.index for p in det.detect(x).points) == [190, 210]


def test_a_change_in_spread_at_equal_level() -> None:
    rng = np.random.default_rng(3)
    x = np.r_[rng.lognormal(3, 0.2, 300), rng.lognormal(3, 0.8, 300)]
    found = det.detect(x)
    assert found.points == []
    (p,) = found.spread
    assert abs(p.index - 300) <= 5 and p.after > 2.5 * p.before and p.p_value < 1e-6


def test_serial_correlation_widens_the_penalty() -> None:
    rng = np.random.default_rng(1)
    white = det.detect(rng.normal(size=400))
    e, ar = rng.normal(size=400), np.zeros(400)
    for i in range(1, 400):
        ar[i] = 0.7 * ar[i - 1] + e[i]
    correlated = det.detect(ar)
    assert correlated.rho > 0.4 > white.rho
    assert correlated.penalty > white.penalty


def test_measure_forms() -> None:
    assert parse_measure("duration_ms").label == "p50(duration_ms)"
    assert parse_measure("count").label == "count"
    assert parse_measure("rate(status >= 500)").rate == "status >= 500"
    with pytest.raises(QuerySpecError, match="--measure"):
        parse_measure("p50(")
    with pytest.raises(QuerySpecError, match="heatmap"):
        parse_measure("heatmap(duration_ms)")


def _event(hours: float, desc: str) -> sus.Event:
    return sus.Event(T0 + timedelta(hours=hours), "deploy", desc, {"service": "api"})


def test_an_event_after_the_onset_is_never_a_cause() -> None:
    """The series steps at bucket 100 (hour 100, hourly buckets); an event at hour 101.5,
    a bucket after the jump, is listed as after, last, with score 0, even though the
    level after it is high; one inside the jump's own bucket is ``at`` (its order cannot
    be told at that resolution); one at hour 99.5 is the top suspect."""
    rng = np.random.default_rng(5)
    times = [T0 + timedelta(hours=i) for i in range(200)]
    values = np.r_[rng.normal(10, 1, 100), rng.normal(20, 1, 100)]
    events = [_event(101.5, "after the jump"), _event(99.5, "just before"), _event(40, "long before")]
    events.append(_event(100.5, "in the bucket"))
    ranked = sus.rank(events, times, values, 100, +1, None)
    assert [s.event.description for s in ranked if s.relation == "after"] == ["after the jump"]
    assert ranked[0].event.description == "just before" and ranked[0].relation == "before"
    assert ranked[-1].relation == "after" and sus.score(ranked[-1]) == 0.0
    assert [s.relation for s in ranked if s.event.description == "in the bucket"] == ["at"]
    causes = [s for s in ranked if s.relation == "before"]
    assert all(s.lead_seconds > 0 for s in causes)


def test_a_step_at_the_event_outranks_a_later_event_inside_the_creep() -> None:
    """The level rises at hour 60 (the cause) and jumps at hour 100: an event at hour 80,
    already inside the raised level, made no step of its own and ranks below."""
    rng = np.random.default_rng(11)
    times = [T0 + timedelta(hours=i) for i in range(160)]
    values = np.r_[rng.normal(10, 1, 60), rng.normal(13, 1, 40), rng.normal(30, 1, 60)]
    ranked = sus.rank([_event(80.2, "decoy"), _event(59.8, "cause")], times, values, 100, +1, None)
    assert [s.event.description for s in ranked] == ["cause", "decoy"]


def test_an_event_at_the_onset_of_a_creep_outranks_one_inside_it() -> None:
    """Two steps up (hour 60, then the jump at hour 100): the event at the first step
    coincides with the shift's onset and ranks first; one inside the creep does not."""
    rng = np.random.default_rng(4)
    times = [T0 + timedelta(hours=i) for i in range(160)]
    values = np.r_[rng.normal(10, 1, 60), rng.normal(14, 1, 40), rng.normal(40, 1, 60)]
    events = [_event(59.5, "onset"), _event(95.2, "inside")]
    ranked = sus.rank(events, times, values, 100, +1, None, [times[60]])
    assert [s.event.description for s in ranked] == ["onset", "inside"]
    assert ranked[0].coincides and not ranked[1].coincides


@pytest.mark.parametrize("elsewhere", [False, True])
def test_exclusivity_is_a_difference_in_differences(elsewhere: bool) -> None:
    """Host b steps up at hour 100, right after a deploy to b (in scope). When the other
    hosts step too (``elsewhere``: a fleet-wide cause), the deploy's exclusivity is about
    0; when they do not, it is many of their spreads, and it lifts the deploy above an
    out-of-scope event at the same time."""
    rng = np.random.default_rng(6)
    times = [T0 + timedelta(hours=i) for i in range(200)]

    def host(step: bool) -> np.ndarray:
        return np.r_[rng.normal(10, 1, 100), rng.normal(20 if step else 10, 1, 100)]

    others = [(times, host(elsewhere)) for _ in range(4)]
    events = [sus.Event(T0 + timedelta(hours=99.5), "deploy", "deploy b", {"host": "b"})]
    events.append(sus.Event(T0 + timedelta(hours=99.5), "config", "config c", {"host": "c"}))
    ranked = sus.rank(events, times, host(True), 100, +1, ("host", "b"), None, others)
    deploy = next(s for s in ranked if s.event.description == "deploy b")
    assert deploy.in_scope and deploy.exclusivity_z is not None
    if elsewhere:
        assert abs(deploy.exclusivity or 0) < 2
    else:
        assert deploy.exclusivity_z > 5 and ranked[0] is deploy
    assert next(s for s in ranked if s.event.description == "config c").exclusivity is None


def _store(data: Path) -> None:
    """A small store: per-minute requests over 6 hours whose latency steps up at 03:00 on
    host b only; change events: a deploy to b at 02:50, a config push at 04:00."""
    rng = np.random.default_rng(2)
    rows = []
    for minute in range(360):
        for host in ("a", "b"):
            for _ in range(4):
                slow = host == "b" and minute >= 180
                ms = rng.lognormal(np.log(900 if slow else 300), 0.2)
                at = T0 + timedelta(minutes=minute, seconds=float(rng.uniform(0, 60)))
                rows.append({"timestamp": at.isoformat() + "Z", "host": host, "duration_ms": round(ms, 2)})
    src = data.parent / "req.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    changes = [
        {"timestamp": "2026-03-02T02:50:00Z", "change.kind": "deploy", "host": "b", "description": "deploy v2 to b"},
        {"timestamp": "2026-03-02T04:00:00Z", "change.kind": "config", "host": "a", "description": "late config"},
    ]
    ev = data.parent / "changes.jsonl"
    ev.write_text("".join(json.dumps(c) + "\n" for c in changes))
    with Rootsift(data) as rs:
        rs.ingest(src, "api")
        rs.ingest(ev, "deploys")


def test_cli_end_to_end_json(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data)
    args = ["changes", "api", "--measure", "p50(duration_ms)", "--by", "host", "--changes", "deploys"]
    run = CliRunner().invoke(main, [*args, "--data", str(data), "--json"])
    assert run.exit_code == 0, run.output
    result = json.loads(run.stdout)
    cps = [f for f in result["findings"] if f["kind"] == "changepoint"]
    assert [(f["field"], f["value"]) for f in cps] == [("host", "b")]
    assert abs(datetime.fromisoformat(cps[0]["time"].rstrip("Z")) - (T0 + timedelta(hours=3))) <= timedelta(minutes=2)
    assert 250 < cps[0]["before"] < 350 and 750 < cps[0]["after"] < 1050
    first = result["findings"][0]
    assert first["kind"] == "suspect" and first["event"] == "deploy v2 to b" and first["relation"] == "before"
    assert "late config" not in [f.get("event") for f in result["findings"] if f["kind"] == "suspect"]
    assert cps[0]["events_after"] == ["late config"]
    assert result["granularity"] == "30s"  # 6 hours over 720 buckets


def test_related_series_that_lead_the_shift(tmp_path: Path) -> None:
    """A metrics dataset: queue_depth on host b steps up at 02:45 (15 minutes before the
    latency shift at 03:00), cpu on host a stays flat: only the first is related, with
    its lead."""
    data = tmp_path / "data"
    _store(data)
    rng = np.random.default_rng(9)
    rows = []
    for minute in range(360):
        at = (T0 + timedelta(minutes=minute)).isoformat() + "Z"
        depth = rng.normal(50 if minute >= 165 else 5, 2)
        rows.append({"timestamp": at, "metric": "queue_depth", "host": "b", "value": round(depth, 2)})
        rows.append({"timestamp": at, "metric": "cpu", "host": "a", "value": round(rng.normal(0.4, 0.05), 3)})
    src = tmp_path / "metrics.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Rootsift(data) as rs:
        rs.ingest(src, "metrics")
        result = rs.changes("api", measure="duration_ms", by="host", related="metrics")
    found = [f for f in result.as_dict()["findings"] if f["kind"] == "related"]
    assert [f["series"] for f in found] == ["avg(value) metric=queue_depth host=b"]
    assert abs(found[0]["lead_seconds"] - 900) <= 60
    assert 4 < found[0]["before"] < 6 and 48 < found[0]["after"] < 52


def test_a_related_change_point_at_an_event_weighs_into_its_ranking(tmp_path: Path) -> None:
    """Host b's latency shifts at 03:00. Two changes on b before it, neither with a step of
    its own in the latency (the shift comes later): a queue limit raised at 02:45 and a
    certificate rotation at 02:52, the nearer one first on the latency alone. queue_depth
    on b steps up at 02:45, at the first: with ``--related`` it ranks first, naming the
    series that moved at it; the rotation names none."""
    data = tmp_path / "data"
    _store(data)
    rng = np.random.default_rng(9)
    rows = []
    for minute in range(360):
        at = (T0 + timedelta(minutes=minute)).isoformat() + "Z"
        depth = rng.normal(50 if minute >= 165 else 5, 2)
        rows.append({"timestamp": at, "metric": "queue_depth", "host": "b", "value": round(depth, 2)})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    changes = [
        {"timestamp": "2026-03-02T02:45:00Z", "change.kind": "config", "host": "b", "description": "raise queue limit"},
        {"timestamp": "2026-03-02T02:52:00Z", "change.kind": "config", "host": "b", "description": "rotate certs"},
    ]
    (tmp_path / "changes2.jsonl").write_text("".join(json.dumps(c) + "\n" for c in changes))
    with Rootsift(data) as rs:
        rs.ingest(tmp_path / "metrics.jsonl", "metrics")
        rs.ingest(tmp_path / "changes2.jsonl", "changes2")
        alone = rs.changes("api", measure="duration_ms", by="host", events="changes2").as_dict()
        both = rs.changes("api", measure="duration_ms", by="host", events="changes2", related="metrics").as_dict()
    assert [f["event"] for f in alone["findings"] if f["kind"] == "suspect"] == ["rotate certs", "raise queue limit"]
    suspects = [f for f in both["findings"] if f["kind"] == "suspect"]
    assert [f["event"] for f in suspects] == ["raise queue limit", "rotate certs"], suspects
    assert suspects[0]["related"] == ["avg(value) metric=queue_depth host=b"] and suspects[0]["related_z"] > 3
    assert suspects[1]["related"] == [] and suspects[0]["score"] > suspects[1]["score"]


def test_sparse_counts_get_buckets_wide_enough(tmp_path: Path) -> None:
    """Events at 0.05/s for 2 hours, stamped to the ms: by the range alone buckets would be
    10 s (0.5 events each, counts of 0 and 1 with no level); they are widened to hold at
    least 5 events on average, and steady traffic shows no change point. With -g 10s the
    sparseness is a warning."""
    rng = np.random.default_rng(8)
    at = np.cumsum(rng.exponential(20.0, 400))
    at = at[at < 7200]
    src = tmp_path / "sparse.jsonl"
    rows = [{"timestamp": (T0 + timedelta(seconds=float(t))).isoformat(timespec="milliseconds") + "Z"} for t in at]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(src, "sparse")
        result = rs.changes("sparse", measure="count")
        assert result.granularity >= timedelta(seconds=100)
        assert result.shifts == []
        assert "sparse" in " ".join(rs.changes("sparse", measure="count", granularity="10s").warnings)


def test_report_is_one_self_contained_file(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data)
    out = tmp_path / "changes.html"
    args = ["changes", "api", "--measure", "duration_ms", "--by", "host", "--changes", "deploys", "--report", str(out)]
    run = CliRunner().invoke(main, [*args, "--data", str(data), "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["report"] == str(out)
    text = out.read_text()
    assert "<svg" in text and "deploy v2 to b" in text and "level change 2026-03-02T03:00" in text
    assert "http://" not in text and "https://" not in text and "<script" not in text
    bad = CliRunner().invoke(main, [*args[:-1], str(tmp_path / "no" / "x.html"), "--data", str(data)])
    assert bad.exit_code == 2 and "--report" in bad.output


def test_cli_terminal_and_errors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _store(data)
    run = CliRunner().invoke(main, ["changes", "api", "--measure", "duration_ms", "--data", str(data)])
    assert run.exit_code == 0, run.output
    assert "changepoint" in run.output and "^" in run.output
    bad = CliRunner().invoke(main, ["changes", "api", "--changes", "deploy", "--data", str(data), "--json"])
    assert bad.exit_code == 2
    assert "deploys" in json.loads(bad.stdout)["error"]["message"]
    bad = CliRunner().invoke(main, ["changes", "api", "--related", "nometrics", "--data", str(data), "--json"])
    assert bad.exit_code == 2 and "--related" in json.loads(bad.stdout)["error"]["message"]
    bad = CliRunner().invoke(main, ["changes", "api", "--measure", "p50(nope)", "--data", str(data), "--json"])
    assert bad.exit_code == 2 and "nope" in json.loads(bad.stdout)["error"]["message"]


def test_the_sparkline_has_columns_of_equal_width() -> None:
    """Each character is the mean of as many buckets as every other (the last of fewer): an
    alternation looks alike all along (columns of 2 and 3 buckets made its first quarter
    alternate and the rest flat, a level shift that is not there)."""
    from rootsift.cli.changes import WIDTH, _spark

    line, per = _spark([120.0 if i % 2 == 0 else 0.0 for i in range(167)])
    assert per == 3 and len(line) == 56 <= WIDTH
    assert len(set(line[0:-1:2])) == 1 and len(set(line[1:-1:2])) == 1 and line[0] != line[1]
    assert _spark([1.0, 2.0, 3.0]) == ("▁▅█", 1)


def test_marks_sit_over_their_buckets_when_the_series_has_gaps(tmp_path: Path) -> None:
    """The terminal's ^ and | are placed by bucket, not by time: a series with a gap (no
    events for two hours, no buckets) shows its step under the step's own column."""
    rng = np.random.default_rng(4)
    rows = []
    for minute in [*range(120), *range(240, 360)]:
        for _ in range(4):
            ms = rng.lognormal(np.log(900 if minute >= 300 else 300), 0.2)
            at = T0 + timedelta(minutes=minute, seconds=float(rng.uniform(0, 60)))
            rows.append({"timestamp": at.isoformat() + "Z", "duration_ms": round(ms, 2)})
    src = tmp_path / "req.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(src, "api")
    args = ["changes", "api", "--measure", "p50(duration_ms)", "-g", "5m", "--data", str(tmp_path / "data")]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0, run.output
    lines = run.output.splitlines()
    spark = next(i for i, line in enumerate(lines) if "▁" in line)
    line, marks = lines[spark], lines[spark + 1]
    assert len(line.strip()) == 48  # 24 buckets either side of the gap
    at = marks.index("^")
    assert line[at] in "▇█" and line[at - 1] in "▁▂"  # under the step's first bucket, after the old level


def test_investigate_ranks_change_events_as_suspects_of_its_onset(tmp_path: Path) -> None:
    """Latency is 4x for two hours (an incident, then a rollback): a deploy 10 minutes before
    the onset is the first suspect; a config push an hour after the onset is listed as
    after, never as a cause; a flag flip two hours before, with nothing changing at it,
    ranks below the deploy."""
    import json as _json
    import random as _random
    from datetime import UTC as _UTC
    from datetime import datetime as _dt
    from datetime import timedelta as _td

    from rootsift import Rootsift

    rng = _random.Random(3)
    t0 = _dt(2026, 5, 1, tzinfo=_UTC)
    onset = t0 + _td(hours=6)
    rows = []
    for i in range(12 * 3600 // 5):
        t = t0 + _td(seconds=5 * i)
        ms = rng.lognormvariate(3, 0.3) * (4 if onset <= t < onset + _td(hours=2) else 1)
        rows.append(_json.dumps({"timestamp": t.isoformat(), "duration_ms": round(ms, 3), "host": f"h{i % 4}"}))
    (tmp_path / "req.jsonl").write_text("\n".join(rows) + "\n")
    events = [
        {"timestamp": (onset - _td(hours=2)).isoformat(), "change": {"kind": "flag"}, "description": "flip flag x"},
        {
            "timestamp": (onset - _td(minutes=10)).isoformat(),
            "change": {"kind": "deploy"},
            "description": "deploy api 2.1",
        },
        {"timestamp": (onset + _td(hours=1)).isoformat(), "change": {"kind": "config"}, "description": "raise pool"},
    ]
    (tmp_path / "changes.jsonl").write_text("\n".join(_json.dumps(e) for e in events) + "\n")
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(tmp_path / "req.jsonl", "req")
        rs.ingest(tmp_path / "changes.jsonl", "deploys")
        result = rs.investigate("req", measure="duration_ms", changes="deploys").as_dict()
    suspects = [f for f in result["findings"] if f["kind"] == "suspect"]
    assert [s["event"] for s in suspects][0] == "deploy api 2.1"
    later = next(s for s in suspects if s["event"] == "raise pool")
    assert later["relation"] == "after" and suspects.index(later) == len(suspects) - 1
    assert {"flip flag x", "deploy api 2.1", "raise pool"} == {s["event"] for s in suspects}


def _turns_store(data: Path, at_handover: bool = False) -> None:
    """Three days of writes, a few a minute, served by whichever server leads: ``slow`` (4x
    the others' latency) leads in recurring turns. A decoy is made 6 minutes into a slow
    turn (a large step at its time); the cause, inside the next slow turn, raises every
    leader's latency 1.5x; 10 hours later latency jumps 5x. ``server`` (where the request
    landed) is spread over every bucket, ``version`` is rolled out once, at the cause.
    ``at_handover``: the slow turn ends 10 minutes before the cause and ``b`` leads from
    then on (the cause lands right after a hand-over)."""
    rng = np.random.default_rng(12)
    turns = [(0, "a"), (5, "slow"), (9, "b"), (14, "c"), (18, "slow"), (22, "a"), (27, "b"), (31, "slow")]
    turns += [(35, "c"), (40, "a"), (44, "slow"), (50.5, "b"), (55, "c"), (58, "slow"), (62, "a"), (66, "b")]
    decoy, cause, jump = 44.1, 48.0, 58.5
    if at_handover:
        turns = [(h, name) if h != 50.5 else (cause - 1 / 6, name) for h, name in turns]

    def leader(hour: float) -> str:
        return [name for start, name in turns if start <= hour][-1]

    rows = []
    for minute in range(72 * 60):
        hour = minute / 60
        scale = (4 if leader(hour) == "slow" else 1) * (1.5 if hour >= cause else 1) * (5 if hour >= jump else 1)
        for _ in range(3):
            at = T0 + timedelta(minutes=minute, seconds=float(rng.uniform(0, 60)))
            row = {"timestamp": at.isoformat() + "Z", "leader": leader(hour), "server": f"s{rng.integers(5)}"}
            row["dc"] = 'east "1"'  # one group under --by dc, a value to quote
            row.update(
                version="v2" if hour >= cause else "v1", duration_ms=round(50 * scale * rng.lognormal(0, 0.25), 2)
            )
            rows.append(row)
    (data.parent / "writes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    changes = [
        {"timestamp": (T0 + timedelta(hours=h)).isoformat() + "Z", "change.kind": "config", "description": d}
        for h, d in [(decoy, "decoy"), (cause, "cause"), (20.3, "early")]
    ]
    (data.parent / "changes.jsonl").write_text("".join(json.dumps(c) + "\n" for c in changes))
    with Rootsift(data) as rs:
        rs.ingest(data.parent / "writes.jsonl", "writes")
        rs.ingest(data.parent / "changes.jsonl", "changes")


@pytest.mark.parametrize("by", [None, "dc"])
def test_a_shift_that_follows_a_host_into_its_turn_is_not_a_change(tmp_path: Path, by: str | None) -> None:
    """The decoy, made at the start of a slow leader's turn, shows the larger step at its
    time; stitched at the leader's hand-overs, the series steps at the cause (inside a turn,
    on every leader) and not at the decoy: the cause is the first suspect. ``leader`` is
    found as the regime; ``server`` (spread over every bucket) and ``version`` (rolled out
    once) are not. The same per group (``--by``: the group's events are read through a
    filter naming it, quoted)."""
    data = tmp_path / "data"
    _turns_store(data)
    with Rootsift(data) as rs:
        found = rs.changes("writes", measure="p50(duration_ms)", by=by, events="changes", granularity="10m")
        result = found.as_dict()
    assert result["method"]["regime"]["field"] == "leader"
    suspects = [f for f in result["findings"] if f["kind"] == "suspect"]
    assert suspects[0]["event"] == "cause" and suspects[0]["regime"] == "leader", suspects
    assert not result["warnings"]
    decoy = next(s for s in suspects if s["event"] == "decoy")
    assert decoy["score"] < suspects[0]["score"]


@pytest.mark.parametrize("command", ["changes", "investigate"])
def test_a_change_made_right_after_a_hand_over_keeps_its_step(tmp_path: Path, command: str) -> None:
    """The cause lands 10 minutes after a slow turn hands over to ``b``: a jump measured at
    the hand-over (stitching) held the cause's 1.5x too and took it out with the slow
    leader's; each holder's level read over all of its turns keeps it, so the cause is
    still the first suspect, ahead of the decoy made at the start of the slow turn."""
    data = tmp_path / "data"
    _turns_store(data, at_handover=True)
    with Rootsift(data) as rs:
        if command == "changes":
            result = rs.changes("writes", measure="p50(duration_ms)", events="changes", granularity="10m").as_dict()
            assert result["method"]["regime"]["field"] == "leader"
        else:
            result = rs.investigate("writes", measure="duration_ms", changes="changes").as_dict()
    suspects = [f for f in result["findings"] if f["kind"] == "suspect"]
    assert suspects[0]["event"] == "cause" and suspects[0]["regime"] == "leader", suspects
    decoy = next(s for s in suspects if s["event"] == "decoy")
    # ranked by its own step, not by a tie of nothing (stitched, the cause's step was negative)
    assert suspects[0]["p_value"] < 1e-3 and suspects[0]["score"] > decoy["score"], suspects


def test_a_regime_recurs_holds_each_bucket_and_moves_the_level() -> None:
    """``judge`` takes a field that alternates and moves the level at its switches; not one
    rolled out once, not one spread over each bucket, not one whose switches move nothing."""
    from rootsift.analysis.changes import regimes as reg

    rng = np.random.default_rng(1)
    modes = [
        name for name, n in zip("abacabacab", [30, 20, 25, 30, 20, 25, 30, 20, 25, 30], strict=True) for _ in range(n)
    ]
    level = np.array([3.0 if m == "b" else 1.0 for m in modes])
    values = np.exp(level + rng.normal(0, 0.1, len(modes)))
    full = np.ones(len(modes))
    assert reg.judge("leader", values, modes, full) is not None
    assert reg.judge("leader", np.exp(rng.normal(0, 0.1, len(modes))), modes, full) is None  # no jump at switches
    assert reg.judge("leader", values, modes, np.full(len(modes), 0.4)) is None  # spread over each bucket
    once = ["v1"] * 130 + ["v2"] * 125
    assert reg.judge("version", values, once, full) is None
    regime = reg.judge("leader", values, modes, full)
    assert regime is not None and regime.switches == 9
    for event in (10, 30, 31):  # stitched around an event inside a turn, in a switch's bucket, just after it
        stitched = regime.stitched_around(values, event, 51)
        assert np.ptp(np.log(stitched)) < 1.0 < np.ptp(np.log(values))
    assert regime.at_switch(30) and regime.at_switch(31) and not regime.at_switch(15)  # a's turn ends at 30


def test_holder_levels_are_read_before_the_shift() -> None:
    """An event in the last bucket of a slow holder's turn, the next holder fast: the jump
    at that switch cannot be read beside the event, so it comes from the holders' own
    levels, and those are read before the shift. Holder ``c`` (as fast as ``a``) leads
    through the incident, ten times slower than before or after it: over the whole series
    its own level is mostly the incident's, and the stitched series would fall at the
    event by that much; read before the shift, it stays level there."""
    from rootsift.analysis.changes import regimes as reg

    rng = np.random.default_rng(3)
    turns = [("a", 30), ("b", 20), ("a", 25), ("c", 20), ("a", 30), ("b", 20), ("c", 25), ("a", 20)]
    turns += [("c", 60), ("a", 40), ("b", 20), ("a", 40)]  # c leads the incident, then it is over
    modes = [name for name, n in turns for _ in range(n)]
    own = {"a": 0.0, "b": 1.5, "c": 0.0}
    shift = sum(n for _, n in turns[:8])
    level = np.array([own[m] + (np.log(10.0) if shift <= i < shift + 60 else 0.0) for i, m in enumerate(modes)])
    values = np.exp(4.0 + level + rng.normal(0, 0.05, len(modes)))
    regime = reg.judge("leader", values, modes, np.ones(len(modes)))
    assert regime is not None
    event = sum(n for _, n in turns[:6]) - 1  # the last bucket of b's second turn; c's turn follows
    assert modes[event] == "b" and modes[event + 1] == "c"
    around, day = slice(event - 8, event + 9), 145  # a day's window, longer than the incident
    kept = np.log(regime.stitched_around(values, event, day, until=shift))[around]
    whole = np.log(regime.stitched_around(values, event, day))[around]
    assert np.ptp(kept) < 0.5 < 1.5 < np.ptp(whole)


def test_a_change_of_slope_is_a_slope_finding_at_the_kink(tmp_path: Path) -> None:
    """A disk filling by about 1 MB a minute, then 5 MB a minute from 03:00 (a random walk
    around each slope): the CLI's JSON has a ``slope`` change point at the kink, before/after
    the increments per bucket, and no level steps; the terminal marks it with ``/``."""
    rng = np.random.default_rng(4)
    used = 1000 + np.cumsum(np.where(np.arange(360) >= 180, 5.0, 1.0) + rng.normal(0, 1, 360))
    rows = [
        {"timestamp": (T0 + timedelta(minutes=m)).isoformat() + "Z", "disk_mb": round(float(v), 3)}
        for m, v in enumerate(used)
    ]
    (tmp_path / "disk.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(tmp_path / "disk.jsonl", "disk")
    args = ["changes", "disk", "--measure", "avg(disk_mb)", "-g", "1m", "--data", str(data)]
    run = CliRunner().invoke(main, [*args, "--json"])
    assert run.exit_code == 0, run.output
    cps = [f for f in json.loads(run.stdout)["findings"] if f["kind"] == "changepoint"]
    assert [f["aspect"] for f in cps] == ["slope"], cps
    assert abs(datetime.fromisoformat(cps[0]["time"].rstrip("Z")) - (T0 + timedelta(hours=3))) <= timedelta(minutes=2)
    assert 0.5 < cps[0]["before"] < 1.5 and 4.5 < cps[0]["after"] < 5.5 and cps[0]["p_value"] < 1e-6
    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0 and "/" in text.output.splitlines()[3] and "slope per bucket" in text.output


def test_a_change_of_slope_has_suspects(tmp_path: Path) -> None:
    """The disk of the slope test, with change events: a debug-logging flag a minute
    before the kink, a config push two hours before it, a deploy an hour after it. The
    first finding is the flag, as a suspect of the slope change point, by its step (judged
    on the increments: they step up right after it); the deploy is ``after``."""
    rng = np.random.default_rng(4)
    used = 1000 + np.cumsum(np.where(np.arange(360) >= 180, 5.0, 1.0) + rng.normal(0, 1, 360))
    rows = [
        {"timestamp": (T0 + timedelta(minutes=m)).isoformat() + "Z", "disk_mb": round(float(v), 3)}
        for m, v in enumerate(used)
    ]
    (tmp_path / "disk.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    changes = [
        {"timestamp": (T0 + timedelta(minutes=m)).isoformat() + "Z", "change.kind": k, "description": d}
        for m, k, d in [
            (60, "config", "rotate logs hourly"),
            (179, "flag", "debug logging on"),
            (240, "deploy", "api 2.2"),
        ]
    ]
    (tmp_path / "changes.jsonl").write_text("".join(json.dumps(c) + "\n" for c in changes))
    with Rootsift(tmp_path / "data") as rs:
        rs.ingest(tmp_path / "disk.jsonl", "disk")
        rs.ingest(tmp_path / "changes.jsonl", "changes")
        result = rs.changes("disk", measure="avg(disk_mb)", granularity="1m", events="changes").as_dict()
    first = result["findings"][0]
    assert first["kind"] == "suspect" and first["event"] == "debug logging on", [
        {k: f.get(k) for k in ("event", "step_z", "coincides_with_onset", "relation", "time", "onset")}
        for f in result["findings"][:3]
    ]
    decoy = next(f for f in result["findings"] if f.get("event") == "rotate logs hourly")
    assert first["relation"] in ("before", "at") and first["score"] > decoy["score"] + 1, first
    slope = next(f for f in result["findings"] if f["kind"] == "changepoint")
    assert slope["aspect"] == "slope" and slope["suspects"][0] == "debug logging on"
    assert "api 2.2" in slope["events_after"] and "api 2.2" not in slope["suspects"]


def test_investigate_ranks_its_onset_suspects_on_the_series_stitched_at_hand_overs(tmp_path: Path) -> None:
    """``investigate --changes`` on the leader-turns store: on the raw series the decoy (made
    at the start of a slow leader's turn) shows the larger step; stitched at the leader's
    hand-overs, as ``changes`` does, the cause ranks first and the suspects name the regime."""
    data = tmp_path / "data"
    _turns_store(data)
    with Rootsift(data) as rs:
        result = rs.investigate("writes", measure="duration_ms", changes="changes").as_dict()
    suspects = [f for f in result["findings"] if f["kind"] == "suspect"]
    assert [s["event"] for s in suspects][:2] == ["cause", "decoy"], suspects
    assert suspects[0]["regime"] == "leader" and suspects[0]["score"] > suspects[1]["score"]
