"""Log-format parser benchmark: lines/s per parser on generated inputs, against DuckDB
parsing the same file with ``regexp_extract`` and a plain line count, measured in the same run.

    python bench/parsers.py                      # 1M lines per format
    python bench/parsers.py --n 200000 --formats nginx,nginx-combined,apache,mysql-slow
    python bench/parsers.py --n 200000 --formats mysql-slow --slow-sql   # the slow log by DuckDB too
    python bench/parsers.py --n 1000000 --formats nginx,nginx-combined,apache --runs 2 --ingest-only

Four timings per case, each the median of ``--runs`` (rounds interleaved):
- ``count``: read the file in 4 MiB chunks and count newlines (the floor: I/O + one pass);
- ``parse``: the parser alone on one core: decode, parse, serialise each event with orjson;
- ``ingest``: ``Rootsift.ingest`` into a fresh store, end to end; for the access logs and
  the slow log also with DuckDB's parsing turned off (``textrun.SQL_LINES``), every line
  through the Python parser as before it existed;
- wall and CPU seconds (all threads of the process) are both kept: on a shared machine the
  CPU seconds are the steadier comparison (the ratio is baseline ÷ rootsift: higher is better);
- the busiest thread's share of the process's CPU seconds in each run (``*_busiest_thread_share``,
  from ``/proc/self/task``): 1.0 is one core at work, 0.5 two; it shows whether the work
  can use both cores even when the machine is too loaded for wall time to;
- ``duckdb``: the baseline (``BASELINES``): DuckDB reads the file as one text column,
  ``regexp_extract`` splits each line into the same fields, typed (times, integers,
  seconds as milliseconds), into a table of a fresh database file. The slow log's
  baseline numbers lines, groups them into entries at each ``# Time:`` line and reads the
  header fields, the ``SET timestamp`` time and the statement per entry, with one
  normalising regex over the statement standing in for the fingerprint (``SLOW_LOG``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

import orjson

from common import BENCH, use_source_tree
from gen_logs import FORMAT_OF, GENERATORS, cached

use_source_tree()

from rootsift import Rootsift  # noqa: E402
from rootsift.ingest import formats, textrun  # noqa: E402
from rootsift.ingest.formats.base import FormatOptions, numbered_lines  # noqa: E402
from rootsift.ingest.rejects import Reject  # noqa: E402


def count_lines(path: Path) -> int:
    n = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(4 << 20):
            n += chunk.count(b"\n")
    return n


LINES = "(SELECT line, row_number() OVER () AS n FROM read_csv({path}, sep=chr(1), quote='', escape='', header=false, auto_detect=false, columns={{'line': 'VARCHAR'}}))"  # noqa: E501
CLF = r"\[([^\]]+)\]"
COMBINED = r"^(\S+) \S+ (\S+) " + CLF + r' "([^"]*)" (\d+) (\d+|-) "([^"]*)" "([^"]*)"'
COMBINED_NAMES = ["remote_addr", "remote_user", "time", "request", "status", "bytes", "referer", "agent"]
COMBINED_TYPED = (
    "strptime(m.time, '%d/%b/%Y:%H:%M:%S %z') AS timestamp, m.remote_addr, m.remote_user, m.request, "
    "CAST(m.status AS INTEGER) AS status, TRY_CAST(m.bytes AS BIGINT) AS bytes, m.referer, m.agent"
)
TIMING = r' rt=(\S+) uct="([^"]*)" uht="([^"]*)" urt="([^"]*)" ua="([^"]*)"'
TIMING_TYPED = (
    ", CAST(m.rt AS DOUBLE) * 1000 AS request_time_ms, TRY_CAST(m.uct AS DOUBLE) * 1000 AS uct_ms, "
    "TRY_CAST(m.uht AS DOUBLE) * 1000 AS uht_ms, TRY_CAST(m.urt AS DOUBLE) * 1000 AS urt_ms, m.ua"
)
BASELINES = {
    "nginx": (
        COMBINED + TIMING + "$",
        [*COMBINED_NAMES, "rt", "uct", "uht", "urt", "ua"],
        COMBINED_TYPED + TIMING_TYPED,
    ),
    "nginx-combined": (COMBINED + "$", COMBINED_NAMES, COMBINED_TYPED),
    "apache": (COMBINED + r" (\d+)$", [*COMBINED_NAMES, "us"], COMBINED_TYPED + ", CAST(m.us AS DOUBLE) / 1000 AS ms"),
}
"""Per case: the regex over each line, its group names, and the typed columns (``m`` is the match)."""
SLOW_LOG = """
WITH l AS {lines},
e AS (SELECT line, n, sum(CAST(starts_with(line, '# Time:') AS INTEGER)) OVER (ORDER BY n) AS entry FROM l),
g AS (SELECT
  min(n) AS line_no,
  make_timestamp(max(TRY_CAST(regexp_extract(line, '^SET timestamp=(\\d+);$', 1) AS BIGINT))
    FILTER (WHERE starts_with(line, 'SET timestamp=')) * 1000000) AS timestamp,
  max(regexp_extract(line, '^# User@Host: (\\S+)\\[', 1)) FILTER (WHERE starts_with(line, '# User@Host:')) AS user,
  max(regexp_extract(line, '@ (\\S*) \\[', 1)) FILTER (WHERE starts_with(line, '# User@Host:')) AS host,
  max(regexp_extract(line, '@ (\\S*) \\[([^\\]]*)\\]', 2)) FILTER (WHERE starts_with(line, '# User@Host:')) AS ip,
  max(TRY_CAST(regexp_extract(line, 'Id: +(\\d+)$', 1) AS BIGINT)) FILTER (WHERE starts_with(line, '# User@Host:'))
    AS thread_id,
  max(TRY_CAST(regexp_extract(line, 'Query_time: (\\S+)', 1) AS DOUBLE) * 1000)
    FILTER (WHERE starts_with(line, '# Query_time:')) AS query_time_ms,
  max(TRY_CAST(regexp_extract(line, 'Lock_time: (\\S+)', 1) AS DOUBLE) * 1000)
    FILTER (WHERE starts_with(line, '# Query_time:')) AS lock_time_ms,
  max(TRY_CAST(regexp_extract(line, 'Rows_sent: (\\d+)', 1) AS BIGINT))
    FILTER (WHERE starts_with(line, '# Query_time:')) AS rows_sent,
  max(TRY_CAST(regexp_extract(line, 'Rows_examined: (\\d+)', 1) AS BIGINT))
    FILTER (WHERE starts_with(line, '# Query_time:')) AS rows_examined,
  string_agg(line, chr(10) ORDER BY n) FILTER (WHERE NOT starts_with(line, '#') AND NOT starts_with(line, 'SET '))
    AS statement
FROM e WHERE entry > 0 GROUP BY entry)
SELECT *, regexp_replace(lower(statement), '[0-9]+', '?', 'g') AS fingerprint FROM g
"""
"""The slow log's baseline: entries, their header fields and the time from ``SET timestamp``
as the parser reads them, and a stand-in for the fingerprint (one normalising regex over the
statement: the parser's runs a chain of them, once per statement shape)."""


def duckdb_baseline(path: Path, case: str, work: Path) -> int:
    """DuckDB parsing ``path`` into a table of a fresh database file; the rows stored."""
    import duckdb

    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    con = duckdb.connect(str(work / "baseline.duckdb"))
    try:
        lines = LINES.format(path=f"'{path}'")
        if case == "mysql-slow":
            con.execute("CREATE TABLE t AS " + SLOW_LOG.format(lines=lines))
        else:
            pattern, names, typed = BASELINES[case]
            con.execute(
                # a line that does not match gives empty groups: the first (an address) is never empty
                f"CREATE TABLE t AS SELECT {typed} FROM (SELECT regexp_extract(line, $pattern, {names!r}) AS m "
                f"FROM {lines}) WHERE m.{names[0]} <> ''",
                {"pattern": pattern},
            )
        row = con.execute("SELECT count(*) FROM t").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def parse_only(path: Path, fmt: str, options: dict[str, str]) -> tuple[int, int]:
    parser = formats.get(fmt)(FormatOptions(**options, source=str(path)))  # type: ignore[arg-type]
    dumps = orjson.dumps
    events = rejects = 0
    with open(path, "rb") as fh:
        for item in parser.parse(numbered_lines(fh)):
            if isinstance(item, Reject):
                rejects += 1
            else:
                dumps(item[1])
                events += 1
    return events, rejects


def ingest(path: Path, fmt: str, options: dict[str, str], work: Path) -> int:
    shutil.rmtree(work, ignore_errors=True)
    with Rootsift(work) as rs:
        return rs.ingest(path, "bench", format=fmt, **options).events  # type: ignore[arg-type]


def timed(fn: object, runs: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def thread_ticks() -> dict[str, int]:
    """CPU ticks (user + system) of each thread of this process so far (Linux; empty elsewhere)."""
    out = {}
    for tid in os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ():
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue  # the thread ended
        fields = stat[stat.rindex(")") + 2 :].split()
        out[tid] = int(fields[11]) + int(fields[12])
    return out


class ThreadSampler:
    """The CPU ticks of every thread that ran while it was open, read every 50 ms (DuckDB's
    threads end with their database, so they are read while they run; up to 50 ms of a
    thread's last CPU may be missed)."""

    def __enter__(self) -> ThreadSampler:
        self.before = thread_ticks()
        self.seen: dict[str, int] = {}
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self) -> None:
        while True:
            self.seen.update(thread_ticks())
            if self.done.wait(0.05):
                return

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self.seen.update(thread_ticks())
        self.seen.pop(str(self.thread.native_id), None)  # not the sampler itself

    def busiest_share(self) -> float:
        """The busiest thread's share of the ticks used: 1.0 is one core at work, 0.5 two."""
        used = [n - self.before.get(tid, 0) for tid, n in self.seen.items()]
        return max(used) / sum(used) if sum(used) > 0 else float("nan")


def _cpu() -> float:
    """CPU seconds of this process (every thread) and of its children that have ended (the
    ingest's parser process, ``ingest/textchild.py``)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def interleaved(fns: list[object], runs: int) -> list[tuple[float, float, object, float]]:
    """Median wall and CPU seconds (all threads of this process and its children), the last result and the
    median share of the CPU taken by the busiest thread, of each of ``fns``, run in rotating
    order so they share the machine's noise. The share does not depend on the machine's load
    the way wall time does: near 1.0 the work ran on one core, near 0.5 on two."""
    walls: list[list[float]] = [[] for _ in fns]
    cpus: list[list[float]] = [[] for _ in fns]
    shares: list[list[float]] = [[] for _ in fns]
    results: list[object] = [None] * len(fns)
    for i in range(runs):
        for k in range(len(fns)):
            j = (k + i) % len(fns)
            with ThreadSampler() as sampler:
                t0, c0 = time.perf_counter(), _cpu()
                results[j] = fns[j]()  # type: ignore[operator]
                walls[j].append(time.perf_counter() - t0)
                cpus[j].append(_cpu() - c0)
            shares[j].append(sampler.busiest_share())
    return [
        (statistics.median(w), statistics.median(c), r, statistics.median(s) if s else float("nan"))
        for w, c, r, s in zip(walls, cpus, results, shares)
    ]


def ingest_python_only(path: Path, fmt: str, options: dict[str, str], work: Path) -> int:
    """``ingest`` with DuckDB's parsing of text formats turned off: every line through the Python parser."""
    textrun.SQL_LINES = False
    try:
        return ingest(path, fmt, options, work)
    finally:
        textrun.SQL_LINES = True


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000, help="lines per case (slow logs: entries)")
    ap.add_argument("--formats", default=",".join(GENERATORS), help="cases of gen_logs.GENERATORS")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=BENCH / "out")
    ap.add_argument("--slow-sql", action="store_true", help="ingest slow logs by DuckDB (textrun.SQL_SLOW_LOG)")
    ap.add_argument(
        "--ingest-only",
        action="store_true",
        help="time only the ingest and the baseline (no parser alone, no Python path)",
    )
    args = ap.parse_args()
    textrun.SQL_SLOW_LOG = args.slow_sql
    rows = []
    for case in args.formats.split(","):
        fmt = FORMAT_OF.get(case, case)
        if case not in GENERATORS or fmt not in formats.all_formats():
            print(f"skip {case}: not a benchmark case of a registered format", file=sys.stderr)
            continue
        options = GENERATORS[case][1]
        path = cached(args.out, case, args.n)
        lines = count_lines(path)
        work = args.out / f"work-{case}"
        t_count, _ = timed(functools.partial(count_lines, path), args.runs)
        t_parse, parsed = (
            (float("nan"), (None, None))
            if args.ingest_only
            else timed(functools.partial(parse_only, path, fmt, options), args.runs)
        )
        has_base = case in BASELINES or case == "mysql-slow"
        contenders = [functools.partial(ingest, path, fmt, options, work)]
        if has_base:
            contenders.append(functools.partial(duckdb_baseline, path, case, args.out / f"base-{case}"))
        python_too = fmt in ("nginx", "apache", "jetty") or (fmt == "mysql-slow" and args.slow_sql)
        if python_too and not args.ingest_only:  # DuckDB's: Python too
            contenders.append(functools.partial(ingest_python_only, path, fmt, options, work))
        timings = interleaved(contenders, args.runs)  # type: ignore[arg-type]
        t_ingest, c_ingest, stored, share_ingest = timings[0]
        t_base, c_base, base_rows, share_base = (
            timings[1] if has_base else (float("nan"), float("nan"), None, float("nan"))
        )
        t_py, c_py = timings[-1][:2] if len(timings) == 3 else (None, None)
        events, rejects = parsed  # type: ignore[misc]
        row = {
            "case": case,
            "format": fmt,
            "lines": lines,
            "events": events,
            "rejects": rejects,
            "stored": stored,
            "baseline_rows": base_rows,
            "count_s": round(t_count, 3),
            "parse_s": round(t_parse, 3),
            "ingest_s": round(t_ingest, 3),
            "baseline_s": round(t_base, 3),
            "parse_lines_per_s": None if args.ingest_only else round(lines / t_parse),
            "parse_events_per_s": None if events is None else round(events / t_parse),
            "ingest_lines_per_s": round(lines / t_ingest),
            "baseline_lines_per_s": round(lines / t_base) if has_base else None,
            "ingest_vs_baseline": round(t_base / t_ingest, 2) if has_base else None,
            "python_path_ingest_s": round(t_py, 3) if t_py else None,
            "python_path_vs_baseline": round(t_base / t_py, 2) if t_py and has_base else None,
            "ingest_cpu_s": round(c_ingest, 3),
            "baseline_cpu_s": round(c_base, 3),
            "python_path_cpu_s": round(c_py, 3) if c_py else None,
            "cpu_ingest_vs_baseline": round(c_base / c_ingest, 2) if has_base else None,
            "cpu_python_path_vs_baseline": round(c_base / c_py, 2) if c_py and has_base else None,
            "parse_vs_count": None if args.ingest_only else round(t_parse / t_count, 1),
            "ingest_busiest_thread_share": round(share_ingest, 2),
            "baseline_busiest_thread_share": round(share_base, 2),
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    print(
        "| case | lines | events | parse lines/s | ingest lines/s | DuckDB regexp lines/s | ingest ÷ DuckDB "
        "| Python-path ingest ÷ DuckDB | same, CPU seconds: ingest / Python path | parse ÷ line count "
        "| busiest thread's CPU share: ingest / DuckDB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        base = f"{r['baseline_lines_per_s']:,}" if r["baseline_lines_per_s"] else "-"
        ratio = f"{r['ingest_vs_baseline']}×" if r["ingest_vs_baseline"] else "-"
        py = f"{r['python_path_vs_baseline']}×" if r["python_path_vs_baseline"] else "-"
        print(
            f"| {r['case']} | {r['lines']:,} | {_n(r['events'])} | {_n(r['parse_lines_per_s'])} | "
            f"{r['ingest_lines_per_s']:,} | {base} | {ratio} | {py} | {r['cpu_ingest_vs_baseline'] or '-'}× / "
            f"{r['cpu_python_path_vs_baseline'] or '-'}× | {r['parse_vs_count']}× | "
            f"{r['ingest_busiest_thread_share']} / {r['baseline_busiest_thread_share']} |"
        )
    (args.out / "parsers.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
