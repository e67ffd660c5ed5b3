"""What a scenario generator is: a seeded simulation of an incident's mechanism that
writes the telemetry a real fleet would have produced, a manifest of what to ingest, and
— apart from the data — its ground truth.

The ground truth is written to ``<out>/truth/ground_truth.json``. Analysis code never
reads it: only ``rootsift.scenarios`` and the tests may (a test enforces this).
"""

from __future__ import annotations

import json
import random
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rootsift.errors import UsageError

TRUTH_DIR = "truth"
TRUTH_FILE = "ground_truth.json"
MANIFEST_FILE = "manifest.json"
SCALES = {"ci": 1.0, "small": 0.25, "large": 20.0}
"""Named sizes: ``ci`` is what the tests use; a number multiplies it."""


@dataclass(frozen=True)
class Source:
    """One thing to ingest: a file or directory (relative to the scenario's folder) as a
    dataset, in a format, with the options that format reads."""

    dataset: str
    path: str
    format: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Manifest:
    """What a scenario wrote: the sources to ingest and how it was made."""

    scenario: str
    seed: int
    scale: float
    sources: list[Source] = field(default_factory=list)
    notes: str = ""
    analyses: list[list[str]] = field(default_factory=list)
    """What a user would ask of this data without knowing the answer: ``rootsift`` command
    lines (without ``--data``/``--json``). ``rootsift demo`` runs those whose command exists;
    the case tests check their findings against the ground truth. Cohorts (kernels,
    versions) are what an operator knows from the inventory, never the answer."""

    def write(self, out: Path) -> Path:
        path = out / MANIFEST_FILE
        path.write_text(json.dumps(asdict(self), indent=1) + "\n")
        return path

    @staticmethod
    def read(out: Path) -> Manifest:
        data = json.loads((out / MANIFEST_FILE).read_text())
        data["sources"] = [Source(**s) for s in data["sources"]]
        data.setdefault("analyses", [])
        return Manifest(**data)


class Scenario(ABC):
    """A generator; subclasses set ``name`` and ``summary`` and register with ``@register``."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def __init__(self, seed: int, scale: float) -> None:
        self.seed = seed
        self.scale = scale
        self.rng = random.Random(f"{self.name}:{seed}")

    @abstractmethod
    def generate(self, out: Path) -> tuple[Manifest, dict[str, Any]]:
        """Write the telemetry under ``out``; return the manifest and the ground truth."""


def parse_scale(text: str | float) -> float:
    """``ci``, ``small``, ``large`` or a positive number (a multiple of ``ci``)."""
    if isinstance(text, (int, float)):
        value = float(text)
    elif text in SCALES:
        value = SCALES[text]
    else:
        try:
            value = float(text)
        except ValueError:
            raise UsageError(f"--scale {text!r} is not one of {', '.join(SCALES)} or a number") from None
    if not 0 < value <= 1000:
        raise UsageError(f"--scale {text!r} must be above 0 and at most 1000")
    return value


def write_truth(out: Path, truth: dict[str, Any]) -> Path:
    """Write the ground truth apart from the data, where no ingest looks."""
    folder = out / TRUTH_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TRUTH_FILE
    path.write_text(json.dumps(truth, indent=1, default=str) + "\n")
    return path
