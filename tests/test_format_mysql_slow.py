"""The MySQL / MariaDB / Percona Server slow-log parser (``--format mysql-slow``)."""

from __future__ import annotations

import gzip
import io
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, GOLDEN, check_golden, check_items, golden_cases, parse
from rootsift.ingest import formats

SAMPLES = CORPORA / "percona_slowlogs" / "t" / "lib" / "samples" / "slowlogs"


@pytest.mark.parametrize("expected", golden_cases("mysql_slow"), ids=lambda p: p.name.split(".")[0])
def test_golden(expected: Path) -> None:
    check_golden(expected)


def one(text: str, **options: object) -> dict[str, object]:
    events, rejects = parse("mysql-slow", text, **options)
    assert not rejects, rejects
    assert len(events) == 1, events
    return events[0][1]


def test_event_time_prefers_start_then_set_timestamp_then_time() -> None:
    head = "# Time: 2023-04-12T08:39:53.662734Z\n# Query_time: 2.000329  Lock_time: 0.0 Rows_sent: 1  Rows_examined: 0"
    start = one(
        head
        + " Start: 2023-04-12T08:39:51.662405Z End: 2023-04-12T08:39:53.662734Z\nSET timestamp=1681288791;\nselect 1;"
    )
    assert start["timestamp"] == datetime(2023, 4, 12, 8, 39, 51, 662405, UTC)
    assert start["timestamp_source"] == "start"
    assert start["end_time"] == "2023-04-12T08:39:53.662734Z"
    set_ts = one(head + "\nSET timestamp=1681288791;\nselect 1;")
    assert set_ts["timestamp"] == datetime(2023, 4, 12, 8, 39, 51, tzinfo=UTC)
    assert set_ts["timestamp_source"] == "set_timestamp"
    only_time = one(head + "\nselect 1;")
    assert only_time["timestamp"] == datetime(2023, 4, 12, 8, 39, 53, 662734, UTC)


def test_entries_without_time_inherit_the_previous_one_or_take_the_next() -> None:
    no_time = "# User@Host: a[a] @ h []\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nselect 1;\n"
    events, rejects = parse("mysql-slow", no_time + "# Time: 071015  9:43:52\n" + no_time + no_time)
    assert not rejects
    assert [line for line, _ in events] == [1, 4, 8]
    first_time = datetime(2007, 10, 15, 9, 43, 52, tzinfo=UTC)
    assert [(ev["timestamp"], ev["timestamp_source"]) for _, ev in events] == [
        (first_time, "next"),  # before the file's first time: ran at or before it
        (first_time, "time"),
        (first_time, "previous"),
    ]


def test_a_log_without_any_time_takes_the_file_time() -> None:
    no_time = "# User@Host: a[a] @ h []\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nselect 1;\n"
    events, rejects = parse("mysql-slow", no_time * 3, mtime=1_700_000_000.0)
    assert not rejects and len(events) == 3
    assert {(ev["timestamp"], ev["timestamp_source"]) for _, ev in events} == {
        (datetime.fromtimestamp(1_700_000_000, UTC), "file_mtime")
    }


def test_old_time_format_with_padding_and_zone() -> None:
    ev = one(
        "# Time: 071015  9:43:52\n# Query_time: 2  Lock_time: 0  Rows_sent: 1  Rows_examined: 0\nselect 1;",
        tz="America/New_York",
    )
    assert ev["timestamp"].isoformat() == "2007-10-15T09:43:52-04:00"  # type: ignore[union-attr]


def test_header_fields_types_and_units() -> None:
    ev = one(
        "# Time: 2019-03-05T10:12:01.123456+02:00\n"
        "# User@Host: app[appuser] @ web1 [10.0.0.5]  Id:   17\n"
        "# Thread_id: 17  Schema:   Last_errno: 0  Killed: 0\n"
        "# Query_time: 0.000652  Lock_time: 0.000109  Rows_sent: 1  Rows_examined: 1\n"
        "# QC_Hit: No  Full_scan: Yes\n"
        "#   InnoDB_IO_r_ops: 2  InnoDB_IO_r_wait: 0.25\n"
        "# InnoDB_trx_id: 101\n"
        "SELECT 1;"
    )
    assert ev["timestamp"] == datetime(2019, 3, 5, 8, 12, 1, 123456, UTC)
    assert (ev["user"], ev["priv_user"], ev["host"], ev["ip"], ev["thread_id"]) == (
        "appuser",
        "app",
        "web1",
        "10.0.0.5",
        17,
    )
    assert ev["query_time_ms"] == 0.652 and ev["lock_time_ms"] == 0.109
    assert ev["rows_sent"] == 1 and ev["rows_examined"] == 1
    assert ev["qc_hit"] is False and ev["full_scan"] is True
    assert ev["innodb_io_r_ops"] == 2 and ev["innodb_io_r_wait_ms"] == 250.0
    assert ev["innodb_trx_id"] == "101"  # hexadecimal in general: always text
    assert "db" not in ev  # "Schema:" empty


@pytest.mark.parametrize(
    ("query_time", "ms"),
    [("0.000652", 0.652), ("123456", 123456000.0), ("2", 2000.0), ("10.5", 10500.0), ("1.2345678", 1234.5678)],
)
def test_query_time_in_milliseconds(query_time: str, ms: float) -> None:
    line = f"# Query_time: {query_time}  Lock_time: 0.000001 Rows_sent: 1  Rows_examined: 2"
    ev = one("# Time: 071015 9:43:52\n" + line + "\nselect 1;")
    assert ev["query_time_ms"] == ms and ev["lock_time_ms"] == 0.001


def test_use_database_carries_over_until_a_restart() -> None:
    head = "# Time: 071015 9:43:52\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
    banner = "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\nTcp port: 3306  Unix socket: /tmp/s\nTime                 Id Command    Argument\n"
    events, rejects = parse(
        "mysql-slow", head + "use shop;\nselect 1;\n" + head + "select 2;\n" + banner + head + "select 3;\n"
    )
    assert not rejects
    assert [ev.get("db") for _, ev in events] == ["shop", "shop", None]
    assert [ev["statement"] for _, ev in events] == ["select 1", "select 2", "select 3"]


def test_banner_inside_an_entry_ends_it_and_never_joins_the_statement() -> None:
    text = (
        "# Time: 071015 9:43:52\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nselect a\nfrom t\n"
        "/usr/sbin/mysqld, Version: 5.7.44-log (MySQL Community Server (GPL)). started with:\n"
        "Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\nTime                 Id Command    Argument\n"
    )
    assert one(text)["statement"] == "select a\nfrom t"


def test_use_or_set_only_body_is_the_statement() -> None:
    head = "# Time: 071015 9:43:52\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
    ev = one(head + "SET timestamp=1111111111;\nuse test_db;")
    assert (ev["statement"], ev["fingerprint"], ev["db"]) == ("use test_db", "use ?", "test_db")
    ev = one(head + "SET NAMES utf8;\nselect 1;")
    assert ev["statement"] == "SET NAMES utf8;\nselect 1"  # only the server's own SET lines are metadata


def test_server_set_lines() -> None:
    head = "# Time: 071015 9:43:52\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\n"
    ev = one(head + "SET last_insert_id=7,insert_id=8,timestamp=1197996507.5;\nINSERT INTO t VALUES (NULL);")
    assert (ev["last_insert_id"], ev["insert_id"]) == (7, 8)
    assert ev["timestamp"] == datetime(2007, 12, 18, 16, 48, 27, 500000, UTC)
    ev = one(head + "SET insert_id=1.2.3;\nselect 1;")  # not the server's: part of the statement
    assert ev["statement"].startswith("SET insert_id=1.2.3;")  # type: ignore[union-attr]
    ev = one(head + "SET timestamp=99999999999999999;\nselect 1;")  # out of range: the # Time wins
    assert ev["timestamp_source"] == "time"


def test_admin_command_after_use() -> None:
    ev = one(
        "# Time: 071015 9:43:52\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nuse db2;\n# administrator command: Quit;"
    )
    assert (ev["db"], ev["statement"], ev["fingerprint"]) == (
        "db2",
        "administrator command: Quit",
        "administrator command: Quit",
    )


def test_multi_megabyte_statement() -> None:
    values = ",".join(f"({i},'row {i}')" for i in range(150_000))
    ev = one(
        f"# Time: 071015 9:43:52\n# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0\nINSERT INTO t VALUES {values};"
    )
    assert len(ev["statement"]) > 2_000_000  # type: ignore[arg-type]
    assert ev["fingerprint"] == "insert into t values(?+)"


def test_sniff() -> None:
    cls = formats.get("mysql-slow")
    assert cls.sniff(["# Time: 071015 9:43:52", "# User@Host: a[a] @ h []", "# Query_time: 1"], "x.log") >= 0.9
    assert (
        cls.sniff(["/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:"], "slow.log") > 0.5
    )
    assert (
        cls.sniff(['{"a": 1}', '127.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "GET / HTTP/1.0" 200 2326'], "x.log") == 0.0
    )
    text = (GOLDEN / "mysql_slow" / "percona_extended.log").read_text().splitlines()
    assert formats.sniff(text, "percona_extended.log") == "mysql-slow"


# -- the Percona Toolkit corpus ---------------------------------------------------------


def _sample(name: str) -> bytes:
    data = (SAMPLES / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not SAMPLES.is_dir():
        pytest.skip("the Percona Toolkit slow-log corpus is not present")
    return SAMPLES


def test_corpus_parses_every_file(corpus: Path) -> None:
    files = sorted(corpus.iterdir())
    assert len(files) >= 70
    for path in files:
        data = _sample(path.name)
        events, rejects = parse("mysql-slow", data)
        check_items(events, rejects, data.count(b"\n") + 1)


@pytest.mark.parametrize(
    ("name", "n_events", "n_rejects"),
    [
        ("slow002.txt", 8, 0),  # Percona 5.0 extended, SET insert_id=..,timestamp=..
        ("slow006.txt", 6, 0),
        ("slow009.txt", 2001, 0),  # no time anywhere: every entry takes the file's time
        ("slow013.txt", 5, 0),  # the first entry comes before any time and takes the next
        ("slow014.txt", 2, 0),  # four restart banners
        ("slow022.txt", 0, 6),  # "# Time: margdl 11:48:27"
        ("slow034.txt", 9, 0),
        ("slow039.txt.gz", 1, 0),  # a multi-megabyte INSERT
        ("slow053.txt", 10, 0),
        ("slow059.txt", 3, 0),
        ("mysql5.7.log", 2, 0),
    ],
)
def test_corpus_counts(corpus: Path, name: str, n_events: int, n_rejects: int) -> None:
    events, rejects = parse("mysql-slow", _sample(name))
    assert (len(events), len(rejects)) == (n_events, n_rejects)


def test_corpus_values(corpus: Path) -> None:
    events, _ = parse("mysql-slow", _sample("slow059.txt"))
    line, ev = events[0]
    assert line == 1
    assert ev["timestamp"] == datetime(2013, 11, 28, 1, 5, 31, tzinfo=UTC)  # SET timestamp=1385600731
    assert (ev["user"], ev["ip"], ev["thread_id"], ev["db"]) == ("user1", "127.0.0.1", 69194, "maindb")
    assert (ev["query_time_ms"], ev["bytes_sent"], ev["innodb_trx_id"]) == (0.228, 545, "1A88583F")
    assert (ev["log_slow_rate_type"], ev["log_slow_rate_limit"]) == ("query", 2)
    assert ev["fingerprint"] == "select foo from bar where id=?"
    assert events[2][1]["filesort"] is True and events[2][1]["rows_examined"] == 10

    events, _ = parse("mysql-slow", _sample("mysql5.7.log"))
    assert [line for line, _ in events] == [7, 12]
    assert events[0][1]["fingerprint"] == "select * from db_facturacion.facturas limit ?"
    assert events[0][1]["rows_sent"] == 1000

    events, _ = parse("mysql-slow", _sample("slow002.txt"))
    assert events[4][1]["insert_id"] == 34484549
    assert events[1][1]["statement"].startswith("update db2.tuningdetail_21_265507 n\n")  # type: ignore[union-attr]

    events, _ = parse("mysql-slow", _sample("slow039.txt.gz"))
    assert len(events[0][1]["statement"]) > 1_000_000  # type: ignore[arg-type]
    assert events[0][1]["fingerprint"] == "insert into the_universe values(?+)"


# -- fuzzing ------------------------------------------------------------------------------

_GOLDEN_LINES = [
    line for path in sorted((GOLDEN / "mysql_slow").glob("*.log")) for line in path.read_text().splitlines()
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=30))
def test_fuzz_random_lines(lines: list[str]) -> None:
    data = "\n".join(lines)
    events, rejects = parse("mysql-slow", data)
    check_items(events, rejects, data.count("\n") + 1)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from(_GOLDEN_LINES),
            st.sampled_from(_GOLDEN_LINES).map(lambda s: s[: len(s) // 2]),
            st.sampled_from(["# Time: ", "# Query_time: x", "# User@Host: [", "use ;", "SET timestamp=9e99;", ""]),
            st.text(max_size=40),
        ),
        max_size=40,
    )
)
def test_fuzz_mutated_golden_lines(lines: list[str]) -> None:
    data = "\n".join(lines)
    events, rejects = parse("mysql-slow", data)
    check_items(events, rejects, data.count("\n") + 1)


# -- common entries read whole (MySQLSlowLog.read) against the line-by-line reader ---------

_COMMON_ENTRY = (
    "# Time: 2024-03-01T10:00:0{s}.339563Z\n"
    "# User@Host: app[app] @ web{s} [10.0.0.1{s}]  Id: 7{s}\n"
    "# Query_time: 0.01664{s}  Lock_time: 0.001665 Rows_sent: {s}  Rows_examined: 5991\n"
    "SET timestamp=170928720{s};\n"
    "SELECT * FROM t WHERE id = {s};\n"
)
# Entries that look common to the whole-entry match but are not, or not quite: each must
# be read as the line-by-line reader reads it.
_NEAR_MISSES = [
    "use shop;\n",  # a `use` line before SET: the entry takes the database
    "SELECT 1 FROM dual\n",  # a statement line after the one ending in ';': the body goes on
    "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n",
    "# Time: 2024-03-01T10:00:09Z\n",  # a header without Query_time: the next one joins it
    "# User@Host: app[app] @ web [10.0.0.1]  Id: 5  Id: 6\n",
    "# User@Host: app[app] @ web [10.0.0.1]  Id:\n",
    "# Query_time: 0.5  Lock_time: 0.0 Rows_sent: 1  Rows_examined: 1\n",
    "SET timestamp=99999999999999999999;\n",
    "# User@Host: app[app] @ web [10.0.0.1] Start: 2024-03-01T10:00:00.5Z  Id: 3\n",
    "use db;\n",
    "   \n",
    "\r\n",
    "",
]
# Statements in the common entry's place that change what its lines mean.
_ODD_STATEMENTS = ["use shop;", "SELECT 1;  ", " ;", "x, Version: 1 started with:", "SELECT \u00e9;", "-- c"]


def _line_reader_items(data: bytes) -> list[object]:
    from rootsift.ingest.formats.base import numbered_lines

    parser = formats.get("mysql-slow")(formats.FormatOptions(mtime=1.7e9))
    return list(parser.parse(numbered_lines(io.BytesIO(data))))


def _block_reader_items(data: bytes, block_bytes: int | None = None) -> list[object]:
    from rootsift.ingest.formats import mysql_slow
    from rootsift.ingest.formats.base import decoded_blocks

    parser = formats.get("mysql-slow")(formats.FormatOptions(mtime=1.7e9))
    if block_bytes is None:
        return list(parser.read(io.BytesIO(data)))
    reader = mysql_slow._Reader(parser.options)
    blocks = decoded_blocks(io.BytesIO(data), block_bytes)
    return list(mysql_slow.backfill(reader.run_blocks(blocks), parser.options.file_time))


def test_common_entries_read_whole_as_line_by_line(corpus: Path) -> None:
    inputs = [_sample(p.name) for p in sorted(corpus.iterdir())]
    inputs += [p.read_bytes() for p in sorted((GOLDEN / "mysql_slow").glob("*.log"))]
    inputs.append("".join(_COMMON_ENTRY.format(s=i % 10) for i in range(200)).encode())
    for data in inputs:
        expected = _line_reader_items(data)
        for block_bytes in (None, 61, 400, 4096):
            assert _block_reader_items(data, block_bytes) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 9).map(lambda s: _COMMON_ENTRY.format(s=s)),
            st.sampled_from(_NEAR_MISSES),
            st.integers(0, 9).map(lambda s: _COMMON_ENTRY.format(s=s).replace("\n", "\r\n", 1)),
            st.sampled_from(_ODD_STATEMENTS).map(
                lambda q: _COMMON_ENTRY.format(s=3).replace("SELECT * FROM t WHERE id = 3;", q)
            ),
        ),
        max_size=25,
    ),
    st.sampled_from([None, 50, 300, 1000]),
)
def test_common_entries_among_near_misses(pieces: list[str], block_bytes: int | None) -> None:
    data = "".join(pieces).encode()
    assert _block_reader_items(data, block_bytes) == _line_reader_items(data)
