"""Scenario generators: the five reference incidents as reproducible telemetry.

``generate(name, out, seed, scale)`` runs one; every module of this package that defines
a ``Scenario`` registers it with ``@register``. See docs/scenarios.md.
"""

from __future__ import annotations

import importlib
import pkgutil
import shutil
from pathlib import Path
from typing import Any, TypeVar

from rootsift.errors import UsageError
from rootsift.scenarios.base import Manifest, Scenario, parse_scale, write_truth

__all__ = ["Manifest", "Scenario", "all_scenarios", "demo", "generate", "ingest", "register"]

_REGISTRY: dict[str, type[Scenario]] = {}
_LOADED = False
T = TypeVar("T", bound=type[Scenario])


def register(cls: T) -> T:
    _REGISTRY[cls.name] = cls
    return cls


def all_scenarios() -> dict[str, type[Scenario]]:
    global _LOADED
    if not _LOADED:
        for mod in pkgutil.iter_modules(__path__):
            if mod.name != "base":
                importlib.import_module(f"{__name__}.{mod.name}")
        _LOADED = True
    return dict(sorted(_REGISTRY.items()))


def generate(name: str, out: str | Path, seed: int = 1, scale: str | float = "ci") -> Manifest:
    """Run scenario ``name`` into the folder ``out`` (emptied first if it holds an earlier run)."""
    scenarios = all_scenarios()
    if name not in scenarios:
        raise UsageError(f"no scenario {name!r} (scenarios: {', '.join(scenarios) or 'none yet'})")
    folder = Path(out)
    if folder.exists() and any(folder.iterdir()):
        if not (folder / "manifest.json").exists():
            raise UsageError(f"--out {folder} is not empty and holds no earlier scenario run; pick another folder")
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    manifest, truth = scenarios[name](seed, parse_scale(scale)).generate(folder)
    manifest.write(folder)
    write_truth(folder, truth)
    return manifest


def ingest(rs: Any, out: str | Path) -> list[Any]:
    """Ingest every source of the scenario written to ``out`` (its manifest) into ``rs``; the summaries."""
    folder = Path(out)
    manifest = Manifest.read(folder)
    return [
        rs.ingest(folder / src.path, src.dataset, format=src.format, **src.options)  # type: ignore[arg-type]
        for src in manifest.sources
    ]


def demo(rs: Any, name: str, out: str | Path, seed: int = 1, scale: str | float = "ci") -> dict[str, Any]:
    """Generate scenario ``name`` into ``out`` and ingest it (its datasets, all named
    ``name_...``, replace those of an earlier run); what was ingested, and the analyses
    its manifest asks for."""
    manifest = generate(name, out, seed, scale)
    folder = Path(out)
    for dataset in {src.dataset for src in manifest.sources} & {d.name for d in rs.datasets()}:
        rs.backend.drop_dataset(dataset)
    ingested = []
    for src in manifest.sources:
        summary = rs.ingest(folder / src.path, src.dataset, format=src.format, **src.options)
        ingested.append(
            {
                "dataset": summary.dataset,
                "source": src.path,
                "format": summary.format,
                "events": summary.events,
                "rejects": summary.rejects,
            }
        )
    return {"scenario": name, "out": str(folder), "ingested": ingested, "analyses": manifest.analyses}
