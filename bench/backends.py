"""DuckDB vs chdb (embedded ClickHouse) on the same events: ingest, queries, explain, and
rootsift's ClickHouse SQL vs hand-written ClickHouse SQL.

Each backend runs in its own child process (chdb opens one store per process; the child's
CPU time is its own, every thread counted), ingesting the same JSON-lines file once and
then timing each case ``--rounds`` times; passes alternate the backends' order.
Ratios are each ClickHouse backend / DuckDB (wall and CPU), each measured in the same run.
``--engines duckdb,chdb,clickhouse`` adds the server backend over HTTP to a real ClickHouse
server on this machine (``scripts/clickhouse_server.py``: ClickHouse's HTTP listener on chdb's
engine, started for the run); its CPU is the child's plus the server process's.

On a ClickHouse backend three contenders answer each case, in an order that alternates every round:
``rs.query`` (rootsift end to end: catalog look-ups, SQL built and rendered, the result
shaped), rootsift's rendered SQL run alone (its text and bound parameters, captured from
``rs.query``), and the same question written by hand for ClickHouse. The hand-written
answer is checked to equal rootsift's before anything is timed; ``sql / hand`` is the
issue's ≤ 1.2× target, ``query / hand`` adds rootsift's own work per query.

    python bench/backends.py --events 1000000 --rounds 5
    python bench/backends.py --events 10000000 --rounds 3     # 4.8 GiB of JSON lines
    python bench/backends.py --events 1000000 --rounds 5 --engines duckdb,chdb,clickhouse
    python bench/backends.py --events 10000000 --copies 10 --rounds 1   # 100M: the 10M file ingested ten times

``--copies K`` ingests the one file K times (K inputs, one after another, into the one
dataset): K × ``--events`` rows without K times the disk for JSON lines (100M distinct
events would be ~47 GiB of them); the ingest time is the K ingests'.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from common import DATASET, dir_bytes, median, use_source_tree
from gen import cached_jsonl

CASES = {
    "p99 per minute": {"calculations": ["p99(duration_ms)"], "granularity": "1m"},
    "breakdown": {
        "calculations": ["count", "avg(duration_ms)", "p50(duration_ms)"],
        "breakdowns": ["endpoint"],
        "where": "status >= 500",
    },
    "heatmap": {"calculations": ["heatmap(duration_ms)"], "granularity": "10m"},
    "count by service": {"calculations": ["count"], "breakdowns": ["service", "version"]},
}
HAND = {  # the same answers, as one would write them for ClickHouse by hand
    "p99 per minute": "SELECT toStartOfMinute(timestamp) AS t, quantileExactWeighted(0.99)(duration_ms, 1) "
    "FROM rootsift.bench GROUP BY t ORDER BY t",
    "breakdown": "SELECT endpoint, count(), avg(duration_ms), quantileExactWeighted(0.5)(duration_ms, 1) "
    "FROM rootsift.bench WHERE status >= 500 GROUP BY endpoint ORDER BY count() DESC",
    # rootsift's heatmap keeps a row (bucket NULL) for values <= 0, so this one does too
    "heatmap": "SELECT toStartOfInterval(timestamp, INTERVAL 10 MINUTE) AS t, "
    "if(duration_ms > 0, toInt64(floor(log2(duration_ms) * 4)), NULL) AS b, count() "
    "FROM rootsift.bench WHERE duration_ms IS NOT NULL GROUP BY t, b",
    "count by service": "SELECT service, version, count() FROM rootsift.bench GROUP BY service, version "
    "ORDER BY count() DESC",
}
Timing = tuple[float, float]
SERVER_PID: int | None = None
"""The ClickHouse server's process (``--engines …,clickhouse``): its CPU counts as the query's."""


def server_cpu() -> float:
    """CPU seconds (user + system, every thread) the server process has used so far."""
    if SERVER_PID is None:
        return 0.0
    fields = Path(f"/proc/{SERVER_PID}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(fn: Callable[[], Any]) -> Timing:
    """(wall seconds, CPU seconds of this process and the server's, every thread) of one call."""
    w, c, s = time.perf_counter(), time.process_time(), server_cpu()
    fn()
    return time.perf_counter() - w, time.process_time() - c + server_cpu() - s


def _rows(table: Any) -> list[tuple[Any, ...]]:
    """An Arrow result's rows, sorted: times as epoch seconds (``toStartOfMinute`` gives a
    DateTime, rootsift a DateTime64), floats to 9 significant digits (the engines add in
    other orders)."""

    def plain(v: Any) -> Any:
        if isinstance(v, datetime):
            return int(v.timestamp()) if v.timestamp().is_integer() else v.timestamp()
        return float(f"{v:.9g}") if isinstance(v, float) else v

    cols = [c.to_pylist() for c in table.columns]
    return sorted((tuple(plain(v) for v in row) for row in zip(*cols)), key=repr)


def chdb_contenders(rs: Any, spec: Any, name: str) -> dict[str, Callable[[], Any]]:
    """rs.query, rootsift's SQL alone, the hand-written SQL; refuses a hand-written answer
    that differs from rootsift's."""
    backend = rs.backend
    sent: list[tuple[str, dict[str, Any]]] = []
    run = backend.run
    backend.run = lambda sql, params=None: sent.append((sql, params or {})) or run(sql, params)
    try:
        rs.query(spec)
    finally:
        del backend.run  # the instance attribute: the class's method again
    sql, params = sent[-1]
    ours, hand = _rows(run(sql, params)), _rows(run(HAND[name]))
    if ours != hand:
        raise SystemExit(f"{name}: the hand-written SQL answers another question ({len(hand)} vs {len(ours)} rows)")
    return {
        "query": lambda: rs.query(spec),
        "sql": lambda: run(sql, params),
        "hand": lambda: run(HAND[name]),
    }


def child(
    backend: str, data: Path, source: Path, rounds: int, server: list[str] | None, copies: int = 1
) -> dict[str, Any]:
    """In the child: ingest (if the store is new), then time each case; return seconds.
    ``server``: the ClickHouse server's URL, process id and data directory."""
    global SERVER_PID
    use_source_tree()
    from rootsift.api import Rootsift
    from rootsift.query.spec import Calculation, QuerySpec

    out: dict[str, Any] = {}
    url = {}
    if backend == "clickhouse" and server:
        url = {"clickhouse_url": f"{server[0]}/rootsift"}
        SERVER_PID = int(server[1])
    with Rootsift(data, engine=backend, **url) as rs:
        if not any(d.name == DATASET for d in rs.datasets()):
            out["ingest"] = timed(lambda: [rs.ingest(source, dataset=DATASET) for _ in range(copies)])
            out["bytes"] = dir_bytes(Path(server[2]) if url and server else data)
    # the queries as `rootsift query` runs them: on the store opened read-only (a store open
    # for writing keeps DuckDB's memory to the writer's 512 MB, too little for p99 per
    # minute over 100M events)
    with Rootsift(data, engine=backend, read_only=True, **url) as rs:
        for name, kw in CASES.items():
            spec = QuerySpec(DATASET, **{**kw, "calculations": [Calculation.parse(x) for x in kw["calculations"]]})
            rs.query(spec)  # warm: the first run reads the files into the page cache
            fns = chdb_contenders(rs, spec, name) if backend != "duckdb" else {"query": lambda s=spec: rs.query(s)}
            times: dict[str, list[Timing]] = {k: [] for k in fns}
            for r in range(rounds):
                for k in list(fns)[:: 1 if r % 2 else -1]:
                    times[k].append(timed(fns[k]))
            out[name] = (median([t[0] for t in times["query"]]), median([t[1] for t in times["query"]]))
            for k in ("sql", "hand"):
                if k in times:
                    out[f"{k}: {name}"] = (median([t[0] for t in times[k]]), median([t[1] for t in times[k]]))
        out["explain"] = timed(lambda: rs.explain(DATASET, select="duration_ms > 500"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--copies", type=int, default=1, help="ingest the events file this many times")
    parser.add_argument("--engines", default="duckdb,chdb", help="duckdb first, then ClickHouse backends")
    parser.add_argument("--child", choices=("duckdb", "chdb", "clickhouse"))
    parser.add_argument("--data", type=Path)
    parser.add_argument("--source", type=Path)
    parser.add_argument("--server", nargs=3, metavar=("URL", "PID", "PATH"), help="(for the child)")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.data, args.source, args.rounds, args.server, args.copies)))
        return
    engines = args.engines.split(",")
    source = cached_jsonl(Path(tempfile.gettempdir()) / "rootsift-bench", args.events)
    results: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(Path(tmp) / "clickhouse-server") if "clickhouse" in engines else None
        try:
            for r in range(2):  # the first pass ingests; the order alternates
                for backend in engines if r % 2 == 0 else engines[::-1]:
                    cmd = [sys.executable, __file__, "--child", backend, "--data", str(Path(tmp) / backend)]
                    cmd += ["--source", str(source), "--rounds", str(args.rounds), "--copies", str(args.copies)]
                    if server and backend == "clickhouse":
                        cmd += [
                            "--server",
                            server[0],
                            str(server[1].pid),
                            str(Path(tmp) / "clickhouse-server" / "data"),
                        ]
                    done = subprocess.run(cmd, capture_output=True, text=True)
                    if done.returncode:
                        raise SystemExit(f"the {backend} child failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
                    results[backend].append(json.loads(done.stdout.strip().splitlines()[-1]))
        finally:
            if server:
                server[1].terminate()
                server[1].wait(timeout=60)
    report(args, source, results)


def start_server(path: Path) -> tuple[str, subprocess.Popen[str]]:
    """A ClickHouse server for the run (scripts/clickhouse_server.py), and its address."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "clickhouse_server.py"
    spec = importlib.util.spec_from_file_location("clickhouse_server", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path.mkdir(parents=True)
    address, process = module.launch(path / "data", path / "server.log")
    return address, process


def report(args: argparse.Namespace, source: Path, results: dict[str, list[dict[str, Any]]]) -> None:
    copies = f" ingested {args.copies} times" if args.copies > 1 else ""
    size = source.stat().st_size / 2**30
    print(
        f"{args.events * args.copies:,} events ({args.events:,} events, {size:.2f} GiB of JSON lines{copies}), "
        f"{args.rounds} rounds a case"
    )
    print("stored: " + ", ".join(f"{e} {r[0]['bytes'] / 2**20:,.0f} MiB" for e, r in results.items()))
    for engine in [e for e in results if e != "duckdb"]:
        print(f"\n{engine}: medians; {engine} / DuckDB; rootsift (query end to end, its SQL alone) / hand-written SQL")
        head = f"{'case':<18}{'duckdb s':>9}{engine + ' s':>14}{'wall ×':>8}{'cpu ×':>7}"
        print(head + f"{'query/hand wall':>17}{'cpu':>6}{'sql/hand wall':>15}{'cpu':>6}")
        for name in ["ingest", *CASES, "explain"]:
            runs = [(d[name], c[name]) for d, c in zip(results["duckdb"], results[engine]) if name in d and name in c]
            duck_w, duck_c = median([d[0] for d, _ in runs]), median([d[1] for d, _ in runs])
            ch_w, ch_c = median([c[0] for _, c in runs]), median([c[1] for _, c in runs])
            line = f"{name:<18}{duck_w:>9.3f}{ch_w:>14.3f}{ch_w / duck_w:>8.2f}{ch_c / duck_c:>7.2f}"
            hands = [c[f"hand: {name}"] for c in results[engine] if f"hand: {name}" in c]
            sqls = [c[f"sql: {name}"] for c in results[engine] if f"sql: {name}" in c]
            if hands:
                hw, hc = median([h[0] for h in hands]), median([h[1] for h in hands])
                sw, sc = median([s[0] for s in sqls]), median([s[1] for s in sqls])
                line += f"{ch_w / hw:>17.2f}{ch_c / hc:>6.2f}{sw / hw:>15.2f}{sc / hc:>6.2f}"
            print(line)


if __name__ == "__main__":
    main()
