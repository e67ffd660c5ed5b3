"""trends: the fit's calibration over many seeded series (cycles and random walks are not
leaks, planted leaks are found, time to exhaustion within its interval), and the command
end to end on a small fleet (the leaking part, the separating label, the limit)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats as sps

from rootsift import Rootsift
from rootsift.analysis.trends.exhaustion import time_to_limit
from rootsift.analysis.trends.fitting import fit
from rootsift.cli import main

HOURS_30D = np.arange(240) * 3.0  # 30 days of 3-hour means (5-minute samples, bucketed)
SEEDS = range(200)
NULL_SEEDS = range(400)
ALPHA = 0.05

Series = Callable[[np.random.Generator, np.ndarray], np.ndarray]


def ar1(rng: np.random.Generator, n: int, phi: float, sd: float = 1.0) -> np.ndarray:
    e = np.zeros(n)
    shocks = rng.normal(0, sd, n)
    for k in range(1, n):
        e[k] = phi * e[k - 1] + shocks[k]
    return e


NO_LEAK: dict[str, Series] = {
    "diurnal load": lambda r, t: 10 * np.sin(2 * np.pi * (t + r.uniform(0, 24)) / 24) + r.normal(0, 1, t.size),
    "weekly and daily": lambda r, t: (
        8 * np.sin(2 * np.pi * (t + r.uniform(0, 168)) / 168) + 3 * np.sin(2 * np.pi * t / 24) + r.normal(0, 1, t.size)
    ),
    "GC sawtooth": lambda r, t: 5 * np.mod(t + r.uniform(0, 7), 7.0) + r.normal(0, 1, t.size),
    "nightly cron": lambda r, t: np.where(np.mod(t, 24) < 3, 20.0, 0.0) + r.normal(0, 1, t.size),
    "autocorrelated noise": lambda r, t: ar1(r, t.size, 0.8),
    "random walk": lambda r, t: np.cumsum(r.normal(0, 1, t.size)),
}


@pytest.mark.parametrize("kind", list(NO_LEAK))
def test_no_leak_is_flagged_at_most_five_percent(kind: str) -> None:
    """Cycles (diurnal, weekly, GC, cron), autocorrelated noise and random walks: at most
    5 % of 400 seeded series have a significant, visible trend at alpha 0.05."""
    flagged = sum(
        fit(HOURS_30D, NO_LEAK[kind](np.random.default_rng([7, s]), HOURS_30D)).trending(ALPHA) for s in NULL_SEEDS
    )
    if kind == "random walk":
        # a random walk's drift is tested exactly (Student's t on its steps): it is flagged
        # at the nominal 5 % (4.8 % over 4,000 seeds), so 400 seeds may show a little more;
        # what must hold is that the rate is not above 5 % (one-sided binomial test, 1 %)
        assert sps.binomtest(flagged, len(NULL_SEEDS), ALPHA, alternative="greater").pvalue > 0.01
    else:
        assert flagged / len(NULL_SEEDS) <= 0.05


def test_cycles_are_removed_before_the_test() -> None:
    """A strong daily cycle on top of a small leak: the fit names the cycle it removed and
    still finds the leak; without enough days the cycle is left alone."""
    rng = np.random.default_rng(3)
    y = 0.02 * HOURS_30D + 10 * np.sin(2 * np.pi * HOURS_30D / 24) + rng.normal(0, 1, HOURS_30D.size)
    f = fit(HOURS_30D, y)
    assert "daily" in f.seasons and f.trending(ALPHA)
    assert abs(f.slope - 0.02) < 0.005
    short = fit(HOURS_30D[:16], y[:16])  # two days
    assert short.seasons == []


@pytest.mark.parametrize(
    ("name", "noise"),
    [
        ("white noise", lambda r, t: r.normal(0, 1, t.size)),
        ("autocorrelated noise and a daily cycle", lambda r, t: ar1(r, t.size, 0.6) + 5 * np.sin(2 * np.pi * t / 24)),
    ],
)
def test_planted_leaks_are_found(name: str, noise: Series) -> None:
    """A leak of 0.03 a hour (21.6 over 30 days, about 10 noise deviations) is flagged in
    at least 90 % of seeds."""
    found = sum(
        fit(HOURS_30D, 0.03 * HOURS_30D + noise(np.random.default_rng([11, s]), HOURS_30D)).trending(ALPHA)
        for s in SEEDS
    )
    assert found / len(SEEDS) >= 0.9


def test_slope_is_theil_sen() -> None:
    """Without cycles to remove (two days), the slope is scipy's Theil–Sen estimate."""
    rng = np.random.default_rng(5)
    t = np.arange(40) * 1.0
    y = 3.0 - 0.4 * t + rng.standard_t(2, t.size)
    assert fit(t, y).slope == pytest.approx(sps.theilslopes(y, t)[0])


@pytest.mark.parametrize(("n", "step", "phi"), [(240, 3.0, 0.0), (240, 3.0, 0.6), (112, 12.0, 0.5)])
def test_time_to_exhaustion_is_within_its_interval(n: int, step: float, phi: float) -> None:
    """Planted leaks of known slope toward a limit: the time the true line reaches it lies
    within the stated 95 % interval in at least 90 % of 200 seeds."""
    t = np.arange(n) * step
    inside = 0
    for s in SEEDS:
        rng = np.random.default_rng([13, s])
        slope = rng.uniform(0.005, 0.05)
        y = 100 - slope * t + 2 * ar1(rng, n, phi) + 5 * np.sin(2 * np.pi * t / 24)
        truth = (100 - slope * t[-1] - 20.0) / slope
        x = time_to_limit(fit(t, y), 20.0, horizon_hours=1e9)
        assert x.low is not None and x.high is not None
        inside += x.low <= truth <= x.high
    assert inside / len(SEEDS) >= 0.9


def test_flat_series_is_not_within_the_horizon() -> None:
    rng = np.random.default_rng(2)
    x = time_to_limit(fit(HOURS_30D, 50 + rng.normal(0, 1, HOURS_30D.size)), 0.0, horizon_hours=90 * 24)
    assert x.status in ("beyond", "away") and x.hours is None
    assert x.as_dict()["days"] is None


def test_a_limit_already_passed_is_reached() -> None:
    f = fit(HOURS_30D, 10 + 0.1 * HOURS_30D)
    assert time_to_limit(f, 30.0, horizon_hours=1e9).status == "reached"
    assert time_to_limit(f, 200.0, horizon_hours=1e9).status == "within"


# --- end to end: a small fleet --------------------------------------------------------

START = datetime(2026, 1, 5, tzinfo=UTC)
GIB = 1 << 30


def fleet(path: Path, hosts: int = 12, days: int = 21) -> Path:
    """Hosts every 30 min: on kernel 5.0 ``slab_bytes`` grows (and available memory falls),
    on 5.3 it is flat; page cache cycles daily on every host, and shrinks a little where
    the slab grows. Half the hosts on each kernel."""
    rng = np.random.default_rng(1)
    lines = []
    for h in range(hosts):
        leaking = h % 2 == 0
        rate = rng.uniform(0.02, 0.04) * GIB if leaking else 0.0  # per hour
        for k in range(days * 48):
            hours = k / 2
            slab = GIB + rate * hours + rng.normal(0, 0.05) * GIB
            cache = 20 * GIB + 2 * GIB * np.sin(2 * np.pi * hours / 24) - 0.2 * rate * hours + rng.normal(0, 0.3) * GIB
            anon = 30 * GIB + rng.normal(0, 1) * GIB
            total = 64 * GIB
            lines.append(
                json.dumps(
                    {
                        "timestamp": (START + timedelta(hours=hours)).isoformat(),
                        "host": f"h{h}",
                        "kernel": "5.0" if leaking else "5.3",
                        "region": ["eu", "us"][h // 6 % 2],
                        "slab_bytes": slab,
                        "cache_bytes": cache,
                        "anon_bytes": anon,
                        "total_bytes": total,
                        "available_bytes": total - slab - anon,
                    }
                )
            )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def fleet_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    with Rootsift(data) as rs:
        rs.ingest(fleet(tmp_path / "fleet.jsonl"), dataset="fleet")
    return data


def run(data: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["trends", "fleet", *args, "--data", str(data), "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_fleet_leak_part_cohort_and_exhaustion(fleet_data: Path) -> None:
    code, out = run(
        fleet_data,
        *("--measure", "avg(available_bytes)", "--parts", "cache_bytes,anon_bytes,slab_bytes"),
        *("--limit", "8e9"),
    )
    assert code == 0, out
    kinds = [f["kind"] for f in out["findings"]]
    assert kinds[0] == "trend" and {"component", "cohort", "exhaustion"} <= set(kinds)
    leaking = {f["series"] for f in out["findings"] if f["kind"] == "trend"}
    assert leaking == {f"h{h}" for h in range(0, 12, 2)}
    parts = [f for f in out["findings"] if f["kind"] == "component"]
    assert parts[0]["field"] == "slab_bytes" and parts[0]["share"] > 0.8 and parts[0]["relation"] == "consumes"
    assert parts[-1]["field"] == "cache_bytes" and parts[-1]["share"] < 0  # it shrinks: not the leak
    cohort = next(f for f in out["findings"] if f["kind"] == "cohort")
    assert (cohort["field"], cohort["value"], cohort["significant"]) == ("kernel", "5.0", True)
    assert cohort["trending_with_value"] == 6 and cohort["others_with_value"] == 0
    assert all(f["field"] != "region" for f in out["findings"] if f["kind"] == "cohort" and f["significant"])
    soon = [f for f in out["findings"] if f["kind"] == "exhaustion"]
    assert soon and all(f["status"] in ("within", "reached") for f in soon)
    assert {f["series"] for f in soon} <= leaking
    assert out["chart"]["series"] in leaking and out["chart"]["limit"] == 8e9


def test_every_numeric_field_without_a_measure(fleet_data: Path) -> None:
    """No --measure: every numeric field that varies is fitted; slab and available trend
    on half the hosts, the constant total is left out."""
    code, out = run(fleet_data)
    assert code == 0, out
    fields = {f["field"]: f for f in out["findings"] if f["kind"] == "trend"}
    assert fields["slab_bytes"]["groups_trending"] == 6 and fields["slab_bytes"]["direction"] == "rising"
    assert fields["available_bytes"]["direction"] == "falling"
    assert "total_bytes" not in fields


def test_limit_field_and_one_series(fleet_data: Path) -> None:
    """--limit names a field (each series' median of it); --by none fits one series."""
    code, out = run(fleet_data, "--measure", "slab_bytes", "--limit", "total_bytes", "--by", "none")
    assert code == 0, out
    assert out["by"] is None and len(out["series"]) == 1
    (x,) = [f for f in out["findings"] if f["kind"] == "exhaustion"]
    assert x["limit"] == pytest.approx(64 * GIB, rel=1e-5) and x["limit_field"] == "total_bytes"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--measure", "avg(nope)"), "--measure: unknown field 'nope'"),
        (("--measure", "slab_bytes", "--parts", "cache_bytes,"), "--parts"),
        (("--measure", "slab_bytes", "--parts", "kernel"), "--parts 'kernel' holds varchar values"),
        (("--parts", "slab_bytes"), "--parts needs --measure"),
        (("--by", "hots"), "did you mean 'host'"),
        (("--measure", "slab_bytes", "--limit", "total_byte"), "--limit: unknown field"),
        (("--measure", "heatmap(slab_bytes)"), "--measure heatmap(slab_bytes)"),
    ],
)
def test_usage_errors_name_the_flag(fleet_data: Path, args: tuple[str, ...], says: str) -> None:
    code, out = run(fleet_data, *args)
    assert code == 2
    assert says in out["error"]["message"]


def test_terminal_output_draws_the_worst_series(fleet_data: Path) -> None:
    result = CliRunner().invoke(
        main, ["trends", "fleet", "--measure", "slab_bytes", "--limit", "total_bytes", "--data", str(fleet_data)]
    )
    assert result.exit_code == 0, result.output
    assert "kernel = 5.0" in result.output
    assert "═" in result.output and "• samples, ─ trend" in result.output


@pytest.mark.parametrize("n", [4, 8, 12, 15])
def test_exact_kendall_matches_scipy(n: int) -> None:
    """The block test's exact p (Mahonian counts) is scipy's exact Kendall tau p."""
    from rootsift.analysis.trends.fitting import _kendall_exact, _pairs

    rng = np.random.default_rng(n)
    for _ in range(10):
        x = rng.normal(size=n)
        i, j = _pairs(n)
        s = int(np.sign(x[j] - x[i]).sum())
        expected = sps.kendalltau(np.arange(n), x, method="exact").pvalue
        assert (_kendall_exact(n, abs(s)) if s else 1.0) == pytest.approx(expected, abs=1e-12)


def test_report_is_one_self_contained_file(fleet_data: Path, tmp_path: Path) -> None:
    """--report writes the worst series as SVG (samples, trend, limit), the parts' shares
    and the findings, with nothing loaded from the network; a missing folder is a usage
    error naming --report, before anything runs."""
    out = tmp_path / "trends.html"
    code, found = run(
        fleet_data, "--measure", "available_bytes", "--parts", "cache_bytes,anon_bytes,slab_bytes",
        "--limit", "8e9", "--report", str(out),
    )  # fmt: skip
    assert code == 0 and found["report"] == str(out)
    text = out.read_text()
    assert text.count("<svg") == 2 and "<circle" in text and "stroke-dasharray" in text
    assert "kernel = 5.0" in text and "slab_bytes" in text
    assert "<script" not in text and not re.search(r"""(src|href)=["']?https?:""", text)
    code, found = run(fleet_data, "--measure", "available_bytes", "--report", str(tmp_path / "absent" / "r.html"))
    assert code == 2 and "--report" in found["error"]["message"]


def test_flat_fleet_is_not_within_the_horizon(fleet_data: Path) -> None:
    """No host's anonymous memory trends: one exhaustion finding says the limit is not
    reached within the horizon (no date), and no trend is claimed."""
    code, out = run(fleet_data, "--measure", "anon_bytes", "--limit", "0", "--horizon", "30d")
    assert code == 0, out
    assert not [f for f in out["findings"] if f["kind"] == "trend"]
    (x,) = [f for f in out["findings"] if f["kind"] == "exhaustion"]
    assert x["status"] in ("beyond", "away") and x["days"] is None and x["horizon_days"] == 30
