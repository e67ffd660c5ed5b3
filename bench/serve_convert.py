"""The server's converter alone: the native scanner (ADR 0028) against the Python
path, on the same logged spans, in the same run (bench/README.md, "serve").

    .venv/bin/python bench/serve_convert.py                   # 200k spans, 5 rounds
    .venv/bin/python bench/serve_convert.py --spans 1000000 --rounds 3
    .venv/bin/python bench/serve_convert.py --signal logs     # log records (bench/serve.py's)

The spans of ``bench/serve.py`` are logged in 8 MiB files as the server logs them, before
the clock starts; then ``convert.convert_files`` converts each file, as the converter
child does (the cyclic GC off, as there), once with the scanner and once without, the
order alternating. It prints the CPU seconds of each (medians), µs a span, their ratio,
and whether the two made the same Arrow tables (it fails if not).
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import use_source_tree


def cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def logged(items: int, work: Path, signal: str) -> list[Path]:
    """The spans or log records as the server logs them: 8 MiB files of log records."""
    from rootsift.server.applier import BATCH_BYTES
    from rootsift.server.wal import OTLP_LOGS, OTLP_TRACES, encode
    from serve import SIGNALS

    logs: list[bytearray] = [bytearray()]
    for body in SIGNALS[signal][0](items, 1000):
        if len(logs[-1]) >= BATCH_BYTES:
            logs.append(bytearray())
        logs[-1] += encode(signal, body, OTLP_TRACES if signal == "traces" else OTLP_LOGS)
    paths = []
    for i, data in enumerate(logs, 1):
        path = work / f"{i:08d}.log"
        path.write_bytes(data)
        paths.append(path)
    return paths


def convert(paths: list[Path], out: Path) -> tuple[float, list[Any]]:
    """CPU seconds of converting each file on its own, and the tables made."""
    import pyarrow as pa
    import pyarrow.ipc

    from rootsift.server.convert import ARROW, convert_files

    out.mkdir()
    made = []
    used = cpu()
    for path in paths:
        (converted,) = (c for name, c in convert_files([path], out).items() if name.startswith(ARROW))
        made.append(converted.path)
    spent = cpu() - used
    return spent, [pa.ipc.open_file(pa.memory_map(str(p))).read_all() for p in made]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=200_000, help="spans, or log records with --signal logs")
    parser.add_argument("--signal", choices=["traces", "logs"], default="traces")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    use_source_tree()
    from rootsift.server import native

    which_scanner = "span_scanner" if args.signal == "traces" else "log_scanner"
    scanner = getattr(native, which_scanner)()
    if scanner is None:
        print("rootsift_native is not installed (scripts/setup.sh builds it where cargo is)", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="rootsift-convert-"))
    paths = logged(args.spans, work, args.signal)
    convert(paths[:1], work / "warm")  # imports and first-use costs out of the clock
    seconds: dict[str, list[float]] = {"native": [], "python": []}
    tables: dict[str, list[Any]] = {}
    gc.disable()
    for r in range(args.rounds):
        for which in ("native", "python") if r % 2 == 0 else ("python", "native"):
            setattr(native, which_scanner, (lambda: scanner) if which == "native" else (lambda: None))
            spent, tables[which] = convert(paths, work / f"out-{r}-{which}")
            seconds[which].append(spent)
    gc.enable()
    same = all(a.equals(b) for a, b in zip(tables["native"], tables["python"], strict=True))
    items = "spans" if args.signal == "traces" else "log records"
    print(f"{args.spans:,} {items} in {len(paths)} log files, {args.rounds} rounds, medians of CPU seconds")
    for which, spent in seconds.items():
        median = statistics.median(spent)
        print(
            f"  {which:<8} {median:6.3f} s  {median / args.spans * 1e6:5.2f} µs each  (rounds {[round(s, 3) for s in spent]})"
        )
    ratio = statistics.median(seconds["native"]) / statistics.median(seconds["python"])
    print(f"  native / python {ratio:.2f}; the same tables: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
