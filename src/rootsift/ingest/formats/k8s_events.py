"""Kubernetes events as change events: ``kubectl get events -o json`` (an ``EventList`` or
``List`` of core/v1 Events, or of events.k8s.io/v1 Events), the ``-w -o json`` stream of
one Event object after another, or Events as JSON lines.

The input is scanned as text, one line at a time, tracking only brackets and strings:
each Event is parsed on its own as soon as it closes and numbered with its first line,
so a List of any size costs the memory of one Event, and a broken Event is one reject
without losing the others. Fields: docs/formats.md, "Change events".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, Item, Lines, TextFormat
from rootsift.ingest.rejects import Reject

REASON_KINDS = {
    "ScalingReplicaSet": "scale",
    "SuccessfulRescale": "scale",
    "SuccessfulCreate": "scale",
    "SuccessfulDelete": "scale",
    "Pulling": "deploy",
    "Pulled": "deploy",
    "Killing": "restart",
    "Created": "restart",
    "Started": "restart",
    "BackOff": "restart",
    "Preempting": "restart",
    "LeaderElection": "election",
    "NodeReady": "node",
    "NodeNotReady": "node",
    "NodeSchedulable": "node",
    "NodeNotSchedulable": "node",
    "Rebooted": "node",
    "RegisteredNode": "node",
    "RemovingNode": "node",
    "Starting": "node",
    "Evicted": "failure",
    "OOMKilling": "failure",
    "Unhealthy": "failure",
    "SystemOOM": "failure",
}
"""An Event's ``reason`` as the conventional ``change.kind``; reasons starting with
``Failed`` are ``failure``, any other is ``other``. ``failure`` and ``node`` events are
symptoms or infrastructure rather than changes someone made: kept, marked as such."""
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]|"')
_WORKLOAD_SUFFIX = {
    "ReplicaSet": re.compile(r"-[a-z0-9]{5,10}$"),  # the pod-template-hash
    "Pod": re.compile(
        r"(?:-[a-z0-9]{5,10})?-[a-z0-9]{5}$|-\d+$"
    ),  # ReplicaSet/Job/DaemonSet pods, StatefulSet ordinals
}
_WORKLOADS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "Service", "Job", "CronJob"} | set(_WORKLOAD_SUFFIX))


class _Scanner:
    """Cuts numbered lines into the JSON texts of Events: each top-level object, each
    element of a top-level object's ``items`` array (which is then not an Event itself),
    or each element of a top-level array."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.depth = 0
        self.items_at = 0  # depth of the items array's elements (2) while inside it, else 0
        self.key = ""  # the last string seen at depth 1 (a key, when ':' follows)
        self.start = 0  # line of the value being captured
        self.parts: list[str] = []
        self.capturing = False
        self.is_list = False

    def feed(self, n: int, line: str) -> Iterator[tuple[int, str] | Reject]:
        """The Events (first line, JSON text) that close on this line, and rejects."""
        seg = 0
        for m in _TOKEN.finditer(line):
            tok = m.group()
            if tok == '"':
                yield from self._broken(n, "a string is not closed on its line", line)
                return
            if self.depth == 0 and tok not in ("{", "["):
                yield Reject(n, "text outside any JSON object (expected kubectl get events -o json)", line)
                return
            if tok[0] == '"':
                if self.depth == 1:
                    self.key = tok
                continue
            if tok in ("{", "["):
                if self.depth == 0 and tok == "[":  # an array of Events (jq's output)
                    self.start, self.items_at, self.is_list, self.capturing = n, 1, True, False
                elif self.depth == 0:
                    self.start, self.parts, self.capturing, self.is_list, seg = n, [], True, False, m.start()
                elif self.depth == 1 and tok == "[" and self.key == '"items"':
                    self.items_at, self.is_list, self.capturing = 2, True, False  # a List: its items are the Events
                elif self.depth == self.items_at and tok == "{":
                    self.start, self.parts, self.capturing, seg = n, [], True, m.start()
                self.depth += 1
            elif tok in ("}", "]"):
                self.depth -= 1
                if self.depth < 0:
                    self.depth = 0
                    yield Reject(n, f"a closing {tok!r} without its opening bracket", line)
                    return
                if self.capturing and self.depth in (0, self.items_at):
                    self.parts.append(line[seg : m.end()])
                    self.capturing = False
                    yield self.start, "".join(self.parts)
                if not self.capturing:
                    seg = m.end()  # what follows on the line is checked as text outside any object
                if self.items_at and self.depth < self.items_at:
                    self.items_at = 0  # the items array closed
        if self.capturing:
            self.parts.append(line[seg:] + "\n")
        elif self.depth == 0 and line[seg:].strip(" \t,"):
            yield Reject(n, "text outside any JSON object (expected kubectl get events -o json)", line)

    def _broken(self, n: int, reason: str, line: str) -> Iterator[Reject]:
        """A line that breaks the JSON: the value it is in is lost; scanning restarts after it."""
        start = self.start if self.capturing else n
        yield Reject(n, f"{reason} (the object from line {start} is dropped)" if start != n else reason, line)
        self.reset()

    def end(self) -> Iterator[Reject]:
        if self.depth:
            yield Reject(max(self.start, 1), "the input ends inside a JSON object (the object starting here)", "")


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def service_of(kind: str, name: str) -> str | None:
    """The workload an object belongs to, by Kubernetes' naming: a Deployment's name; a
    ReplicaSet's without its hash; a Pod's without the generated suffixes.

    >>> service_of("Pod", "checkout-7d9f8b6c5d-x2x7q")
    'checkout'
    """
    if kind not in _WORKLOADS or not name:
        return None
    suffix = _WORKLOAD_SUFFIX.get(kind)
    return suffix.sub("", name) or name if suffix else name


def event_of(obj: Any) -> tuple[Event | None, str]:
    """A Kubernetes Event object as a change event, or None and what is wrong with it."""
    if not isinstance(obj, dict):
        return None, "an item that is not a JSON object"
    target = obj.get("involvedObject") or obj.get("regarding")
    reason = obj.get("reason")
    if not isinstance(target, dict) or not isinstance(reason, str):
        return None, "not a Kubernetes Event: no reason and involvedObject (or regarding)"
    series, meta, source = (_object(obj.get(k)) for k in ("series", "metadata", "source"))
    times = [obj.get("lastTimestamp"), obj.get("eventTime"), obj.get("firstTimestamp")]
    times += [series.get("lastObservedTime"), obj.get("deprecatedLastTimestamp"), meta.get("creationTimestamp")]
    at = next((t for t in map(_time, times) if t is not None), None)
    if at is None:
        return None, "Event has no lastTimestamp, eventTime or firstTimestamp in RFC 3339"
    kind = REASON_KINDS.get(reason) or ("failure" if reason.startswith("Failed") else "other")
    ev: Event = {TIME_KEY: at, "change": {"kind": kind}, "reason": reason}
    fields = {
        "description": obj.get("message") or obj.get("note"),
        "type": obj.get("type"),
        "k8s.object.kind": target.get("kind"),
        "k8s.object.name": target.get("name"),
        "k8s.namespace.name": target.get("namespace") or meta.get("namespace"),
        "k8s.object.field_path": target.get("fieldPath"),
        "k8s.event.name": meta.get("name"),
        "k8s.event.count": obj.get("count") or series.get("count"),
        "k8s.event.first_timestamp": obj.get("firstTimestamp") or obj.get("deprecatedFirstTimestamp"),
        "source": source.get("component") or obj.get("reportingComponent") or obj.get("reportingController"),
        "host": source.get("host") or (target.get("name") if target.get("kind") == "Node" else None),
        "service": service_of(str(target.get("kind") or ""), str(target.get("name") or "")),
    }
    for key, value in fields.items():
        if isinstance(value, str | int) and not isinstance(value, bool) and value != "":
            if "." in key:
                *path, leaf = key.split(".")
                node: dict[str, Any] = ev
                for part in path:
                    node = node.setdefault(part, {})
                node[leaf] = value
            else:
                ev[key] = value
    return ev, ""


@register
class K8sEventsFormat(TextFormat):
    """``kubectl get events -o json``: one change event per Kubernetes Event."""

    name = "k8s-events"
    summary = "Kubernetes events: kubectl get events -o json (List, -w stream, JSON lines), core/v1 or events.k8s.io/v1"
    reads = ()

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        head = "\n".join(lines[:400])
        if not head.lstrip().startswith("{"):
            return 0.0
        event = re.search(r'"kind"\s*:\s*"Event(?:List)?"', head) or re.search(r'"reason"\s*:', head)
        target = re.search(r'"(?:involvedObject|regarding)"\s*:\s*\{', head)
        return 0.95 if event and target else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        scanner = _Scanner()
        for n, line in lines:
            for found in scanner.feed(n, line):
                if isinstance(found, Reject):
                    yield found
                    continue
                first, text = found
                try:
                    obj = json.loads(text)
                except ValueError as exc:
                    yield Reject(first, f"the object starting here is not valid JSON: {exc}", text[:300])
                    continue
                ev, error = event_of(obj)
                if ev is None:
                    if not (isinstance(obj, dict) and obj.get("kind") in ("List", "EventList")):
                        yield Reject(first, error, text.partition("\n")[0])
                    continue
                yield first, ev
        yield from scanner.end()
