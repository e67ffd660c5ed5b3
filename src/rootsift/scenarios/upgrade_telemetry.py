"""Writers for the upgrade scenario: Prometheus text per node, folded CPU-profile stacks, and
the quantile comparison the ground truth reports."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

SAMPLE_HZ = 100  # pprof's default CPU sampling rate: one sample per 10 ms of CPU
QUANTILES = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)
REGRESSED_RATIO = 1.25
"""A quantile counts as regressed when the new version's is at least this times the old one's."""

# Plausible leaves for the write path's block-sealing step: one is the seed's regressed function.
SEAL_FUNCTIONS = (
    "encoder.(*Encoder).compressBlock",
    "m3tsz.(*encoder).writeAnnotation",
    "series.(*BufferBucket).mergeToStream",
    "encoding.(*ostream).WriteBits",
    "xio.(*SegmentReader).Segment",
)
_SERVER = "main.main;server.(*server).Serve;tchannelthrift.(*service)"
WRITE_STACKS = (  # (stack, share of the write path's CPU)
    (f"{_SERVER}.WriteBatchRaw;storage.(*db).WriteTaggedBatch;storage.(*dbShard).Write;"
     "series.(*dbSeries).Write;series.(*dbBuffer).Write;m3tsz.(*encoder).Encode", 0.45),
    (f"{_SERVER}.WriteBatchRaw;storage.(*db).WriteTaggedBatch;storage.(*dbShard).Write;"
     "index.(*nsIndex).WriteBatch", 0.25),
    (f"{_SERVER}.WriteBatchRaw;thrift.(*TCompactProtocol).ReadBinary", 0.30),
)  # fmt: skip
READ_STACKS = (
    (f"{_SERVER}.FetchTagged;storage.(*db).QueryIDs;index.(*block).Query", 0.5),
    (f"{_SERVER}.FetchTagged;series.(*dbSeries).ReadEncoded;series.(*dbBuffer).ReadEncoded", 0.5),
)
SEAL_PREFIX = (
    f"{_SERVER}.WriteBatchRaw;storage.(*db).WriteTaggedBatch;storage.(*dbShard).Write;"
    "series.(*dbSeries).Write;series.(*dbBuffer).Write;series.(*BufferBucket).seal"
)
BACKGROUND_STACKS = (
    ("runtime.gcBgMarkWorker;runtime.gcDrain;runtime.scanobject", 0.40),
    ("storage.(*db).tick;storage.(*dbShard).Tick;series.(*dbSeries).Tick", 0.35),
    ("storage.(*fileSystemManager).Run;fs.(*writer).WriteAll;snappy.Encode", 0.25),
)


@dataclass
class Profile:
    """CPU seconds per folded stack, collected over one version's profiling window."""

    version: str
    seconds: dict[str, float] = field(default_factory=dict)

    def add(self, stacks: tuple[tuple[str, float], ...], cpu_s: float) -> None:
        for stack, share in stacks:
            self.seconds[stack] = self.seconds.get(stack, 0.0) + cpu_s * share

    def folded(self, rng: random.Random) -> str:
        """``frame;frame;leaf count`` lines, as ``pprof -raw``/stackcollapse-go print them."""
        lines = []
        for stack, secs in sorted(self.seconds.items()):
            count = round(secs * SAMPLE_HZ * rng.uniform(0.97, 1.03))
            if count > 0:
                lines.append(f"{stack} {count}")
        return "\n".join(lines) + "\n"


@dataclass
class Scrapes:
    """One node's scraped samples: (ms timestamp, rss bytes, cpu seconds, version)."""

    node: str
    rows: list[tuple[int, int, float, str]] = field(default_factory=list)

    def text(self) -> str:
        """Prometheus text exposition, one family after another, every sample timestamped in ms."""
        out = [
            "# HELP process_resident_memory_bytes Resident memory size in bytes.",
            "# TYPE process_resident_memory_bytes gauge",
        ]
        out += [f"process_resident_memory_bytes {rss} {ms}" for ms, rss, _, _ in self.rows]
        out += [
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
            "# TYPE process_cpu_seconds_total counter",
        ]
        out += [f"process_cpu_seconds_total {cpu:.2f} {ms}" for ms, _, cpu, _ in self.rows]
        out += ["# HELP m3db_build_information Build information.", "# TYPE m3db_build_information gauge"]
        out += [f'm3db_build_information{{build_version="{v}"}} 1 {ms}' for ms, _, _, v in self.rows]
        return "\n".join(out) + "\n"

    def write(self, folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "metrics.prom"
        path.write_text(self.text())
        return path


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile of a sorted list."""
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def quantile_ratios(old: list[float], new: list[float]) -> dict[str, float]:
    """new/old for each quantile of QUANTILES, keyed ``p50``…``p99``."""
    a, b = sorted(old), sorted(new)
    return {f"p{round(q * 100)}": round(quantile(b, q) / quantile(a, q), 3) for q in QUANTILES}


def regressed_from(ratios: dict[str, float]) -> str | None:
    """The lowest quantile from which every higher one is regressed, or None."""
    keys = list(ratios)
    first = None
    for key in reversed(keys):
        if ratios[key] < REGRESSED_RATIO:
            break
        first = key
    return first
