"""PostgreSQL logs (stderr, csvlog, jsonlog, Cloud SQL, CloudNativePG): golden files, the
prefix escapes, time zones, statement/duration joining, the pgBadger corpus, fuzzing."""

from __future__ import annotations

import bz2
import gzip
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, GOLDEN, check_golden, check_items, golden_cases, parse
from rootsift.ingest import fingerprint, formats
from rootsift.ingest.formats import postgres_common
from rootsift.ingest.formats.postgres_prefix import CANDIDATES, Prefix, detect
from rootsift.ingest.formats.postgres_time import PgTime

FIXTURES = CORPORA / "pgbadger_fixtures" / "t" / "fixtures"


@pytest.mark.parametrize("case", golden_cases("postgres"), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    check_golden(case)


def test_every_escape_of_log_line_prefix() -> None:
    prefix = Prefix("%m|%n|%t|%s|%p|%P|%l|%c|%v|%x|%e|%i|%b|%a|%u|%d|%r|%h|%Q|%%|%Z|", PgTime(UTC, False))
    line = (
        "2024-01-02 03:04:05.678 UTC|1704164645.678|2024-01-02 03:04:05 UTC|2024-01-02 03:00:00 UTC|42|41|7|"
        "6593e0b0.2a|3/9|812|23505|INSERT|client backend|my app|bob|shop|10.0.0.1(5432)|10.0.0.1|-17|%||"
        "ERROR:  duplicate key"
    )
    got = prefix.read(line)
    assert got is not None
    record, severity, message = got
    assert (severity, message) == ("ERROR", "duplicate key")
    assert record == {
        "timestamp": datetime(2024, 1, 2, 3, 4, 5, 678000, UTC),
        "session_start": "2024-01-02T03:00:00+00:00",
        "pid": 42,
        "leader_pid": 41,
        "line_num": 7,
        "session_id": "6593e0b0.2a",
        "virtual_xid": "3/9",
        "transaction_id": 812,
        "sql_state": "23505",
        "command_tag": "INSERT",
        "backend_type": "client backend",
        "application_name": "my app",
        "user": "bob",
        "database": "shop",
        "remote_host": "10.0.0.1",
        "remote_port": 5432,
        "query_id": -17,
    }


def test_q_stops_non_session_lines_and_padding_is_read() -> None:
    prefix = Prefix("%m [%-6p] %q%u@%d ", PgTime(UTC, False))
    assert prefix.read("2024-01-02 03:04:05.678 UTC [42    ] LOG:  checkpoint starting")[0]["pid"] == 42  # type: ignore[index]
    got = prefix.read("2024-01-02 03:04:05.678 UTC [42    ] bob@shop LOG:  hi")
    assert got is not None and got[0]["user"] == "bob" and got[0]["database"] == "shop"


@pytest.mark.parametrize(
    ("stamp", "tz", "offset"),
    [
        ("2024-07-01 12:00:00 CEST", None, 2),
        ("2024-01-01 12:00:00.5 CET", None, 1),
        ("2024-07-01 12:00:00 PDT", None, -7),
        ("2024-07-01 12:00:00 +0545", None, 5.75),
        ("2024-07-01 12:00:00 -03", None, -3),
        ("2024-07-01 12:00:00 IST", None, 5.5),
        ("2024-01-01 12:00:00 IST", "Asia/Jerusalem", 2),  # the zone given settles an ambiguous name
        ("2024-07-01 12:00:00 IST", "Europe/Dublin", 1),
        ("2024-07-01 12:00:00 XYZT", "America/New_York", -4),  # unknown name: read in --tz
        ("2024-07-01 12:00:00", "Europe/Berlin", 2),
    ],
)
def test_time_zones(stamp: str, tz: str | None, offset: float) -> None:
    fmt = formats.get("postgres-stderr")(formats.FormatOptions(tz=tz))
    got = fmt.clock.parse(stamp)  # type: ignore[attr-defined]
    assert got is not None and got.utcoffset() == timedelta(hours=offset)


@pytest.mark.parametrize("text", CANDIDATES[:4])
def test_defaults_are_detected(text: str) -> None:
    clock = PgTime(UTC, False)
    lines = {
        "%m [%p] %q%u@%d ": "2024-01-02 03:04:05.678 UTC [42] bob@shop LOG:  x",
        "%m [%p] ": "2024-01-02 03:04:05.678 UTC [42] LOG:  x",
        "%t:%r:%u@%d:[%p]:": "2024-01-02 03:04:05 UTC:10.0.0.1(5000):bob@shop:[42]:LOG:  x",
        "%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ": "2024-01-02 03:04:05 UTC [42]: [1-1] user=bob,db=shop,app=a,client=h LOG:  x",
    }
    found = detect([lines[text]] * 3, clock)
    assert isinstance(found, Prefix)
    assert found.read(lines[text]) is not None
    assert found.prefix in (text, CANDIDATES[0])  # Debian's %q part is optional: it reads the default too


def test_empty_prefix_of_old_servers() -> None:
    events, rejects = parse(
        "postgres-stderr", "LOG:  database system is ready\n\tmore\n", log_line_prefix="", mtime=0.0
    )
    assert not rejects and events[0][1]["message"] == "database system is ready\nmore"


def test_syslog_without_sequence_numbers() -> None:
    log = (
        "Feb 29 13:15:40 db1 postgres[7]: db=shop,user=app LOG:  statement: SELECT 1,\n"
        "Feb 29 13:15:40 db1 postgres[7]: #011  2\n"
        "Feb 29 13:15:41 db1 postgres[8]: #011 orphan\n"
    )
    events, rejects = parse("postgres-syslog", log, mtime=1709290800.0)
    assert [(line, ev["statement"], ev["host"]) for line, ev in events] == [(1, "SELECT 1,\n  2", "db1")]
    assert [(r.line, r.reason) for r in rejects] == [(3, "continuation with no message of process 8 before it")]


def test_wrong_prefix_rejects_name_it() -> None:
    events, rejects = parse("postgres-stderr", "2024-01-01 00:00:00.000 UTC [1] LOG:  x\n", log_line_prefix="%t [%p]: ")
    assert not events and len(rejects) == 1 and "'%t [%p]: '" in rejects[0].reason


def test_almost_matching_long_line_does_not_hang() -> None:
    """Lazy groups bounded, the prefix read only up to the severity: this returns at once."""
    prefix = Prefix("%a %u %d %i [", PgTime(UTC, False))
    assert prefix.read("a " * 500 + "LOG:  x") is None
    assert prefix.read("a, " * 2000) is None


def test_csv_quote_never_closed() -> None:
    text = '2024-01-01 00:00:00.000 UTC,"u","d",1,,1.1,1,"idle",,1/1,0,LOG,00000,"open\nstill open\n'
    events, rejects = parse("postgres-csv", text)
    assert not events and [(r.line, r.reason) for r in rejects] == [
        (1, "unterminated quoted field at the end of the input")
    ]


def test_duration_joins_only_its_own_session() -> None:
    log = (
        "2024-01-01 00:00:00.000 UTC [1] LOG:  statement: SELECT 1\n"
        "2024-01-01 00:00:00.001 UTC [2] LOG:  duration: 5.000 ms\n"
        "2024-01-01 00:00:00.002 UTC [1] LOG:  duration: 1.000 ms\n"
        "2024-01-01 00:00:00.003 UTC [1] LOG:  statement: SELECT 2\n"
    )
    events, rejects = parse("postgres-stderr", log)
    assert not rejects
    by_line = {line: ev for line, ev in events}
    assert sorted(by_line) == [1, 2, 4]
    assert by_line[1]["duration_ms"] == 1.0 and by_line[1]["statement"] == "SELECT 1"
    assert by_line[2]["duration_ms"] == 5.0 and "statement" not in by_line[2]
    assert "duration_ms" not in by_line[4]  # emitted at the end, never given another's duration


def test_waiting_statements_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres_common, "MAX_PENDING", 3)
    log = "".join(f"2024-01-01 00:00:00.000 UTC [{pid}] LOG:  statement: SELECT {pid}\n" for pid in range(10))
    events, _ = parse("postgres-stderr", log)
    assert sorted(line for line, _ in events) == list(range(1, 11))


def test_fingerprint_is_the_shared_one() -> None:
    events, _ = parse(
        "postgres-stderr",
        "2024-01-01 00:00:00.000 UTC [1] LOG:  duration: 2.0 ms  statement: SELECT * FROM t WHERE id = 42\n",
    )
    assert events[0][1]["fingerprint"] == fingerprint.postgres("SELECT * FROM t WHERE id = 42")
    assert "42" not in str(events[0][1]["fingerprint"])


def test_prefix_without_time_uses_file_time() -> None:
    events, _ = parse("postgres-stderr", "[7] LOG:  hello\n", log_line_prefix="[%p] ", mtime=1_700_000_000.0)
    assert events[0][1]["timestamp"] == datetime.fromtimestamp(1_700_000_000, UTC)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("postgres-stderr", "2024-01-01 00:00:00.000 UTC [1] LOG:  x\n2024-01-01 00:00:00.000 UTC [1] ERROR:  y\n"),
        (
            "postgres-csv",
            '2024-01-01 00:00:00.000 UTC,"u","d",1,"h:1",1.1,1,"idle",2024-01-01 00:00:00 UTC,1/1,0,LOG,00000,"x",,,,,,,,,""\n',
        ),
        ("postgres-json", '{"timestamp":"2024-01-01 00:00:00.000 UTC","pid":1,"error_severity":"LOG","message":"x"}\n'),
    ],
)
def test_sniff(name: str, text: str) -> None:
    assert formats.sniff(text.splitlines(), "postgresql.log") == name


def _corpus(name: str) -> bytes:
    path = FIXTURES / name
    if not path.exists():
        pytest.skip("pgbadger corpus not present")
    raw = path.read_bytes()
    return gzip.decompress(raw) if name.endswith(".gz") else bz2.decompress(raw) if name.endswith(".bz2") else raw


POSTGRES_FILES = {
    "anonymize.log": "postgres-csv", "begin_end.log": "postgres-stderr", "cloudsql.log.gz": "postgres-json",
    "cnpg.log.gz": "postgres-json", "csv_statement_without_duration.log": "postgres-csv",
    "light.postgres.log.bz2": "postgres-stderr", "multiline_param.log": "postgres-stderr",
    "pg-timezones.log": "postgres-stderr", "pg_rawcsv.log": "postgres-stderr", "pg_vacuums.json.gz": "postgres-json",
    "pg_vacuums.log.gz": "postgres-stderr", "postgresql_param_range.log": "postgres-stderr",
    "queryid.log.gz": "postgres-stderr", "rds.log.bz2": "postgres-stderr", "stmt_type.log": "postgres-stderr",
    "tempfile_only.log.gz": "postgres-stderr", "weeknumber.log": "postgres-csv",
    "pg-syslog.1.bz2": "postgres-syslog", "pg-syslog.2.gz": "postgres-syslog",
}  # fmt: skip
"""Every PostgreSQL file of the corpus and its format (Heroku logplex and PgBouncer: out of scope)."""


@pytest.mark.parametrize("name", sorted(POSTGRES_FILES))
def test_corpus_file_parses(name: str) -> None:
    raw = _corpus(name)
    text = raw.decode("utf-8", "replace")
    assert formats.sniff(text.splitlines()[:50], name) == POSTGRES_FILES[name]
    events, rejects = parse(POSTGRES_FILES[name], raw)
    check_items(events, rejects, text.count("\n") + 1)
    assert events and len(rejects) <= 3, rejects[:4]


def test_corpus_rds_counts() -> None:
    raw = _corpus("rds.log.bz2")
    events, rejects = parse("postgres-stderr", raw)
    text = raw.decode()
    assert not rejects and len(events) == text.count("\n")
    timed = [ev for _, ev in events if "duration_ms" in ev]
    assert len(timed) == len(re.findall(r"\]:LOG:  duration: [\d.]+ ms  statement: ", text))
    assert sum(1 for ev in timed if ev.get("database") == "pgbench") == text.count("@pgbench:[") - text.count("FATAL")
    first = events[7][1]
    assert first["remote_host"] == "[local]" and first["user"] == "postgres" and first["database"] == "template1"
    assert first["timestamp"] == datetime(2020, 3, 11, 19, 40, 44, tzinfo=UTC)  # CET, +1
    assert first["duration_ms"] == 0.027


def test_corpus_light_matches_pgbadger() -> None:
    """pgBadger's t/03_consistency.t: 629 queries, all in database postgres."""
    events, rejects = parse("postgres-stderr", _corpus("light.postgres.log.bz2"))
    queries = [ev for _, ev in events if "statement" in ev]
    assert not rejects and len(queries) == 629
    assert {ev["database"] for ev in queries} == {"postgres"}
    at = [
        ev
        for ev in queries
        if datetime(2017, 9, 6, 8, 48, 44, tzinfo=UTC) <= ev["timestamp"] <= datetime(2017, 9, 6, 8, 48, 46, tzinfo=UTC)
    ]  # type: ignore[operator]
    assert [(ev["pid"], ev["line_num"], ev["duration_ms"], str(ev["statement"])[:6]) for ev in at] == [
        (170, 3809, 0.119, "INSERT"),
        (174, 3768, 2.482, "END;"),
        (168, 3881, 0.051, "BEGIN;"),
    ]
    assert {ev["application_name"] for ev in queries} == {"pgbench"}


def test_corpus_csv_statement_without_duration() -> None:
    """pgBadger's t/07: the duration stays on its query; the statement-only query gets none."""
    events, _ = parse("postgres-csv", _corpus("csv_statement_without_duration.log"))
    slow = next(ev for _, ev in events if "slow_table" in str(ev.get("statement")))
    health = next(ev for _, ev in events if "health_check" in str(ev.get("statement")))
    assert slow["duration_ms"] == 688786.283 and "duration_ms" not in health


def test_corpus_cloudsql_and_cnpg() -> None:
    raw = _corpus("cloudsql.log.gz")
    events, rejects = parse("postgres-json", raw)
    assert not rejects and len(events) == raw.count(b"\n") - raw.count(b'"textPayload":"\\t')
    assert {ev.get("database") for _, ev in events} - {None} == {"cloudsqladmin", "postgres", "test"}
    raw = _corpus("cnpg.log.gz")
    events, rejects = parse("postgres-json", raw)
    records = [ev for _, ev in events if "session_id" in ev]
    assert not rejects and len(records) == raw.count(b'"msg":"record"')
    assert sum(1 for ev in records if "duration_ms" in ev) == raw.count(b'"message":"duration: ')


def test_corpus_jsonlog_and_stderr_agree() -> None:
    """pg_vacuums: the same server messages as jsonlog and as stderr give the same events."""
    js, _ = parse("postgres-json", _corpus("pg_vacuums.json.gz"))
    se, _ = parse("postgres-stderr", _corpus("pg_vacuums.log.gz"))
    assert len(js) == len(se) == 3544
    for (_, a), (_, b) in zip(js, se):
        assert (a["pid"], a["message"], a["line_num"]) == (b["pid"], b["message"], b["line_num"])
        # the two files were written apart: the stderr %t (whole seconds) is within a second of jsonlog's
        assert abs(a["timestamp"] - b["timestamp"]) < timedelta(seconds=1.5)  # type: ignore[operator]


def test_corpus_syslog() -> None:
    raw = _corpus("pg-syslog.1.bz2")
    events, rejects = parse(
        "postgres-syslog", raw, tz="Europe/Paris", mtime=datetime(2019, 3, 1, tzinfo=UTC).timestamp()
    )
    text = raw.decode()
    assert [r.line for r in rejects] == [i for i, ln in enumerate(text.splitlines(), 1) if " systemd[1]: " in ln]
    timed = [ev for _, ev in events if "duration_ms" in ev]
    assert len(timed) == text.count(" LOG:  duration: ")
    assert len(events) == sum(1 for ln in text.splitlines() if re.search(r"\[\d+-1\] ", ln))
    first = timed[0]
    assert first["timestamp"] == datetime(2019, 2, 11, 12, 15, 40, tzinfo=UTC)  # CET
    assert (first["host"], first["pid"], first["database"], first["application_name"]) == (
        "test-pc",
        10819,
        "postgres",
        "psql",
    )
    assert str(first["statement"]).startswith('SELECT d.datname as "Name",\n       pg_catalog.pg_get_userbyid')
    assert str(first["statement"]).endswith("\nORDER BY 1;")


@pytest.mark.parametrize("name", ["pgbouncer.log.gz", "pgbouncer.1.21.log.gz"])
def test_corpus_out_of_scope_files_are_rejected_cleanly(name: str) -> None:
    raw = _corpus(name)
    head = raw[:20000].decode("utf-8", "replace").splitlines()[:50]
    assert not str(formats.sniff(head, name)).startswith("postgres")
    for fmt in POSTGRES_FILES.values():
        events, rejects = parse(fmt, raw[:200000])
        check_items(events, rejects, raw[:200000].count(b"\n") + 1)
        assert not events and rejects


_ALPHABET = st.sampled_from(list('2024-01 0:.5 UTC[]12@dbLOG:ERROR:DETAIL:  \t"{},duration: ms statement:execute S_1:'))


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.text(alphabet=_ALPHABET, max_size=80), max_size=25),
    st.sampled_from(sorted(set(POSTGRES_FILES.values()))),
)
def test_any_input(lines: list[str], name: str) -> None:
    text = "\n".join(lines)
    events, rejects = parse(name, text)
    check_items(events, rejects, text.count("\n") + 1)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(golden_cases("postgres")), st.data())
def test_mutated_golden_inputs(case: Path, data: st.DataObject) -> None:
    stem = case.name.removesuffix(".expected.json")
    source = next(p for p in (GOLDEN / "postgres").glob(stem + ".*") if not p.name.endswith(".expected.json"))
    raw = bytearray(source.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        pos = data.draw(st.integers(0, len(raw) - 1))
        raw[pos : pos + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=3))
    fmt = str(case.read_text().split('"format": "')[1].split('"')[0])
    events, rejects = parse(fmt, bytes(raw))
    check_items(events, rejects, bytes(raw).count(b"\n") + 1)
