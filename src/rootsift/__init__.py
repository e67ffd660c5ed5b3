"""rootsift: finds why production broke, from the telemetry you already have.

The names below are imported when first used, so ``import rootsift`` (and the command
line's start-up) does not load the store, numpy or scipy until something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rootsift.api import Rootsift, default_data_dir
    from rootsift.query.spec import Calculation, QuerySpec

__version__ = "0.1.0"
__all__ = ["Rootsift", "QuerySpec", "Calculation", "default_data_dir", "__version__"]

_LAZY = {
    "Rootsift": "rootsift.api",
    "default_data_dir": "rootsift.api",
    "QuerySpec": "rootsift.query.spec",
    "Calculation": "rootsift.query.spec",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rootsift' has no attribute {name!r}")
