"""What every PostgreSQL log variant shares: field names, statement/duration joining.

A *record* is one server message as a flat dict (the fields of docs/formats/postgres.md).
``Assembler`` turns records into events:

* ``duration: 1.2 ms  statement: SELECT …`` (log_min_duration_statement) becomes one
  event with ``duration_ms`` and ``statement``; likewise ``execute|parse|bind NAME: …``.
* ``statement: …`` / ``execute NAME: …`` without a duration (log_statement) waits, per
  session, for the ``duration: … ms`` line that log_duration writes after it; it is
  emitted with that duration, or without one when the session logs its next statement,
  an error, its disconnection, or the input ends — nothing is dropped.
* stderr-style records are built line by line (``open``, ``attach``, ``extend``): the
  DETAIL/HINT/CONTEXT/STATEMENT/QUERY/LOCATION lines and tab-indented continuation
  lines of a message belong to it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rootsift.ingest import fingerprint as _fingerprints
from rootsift.ingest.formats.base import Event, Item
from rootsift.ingest.formats.postgres_messages import add_facts

SEVERITIES = ("DEBUG1", "DEBUG2", "DEBUG3", "DEBUG4", "DEBUG5", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "LOG", "FATAL", "PANIC")  # fmt: skip
SECONDARY = {
    "DETAIL": "detail",
    "HINT": "hint",
    "CONTEXT": "context",
    "STATEMENT": "statement",
    "QUERY": "internal_query",
    "LOCATION": "location",
}
"""Lines that continue the message before them, and the field each one fills."""
SEVERITY_RE = "|".join(SEVERITIES + tuple(SECONDARY))
UNKNOWN = ("", "[unknown]")
"""Values PostgreSQL prints for user/database/application before they are known: omitted."""

_STATEMENT = re.compile(r"(statement|execute|parse|bind)(?: ([^:\n]*))?: ")
_DURATION = re.compile(r"duration: (\d+(?:\.\d+)?) ms(?: +(statement|(?:execute|parse|bind)(?= ))(?: ([^:\n]*))?: )?")
_ENDS_SESSION = ("ERROR", "FATAL", "PANIC")
MAX_PENDING = 10000
"""Sessions with a statement waiting for its duration; the oldest is emitted beyond this."""


FINGERPRINT: Callable[[str], str] | None = _fingerprints.postgres
"""Statement → fingerprint (``rootsift.ingest.fingerprint.postgres``); None turns it off (benchmarks)."""


_FINGERPRINTS: dict[str, str] = {}


def add_fingerprint(event: Event, statement: str) -> None:
    """Set ``fingerprint`` from ``statement`` (cached by text: prepared statements repeat verbatim)."""
    if FINGERPRINT is None or not statement:
        return
    value = _FINGERPRINTS.get(statement)
    if value is None:
        try:
            value = FINGERPRINT(statement)
        except Exception:  # noqa: BLE001 - a statement the fingerprinter trips on keeps its text, without a fingerprint
            return
        if len(_FINGERPRINTS) >= 4096:
            _FINGERPRINTS.clear()
        _FINGERPRINTS[statement] = value
    if value:
        event["fingerprint"] = value


def split_statement(event: Event, text: str) -> bool:
    """If ``text`` is ``statement: SQL`` or ``execute|parse|bind NAME: SQL``, set statement fields."""
    m = _STATEMENT.match(text)
    if m is None:
        return False
    kind, name = m.group(1), m.group(2)
    if (kind == "statement") != (name is None):
        return False
    event["statement_kind"] = kind
    if name is not None:
        event["prepared_name"] = name
    event["statement"] = text[m.end() :]
    return True


class Assembler:
    """Builds events from records; call ``take()`` after each input line for what is ready."""

    def __init__(self) -> None:
        self.out: list[Item] = []
        self.cur: Event | None = None
        self.cur_line = 0
        self.cur_field = "message"
        self.pending: dict[object, tuple[int, Event]] = {}

    def take(self) -> list[Item]:
        out = self.out[:]
        self.out.clear()
        return out

    # -- line-by-line records (stderr, Cloud SQL text) -------------------------------
    def open(self, line: int, record: Event) -> None:
        """Start a record (its ``message`` set); the previous one is finished."""
        if self.cur is not None:
            self.complete(self.cur_line, self.cur)
        self.cur, self.cur_line, self.cur_field = record, line, "message"

    def attach(self, line: int, record: Event, kind: str, text: str) -> None:
        """A DETAIL/HINT/… line: joins the open record of the same process, else stands alone."""
        cur = self.cur
        field = SECONDARY[kind]
        if cur is None or cur.get("pid") != record.get("pid") or cur.get("session_id") != record.get("session_id"):
            record["severity"] = kind
            record["message"] = text
            self.open(line, record)
            return
        if field == "detail" and text.startswith("parameters: ") and "parameters" not in cur:
            field, text = "parameters", text[12:]
        old = cur.get(field)
        cur[field] = text if not isinstance(old, str) else old + "\n" + text
        self.cur_field = field

    def extend(self, text: str, join: str = "\n") -> bool:
        """A continuation line (its leading tab removed); False if there is no record to extend."""
        cur = self.cur
        if cur is None:
            return False
        old = cur.get(self.cur_field)
        cur[self.cur_field] = text if not isinstance(old, str) else old + join + text
        return True

    def close(self) -> None:
        if self.cur is not None:
            self.complete(self.cur_line, self.cur)
            self.cur = None

    def finish(self) -> list[Item]:
        """End of input: the open record and every waiting statement."""
        self.close()
        for line, event in self.pending.values():
            self._emit(line, event)
        self.pending.clear()
        return self.take()

    # -- whole records -----------------------------------------------------------------
    def complete(self, line: int, event: Event) -> None:
        """A finished record: emit it, hold it for its duration, or complete a held one."""
        msg = event.get("message")
        if not isinstance(msg, str):
            self._emit(line, event)
            return
        if msg.startswith("duration: "):
            m = _DURATION.match(msg)
            if m is not None:
                event["duration_ms"] = float(m.group(1))
                end = m.end()
                kind = m.group(2)
                if kind is not None:
                    event["statement_kind"] = kind
                    if kind != "statement":
                        event["prepared_name"] = m.group(3)
                    event["statement"] = msg[end:]
                    event["message"] = msg[: end - 2]
                elif end == len(msg) or not msg[end:].strip():
                    held = self.pending.pop(_key(event), None)
                    if held is not None:
                        self._merge(held[1], event)
                        line, event = held
            self._emit(line, event)
            return
        if msg.startswith(("statement: ", "execute ")) and split_statement(event, msg):
            event["message"] = _header(msg, event)
            key = _key(event)
            held = self.pending.pop(key, None)
            if held is not None:
                self._emit(*held)
            elif len(self.pending) >= MAX_PENDING:
                self._emit(*self.pending.pop(next(iter(self.pending))))
            self.pending[key] = (line, event)
            return
        add_facts(event, msg)
        if self.pending and (event.get("severity") in _ENDS_SESSION or msg.startswith("disconnection: ")):
            held = self.pending.pop(_key(event), None)
            if held is not None:
                self._emit(*held)
        self._emit(line, event)

    def _merge(self, held: Event, duration: Event) -> None:
        held["duration_ms"] = duration["duration_ms"]
        for k, v in duration.items():
            if k not in held or (k == "query_id" and not held[k]):
                held[k] = v

    def _emit(self, line: int, event: Event) -> None:
        stmt = event.get("statement")
        if isinstance(stmt, str) and "fingerprint" not in event:
            add_fingerprint(event, stmt)
        self.out.append((line, event))


def _header(msg: str, event: Event) -> str:
    """The message without its SQL text (kept once, under ``statement``)."""
    stmt = event["statement"]
    return msg[: len(msg) - len(stmt) - 2] if isinstance(stmt, str) else msg


def _key(event: Event) -> object:
    return event.get("session_id") or event.get("pid")
