"""The chdb backend's tables as ClickHouse keeps them: one partition a UTC day, and
retention that drops whole days, rewrites only the day its cutoff cuts, and gives the
disk back before it returns (ADR 0022's amendment); no dropped table left on disk."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from helpers.backends import needs_chdb
from helpers.store import iso, write_jsonl
from rootsift import QuerySpec, Rootsift
from rootsift.store.chdb_writer import shape

pytestmark = needs_chdb

T0 = datetime(2024, 6, 1)
DAYS = 10
PER_DAY = 400


def _rows(days: int = DAYS, per_day: int = PER_DAY) -> list[dict[str, Any]]:
    step = timedelta(days=1) / per_day
    return [
        {"timestamp": iso(T0 + k * step), "duration_ms": float(k % 97), "service": ["api", "db"][k % 2]}
        for k in range(days * per_day)
    ]


def _parts(rs: Rootsift, dataset: str) -> list[tuple[str, str, str, int]]:
    """(partition ID, part name, part path, rows) of the dataset's active parts."""
    backend: Any = rs.backend
    sql = (
        "SELECT partition_id, name, path, rows FROM system.parts "
        "WHERE database = 'rootsift' AND table = {t:String} AND active ORDER BY partition_id, name"
    )
    return [(r["partition_id"], r["name"], r["path"], r["rows"]) for r in backend.run(sql, {"t": dataset}).to_pylist()]


def _left_behind(rs: Rootsift, dataset: str) -> list[str]:
    """Part directories on disk under the table that hold rows but are no active part
    (what a retention that does not give the disk back leaves)."""
    backend: Any = rs.backend
    sql = "SELECT name, active, rows FROM system.parts WHERE database = 'rootsift' AND table = {t:String}"
    kept = {r["name"] for r in backend.run(sql, {"t": dataset}).to_pylist() if r["active"] or not r["rows"]}
    sql = "SELECT data_paths FROM system.tables WHERE database = 'rootsift' AND name = {t:String}"
    (paths,) = backend.run(sql, {"t": dataset}).column("data_paths").to_pylist()
    on_disk = [d.name for root in paths for d in Path(root).iterdir() if d.is_dir() and d.name != "detached"]
    assert on_disk  # the layout this reads is ClickHouse's: a directory a part
    return sorted(set(on_disk) - kept)


def test_a_dataset_is_partitioned_by_day_and_an_input_may_span_many(tmp_path: Path) -> None:
    rows = _rows(days=150, per_day=4)  # past ClickHouse's 100 partitions in one insert block
    with Rootsift(tmp_path / "data", engine="chdb") as rs:
        assert rs.ingest(write_jsonl(tmp_path / "e.jsonl", rows), dataset="api").events == len(rows)
        backend: Any = rs.backend
        key = backend.run("SELECT partition_key FROM system.tables WHERE name = 'api'").column(0).to_pylist()
        assert key == ["toDate(timestamp)"]
        assert {p[0] for p in _parts(rs, "api")} == {(T0 + timedelta(days=d)).strftime("%Y%m%d") for d in range(150)}


def test_retention_drops_whole_days_rewrites_the_cut_day_and_gives_the_disk_back(tmp_path: Path) -> None:
    rows = _rows()
    cutoff = T0 + timedelta(days=4, hours=12)
    kept = [r for r in rows if r["timestamp"] >= iso(cutoff)]
    now = (cutoff + timedelta(days=7)).replace(tzinfo=UTC)
    with Rootsift(tmp_path / "data", engine="chdb") as rs:
        rs.ingest(write_jsonl(tmp_path / "e.jsonl", rows), dataset="api")
        before = _parts(rs, "api")
        dry = rs.retention("api", timedelta(days=7), now, dry_run=True)
        assert dry["would_delete_events"] == len(rows) - len(kept)
        assert 0 < dry["would_free_bytes"] < dry["bytes_before"]
        done = rs.retention("api", timedelta(days=7), now)
        assert done["deleted_events"] == len(rows) - len(kept)
        after = _parts(rs, "api")
        # the days after the cut are the same parts, in the same place: nothing was copied
        later = [p for p in before if p[0] > cutoff.strftime("%Y%m%d")]
        assert later and [p for p in after if p[0] > cutoff.strftime("%Y%m%d")] == later
        # the days before the cut are gone; the cut day holds its kept rows only
        assert [p[0] for p in after if p[0] <= cutoff.strftime("%Y%m%d")] == [cutoff.strftime("%Y%m%d")]
        assert sum(p[3] for p in after) == len(kept)
        # the disk holds the active parts, no replaced part left behind
        assert done["bytes_after"] < done["bytes_before"]
        assert _left_behind(rs, "api") == []
        assert rs.query(QuerySpec("api"), now).rows == [[len(kept)]]
        assert rs.datasets()[0].first == datetime.fromisoformat(kept[0]["timestamp"].rstrip("Z"))
        assert rs.retention("api", timedelta(days=7), now)["deleted_events"] == 0
    with Rootsift(tmp_path / "data", engine="chdb") as rs:  # and a reopened store reads the same
        assert rs.query(QuerySpec("api"), now).rows == [[len(kept)]]


def test_retention_of_a_store_written_before_partitions_rewrites_its_one_partition(tmp_path: Path) -> None:
    rows = _rows(days=3)
    cutoff = T0 + timedelta(days=1, hours=6)
    now = (cutoff + timedelta(days=1)).replace(tzinfo=UTC)
    with Rootsift(tmp_path / "data", engine="chdb") as rs:
        backend: Any = rs.backend
        rs.ingest(write_jsonl(tmp_path / "e.jsonl", rows), dataset="api")
        columns = ", ".join(f"`{c}` {t}" for c, t in backend.columns_of("api").items())
        backend.run(  # the table as rootsift wrote it before partitions
            f"CREATE TABLE rootsift.old ({columns}) "
            'ENGINE = MergeTree ORDER BY (timestamp, "#sample") SAMPLE BY "#sample"'
        )
        names = ", ".join(f"`{c}`" for c in backend.columns_of("api"))
        backend.run(f"INSERT INTO rootsift.old ({names}) SELECT {names} FROM rootsift.api")
        backend.run("DROP TABLE rootsift.api SYNC")
        backend.run("RENAME TABLE rootsift.old TO rootsift.api")
        backend.changed()
        assert {p[0] for p in _parts(rs, "api")} == {"all"}
        done = rs.retention("api", timedelta(days=1), now)
        assert done["deleted_events"] == sum(r["timestamp"] < iso(cutoff) for r in rows)
        assert rs.query(QuerySpec("api"), now).rows == [[len(rows) - done["deleted_events"]]]
        assert _left_behind(rs, "api") == []


def _dropped(rs: Rootsift) -> list[str]:
    backend: Any = rs.backend
    return backend.run("SELECT table FROM system.dropped_tables").column(0).to_pylist()


def test_no_dropped_table_stays_on_disk(tmp_path: Path) -> None:
    rows = _rows(days=2)
    with Rootsift(tmp_path / "data", engine="chdb") as rs:
        summary = rs.ingest(write_jsonl(tmp_path / "e.jsonl", rows), dataset="api", block_bytes=16 * 1024)
        assert summary.blocks > 1  # read through a pending table, moved in and dropped
        assert _dropped(rs) == []
        backend: Any = rs.backend
        backend.run("CREATE TABLE rootsift.`api#pending-old` AS rootsift.api")
        backend.run("INSERT INTO rootsift.`api#pending-old` SELECT * FROM rootsift.api")
        sql = "SELECT data_paths FROM system.tables WHERE name = 'api#pending-old'"
        (paths,) = backend.run(sql).column(0).to_pylist()
        backend.run("DROP TABLE rootsift.`api#pending-old`")  # as rootsift dropped them before
        assert _dropped(rs) == ["api#pending-old"] and all(Path(p).exists() for p in paths)
    with Rootsift(tmp_path / "data", engine="chdb") as rs:  # the next open gives that disk back
        assert _dropped(rs) == [] and not any(Path(p).exists() for p in paths)
        assert rs.query(QuerySpec("api")).rows == [[len(rows)]]


def test_a_pending_input_is_attached_or_copied_into_the_dataset(tmp_path: Path) -> None:
    import pyarrow as pa

    rows = _rows(days=3)
    with Rootsift(tmp_path / "data", engine="chdb") as rs:
        rs.ingest(write_jsonl(tmp_path / "e.jsonl", rows), dataset="api")
        backend: Any = rs.backend
        stamps = pa.array([T0 + timedelta(days=d, hours=1) for d in range(3)], pa.timestamp("us"))
        batch = pa.record_batch({"timestamp": stamps, "duration_ms": pa.array([1.0, 2.0, 3.0])})
        for widened in (False, True):
            pending = backend.create_pending("api")
            backend.append_arrow("api", pa.RecordBatchReader.from_batches(batch.schema, [batch]), [], table=pending)
            if widened:  # another input gave the dataset a column the pending table has not
                backend.run("ALTER TABLE rootsift.api ADD COLUMN `zone` Nullable(String)")
            assert (shape(backend, pending) == shape(backend, "api")) is not widened
            backend.publish_pending("api", pending)
            assert backend.tables(pending=True) == [] and _dropped(rs) == []
        assert rs.query(QuerySpec("api")).rows == [[len(rows) + 6]]
        parts = _parts(rs, "api")  # each input's three rows went to their own days
        assert sum(p[3] for p in parts) == len(rows) + 6 and {p[0] for p in parts} == {
            "20240601",
            "20240602",
            "20240603",
        }
