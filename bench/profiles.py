"""profile ingest and profile-diff at scale, against a plain DuckDB load and group-by of the
same samples, measured in the same run.

    .venv/bin/python bench/profiles.py                                   # 1,000 profiles x 10k samples
    .venv/bin/python bench/profiles.py --profiles 200 --rounds 3         # smaller, quicker

The input: ``--profiles`` folded CPU profiles (half of version 1.0, half of 1.1, where one
function is slower), each ``--samples`` samples drawn over ``--stacks`` distinct stacks
(depth 4-12, 200 functions), one file per profile, as a profiler writes them. Each round,
in alternating order:

- ingest: ``Rootsift.ingest`` of the two folders (``--label version=...``), against
  DuckDB's ``read_csv`` of the same files into a table (stack, count, file name);
- diff: ``Rootsift.profile_diff`` (per profile and function self and total, tests, paths),
  against a plain ``GROUP BY`` of that table by file and leaf function.

Wall and CPU time (user + sys of this process, all threads) are medians over the rounds;
the ratios are rootsift's over the baseline's.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from common import use_source_tree

use_source_tree()

import duckdb  # noqa: E402

import rootsift.analysis.profiles  # noqa: E402, F401  (imported before timing: scipy's import is not the diff)
from rootsift import Rootsift  # noqa: E402


def write_profiles(root: Path, profiles: int, samples: int, stacks: int, seed: int = 1) -> int:
    """The folded files under root/1.0 and root/1.1; returns the number of lines (events)."""
    rng = np.random.default_rng(seed)
    functions = [f"pkg{i // 20}.func{i}" for i in range(200)]
    paths = []
    for _ in range(stacks):
        depth = int(rng.integers(4, 13))
        paths.append(";".join(["main.main", *rng.choice(functions, depth - 1, replace=False)]))
    weights = rng.dirichlet(np.full(stacks, 0.5))
    slower = weights.copy()
    slower[0] *= 3  # the stack whose leaf regressed
    lines = 0
    for i in range(profiles):
        version = "1.0" if i % 2 == 0 else "1.1"
        folder = root / version
        folder.mkdir(parents=True, exist_ok=True)
        w = (weights if version == "1.0" else slower) * np.exp(rng.normal(0, 0.05, stacks))
        counts = rng.multinomial(samples, w / w.sum())
        text = "".join(f"{p} {c}\n" for p, c in zip(paths, counts, strict=True) if c)
        lines += text.count("\n")
        (folder / f"cpu-{i:05d}.folded").write_text(text)
    return lines


def timed(run: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--stacks", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-profiles-"))
    try:
        events = write_profiles(root / "in", args.profiles, args.samples, args.stacks)
        print(
            f"{args.profiles:,} profiles x {args.samples:,} samples = {args.profiles * args.samples:,} samples "
            f"in {events:,} folded lines (distinct stacks per profile)"
        )
        files = str(root / "in" / "*" / "*.folded")
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in ("ingest", "load", "diff", "group-by")}
        for r in range(args.rounds):
            data, db = root / f"data{r}", root / f"base{r}.duckdb"
            rs = Rootsift(data)
            con = duckdb.connect(str(db))

            def ours_ingest(rs: Rootsift = rs) -> None:
                for version in ("1.0", "1.1"):
                    rs.ingest(root / "in" / version, "cpu", format="folded", labels={"version": version})

            def base_load(con: duckdb.DuckDBPyConnection = con) -> None:
                con.execute(
                    "CREATE TABLE s AS SELECT stack, samples, filename FROM read_csv(?, delim=' ', header=false, "
                    "columns={'stack': 'VARCHAR', 'samples': 'BIGINT'}, filename=true)",
                    [files],
                )

            def ours_diff(rs: Rootsift = rs) -> None:
                rs.profile_diff("cpu", a='version = "1.0"', b='version = "1.1"')

            def base_group(con: duckdb.DuckDBPyConnection = con) -> None:
                con.execute(
                    "SELECT filename, string_split(stack, ';')[-1] AS f, sum(samples) FROM s GROUP BY ALL"
                ).fetchall()

            pairs = [("ingest", ours_ingest), ("load", base_load)]
            for name, run in pairs if r % 2 == 0 else pairs[::-1]:
                results[name].append(timed(run))
            pairs = [("diff", ours_diff), ("group-by", base_group)]
            for name, run in pairs if r % 2 == 0 else pairs[::-1]:
                results[name].append(timed(run))
            rs.close()
            con.close()
            shutil.rmtree(data)
            db.unlink()
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
        print(f"{'step':<34}{'wall s':>9}{'cpu s':>9}")
        labels = {
            "ingest": "rootsift ingest (folded, 2 dirs)",
            "load": "duckdb read_csv (baseline)",
            "diff": "rootsift profile-diff",
            "group-by": "duckdb group-by (baseline)",
        }
        for key, label in labels.items():
            print(f"{label:<34}{med[key][0]:>9.2f}{med[key][1]:>9.2f}")
        for ours, base in (("ingest", "load"), ("diff", "group-by")):
            print(
                f"ratio {ours} / {base}: wall {med[ours][0] / med[base][0]:.1f}x, "
                f"cpu {med[ours][1] / med[base][1]:.1f}x"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
