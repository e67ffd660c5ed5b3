"""Log-format parsers, registered by name: ``rootsift ingest --format NAME``.

Every module in this package that defines a ``TextFormat`` subclass registers it with
``@register``; the registry imports them all on first use. ``sniff`` asks each format
how sure it is that an input is its own and picks the surest.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from rootsift.errors import UsageError
from rootsift.ingest.formats.base import FormatOptions, TextFormat

__all__ = ["FormatOptions", "TextFormat", "all_formats", "get", "register", "sniff"]

_REGISTRY: dict[str, type[TextFormat]] = {}
_LOADED = False
SNIFF_THRESHOLD = 0.5
"""A format must be at least this sure of an input for ``--format auto`` to pick it."""

T = TypeVar("T", bound=type[TextFormat])


def register(cls: T) -> T:
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise RuntimeError(f"two log formats are named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in ("base",):
            importlib.import_module(f"{__name__}.{mod.name}")
    _LOADED = True


def all_formats() -> dict[str, type[TextFormat]]:
    """Every registered log format by name, sorted."""
    _load()
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> type[TextFormat]:
    formats = all_formats()
    if name not in formats:
        raise UsageError(f"--format {name!r} is not a known format")
    return formats[name]


def sniff(lines: list[str], name: str, among: list[str] | None = None) -> str | None:
    """The registered format (of ``among``, default all) surest that ``lines`` (the input's
    first lines) are its own, if any is sure enough."""
    best, score = None, SNIFF_THRESHOLD
    for fmt_name, cls in all_formats().items():
        if among is not None and fmt_name not in among:
            continue
        try:
            s = cls.sniff(lines, name)
        except Exception:  # noqa: BLE001 - a sniffer that trips on odd input is simply not sure
            s = 0.0
        if s > score:
            best, score = fmt_name, s
    return best
