"""A standing retention (``rootsift retention DATASET --keep 7d --standing``): on a ClickHouse
server the table's TTL, so the server goes on deleting old days by itself between
commands. Run against the test run's live server (helpers/backends.py): what is measured
is the server's own doing (its background merges dropping expired parts), by the real clock.
DuckDB and chdb, whose engines stop with the command, refuse it before deleting anything."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from helpers.backends import cli_env, needs_chdb, needs_clickhouse, opened
from helpers.store import iso, write_jsonl
from rootsift.cli import main

HOURS = 240
"""Events an hour apart reaching back ten days from now."""


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _hourly(start: datetime, hours: range, service: str) -> list[dict[str, Any]]:
    return [{"timestamp": iso(start - timedelta(hours=h)), "duration_ms": float(h), "service": service} for h in hours]


def _cli(engine: str, data: Path, *args: str) -> Result:
    return CliRunner(env=cli_env(engine, data)).invoke(main, [*args, "--data", str(data)])


def _count(engine: str, data: Path, service: str) -> int:
    done = _cli(engine, data, "query", "api", "-c", "count", "--where", f'service = "{service}"', "--json")
    assert done.exit_code == 0, done.output
    rows = json.loads(done.output)["rows"]
    return int(rows[0][0] or 0) if rows else 0


def _until(predicate: Any, seconds: float = 20.0) -> bool:
    """Poll ``predicate`` until it holds or ``seconds`` pass (the server's merges are its own)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return bool(predicate())


@needs_clickhouse
def test_a_standing_retention_is_the_servers_ttl_and_it_deletes_by_itself(tmp_path: Path) -> None:
    data, start = tmp_path / "data", _now()
    rows = _hourly(start, range(HOURS), "api")
    assert _cli("clickhouse", data, "ingest", str(write_jsonl(tmp_path / "e.jsonl", rows)), "-d", "api").exit_code == 0
    shown = _cli("clickhouse", data, "retention", "api")
    assert shown.exit_code == 0 and "api has no standing retention" in shown.output

    dry = _cli("clickhouse", data, "retention", "api", "--keep", "3d", "--standing", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["standing"] is None  # a dry run sets nothing
    assert json.loads(dry.output)["would_set_standing"] == {"keep_seconds": 3 * 86400, "keep": "3d"}

    done = _cli("clickhouse", data, "retention", "api", "--keep", "3d", "--standing", "--json")
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    cutoff = iso(datetime.fromisoformat(result["cutoff"].removesuffix("Z")))
    assert result["deleted_events"] == sum(r["timestamp"] < cutoff for r in rows)  # exact now, at the cutoff
    assert result["standing"] == {
        "ttl": "toDateTime(timestamp) + toIntervalSecond(259200)",
        "keep_seconds": 259200,
        "keep": "3d",
    }
    with opened(data, "clickhouse") as rs:
        ddl = (
            rs.backend.run(
                "SELECT engine_full FROM system.tables WHERE database = {db:String} AND name = 'api'",
                {"db": rs.backend.database},
            )
            .column(0)[0]
            .as_py()
        )
    assert "TTL toDateTime(timestamp) + toIntervalSecond(259200)" in ddl and "ttl_only_drop_parts = 1" in ddl

    # events older than the keep, ingested afterwards: rootsift says so, the server deletes them
    old = _hourly(start, range(100, 150), "old")  # 4 to 6 days ago: three whole days past the keep
    ingested = _cli("clickhouse", data, "ingest", str(write_jsonl(tmp_path / "old.jsonl", old)), "-d", "api")
    assert ingested.exit_code == 0, ingested.output
    assert "50 of these events are older than api's standing retention (3d)" in ingested.output
    assert _until(lambda: _count("clickhouse", data, "old") == 0)
    assert _count("clickhouse", data, "api") == HOURS - result["deleted_events"]  # the kept days untouched

    removed = _cli("clickhouse", data, "retention", "api", "--remove-standing", "--json")
    assert removed.exit_code == 0, removed.output
    assert json.loads(removed.output)["removed"]["keep"] == "3d" and json.loads(removed.output)["standing"] is None
    again = _cli("clickhouse", data, "ingest", str(write_jsonl(tmp_path / "old2.jsonl", old)), "-d", "api")
    assert again.exit_code == 0 and "standing retention" not in again.output
    time.sleep(1.0)  # deletion on arrival takes milliseconds on this server: it would have happened
    assert _count("clickhouse", data, "old") == len(old)


@needs_clickhouse
def test_setting_a_standing_retention_expires_the_days_already_stored(tmp_path: Path) -> None:
    """Parts written before the TTL carry no TTL bounds: setting it recomputes them, so the
    server drops days already past the keep without rootsift deleting anything."""
    data = tmp_path / "data"
    rows = _hourly(_now(), range(HOURS), "api")
    with opened(data, "clickhouse") as rs:
        rs.ingest(write_jsonl(tmp_path / "e.jsonl", rows), "api")
        rs.backend.set_standing_retention("api", timedelta(days=3))
        # the days wholly past the keep go; the day the cutoff cuts stays until all of it is older
        left = lambda: rs.events("api")  # noqa: E731
        assert _until(lambda: left() < HOURS)
        cutoff = iso(_now() - timedelta(days=3))
        oldest_kept_day = cutoff[:10]
        expected = sum(r["timestamp"][:10] >= oldest_kept_day for r in rows)
        assert _until(lambda: left() == expected)


@pytest.mark.parametrize("engine", ["duckdb", pytest.param("chdb", marks=needs_chdb)])
def test_an_embedded_store_refuses_a_standing_retention_before_deleting_anything(engine: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    rows = _hourly(_now(), range(HOURS), "api")
    assert _cli(engine, data, "ingest", str(write_jsonl(tmp_path / "e.jsonl", rows)), "-d", "api").exit_code == 0
    refused = _cli(engine, data, "retention", "api", "--keep", "3d", "--standing")
    assert refused.exit_code == 2
    assert "--standing: a standing retention needs a ClickHouse server" in refused.output
    assert _count(engine, data, "api") == HOURS  # nothing deleted
    shown = _cli(engine, data, "retention", "api", "--json")
    assert shown.exit_code == 0 and json.loads(shown.output) == {"dataset": "api", "standing": None}


def test_the_retention_flags_that_do_not_go_together_are_usage_errors(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_jsonl(tmp_path / "e.jsonl", _hourly(_now(), range(3), "api"))
    assert _cli("duckdb", data, "ingest", str(tmp_path / "e.jsonl"), "-d", "api").exit_code == 0
    for args, words in [
        (["--standing"], "--standing needs --keep"),
        (["--dry-run"], "--dry-run needs --keep"),
        (["--remove-standing", "--keep", "3d"], "--remove-standing deletes nothing and takes no --keep"),
    ]:
        done = _cli("duckdb", data, "retention", "api", *args)
        assert done.exit_code == 2 and words in done.output, (args, done.output)
    unknown = _cli("duckdb", data, "retention", "nope")
    assert unknown.exit_code != 0 and "no dataset named 'nope'" in unknown.output
