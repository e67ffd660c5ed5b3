"""MySQL slow logs read by DuckDB: lines grouped into entries in SQL, for the common shape.

The common shape is what MySQL 5.7+ writes for every entry, and the parser's fast path::

    # Time: 2024-03-01T10:00:00.339563Z
    # User@Host: app[app] @ web0 [10.0.0.18]  Id: 70239
    # Query_time: 0.016645  Lock_time: 0.001665 Rows_sent: 6  Rows_examined: 5991
    SET timestamp=1709287200;
    SELECT ... (one or more lines, none starting with ``#``);

``ENTRIES`` reads a block of such lines in one query: each line is classified and its
header fields extracted (in parallel), the lines are numbered and each ``# Time:`` line
starts an entry (a running sum, streamed in file order), and each entry's fields and
statement are aggregated. ``ok`` says whether an entry is in the common shape, where the
SQL gives exactly what the parser gives (``mysql_slow_entry.EntryBuilder.finish``'s fast
path: the time from ``SET timestamp``, the statement stripped of Python's whitespace and
one ``;``); entry 0 holds the lines before the first ``# Time:`` (the start-up banner,
blank lines). A block with any other entry (``use db;``, MariaDB or Percona header lines,
``# Time:`` without ``SET timestamp``, non-ASCII header values, a banner inside an entry)
is parsed by the Python parser, which stays the reference.
"""

from __future__ import annotations

from rootsift.store.sqltext import literal

WHITESPACE = (
    "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)
"""The characters ``str.strip()`` removes (``str.isspace``), for DuckDB's ``trim``."""

_USER_HOST = r"^# User@Host: ([^\[\s]*)\[([^\]\s]*)\] @ ([^\[\s]*) \[([^\]\s]*)\]  Id: *([0-9]{1,18})$"
_QUERY_TIME = (
    r"^# Query_time: ([0-9]{1,6})\.([0-9]{6})  Lock_time: ([0-9]{1,9})\.([0-9]{6}) "
    r"Rows_sent: ([0-9]{1,18})  Rows_examined: ([0-9]{1,18})$"
)
_SET = r"^SET timestamp=([0-9]{1,11});$"
_BANNER = r".*, Version: .*started with: *"
_BANNER_REST = r"(?:Tcp port|TCP Port): .*|Time +Id +Command +Argument *"


def _kind(line: str) -> str:
    """SQL: a line's kind: T(ime), U(ser@Host), Q(uery_time), S(ET timestamp), B(ody),
    V (what may be a server's start-up banner: ends an entry), X (any other ``#`` line)."""
    return (
        f"CASE WHEN {line} IS NULL THEN 'B' "
        f"WHEN starts_with({line}, '#') THEN CASE WHEN starts_with({line}, '# Time:') THEN 'T' "
        f"WHEN starts_with({line}, '# User@Host:') THEN 'U' WHEN starts_with({line}, '# Query_time:') THEN 'Q' "
        "ELSE 'X' END "
        f"WHEN starts_with({line}, 'SET timestamp=') THEN 'S' "
        f"WHEN contains({line}, ', Version: ') AND contains({line}, 'started with:') THEN 'V' "
        "ELSE 'B' END"
    )


_LINES = f"""
SELECT line, kind,
  CASE WHEN kind = 'U' THEN regexp_extract(line, {literal(_USER_HOST)}, ['priv', 'user', 'host', 'ip', 'id']) END AS u,
  CASE WHEN kind = 'Q' THEN regexp_extract(line, {literal(_QUERY_TIME)}, ['qt', 'qf', 'lt', 'lf', 'sent', 'examined'])
  END AS q,
  CASE WHEN kind = 'S' THEN regexp_extract(line, {literal(_SET)}, 1) END AS s
FROM (SELECT line, {_kind("line")} AS kind FROM $lines)
"""

_SKIPPED = (
    f"line IS NULL OR trim(line, {literal(WHITESPACE)}) = '' OR (NOT regexp_matches(line, '[^ -~]') "
    f"AND kind IN ('B', 'V') AND regexp_full_match(line, {literal(_BANNER + '|' + _BANNER_REST)}))"
)
"""SQL: a line the parser skips before the first entry (blank, the start-up banner)."""

_ASCII_SPACE = literal("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f ")
_TRIMMED = f"trim(body, {_ASCII_SPACE})"
_STATEMENT = (
    f"CASE WHEN suffix({_TRIMMED}, ';') THEN rtrim(substr({_TRIMMED}, 1, length({_TRIMMED}) - 1), {_ASCII_SPACE}) "
    f"ELSE {_TRIMMED} END"
)
"""SQL: the statement as the parser's fast path has it (stripped, one ``;`` off), where it
starts and ends with a visible ASCII character (the only case ``ok`` lets through: there
Python's ``strip`` and this ASCII trim agree)."""

_ENTRIES = f"""
SELECT *, entry > 0 AND ok_head AND left(statement, 1) BETWEEN '!' AND '~'
  AND right(statement, 1) BETWEEN '!' AND '~' AS ok
FROM (
  SELECT n, entry, ok_head, skipped, restarted, u, q, s, {_STATEMENT} AS statement
  FROM (SELECT *, CASE WHEN more_lines IS NULL THEN first_line ELSE first_line || chr(10) || more_lines END AS body FROM (
    SELECT min(n) AS n, entry,
      count(*) FILTER (WHERE kind = 'T') = 1 AND NOT bool_or(t_user) FILTER (WHERE kind = 'T')
        AND count(*) FILTER (WHERE kind = 'U') = 1 AND min(n) FILTER (WHERE kind = 'U') = min(n) + 1
        AND count(*) FILTER (WHERE kind = 'Q') = 1 AND min(n) FILTER (WHERE kind = 'Q') = min(n) + 2
        AND count(*) FILTER (WHERE kind = 'S') = 1 AND min(n) FILTER (WHERE kind = 'S') = min(n) + 3
        AND count(*) FILTER (WHERE kind = 'B') = count(*) - 4
        AND any_value(u.id) FILTER (WHERE kind = 'U') <> ''
        AND any_value(q.qt) FILTER (WHERE kind = 'Q') <> ''
        AND any_value(s) FILTER (WHERE kind = 'S') <> ''
        AND NOT starts_with(arg_min(coalesce(line, ''), n) FILTER (WHERE kind = 'B'), 'use ') AS ok_head,
      -- the CASE keeps the test to entry 0's lines (a FILTER alone still computes it for every line)
      bool_and(CASE WHEN entry = 0 THEN {_SKIPPED} END) FILTER (WHERE entry = 0) AS skipped,
      bool_or(kind = 'V') FILTER (WHERE entry = 0) AS restarted,
      any_value(u) FILTER (WHERE kind = 'U') AS u,
      any_value(q) FILTER (WHERE kind = 'Q') AS q,
      any_value(s) FILTER (WHERE kind = 'S') AS s,
      arg_min(coalesce(line, ''), n) FILTER (WHERE kind = 'B') AS first_line,
      -- the ordered aggregate only over the lines after a statement's first (rare: it is costly)
      string_agg(coalesce(line, ''), chr(10) ORDER BY n) FILTER (WHERE kind = 'B' AND before = 'B') AS more_lines
    FROM (
      SELECT *, row_number() OVER () + $first AS n,
        sum(CAST(kind = 'T' AS INTEGER)) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS entry,
        lag(kind) OVER () AS before, CASE WHEN kind = 'T' THEN contains(line, '# User@Host:') END AS t_user
      FROM ({_LINES})
    )
    GROUP BY entry
  ))
)
"""


def entries(lines: str, first: int) -> str:
    """SQL: the entries of a block (``lines``: a relation of its lines as ``line``, the first
    numbered ``first``), with ``ok``, the header fields, the statement. Entry 0 has the lines
    before the first ``# Time:`` (``skipped``: all of kinds the parser skips there;
    ``restarted``: a start-up banner among them)."""
    return _ENTRIES.replace("$lines", lines).replace("$first", str(first - 1))


FIELDS = [
    ("timestamp", "make_timestamp(CAST(s AS BIGINT) * 1000000)"),
    ("timestamp_source", "'set_timestamp'"),
    ("user", "CASE WHEN u.user <> '' THEN u.user WHEN u.priv <> '' THEN u.priv END"),
    ("priv_user", "CASE WHEN u.priv <> '' AND u.user <> '' AND u.priv <> u.user THEN u.priv END"),
    ("host", "nullif(u.host, '')"),
    ("ip", "nullif(u.ip, '')"),
    ("thread_id", "CAST(u.id AS BIGINT)"),
    ("query_time_ms", "CAST(CAST(q.qt || q.qf AS BIGINT) AS DOUBLE) / 1000"),
    ("lock_time_ms", "CAST(CAST(q.lt || q.lf AS BIGINT) AS DOUBLE) / 1000"),
    ("rows_sent", "CAST(q.sent AS BIGINT)"),
    ("rows_examined", "CAST(q.examined AS BIGINT)"),
    ("statement", "statement"),
]
"""The event's fields (but ``db`` and ``fingerprint``) over an ``ok`` entry of ``ENTRIES``,
as ``FieldReader.entry_fields``, ``query_time`` and ``EntryBuilder.finish`` give them."""

KEY = "translate(statement, '123456789', '000000000')"
"""SQL: ``MySQLCache``'s key of a statement (every digit made 0): one fingerprint per key."""
