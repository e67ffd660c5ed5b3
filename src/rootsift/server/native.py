"""The optional native scanner (``native/``, ADR 0028), when it is installed.

``rootsift_native.scan_spans`` and ``scan_logs`` read an OTLP traces or logs request's
items off the wire into column buffers (otlp_scan.py takes them); the converter uses them
where the module is installed and ``$ROOTSIFT_NATIVE`` is not ``0``, and converts in
Python otherwise (the same tables: tests/test_native_scan.py). ``scripts/setup.sh``
builds it where cargo is installed.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import Any

Scanner = Callable[[bytes], Any]
"""``scan(payload)``: the request's column buffers, or None where it declines."""


@functools.cache
def _module() -> Any:
    if os.environ.get("ROOTSIFT_NATIVE", "1") == "0":
        return None
    try:
        return importlib.import_module("rootsift_native")
    except ImportError:
        return None


def span_scanner() -> Scanner | None:
    """``scan_spans``, or None when the scanner is not installed or is turned off."""
    return getattr(_module(), "scan_spans", None)  # an older build may lack either


def log_scanner() -> Scanner | None:
    """``scan_logs``, or None when the scanner is not installed or is turned off."""
    return getattr(_module(), "scan_logs", None)
