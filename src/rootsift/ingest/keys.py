"""Keys a dataset cannot take as columns: the empty key, and keys past its field limit.

A dataset has at most ``max_fields`` fields of its own (``ROOTSIFT_MAX_FIELDS``, 250 by
default): DuckDB spends time and memory on every column of every row, so a
wide-schema input (thousands of distinct keys, a few per line) would otherwise cost
rows × keys and run out of memory. Leaves past the limit are moved, under their dotted
name, into one JSON object stored as text in the ``_overflow`` field; the empty key
``""`` becomes ``_empty``. Both are counted and reported in the ingest summary
(docs/formats.md, "Fields"; ADR 0011).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import orjson

MAX_FIELDS = 250
"""Fields a dataset gets as columns before further keys go into ``OVERFLOW_FIELD``."""
OVERFLOW_FIELD = "_overflow"
EMPTY_KEY = "_empty"
"""What the key ``""`` is renamed to (``_empty~2`` if the object has an ``_empty`` too)."""
REPORTED_NAMES = 20
"""Overflowing keys named in the summary's warning; the count covers all."""


def max_fields() -> int:
    """The field limit: ``$ROOTSIFT_MAX_FIELDS`` or ``MAX_FIELDS``."""
    text = os.environ.get("ROOTSIFT_MAX_FIELDS", "")
    return int(text) if text.isdigit() and int(text) > 0 else MAX_FIELDS


class KeyFitter:
    """Rewrites parsed JSON objects so their leaves fit the dataset's field limit.

    ``admitted`` holds the leaf paths that are (or will be) columns; a new leaf is
    admitted while there is room, in the order the lines bring them.
    """

    def __init__(self, known: Iterable[tuple[str, ...]], limit: int | None = None) -> None:
        self.limit = limit or max_fields()
        self.admitted: set[tuple[str, ...]] = set()
        self._under: dict[tuple[str, ...], set[str]] = {}  # the admitted leaf keys below each object path
        self.overflowed: dict[str, int] = {}  # dotted name -> values moved
        self.empty_keys = 0
        for path in known:
            self.admit(path)

    def admit(self, path: tuple[str, ...]) -> None:
        """Make ``path`` a leaf that is (or will be) a column."""
        self.admitted.add(path)
        self._under.setdefault(path[:-1], set()).add(path[-1])

    @property
    def room(self) -> int:
        """How many more leaves can become columns."""
        return self.limit - len(self.admitted)

    def fit(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """``obj`` with empty keys renamed and leaves past the limit moved into
        ``_overflow``; None when it needs no change."""
        if self._fits(obj, ()):  # the common case: every leaf is a column already
            return None
        overflow: dict[str, Any] = {}
        fitted, changed = self._walk(obj, (), overflow)
        if overflow:
            if (OVERFLOW_FIELD,) not in self.admitted:
                self.admit((OVERFLOW_FIELD,))
            previous = fitted.get(OVERFLOW_FIELD)
            if previous is not None:  # the input's own _overflow: kept inside ours
                overflow.setdefault(OVERFLOW_FIELD, previous)
            fitted[OVERFLOW_FIELD] = orjson.dumps(overflow).decode()
        return fitted if changed or overflow else None

    def _fits(self, obj: dict[str, Any], prefix: tuple[str, ...]) -> bool:
        """Whether every leaf of ``obj`` is admitted (no key is empty): read-only, no copies."""
        names = self._under.get(prefix)
        for key, value in obj.items():
            if isinstance(value, dict) and value:
                if not self._fits(value, (*prefix, key)):
                    return False
            elif names is None or key not in names:
                return False
        return True

    def _walk(
        self, obj: dict[str, Any], prefix: tuple[str, ...], overflow: dict[str, Any]
    ) -> tuple[dict[str, Any], bool]:
        out: dict[str, Any] = {}
        changed = False
        for key, value in obj.items():
            if key == "":
                key = EMPTY_KEY
                n = 2
                while key in obj or key in out:
                    key = f"{EMPTY_KEY}~{n}"
                    n += 1
                self.empty_keys += 1
                changed = True
            path = (*prefix, key)
            if isinstance(value, dict) and value:
                inner, inner_changed = self._walk(value, path, overflow)
                changed = changed or inner_changed
                if inner:
                    out[key] = inner
                continue
            if path not in self.admitted:
                if len(self.admitted) >= self.limit:
                    name = ".".join(path)
                    overflow[name] = value
                    self.overflowed[name] = self.overflowed.get(name, 0) + 1
                    changed = True
                    continue
                self.admit(path)
            out[key] = value
        return out, changed

    def warnings(self) -> list[str]:
        """What the summary says about renamed and overflowing keys."""
        out = []
        if self.empty_keys:
            out.append(f'{self.empty_keys:,} empty keys ("") stored as {EMPTY_KEY!r}')
        if self.overflowed:
            names = sorted(self.overflowed)
            shown = ", ".join(names[:REPORTED_NAMES]) + (", …" if len(names) > REPORTED_NAMES else "")
            values = sum(self.overflowed.values())
            out.append(
                f"{len(names):,} keys past the field limit ({self.limit:,}) stored in {OVERFLOW_FIELD!r} "
                f"({values:,} values): {shown}"
            )
        return out
