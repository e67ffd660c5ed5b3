"""MySQL slow logs read by DuckDB: lines placed into entries in SQL, for the common shape.

The common shape is what MySQL 5.7+ writes for every entry, and the parser's fast path::

    # Time: 2024-03-01T10:00:00.339563Z
    # User@Host: app[app] @ web0 [10.0.0.18]  Id: 70239
    # Query_time: 0.016645  Lock_time: 0.001665 Rows_sent: 6  Rows_examined: 5991
    use shop;  (optional: the database of this entry and of later ones)
    SET timestamp=1709287200;
    SELECT ... (one or more lines, none starting with ``#``);

``lines`` reads a block in one pass without grouping: each line's kind and header fields
are extracted (in parallel), then streaming windows in file order number the lines, count
entries (each ``# Time:`` line starts one), check each line is where the shape has it
(each kind after the one before) and, at a statement's first line, look back at the
entry's header lines; only statement lines, odd lines and the last line are kept.
``entries`` joins each statement's lines and says where the result is exactly the
parser's (``mysql_slow_entry.EntryBuilder.finish``'s fast path: the time from
``SET timestamp``, the statement without one ``;``, stripped where Python's ``strip``
would leave it as it is). Lines before the first ``# Time:`` may only be what the parser
skips there (the start-up banner, blank lines). A block with any other entry (MariaDB or
Percona header lines, ``# Time:`` without ``SET timestamp``, non-ASCII header values, a
banner inside an entry, blank lines around a statement) is parsed by the Python parser,
which stays the reference (``ingest/textslow.py``).
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
    """SQL: a line's kind: T(ime), U(ser@Host), Q(uery_time), D (``use db;``), S(ET timestamp), B(ody),
    V (what may be a server's start-up banner: ends an entry), X (any other ``#`` line)."""
    return (
        f"CASE WHEN {line} IS NULL THEN 'B' "
        f"WHEN starts_with({line}, '#') THEN CASE WHEN starts_with({line}, '# Time:') THEN 'T' "
        f"WHEN starts_with({line}, '# User@Host:') THEN 'U' WHEN starts_with({line}, '# Query_time:') THEN 'Q' "
        "ELSE 'X' END "
        f"WHEN starts_with({line}, 'SET timestamp=') THEN 'S' WHEN starts_with({line}, 'use ') THEN 'D' "
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

_VISIBLE = "BETWEEN '!' AND '~'"
_LINE_OK = """CASE kind
  WHEN 'T' THEN (before IS NULL OR before = 'B' OR entry = 1) AND NOT contains(line, '# User@Host:')
  WHEN 'U' THEN before = 'T' AND u.id <> ''
  WHEN 'Q' THEN before = 'U' AND q.qt <> ''
  WHEN 'D' THEN before = 'Q' AND regexp_full_match(line, 'use [!-~]+;')
  WHEN 'S' THEN before IN ('Q', 'D') AND s <> ''
  WHEN 'B' THEN before IN ('S', 'B')
  ELSE false END"""
"""SQL: a line of an entry is where the common shape has it (each kind after the one before)."""

_MARKED = f"""
SELECT n, entry, kind, line, s1 AS s, CASE WHEN kind2 = 'D' THEN u4 ELSE u3 END AS u,
  CASE WHEN kind2 = 'D' THEN q3 ELSE q2 END AS q, CASE WHEN kind2 = 'D' THEN line2 END AS use_line,
  CASE WHEN entry = 0 THEN CASE WHEN {_SKIPPED} THEN 'skipped' ELSE 'odd' END
    WHEN NOT ({_LINE_OK}) THEN 'odd'
    WHEN kind = 'B' AND before = 'S' THEN 'first'
    WHEN kind = 'B' THEN 'more' END AS role
FROM (
  SELECT *, row_number() OVER () + $first AS n,
    sum(CAST(kind = 'T' AS INTEGER)) OVER (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS entry,
    lag(kind) OVER () AS before, lag(kind, 2) OVER () AS kind2, lag(line, 2) OVER () AS line2,
    lag(u, 3) OVER () AS u3, lag(u, 4) OVER () AS u4, lag(q, 2) OVER () AS q2, lag(q, 3) OVER () AS q3,
    lag(s, 1) OVER () AS s1
  FROM ({_LINES})
)
"""

_LINES_KEPT = f"""
SELECT * FROM ({_MARKED})
WHERE role IN ('first', 'more', 'odd') OR n = $last OR (entry = 0 AND kind = 'V')
"""


def lines(relation: str, first: int, last: int) -> str:
    """SQL: the lines of a block that ``entries`` needs (``relation``: the block's lines as
    ``line``, numbered ``first`` to ``last``), each with its ``role``: the ``first`` line of
    an entry's statement (with the entry's header fields ``u``, ``q``, ``s``), its ``more``
    lines, an ``odd`` line (not in the common shape: the block goes to the parser), the
    block's last line, and the ``skipped`` lines of a start-up banner before the first entry.

    One pass in file order without grouping: streaming windows number the lines, count the
    entries (each ``# Time:`` line starts one) and look back at the lines before."""
    return _LINES_KEPT.replace("$lines", relation).replace("$first", str(first - 1)).replace("$last", str(last))


CHECK = """SELECT count(*) FILTER (WHERE role = 'odd'), count(*) FILTER (WHERE role = 'first'),
  coalesce(max(entry), 0), coalesce(bool_and(kind = 'B') FILTER (WHERE n = $last), false),
  coalesce(bool_or(kind = 'V') FILTER (WHERE entry = 0), false) FROM $table"""
"""SQL over ``lines``' table: its odd lines, entries with a statement, entries, whether
the block ends in a statement line, whether a start-up banner came before the first entry.
The block is in the common shape when there is no odd line, every entry has a statement
and the last line is one."""

_BODY = "CASE WHEN more IS NULL THEN coalesce(line, '') ELSE coalesce(line, '') || chr(10) || more END"
_ENTRIES = f"""
SELECT n, u, q, s, use_db, CASE WHEN suffix(body, ';') THEN body[:-2] ELSE body END AS statement,
  NOT starts_with(body, 'use ') AND left(body, 1) {_VISIBLE} AND right(body, 1) {_VISIBLE}
    AND (NOT suffix(body, ';') OR right(body[:-2], 1) {_VISIBLE}) AS ok
FROM (
  SELECT f.n - CASE WHEN f.use_line IS NULL THEN 4 ELSE 5 END AS n, f.u, f.q, f.s,
    trim(f.use_line[5:-2], '`') AS use_db,
    CASE WHEN more IS NULL THEN coalesce(f.line, '') ELSE coalesce(f.line, '') || chr(10) || more END AS body
  FROM $table AS f LEFT JOIN (
    SELECT entry, string_agg(coalesce(line, ''), chr(10) ORDER BY n) AS more FROM $table WHERE role = 'more'
    GROUP BY entry
  ) AS m USING (entry)
  WHERE f.role = 'first'
)
"""
"""The statement is the entry's lines after ``SET timestamp`` joined, without its last ``;``;
``use_db`` the database of its ``use db;`` line (backquotes trimmed), if it has one.
``ok`` where the parser's fast path gives the same: the statement is not after ``use``, and
it starts and ends (before that ``;``) with a visible ASCII character, so Python's
``strip()`` and ``rstrip()`` leave it as it is."""


def entries(table: str) -> str:
    """SQL: the entries of a block from ``lines``' ``table``: the first line's number, the
    header fields, the statement and ``ok`` (``_ENTRIES``)."""
    return _ENTRIES.replace("$table", table)


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
