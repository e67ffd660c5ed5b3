"""The Python API: everything the CLI (and later the server) does, as plain calls.

>>> rs = Rootsift("./data")                                   # doctest: +SKIP
>>> rs.ingest("requests.jsonl.gz", dataset="api").events       # doctest: +SKIP
>>> rs.query(QuerySpec("api", where="status >= 500", calculations=[Calculation.parse("p99(duration_ms)")]))  # doctest: +SKIP
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rootsift.api_analyses import Analyses
from rootsift.errors import UsageError
from rootsift.ingest import COMMIT_EVERY
from rootsift.query.spec import QuerySpec
from rootsift.store.base import RAW_SUFFIX, TIME_COLUMN, DatasetInfo, open_backend
from rootsift.store.duckdb import weight_sql
from rootsift.store.sqltext import ident
from rootsift.timeutil import format_duration

if TYPE_CHECKING:
    from rootsift.ingest.collect import CollectSummary
    from rootsift.ingest.pipeline import IngestSummary, Progress
    from rootsift.query.engine import QueryOutput
    from rootsift.store.duckdb import DuckDBBackend

# The analyses (numpy, scipy) and the ingest machinery are imported by the methods that
# use them: a command that only lists or queries datasets starts without loading them.

DEFAULT_DATA = Path(".rootsift")


def default_data_dir() -> Path:
    """``$ROOTSIFT_DATA`` if set, else ``./.rootsift``."""
    return Path(os.environ.get("ROOTSIFT_DATA") or DEFAULT_DATA)


class Rootsift(Analyses):
    """One data directory, opened once; safe to use from several threads. The analyses'
    methods (explain, investigate, compare, profile_diff, trends, changes) are in
    ``api_analyses.Analyses``."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        *,
        read_only: bool = False,
        engine: str | None = None,
        clickhouse_url: str | None = None,
        **backend: Any,
    ) -> None:
        """Open ``data_dir`` with the backend ``engine`` (``duckdb``, the default, ``chdb``, or
        ``clickhouse``: a server at ``clickhouse_url``; ``$ROOTSIFT_BACKEND`` and
        ``$ROOTSIFT_CLICKHOUSE_URL`` when None, a URL alone meaning ``clickhouse``);
        ``backend`` options go to DuckDB."""
        self.data_dir = Path(data_dir) if data_dir is not None else default_data_dir()
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise UsageError(f"{self.data_dir} is a file, not a data directory (see --data, $ROOTSIFT_DATA)")
        engine = engine or os.environ.get("ROOTSIFT_BACKEND") or None
        if clickhouse_url is None and (engine is None or engine.strip().lower() == "clickhouse"):
            clickhouse_url = os.environ.get("ROOTSIFT_CLICKHOUSE_URL") or None
        if engine is None and clickhouse_url:
            engine = "clickhouse"
        opened = open_backend(engine, self.data_dir, read_only=read_only, clickhouse_url=clickhouse_url, **backend)
        # Typed as DuckDB's: the analyses still call its SQL-text methods, which chdb refuses
        # with a usage error at run time (docs/clickhouse.md); the query path runs on both.
        self.backend = cast("DuckDBBackend", opened)

    def __enter__(self) -> Rootsift:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.backend.close()

    def ingest(
        self,
        source: str | Path,
        dataset: str,
        *,
        format: str = "auto",
        time_field: str | None = None,
        time_format: str | None = None,
        strictness: str = "warn",
        progress: Progress | None = None,
        on_commit: Any = None,
        block_bytes: int | None = None,
        log_format: str | None = None,
        log_line_prefix: str | None = None,
        host: str | None = None,
        tz: str | None = None,
        labels: dict[str, str] | None = None,
        commit_every: float = COMMIT_EVERY,
        count_field: str | None = None,
    ) -> IngestSummary:
        """Ingest a file, a directory of files in a text log format, or ``-`` (stdin) into
        ``dataset``, creating it if needed.

        ``format`` is ``auto`` (sniffed), jsonl, json, csv, tsv or a log format of
        ``rootsift.ingest.formats``; ``log_format``, ``log_line_prefix``, ``host`` and
        ``tz`` are told to the log formats that read them (docs/formats/); ``labels`` are
        fields set on every event of a log format (a value the event has wins). A stream
        (``-``, a pipe) is committed every ``commit_every`` seconds and on SIGTERM/SIGINT,
        releasing the store between commits. ``count_field`` is recorded as the dataset's
        count field (a row with count n stands for n identical events; docs/formats.md).
        """
        from rootsift.ingest.formats.base import FormatOptions
        from rootsift.ingest.pipeline import ingest_file
        from rootsift.ingest.runner import BLOCK_BYTES

        if count_field is not None and not count_field.strip():
            raise UsageError("--count-field is empty: name the field that says how many events a row stands for")
        summary = ingest_file(
            self.backend,
            dataset,
            source,
            format=format,
            time_field=time_field,
            time_format=time_format,
            strictness=strictness,
            progress=progress,
            on_commit=on_commit,
            parse=FormatOptions(
                log_format=log_format, log_line_prefix=log_line_prefix, host=host, tz=tz, labels=dict(labels or {})
            ),
            block_bytes=block_bytes or BLOCK_BYTES,
            commit_every=commit_every,
        )
        if count_field is not None:
            self.backend.set_count_field(dataset, count_field)
        expired = self.backend.expired_on_arrival(dataset)
        if expired:
            keep = self.standing_retention(dataset)["standing"]
            summary.warnings.append(
                f"{expired:,} of these events are older than {dataset}'s standing retention "
                f"({keep['keep'] if keep else 'its TTL'}): the server deletes them, each day once all its events are "
                f"older; to keep them, `rootsift retention {dataset} --remove-standing` first, or ingest into another dataset"
            )
        return summary

    def collect_procfs(
        self,
        dataset: str = "hosts",
        *,
        every: float = 60.0,
        count: int | None = None,
        proc: str | Path = "/proc",
        files: list[str] | None = None,
        host: str | None = None,
        labels: dict[str, str] | None = None,
        warn: Any = None,
        stop: Any = None,
        to: str | None = None,
        key: str | None = None,
    ) -> CollectSummary:
        """Sample this machine's /proc into ``dataset`` every ``every`` seconds until ``count``
        samples, ``stop`` (a threading.Event) or SIGTERM/SIGINT; see docs/collect.md.

        ``files`` default to meminfo, slabinfo, vmstat, cgroups, pressure/* and loadavg;
        every event has the procfs format's fields, ``host`` and ``labels``. With ``to`` (a
        ``rootsift serve`` URL, and its ``key``) the samples are sent there instead.
        """
        from rootsift.ingest.collect import DEFAULT_FILES, collect_procfs
        from rootsift.ingest.collect_send import Sender

        return collect_procfs(
            self.backend,
            dataset,
            every=every,
            count=count,
            root=proc,
            files=files or DEFAULT_FILES,
            host=host,
            labels=labels,
            warn=warn,
            stop=stop,
            sender=Sender(to, dataset, key) if to else None,
        )

    def datasets(self) -> list[DatasetInfo]:
        """Every dataset: events (weighted by sample rate), stored rows, time span, bytes on disk."""
        return self.backend.datasets()

    def schema(self, dataset: str) -> list[dict[str, Any]]:
        """Fields with type, present count, distinct-count estimate and type conflicts."""
        fields = self.backend.fields(dataset)
        rel = self.backend.relation_text(dataset, None, None)
        assert rel is not None
        have = set(self.backend.execute_sql(f"SELECT * FROM {rel} LIMIT 0", []).columns)
        names = [n for n in fields if n in have]
        parts = []
        for n in names:
            col = ident(n)
            parts += [f"count({col})", f"approx_count_distinct({col})"]
            raw = n + RAW_SUFFIX
            parts.append(f"count({ident(raw)})" if raw in have else "0")
        row = self.backend.execute_sql(f"SELECT count(*), {', '.join(parts)} FROM {rel}", []).rows[0]
        total = row[0]
        out = []
        for i, n in enumerate(names):
            present, distinct, conflicts = row[1 + 3 * i : 4 + 3 * i]
            info = fields[n]
            out.append(
                {
                    "field": n,
                    "type": info.type.lower(),
                    "present": present,
                    "present_fraction": round(present / total, 4) if total else 0.0,
                    "distinct_estimate": distinct,
                    "conflicts": conflicts,
                    "path": info.path,
                }
            )
        if "_overflow" in names:  # keys past the field limit, each queryable by its own name
            from rootsift.query.overflow import OVERFLOW_FIELD, keys_query

            count, sample = self.backend.execute(keys_query(self.backend.relation(dataset, None, None)), []).rows[0]
            entry = next(f for f in out if f["field"] == OVERFLOW_FIELD)
            entry["overflow_keys"] = {"count": count, "sample": list(sample or [])}
        return out

    def query(self, spec: QuerySpec, now: datetime | None = None, *, keep_plan: bool = False) -> QueryOutput:
        """Run a query spec; see rootsift.query.spec. ``keep_plan``: run the plan kept for the
        same query, or keep this one (what the ``query`` command does: a process that
        compiles once pays sqlglot's import once; rootsift.query.plan)."""
        from rootsift.query.engine import run_query

        return run_query(self.backend, spec, now, keep_plan=keep_plan)

    def retention(
        self,
        dataset: str,
        keep: timedelta,
        now: datetime | None = None,
        *,
        dry_run: bool = False,
        standing: bool = False,
    ) -> dict[str, Any]:
        """Delete events older than ``now - keep``; return rows deleted and bytes before/after.

        ``dry_run`` deletes nothing and returns what would go: ``would_delete_events`` and
        ``would_free_bytes`` (in proportion for a segment the cutoff cuts through). A
        ``keep`` that is negative, or reaches back before year 1, is a usage error.
        ``standing`` (a ClickHouse server only) also has the server go on deleting what
        becomes older than ``keep`` (``standing_retention``); ``standing`` in the result is
        the dataset's standing retention afterwards."""
        now = now or datetime.now(UTC)
        cutoff = _cutoff(now, keep)
        if standing and not self.backend.runs_between_commands:
            self.backend.set_standing_retention(dataset, keep)  # refused: before anything is deleted
        before = self.backend.dataset_bytes(dataset)
        done = {"dataset": dataset, "cutoff": cutoff.isoformat() + "Z", "dry_run": dry_run, "bytes_before": before}
        if dry_run:
            rows, freed = self.backend.count_before(dataset, cutoff)
            would = {"would_set_standing": {"keep_seconds": round(keep.total_seconds()), "keep": format_duration(keep)}}
            return {
                **done,
                "would_delete_events": rows,
                "would_free_bytes": freed,
                **self._standing(dataset),
                **(would if standing else {}),
            }
        dropped = self.backend.drop_before(dataset, cutoff)
        if standing:
            self.backend.set_standing_retention(dataset, keep)
        after = self.backend.dataset_bytes(dataset)
        return {**done, "deleted_events": dropped, "bytes_after": after, **self._standing(dataset)}

    def standing_retention(self, dataset: str, remove: bool = False) -> dict[str, Any]:
        """The dataset's standing retention (``{"dataset", "standing"}``, None for none);
        ``remove`` stops it first (``removed``: what it was)."""
        self.backend.fields(dataset)  # an unknown dataset is an error naming the known ones
        was = self.backend.standing_retention(dataset)
        if remove and was is not None:
            self.backend.set_standing_retention(dataset, None)
            return {"dataset": dataset, "removed": was.as_dict(), **self._standing(dataset)}
        return {
            "dataset": dataset,
            **({"removed": None} if remove else {}),
            "standing": None if was is None else was.as_dict(),
        }

    def _standing(self, dataset: str) -> dict[str, Any]:
        policy = self.backend.standing_retention(dataset)
        return {"standing": None if policy is None else policy.as_dict()}

    def events(self, dataset: str) -> int:
        """Weighted event count of ``dataset``."""
        rel = self.backend.relation_text(dataset, None, None)
        weight = self.backend.weight_field(dataset)
        agg = f"sum({weight_sql(weight)})" if weight else "count(*)"
        return int(self.backend.execute_sql(f"SELECT coalesce({agg}, 0) FROM {rel}", []).rows[0][0])


def _cutoff(now: datetime, keep: timedelta) -> datetime:
    """``now - keep`` as a naive UTC datetime; ``keep`` must be ≥ 0 and reach no further than year 1."""
    if keep < timedelta(0):
        raise UsageError(f"--keep {format_duration(keep)} is negative: say how much recent data to keep, e.g. 7d")
    try:
        return (now - keep).astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        most = (now.astimezone(UTC).replace(tzinfo=None) - datetime(1, 1, 2)).days
        raise UsageError(
            f"--keep {format_duration(keep)} reaches back before year 1: keep at most {most:,}d "
            "(the longest keep deletes nothing)"
        ) from None


__all__ = ["Rootsift", "QuerySpec", "TIME_COLUMN", "default_data_dir"]
