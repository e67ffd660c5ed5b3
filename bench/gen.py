"""Seeded generator of wide events for benchmarks (JSON lines).

~25 fields: a long-tailed duration, a ~1M-cardinality user id, low-cardinality
dimensions, a nested object (flattened to dotted names on ingest).

Up to ``CHUNK`` events are one Arrow table (the file is the same as it always was for a
seed); more are written ``CHUNK`` at a time, each chunk its own seeded table over its
own slice of the six hours, appended in time order, so memory stays that of one chunk
(~3 GiB) at any ``n`` (100M events: ~47 GiB of JSON lines).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

CHUNK = 10_000_000
"""Most events generated as one table."""
SPAN_US = 6 * 3600 * 1_000_000
"""The events' time range: six hours, in microseconds."""


def generate_table(
    n: int, seed: int = 7, start_epoch_s: int = 1_790_000_000, span: tuple[int, int] = (0, SPAN_US)
) -> pa.Table:
    """Return ``n`` wide events as an Arrow table, deterministic for ``seed``, their times
    uniform over ``span`` (microseconds after ``start_epoch_s``)."""
    rng = np.random.default_rng(seed)
    ts = np.sort(rng.integers(span[0], span[1], n)) + start_epoch_s * 1_000_000

    def pick(values: list[str], p: list[float] | None = None) -> pa.Array:
        idx = rng.choice(len(values), n, p=p)
        return pa.DictionaryArray.from_arrays(pa.array(idx, pa.int32()), pa.array(values)).cast(pa.string())

    endpoints = [f"/api/v1/{name}" for name in ("users", "orders", "search", "cart", "login", "feed", "items", "pay")]
    duration = rng.lognormal(3.0, 1.0, n)
    slow = rng.random(n) < 0.01
    duration[slow] *= 20
    status = rng.choice([200, 201, 204, 301, 400, 404, 500, 503], n, p=[0.8, 0.05, 0.03, 0.02, 0.04, 0.03, 0.02, 0.01])
    users = rng.integers(0, 1_000_000, n)
    k8s = pa.StructArray.from_arrays(
        [pick([f"pod-{i:03d}" for i in range(120)]), pick([f"node-{i:02d}" for i in range(24)])],
        names=["pod", "node"],
    )
    cols = {
        "ts_us": pa.array(ts, pa.int64()),
        "duration_ms": pa.array(np.round(duration, 3)),
        "status": pa.array(status, pa.int64()),
        "endpoint": pick(endpoints),
        "method": pick(["GET", "POST", "PUT", "DELETE"], [0.7, 0.2, 0.07, 0.03]),
        "region": pick(["us-east-1", "us-west-2", "eu-west-1"]),
        "az": pick(["a", "b", "c"]),
        "host": pick([f"host-{i:03d}" for i in range(200)]),
        "service": pick(["api", "web", "worker", "auth", "billing"]),
        "version": pick(["1.4.0", "1.4.1", "1.5.0"], [0.45, 0.45, 0.1]),
        "user_id": pa.array([f"u{u:07d}" for u in users]),
        "trace_id": pa.array(rng.integers(0, 2**62, n, dtype=np.int64)).cast(pa.string()),
        "bytes_sent": pa.array(rng.integers(100, 100_000, n), pa.int64()),
        "bytes_received": pa.array(rng.integers(50, 5_000, n), pa.int64()),
        "db_time_ms": pa.array(np.round(duration * rng.random(n), 3)),
        "pool_wait_ms": pa.array(np.round(rng.exponential(2.0, n), 3)),
        "cache": pick(["hit", "miss"], [0.85, 0.15]),
        "user_agent": pick(["curl/8.5", "Mozilla/5.0", "okhttp/4.12", "python-requests/2.32"]),
        "tier": pick(["free", "pro", "enterprise"], [0.7, 0.25, 0.05]),
        "retries": pa.array(rng.poisson(0.1, n), pa.int64()),
        "upstream": pick(["users-svc", "orders-svc", "search-svc", "spectator"]),
        "feature_flag": pa.array(rng.random(n) < 0.3),
        "build": pick([f"b{i}" for i in range(30)]),
        "k8s": k8s,
    }
    return pa.table(cols)


def write_jsonl(path: Path, n: int, seed: int = 7, chunk: int = CHUNK) -> Path:
    """Write ``n`` events as JSON lines with an RFC 3339 ``timestamp``; return the path.
    Past ``chunk`` events, chunk ``k`` of ``K`` is ``generate_table`` with seed
    ``seed * 1000 + k`` over the k-th K-th of the time range, appended in order."""
    chunks = max(1, -(-n // chunk))
    con = duckdb.connect()
    with path.open("wb") as out:
        for k in range(chunks):
            size = n // chunks + (k < n % chunks)
            span = (SPAN_US * k // chunks, SPAN_US * (k + 1) // chunks)
            table = generate_table(size, seed if chunks == 1 else seed * 1000 + k, span=span)
            con.register("events", table)
            cols = [c for c in table.column_names if c != "ts_us"]
            select = ", ".join(f'"{c}"' for c in cols)
            part = path.with_name(path.name + f".{k}")
            con.execute(
                f"COPY (SELECT strftime(make_timestamp(ts_us), '%Y-%m-%dT%H:%M:%S.%fZ') AS timestamp, {select} "
                f"FROM events) TO '{part}' (FORMAT json)"
            )
            con.unregister("events")
            del table
            with part.open("rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)
            part.unlink()
    return path


def cached_jsonl(directory: Path, n: int, seed: int = 7) -> Path:
    """Return ``directory/events-<n>-s<seed>.jsonl``, generating it first if absent.

    The file is written under a temporary name and renamed, so an interrupted run
    never leaves a truncated file that a later run would take for a finished one.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"events-{n}-s{seed}.jsonl"
    if not path.exists():
        tmp = path.with_name(path.name + ".partial")
        tmp.unlink(missing_ok=True)
        # In a child process: the Arrow table (GiBs at 10M rows) must not stay in the
        # caller's heap, where it would compete with what is being measured.
        cmd = [sys.executable, str(Path(__file__).resolve()), str(tmp), "-n", str(n), "--seed", str(seed)]
        subprocess.run(cmd, check=True)
        tmp.replace(path)
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("-n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    write_jsonl(args.out, args.n, args.seed)
