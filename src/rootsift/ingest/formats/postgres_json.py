"""PostgreSQL as JSON lines: jsonlog (PG15+), Google Cloud SQL exports, CloudNativePG.

Each line is read on its own, so the three may even be mixed:

* jsonlog: ``{"timestamp": "2024-06-27 00:00:07.369 CEST", "pid": 58151, "error_severity": "LOG", "message": …}``
* Cloud SQL (Cloud Logging export): the server line in ``textPayload`` behind a short
  prefix (``[24667]: [1-1] db=test,user=bob LOG:  …``), time from ``timestamp``; entries
  whose text starts with a tab continue the message before them. A ``jsonPayload``
  holding jsonlog keys is read as jsonlog.
* CloudNativePG: ``{"logger": "postgres", "msg": "record", "record": {csvlog keys}}``;
  its ``postgres`` lines with a plain stderr line in ``msg`` and the operator's own lines
  (``level``/``logger``/``msg``) are kept as events too.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import orjson

from rootsift.ingest.formats import register
from rootsift.ingest.formats.base import TIME_KEY, Event, FormatOptions, Item, Lines, TextFormat
from rootsift.ingest.formats.postgres_common import SECONDARY, Assembler
from rootsift.ingest.formats.postgres_csv import PostgresCsv
from rootsift.ingest.formats.postgres_prefix import LoosePrefix
from rootsift.ingest.formats.postgres_time import PgTime
from rootsift.ingest.rejects import Reject

# jsonlog key -> (event field, kind)
JSONLOG: dict[str, tuple[str, str]] = {
    "timestamp": ("timestamp", "time"),
    "user": ("user", "str"),
    "dbname": ("database", "str"),
    "pid": ("pid", "int"),
    "remote_host": ("remote_host", "str"),
    "remote_port": ("remote_port", "int"),
    "session_id": ("session_id", "str"),
    "line_num": ("line_num", "int"),
    "ps": ("command_tag", "str"),
    "session_start": ("session_start", "stamp"),
    "vxid": ("virtual_xid", "str"),
    "txid": ("transaction_id", "int"),
    "error_severity": ("severity", "str"),
    "state_code": ("sql_state", "str"),
    "message": ("message", "text"),
    "detail": ("detail", "text"),
    "hint": ("hint", "text"),
    "internal_query": ("internal_query", "text"),
    "internal_position": ("internal_position", "int"),
    "context": ("context", "text"),
    "statement": ("statement", "text"),
    "cursor_position": ("cursor_position", "int"),
    "application_name": ("application_name", "str"),
    "backend_type": ("backend_type", "str"),
    "leader_pid": ("leader_pid", "int"),
    "query_id": ("query_id", "int"),
}
_TEXT = {k: field for k, (field, kind) in JSONLOG.items() if kind in ("str", "text")}
_INTS = [(k, field) for k, (field, kind) in JSONLOG.items() if kind == "int"]
CSV_KEYS = (
    "log_time", "user_name", "database_name", "process_id", "connection_from", "session_id", "session_line_num",
    "command_tag", "session_start_time", "virtual_transaction_id", "transaction_id", "error_severity",
    "sql_state_code", "message", "detail", "hint", "internal_query", "internal_query_pos", "context", "query",
    "query_pos", "location", "application_name", "backend_type", "leader_pid", "query_id",
)  # fmt: skip
"""The csvlog column names, as CloudNativePG's ``record`` spells them."""


@register
class PostgresJson(TextFormat):
    name = "postgres-json"
    summary = "PostgreSQL jsonlog (PG15+), Google Cloud SQL exports and CloudNativePG JSON lines"
    reads = ("tz",)

    def __init__(self, options: FormatOptions) -> None:
        super().__init__(options)
        self.clock = PgTime(options.zone(), bool(options.tz))
        self.text = LoosePrefix(self.clock, need_time=False)
        self.csv = PostgresCsv(options)

    @classmethod
    def sniff(cls, lines: list[str], name: str) -> float:
        sample = [ln for ln in lines if ln.strip()][:50]
        if not sample or not sample[0].lstrip().startswith("{"):
            return 0.0
        hits = sum(1 for ln in sample if _variant(ln) is not None)
        return 0.95 * hits / len(sample) if hits * 2 >= len(sample) else 0.0

    def parse(self, lines: Lines) -> Iterator[Item]:
        asm = Assembler()
        for number, line in lines:
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                yield Reject(number, f"not JSON: {exc}", line)
                continue
            why = self._object(asm, number, obj) if isinstance(obj, dict) else "not a JSON object"
            if why is not None:
                asm.close()
                yield from asm.take()
                yield Reject(number, why, line)
            elif asm.out:
                yield from asm.take()
        yield from asm.finish()

    def _object(self, asm: Assembler, number: int, obj: dict[str, object]) -> str | None:
        """Feed one JSON object to ``asm``; the reason it is no PostgreSQL record, else None."""
        record = obj.get("record")
        if isinstance(record, dict):
            row = ["" if record.get(k) is None else str(record.get(k)) for k in CSV_KEYS]
            event = self.csv.row_event(row)
            if isinstance(event, str):
                return "CloudNativePG record: " + event
            _extra(event, "pod", obj.get("logging_pod"))
            asm.close()
            asm.complete(number, event)
            return None
        if "error_severity" in obj or ("message" in obj and any(k.strip('"') in obj for k in _JSONLOG_ONLY)):
            return self._jsonlog(asm, number, obj, {})
        payload = obj.get("jsonPayload")
        if isinstance(payload, dict) and ("error_severity" in payload or "message" in payload):
            extra = {"instance": _instance(obj)}
            return self._jsonlog(asm, number, {"timestamp": obj.get("timestamp"), **payload}, extra)
        text = obj.get("textPayload")
        if isinstance(text, str):
            when = self.clock.parse(str(obj.get("timestamp", "")))
            return self._text(asm, number, text, when, obj.get("severity"), {"instance": _instance(obj)})
        msg, ts = obj.get("msg"), obj.get("ts")
        if isinstance(msg, str) and isinstance(ts, int | float) and "level" in obj:
            when = _epoch(ts)
            extra = {"pod": obj.get("logging_pod"), "logger": obj.get("logger"), "detail": obj.get("err")}
            return self._text(asm, number, msg, when, obj.get("level"), extra)
        return "JSON object is not a PostgreSQL jsonlog, Cloud SQL or CloudNativePG record"

    def _jsonlog(self, asm: Assembler, number: int, obj: dict[str, object], extra: dict[str, object]) -> str | None:
        event: Event = {_TEXT[k]: v for k, v in obj.items() if k in _TEXT and isinstance(v, str) and v}
        for field in ("user", "database", "application_name"):
            if event.get(field) == "[unknown]":
                del event[field]
        for key, field in _INTS:
            value = obj.get(key)
            if isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit()):
                event[field] = int(value)
        when = obj.get("timestamp")
        if when is not None:
            stamp = self.clock.parse(str(when))
            if stamp is None:
                return f"unreadable time stamp {when!r}"
            event[TIME_KEY] = stamp
        start = obj.get("session_start")
        if isinstance(start, str) and start:
            iso = self.clock.iso(start)
            if iso is not None:
                event["session_start"] = iso
        if TIME_KEY not in event:
            return "no time stamp (jsonlog key 'timestamp')"
        if "func_name" in obj or "file_name" in obj:
            event["location"] = f"{obj.get('func_name', '')}, {obj.get('file_name', '')}:{obj.get('file_line_num', '')}"
        if str(event.get("detail", "")).startswith("parameters: "):
            event["parameters"] = str(event.pop("detail"))[12:]
        for k, v in extra.items():
            _extra(event, k, v)
        asm.close()
        asm.complete(number, event)
        return None

    def _text(
        self, asm: Assembler, number: int, text: str, when: datetime | None, level: object, extra: dict[str, object]
    ) -> str | None:
        """A server log line carried in JSON (Cloud SQL textPayload, CloudNativePG msg)."""
        if text.startswith("\t") and asm.extend(text[1:]):
            return None
        got = self.text.read(text)
        secondary = ""
        if got is None:
            record: Event = {"message": text.rstrip("\n")}
            if isinstance(level, str) and level:
                record["severity"] = level.upper()
        else:
            record, severity, message = got
            if severity in SECONDARY:
                secondary = severity
            else:
                record["severity"] = severity
            record["message"] = message
        if TIME_KEY not in record:
            if when is None:
                return "no readable time stamp"
            record[TIME_KEY] = when
        for k, v in extra.items():
            _extra(record, k, v)
        if secondary:
            asm.attach(number, record, secondary, str(record.pop("message")))
        else:
            asm.open(number, record)
        return None


_JSONLOG_ONLY = ('"session_id"', '"backend_type"', '"dbname"', '"vxid"', '"state_code"')


def _variant(line: str) -> str | None:
    # An application's JSON log may well have "message" and "pid": ask for keys only
    # PostgreSQL's jsonlog writes, so such logs stay ordinary JSON lines.
    if '"error_severity"' in line or ('"message"' in line and any(k in line for k in _JSONLOG_ONLY)):
        return "jsonlog"
    if '"textPayload"' in line and "cloudsql" in line:
        return "cloudsql"
    if '"logging_pod"' in line or '"logger":"postgres"' in line:
        return "cnpg"
    return None


def _instance(obj: dict[str, object]) -> object:
    resource = obj.get("resource")
    labels = resource.get("labels") if isinstance(resource, dict) else None
    return labels.get("database_id") if isinstance(labels, dict) else None


def _extra(event: Event, key: str, value: object) -> None:
    if isinstance(value, str) and value:
        event[key] = value


def _epoch(value: int | float) -> datetime | None:
    try:
        return datetime.fromtimestamp(value, UTC)
    except (ValueError, OverflowError, OSError):
        return None
