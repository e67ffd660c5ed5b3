"""Random OTLP values for the converter's tests: every kind an attribute or a body holds."""

from __future__ import annotations

import random
from typing import Any

KINDS = ("s", "i", "d", "b", "map", "array", "bytes", "empty")


def fill(value: Any, rng: random.Random, kind: str | None = None, extreme: bool = False) -> None:
    """Set the AnyValue ``value`` to a random value of ``kind`` (random when None): text
    with quotes and non-ASCII, integers (at int64's ends with ``extreme``), doubles (NaN,
    and infinity with ``extreme``), a boolean, a map, an array, bytes, or nothing."""
    kind = kind or rng.choice(KINDS)
    if kind == "s":
        value.string_value = rng.choice(["GET", 'quo"te', "ünï", "", "POST"])
    elif kind == "i":
        value.int_value = rng.choice([rng.randrange(-(2**40), 2**40), *([2**63 - 1, -(2**63)] if extreme else [])])
    elif kind == "d":
        value.double_value = rng.choice([0.1, 1e-7, 3.0, -2.5e12, float("nan"), *([float("inf")] if extreme else [])])
    elif kind == "b":
        value.bool_value = rng.random() < 0.5
    elif kind == "map":
        value.kvlist_value.values.add(key="k").value.string_value = "v"
    elif kind == "array":
        value.array_value.values.add().int_value = 1
    elif kind == "bytes":
        value.bytes_value = b"\x00\xff"


def attribute(key: str, rng: random.Random, kinds: tuple[str, ...] = KINDS, extreme: bool = False) -> Any:
    """A KeyValue named ``key`` holding a random value of one of ``kinds``."""
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue

    kv = KeyValue(key=key)
    fill(kv.value, rng, rng.choice(kinds), extreme)
    return kv
