"""A query's statements and how their rows are shaped, and the plans kept on disk.

Compiling a query needs sqlglot, whose import is most of ``rootsift query``'s start-up
(ADR 0027). The SQL a query compiles to is a function of a few inputs only: the spec,
the dataset's fields and weight, the relation its time range selects (which segments,
under the names this process attached them as), the time bucket, and the code that
compiles and renders. The ``query`` command keeps that SQL, rendered, under a hash of
exactly those inputs and of the store's path, in the user's cache folder
(``cache_dir``: ``$ROOTSIFT_CACHE_DIR/plans``, else ``$XDG_CACHE_HOME/rootsift/plans``,
else ``~/.cache/rootsift/plans``; never in the store, which ``query`` opens read-only);
the same query again runs it without importing sqlglot. The range's two times are the
only values a plan leaves open: they are bound where the compiler bound them (found by
identity when the plan is kept), so ``--from -15m`` run every minute reuses one plan. A
plan holding any other time (a filter's ``timestamp >= -30m`` is a time when compiled)
is not kept. Anything that changes an input (a new field, a new segment in range,
another filter, an upgraded rootsift or sqlglot, an edited source file) is another key.
A plan that cannot be read is compiled again; one that cannot be written is not kept.
Nothing here caches results: a kept plan runs against the data as it is now.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rootsift.query.spec import QuerySpec
    from rootsift.store.base import Backend, FieldInfo

FORMAT = 1
"""The kept plan's file format; part of every key."""
KEEP = 256
"""At most this many plans are kept; the least recently written go first."""
SWITCH = "ROOTSIFT_PLAN_CACHE"
"""Set to ``0`` (or ``off``) to compile every query (bench/startup.py's cold rounds)."""
CACHE_DIR = "ROOTSIFT_CACHE_DIR"
"""rootsift's cache folder; plans go in its ``plans/`` (default: the XDG cache folder's ``rootsift``)."""


def cache_dir() -> Path:
    """Where kept plans go (module docstring)."""
    explicit = os.environ.get(CACHE_DIR)
    if explicit:
        return Path(explicit) / "plans"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "rootsift" / "plans"


@dataclass(frozen=True)
class Inputs:
    """What a query is compiled from besides its bucket and order: the backend, the spec,
    the dataset's fields and weight, and the resolved range ``[start, end)``."""

    backend: Backend
    spec: QuerySpec
    fields: dict[str, FieldInfo]
    weight: str | None
    start: datetime | None
    end: datetime | None

    @property
    def span(self) -> tuple[datetime | None, datetime | None]:
        return self.start, self.end


@dataclass
class Statement:
    """One statement of a plan: a sqlglot tree and its positional parameters. ``sql`` is
    its rendering, set when the plan is kept; a plan read back has no tree."""

    tree: Any
    params: list[Any]
    sql: str | None = None


@dataclass
class Plan:
    """What answers one query: ``kind`` table or heatmap and its ``main`` statement; for a
    heatmap the field it counts; for a table the labels of its columns, how many are group
    keys, the labels ``main`` computes (``plain``) and each weighted percentile's own
    statement by label."""

    kind: str
    main: Statement
    heatmap_field: str = ""
    labels: list[str] = field(default_factory=list)
    keys: int = 0
    plain: list[str] = field(default_factory=list)
    percentiles: list[tuple[str, Statement]] = field(default_factory=list)

    def statements(self) -> list[Statement]:
        return [self.main, *(s for _, s in self.percentiles)]


class _Unkept(Exception):
    """A parameter this file format does not hold, a time that is not the range's, or a
    range time the plan did not bind."""


class PlanCache:
    """Plans kept in one directory, one JSON file each, named by the hash of their inputs
    and of ``scope`` (the store they were compiled for)."""

    def __init__(self, directory: Path, scope: str) -> None:
        self.directory = directory
        self.scope = scope

    @classmethod
    def at(cls, directory: Path, scope: str) -> PlanCache | None:
        """The cache in ``directory``, or None when ``$ROOTSIFT_PLAN_CACHE`` turns it off."""
        if os.environ.get(SWITCH, "").strip().lower() in ("0", "off", "no", "false"):
            return None
        return cls(directory, scope)

    def key(self, inputs: dict[str, Any]) -> str:
        """The hash of every input the SQL depends on, with the code that compiles it."""
        material = {"format": FORMAT, "code": _code_stamp(), "scope": self.scope, **inputs}
        text = json.dumps(material, sort_keys=True, separators=(",", ":"), default=repr)
        return hashlib.sha256(text.encode()).hexdigest()

    def load(self, key: str, start: datetime | None, end: datetime | None) -> Plan | None:
        """The plan kept under ``key`` with the range's times bound, or None."""
        try:
            data = json.loads((self.directory / f"{key}.json").read_text(encoding="utf-8"))
            return _decode(data, {"start": start, "end": end})
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None

    def store(self, key: str, plan: Plan, start: datetime | None, end: datetime | None) -> bool:
        """Keep ``plan`` (its statements rendered) under ``key``; False when it is not kept."""
        try:
            data = _encode(plan, start, end)
        except _Unkept:
            return False
        tmp: str | None = None
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=self.directory)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(data, separators=(",", ":")))
            os.replace(tmp, self.directory / f"{key}.json")
            self._prune()
        except OSError:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            return False
        return True

    def _prune(self) -> None:
        kept = []
        for p in self.directory.glob("*.json"):
            try:
                kept.append((p.stat().st_mtime_ns, p))
            except OSError:
                continue
        for _, p in sorted(kept)[: max(0, len(kept) - KEEP)]:
            p.unlink(missing_ok=True)


# -- the file format ----------------------------------------------------------------


def _encode(plan: Plan, start: datetime | None, end: datetime | None) -> dict[str, Any]:
    marked = {"start": False, "end": False}

    def value(v: Any) -> Any:
        if start is not None and v is start:
            marked["start"] = True
            return {"range": "start"}
        if end is not None and v is end:
            marked["end"] = True
            return {"range": "end"}
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        # any other time (a filter's): it may be relative, a time only when compiled
        raise _Unkept(type(v).__name__)

    def statement(st: Statement) -> dict[str, Any]:
        if st.sql is None:
            raise _Unkept("an unrendered statement")
        return {"sql": st.sql, "params": [value(p) for p in st.params]}

    out = {
        "kind": plan.kind,
        "main": statement(plan.main),
        "heatmap_field": plan.heatmap_field,
        "labels": plan.labels,
        "keys": plan.keys,
        "plain": plan.plain,
        "percentiles": [[label, statement(st)] for label, st in plan.percentiles],
    }
    # A range time the compiler did not bind as itself could hide in a derived value:
    # such a plan would carry this run's time into the next, so it is not kept.
    if (start is not None and not marked["start"]) or (end is not None and not marked["end"]):
        raise _Unkept("a range time not bound as a parameter")
    return out


def _decode(data: dict[str, Any], times: dict[str, datetime | None]) -> Plan:
    def value(v: Any) -> Any:
        if isinstance(v, dict):
            moment = times[v["range"]]
            if moment is None:
                raise KeyError(v["range"])
            return moment
        return v

    def statement(d: dict[str, Any]) -> Statement:
        return Statement(None, [value(p) for p in d["params"]], str(d["sql"]))

    return Plan(
        str(data["kind"]),
        statement(data["main"]),
        heatmap_field=str(data["heatmap_field"]),
        labels=[str(x) for x in data["labels"]],
        keys=int(data["keys"]),
        plain=[str(x) for x in data["plain"]],
        percentiles=[(str(label), statement(d)) for label, d in data["percentiles"]],
    )


_STAMP: list[Any] | None = None


def _code_files() -> list[Path]:
    """The files whose code decides a query's SQL text: the query package, what the store
    contributes (relations, dialects, quoting), the time parser, and sqlglot's version
    file and generators (found without importing sqlglot)."""
    here = Path(__file__).resolve().parent
    store = here.parent / "store"
    files = [*sorted(here.glob("*.py")), here.parent / "timeutil.py"]
    files += [store / f for f in ("base.py", "dialects.py", "duckdb.py", "segment.py", "sqltext.py")]
    spec = importlib.util.find_spec("sqlglot")
    if spec is not None and spec.origin:
        root = Path(spec.origin).parent
        files += [root / "_version.py", root / "generator.py", root / "generators" / "duckdb.py"]
    return files


def _code_stamp() -> list[Any]:
    """What identifies the code that compiles and renders: rootsift's version and the size
    and modification time of each of ``_code_files``."""
    global _STAMP
    if _STAMP is None:
        from rootsift import __version__

        stamp: list[Any] = [__version__]
        for f in _code_files():
            try:
                st = f.stat()
                stamp.append([str(f), st.st_size, st.st_mtime_ns])
            except OSError:
                stamp.append([str(f), None])
        _STAMP = stamp
    return _STAMP
