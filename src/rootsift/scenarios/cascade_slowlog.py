"""Writes a MySQL 8 slow query log (``long_query_time=0``, ``log_slow_extra=ON``) from the
statements the simulated server completed, in the order the server writes them: by end.

``# Time:`` is when the entry was written (the statement's end), ``SET timestamp`` and
``Start:`` its start, as mysqld does.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from rootsift.scenarios.cascade_sim import Statement

BANNER = (
    "/rdsdbbin/mysql/bin/mysqld, Version: 8.0.15 (Source distribution). started with:\n"
    "Tcp port: 3306  Unix socket: /tmp/mysql.sock\n"
    "Time                 Id Command    Argument\n"
)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry_text(stmt: Statement, origin: datetime, last_db: str) -> str:
    """One entry; a ``use db;`` line when the database differs from the last one written."""
    start = origin + timedelta(seconds=stmt.start)
    end = origin + timedelta(seconds=stmt.end)
    query = stmt.end - stmt.start
    ip = f"[{stmt.ip}]" if stmt.ip else "[]"
    read_key = 1 if stmt.rows_examined else 0
    extra = (
        f"Thread_id: {stmt.conn_id} Errno: 0 Killed: 0 Bytes_received: {len(stmt.text) + 5} "
        f"Bytes_sent: {60 + 40 * stmt.rows_sent} Read_first: 0 Read_last: 0 Read_key: {read_key} "
        f"Read_next: 0 Read_prev: 0 Read_rnd: 0 Read_rnd_next: {max(0, stmt.rows_examined - read_key)} "
        "Sort_merge_passes: 0 Sort_range_count: 0 Sort_rows: 0 Sort_scan_count: 0 "
        f"Created_tmp_disk_tables: 0 Created_tmp_tables: {1 if 'group by' in stmt.text.lower() else 0} "
        f"Count_hit_tmp_table_size: 0 Start: {_iso(start)} End: {_iso(end)}"
    )
    lines = [
        f"# Time: {_iso(end)}",
        f"# User@Host: {stmt.user}[{stmt.user}] @ {stmt.host} {ip}  Id: {stmt.conn_id:5d}",
        f"# Query_time: {query:.6f}  Lock_time: {stmt.lock_time:.6f} Rows_sent: {stmt.rows_sent}  "
        f"Rows_examined: {stmt.rows_examined} {extra}",
    ]
    if stmt.db and stmt.db != last_db:
        lines.append(f"use {stmt.db};")
    lines.append(f"SET timestamp={int(start.timestamp())};")
    lines.append(stmt.text + ";")
    return "\n".join(lines) + "\n"


def write_slow_log(path: Path, statements: Iterable[Statement], origin: datetime) -> int:
    """Write every statement, ordered by end; the number written."""
    ordered = sorted(statements, key=lambda s: (s.end, s.start, s.conn_id))
    last_db = ""
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(BANNER)
        for stmt in ordered:
            fh.write(entry_text(stmt, origin, last_db))
            last_db = stmt.db or last_db
            n += 1
    return n
