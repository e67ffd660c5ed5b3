"""The optional native span scanner (``native/``, ADR 0028), when it is installed.

``rootsift_native.scan_spans`` reads an OTLP traces request's spans off the wire into
column buffers (otlp_scan.py takes them); the converter uses it where it is installed
and ``$ROOTSIFT_NATIVE`` is not ``0``, and converts in Python otherwise (the same tables:
tests/test_native_scan.py). ``scripts/setup.sh`` builds it where cargo is installed.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import Any


@functools.cache
def span_scanner() -> Callable[[bytes], Any] | None:
    """``scan_spans(payload)`` (None where it declines a request), or None when the
    scanner is not installed or ``$ROOTSIFT_NATIVE`` is ``0``."""
    if os.environ.get("ROOTSIFT_NATIVE", "1") == "0":
        return None
    try:
        module = importlib.import_module("rootsift_native")
    except ImportError:
        return None
    scan: Callable[[bytes], Any] = module.scan_spans
    return scan
