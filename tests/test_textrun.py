"""Text log formats through the whole ingest: blocks, directories, line numbers of rejects."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from helpers.store import query_rows
from rootsift import Rootsift
from rootsift.errors import InputFormatError, UsageError


def _lines(n: int, start: int = 0) -> str:
    return "".join(
        f"time=2024-05-01T10:{(i // 60) % 60:02d}:{i % 60:02d}Z level={'warn' if i % 3 else 'info'} i={i} "
        f'msg="request {i} done"\n'
        for i in range(start, start + n)
    )


def test_many_blocks_keep_every_event(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    src.write_text(_lines(3000))
    summary = rs.ingest(src, "app", block_bytes=16 << 10)
    assert summary.format == "logfmt"
    assert summary.events == 3000 and summary.blocks > 5 and summary.rejects == 0
    rows = query_rows(rs, "app", "count", "sum(i)", start="2024-05-01", end="2024-05-02")
    assert rows == [[3000, sum(range(3000))]]


def test_store_rejects_are_renumbered(rs: Rootsift, tmp_path: Path) -> None:
    text = _lines(400).splitlines(keepends=True)
    for i in (5, 150, 399):
        text[i] = text[i].replace("i=", "when=2024-05-01T11:00:00Z i=")
    src = tmp_path / "app.log"
    src.write_text("".join(text))
    summary = rs.ingest(src, "app", format="logfmt", time_field="when", block_bytes=4 << 10)
    assert summary.events == 3
    assert summary.rejects == 397
    lines = sorted(int(str(r["line"])) for r in summary.first_rejects)
    assert lines == [1, 2, 3, 4, 5]  # lines 1-5 lack 'when'; line 6 (index 5) has it
    assert all("when" in str(r["reason"]) for r in summary.first_rejects)


def test_directory_of_files(rs: Rootsift, tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "a.log").write_text(_lines(10))
    (d / "b.log.gz").write_bytes(gzip.compress((_lines(5, 10) + "oops\n").encode()))
    (d / ".hidden").write_text("ignored entirely\n")
    summary = rs.ingest(d, "app")
    assert summary.format == "logfmt" and summary.events == 15 and summary.rejects == 1
    assert summary.first_rejects[0]["line"] == 6
    assert str(summary.first_rejects[0]["reason"]).startswith("b.log.gz: ")
    assert summary.source == str(d)


def test_raise_stops_at_the_first_bad_line(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    src.write_text(_lines(20) + "not a pair\n" + _lines(5, 20))
    with pytest.raises(InputFormatError, match="line 21"):
        rs.ingest(src, "app", format="logfmt", strictness="raise")


def test_options_a_format_does_not_read_are_errors(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    src.write_text(_lines(3))
    with pytest.raises(UsageError, match="--log-format does not apply to --format logfmt"):
        rs.ingest(src, "app", format="logfmt", log_format="$remote_addr")
    with pytest.raises(UsageError, match="--host is read by folded, procfs, prometheus, and .* looks like none"):
        rs.ingest(src, "app", host="h1")
    with pytest.raises(UsageError, match="--tz"):
        rs.ingest(src, "app", tz="Mars/Olympus")
    d = tmp_path / "json"
    d.mkdir()
    (d / "x.jsonl").write_text('{"time": "2024-01-01T00:00:00Z"}\n')
    with pytest.raises(UsageError, match="only text log formats read directories"):
        rs.ingest(d, "j")


def test_naive_times_read_in_the_zone(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    src.write_text("time=2024-05-01T12:00:00 level=info\n")
    rs.ingest(src, "app", tz="Europe/Berlin")
    rows = query_rows(rs, "app", start="2024-05-01T10:00:00Z", end="2024-05-01T10:00:01Z")
    assert rows == [[1]]


def test_directory_sniffed_past_an_odd_first_file(rs: Rootsift, tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "0-readme.txt").write_text("a,b\n1,2\n")
    (d / "a.log").write_text(_lines(4))
    summary = rs.ingest(d, "app")
    assert summary.format == "logfmt" and summary.events == 4
    assert summary.rejects == 2  # the odd file's lines, named with it
    assert str(summary.first_rejects[0]["reason"]).startswith("0-readme.txt: ")


@pytest.mark.parametrize("compress", ["bz2", "lzma"])
def test_bzip2_and_xz_inputs(rs: Rootsift, tmp_path: Path, compress: str) -> None:
    import bz2
    import lzma

    src = tmp_path / "app.log.z"
    src.write_bytes((bz2 if compress == "bz2" else lzma).compress(_lines(50).encode()))
    summary = rs.ingest(src, "app")
    assert summary.compression == ("bzip2" if compress == "bz2" else "xz")
    assert summary.format == "logfmt" and summary.events == 50


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_utf16_inputs_read_as_text(rs: Rootsift, tmp_path: Path, encoding: str) -> None:
    """A UTF-16 file with its byte-order mark, plain or gzip, log format or JSON lines."""
    text = "\ufeff" + _lines(2000) if encoding == "utf-16-be" else _lines(2000)
    (tmp_path / "app.log").write_bytes(text.encode(encoding))
    (tmp_path / "app.log.gz").write_bytes(gzip.compress(text.encode(encoding)))
    (tmp_path / "app.jsonl").write_bytes('{"time": "2024-01-01T00:00:00Z", "msg": "Grüße"}\n'.encode("utf-16"))
    assert rs.ingest(tmp_path / "app.log", "plain").events == 2000
    assert rs.ingest(tmp_path / "app.log.gz", "gz").events == 2000
    assert rs.ingest(tmp_path / "app.jsonl", "json").events == 1
    assert query_rows(rs, "json", "count", breakdowns=["msg"]) == [["Grüße", 1]]


def test_undetectable_input_says_to_name_the_format(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "blob.bin"
    src.write_bytes(b'\x00\x01 odd\r bytes "x\n' * 3)
    with pytest.raises(InputFormatError, match="--format"):
        rs.ingest(src, "blob")


def test_directory_starting_with_an_empty_file(rs: Rootsift, tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "0-empty").write_text("")
    (d / "a.log").write_text(_lines(3))
    summary = rs.ingest(d, "app")
    assert summary.format == "logfmt" and summary.events == 3 and summary.rejects == 0


def test_a_log_read_as_csv_says_to_name_its_format(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    src.write_text("2018-09-12 16:08:54.775 pid=3392 max fds: 150, clients: 100\n2018-09-12 16:08:55 ok, x\n")
    with pytest.raises(UsageError, match="read as csv; if it is a log, name its format with --format"):
        rs.ingest(src, "app")


def test_a_pgbouncer_log_is_named_as_one(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "pgbouncer.log"
    src.write_text("2018-09-12 16:08:54.775 3392 LOG max fds: 150, clients: 100\n2018-09-12 16:08:55 3394 LOG ok, x\n")
    with pytest.raises(UsageError, match="looks like a PgBouncer log"):
        rs.ingest(src, "pgb")


def test_an_application_json_log_with_message_and_pid_stays_json(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    line = '{"timestamp":"2024-01-01T00:00:00Z","level":"info","message":"hello","pid":42,"latency_ms":12.5}\n'
    src.write_text(line * 5)
    summary = rs.ingest(src, "app")
    assert summary.format == "jsonl" and summary.events == 5
    assert {"level", "latency_ms", "pid", "message"} <= {f["field"] for f in rs.schema("app")}


def test_a_log_format_names_the_access_log_format(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "custom.log"
    src.write_text("".join(f"1714557600.{i:03d} 10.0.0.{i} GET /x/{i} 200 0.0{i % 10}\n" for i in range(20)))
    summary = rs.ingest(src, "web", log_format="$msec $remote_addr $request_method $uri $status $request_time")
    assert summary.format == "nginx" and summary.events == 20 and summary.rejects == 0
    assert query_rows(rs, "web", "count", "max(request_time_ms)", start="2024-05-01", end="2024-05-02") == [[20, 90.0]]


def test_raise_stores_nothing_after_the_bad_line(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    src.write_text(_lines(20) + "not a pair\n" + _lines(5, 20))
    with pytest.raises(InputFormatError, match="line 21"):
        rs.ingest(src, "app", strictness="raise")
    assert query_rows(rs, "app", "count", "max(i)", start="2024-05-01", end="2024-05-02") == [[20, 19]]


def test_every_reject_names_its_log_line_across_blocks(rs: Rootsift, tmp_path: Path) -> None:
    import json

    d = tmp_path / "logs"
    d.mkdir()
    wanted = []
    for name in ("a.log", "b.log"):
        text = _lines(400).splitlines(keepends=True)
        for i in range(0, 400, 7):
            text[i] = text[i].replace("i=", "when=2024-05-01T11:00:00Z i=")
        (d / name).write_text("".join(text))
        wanted += [(name, n) for n in range(1, 401) if (n - 1) % 7]
    summary = rs.ingest(d, "app", time_field="when", block_bytes=4 << 10)
    assert summary.blocks > 10
    assert summary.events == 2 * len(range(0, 400, 7))
    saved = [json.loads(x) for x in Path(str(summary.rejects_file)).read_text().splitlines()]
    got = [(r["reason"].split(":")[0], r["line"]) for r in saved]
    assert got == wanted  # file order, then line order; every line the log's own


def test_byte_order_mark_and_huge_lines(rs: Rootsift, tmp_path: Path) -> None:
    src = tmp_path / "app.log"
    big = "x" * (9 << 20)
    src.write_text("\ufeff" + _lines(2) + f'time=2024-05-01T10:00:05Z msg="{big}"\n' + _lines(1, 2))
    summary = rs.ingest(src, "app")
    assert summary.events == 4 and summary.rejects == 0
    got = query_rows(rs, "app", "count", "max(msg_truncated_from_chars)", start="2024-05-01", end="2024-05-02")
    assert got == [[4, float(len(big))]]


def test_a_postgres_log_directory_with_stderr_and_csvlog(rs: Rootsift, tmp_path: Path) -> None:
    import json
    import shutil

    golden = Path(__file__).parent / "golden" / "formats" / "postgres"
    d = tmp_path / "pglog"
    d.mkdir()
    want_events = want_rejects = 0
    for stem, ext in (("stderr_default", "log"), ("csv_pg14", "csv")):
        shutil.copy(golden / f"{stem}.{ext}", d / f"postgresql-2024-03-01.{ext}")
        spec = json.loads((golden / f"{stem}.expected.json").read_text())
        want_events += len(spec["events"])
        want_rejects += len(spec["rejects"])
    summary = rs.ingest(d, "pg")
    assert (summary.events, summary.rejects) == (want_events, want_rejects)


# --- access logs parsed by DuckDB (textsql) give what the Python parser gives ------------------

ACCESS = sorted((Path(__file__).parent / "golden" / "formats" / "access").glob("*.expected.json"))


def _both_ways(
    rs: Rootsift, src: Path, monkeypatch: pytest.MonkeyPatch, **options: object
) -> tuple[list[tuple[object, ...]], ...]:
    """Ingest ``src`` with DuckDB parsing (``sql``) and with the Python parser only (``py``):
    the stored rows, field types, counts and rejects of each."""
    import json

    from helpers.store import stored_rows
    from rootsift.ingest import textrun

    out = []
    for name, sql in (("sql", True), ("py", False)):
        monkeypatch.setattr(textrun, "SQL_LINES", sql)
        summary = rs.ingest(src, name, **options)  # type: ignore[arg-type]
        rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in stored_rows(rs, name))
        types = sorted((k, v.type) for k, v in rs.backend.fields(name).items())
        rejects = [(r["line"], r["reason"]) for r in summary.first_rejects]
        out.append((rows, types, (summary.events, summary.rejects), rejects))
    return tuple(out)


@pytest.mark.parametrize("case", ACCESS, ids=lambda p: p.name.removesuffix(".expected.json"))
def test_duckdb_reads_access_logs_as_the_python_parser_does(
    rs: Rootsift, case: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    spec = json.loads(case.read_text())
    src = next(p for p in case.parent.glob(case.name.removesuffix(".expected.json") + ".*") if p != case)
    options = {k: v for k, v in spec.get("options", {}).items() if k in ("log_format", "tz")}
    sql, py = _both_ways(rs, src, monkeypatch, format=spec["format"], **options)
    assert sql == py


def test_duckdb_parsed_lines_keep_their_numbers_across_blocks(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
    from gen_logs import NGINX_FORMAT, nginx
    from rootsift.ingest.formats.access_nginx import compile_user
    from rootsift.ingest.formats.access_sql import sql_plan

    rng = random.Random(5)
    lines = list(nginx(rng, 6000))  # multi-upstream retries and TLS probes: Python reads those
    odd = ["", "garbage line", "   ", "10.0.0.1 - - [31/Feb/2024:10:00:00 +0000] \"GET / HTTP/1.1\" 200 1 \"-\" \"-\"",
           lines[0].replace("GET", "GÉT"), lines[1][:40], lines[2].replace("10:00", "10:00\x1f")]  # fmt: skip
    for i in sorted(rng.sample(range(len(lines)), 60), reverse=True):
        lines.insert(i, rng.choice(odd))
    src = tmp_path / "access.log"
    src.write_text("\n".join(lines) + "\n")
    from datetime import UTC

    assert sql_plan(compile_user(NGINX_FORMAT, UTC)) is not None  # the DuckDB path is taken
    sql, py = _both_ways(rs, src, monkeypatch, format="nginx", log_format=NGINX_FORMAT, block_bytes=64 << 10)
    assert sql == py
    assert sql[2][0] > 5900 and sql[2][1] >= 20


def test_duckdb_parsed_lines_take_the_types_a_dataset_already_has(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # status stored as text by an earlier input: the access log's numbers convert to it
    # (the staged, converting route), the same with DuckDB's parsing as without
    first = tmp_path / "first.jsonl"
    first.write_text('{"timestamp": "2026-11-21T08:00:00Z", "status": "ok", "path": 7}\n')
    for name in ("sql", "py"):
        rs.ingest(first, name)
    golden = Path(__file__).parent / "golden" / "formats" / "access"
    sql, py = _both_ways(rs, golden / "nginx_combined.log", monkeypatch, format="nginx")
    assert sql == py
    assert ("status", "VARCHAR") in sql[1] and sql[2][0] == 9


def test_duckdb_parsed_directory_names_each_file_in_its_rejects(rs: Rootsift, tmp_path: Path) -> None:
    golden = (Path(__file__).parent / "golden" / "formats" / "access" / "nginx_combined.log").read_text()
    d = tmp_path / "nginx"
    d.mkdir()
    (d / "access.log.1").write_text(golden + "bad line\n")
    (d / "access.log").write_text("oops\n" + golden)
    summary = rs.ingest(d, "web", format="nginx")
    assert summary.events == 18
    got = [(str(r["reason"]).split(":")[0], r["line"]) for r in summary.first_rejects]
    n = golden.count("\n")
    assert got == [("access.log", 1), ("access.log.1", n + 1)]


def test_duckdb_parsed_values_of_another_shape_go_to_python_without_failing(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a 20-digit status, text or a malformed list in an upstream time, a list with "-" and
    # several addresses: the SQL columns of such lines are computed too (and dropped): they
    # must not stop the ingest, and the lines read as the Python parser reads them
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
    from gen_logs import NGINX_FORMAT

    line = (
        '10.1.19.44 - - [01/Mar/2024:10:00:0{i} +0000] "GET /a?id=1 HTTP/1.1" {status} 27505 "-" "curl/8.5.0" '
        'rt=0.108 uct="{uct}" uht="{uht}" urt="0.107" ua="{ua}"'
    )
    cases = [
        ("200", "0.000", "0.107", "10.0.0.4:8080"),
        ("99999999999999999999", "0.000", "0.107", "10.0.0.4:8080"),
        ("200", "abc", "0.107", "10.0.0.4:8080"),
        ("200", "0.000", "0.001, 0.0x2 : 0.003", "10.0.0.4:8080"),
        ("200", "0.000, 0.001", "1.000, - : 0.002", "a:1, b:2 : c:3"),
        ("200", "12345678901234.000", "0.107", "10.0.0.4:8080"),
        ("200", "-", "-", "-"),
    ]
    src = tmp_path / "access.log"
    src.write_text(
        "".join(line.format(i=i, status=s, uct=c, uht=h, ua=a) + "\n" for i, (s, c, h, a) in enumerate(cases))
    )
    sql, py = _both_ways(rs, src, monkeypatch, format="nginx", log_format=NGINX_FORMAT)
    assert sql == py
    assert sql[2] == (4, 3)  # the 20-digit status, "abc" and "0.0x2" are rejects, as in Python


def test_duckdb_parsed_upstream_sums_past_64_bits_go_to_python_without_failing(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an upstream byte list whose sum does not fit in 64 bits, a 20-digit upstream status
    log_format = (
        '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent '
        'ubr="$upstream_bytes_received" us="$upstream_status"'
    )
    head = '10.0.0.1 - - [01/Mar/2024:10:00:0{} +0000] "GET / HTTP/1.1" 200 1 '
    tails = [
        'ubr="12, 13" us="502, 200"',
        'ubr="9223372036854775807, 9223372036854775807" us="200"',
        'ubr="5" us="502, 99999999999999999999"',
        'ubr="-" us="-"',
    ]
    src = tmp_path / "access.log"
    src.write_text("".join(head.format(i) + t + "\n" for i, t in enumerate(tails)))
    sql, py = _both_ways(rs, src, monkeypatch, format="nginx", log_format=log_format)
    assert sql == py
    assert sql[2][0] + sql[2][1] == len(tails) and sql[2][0] >= 3


# --- MySQL slow logs read by DuckDB (textslow) give what the Python parser gives ---------------

SLOW = sorted((Path(__file__).parent / "golden" / "formats" / "mysql_slow").glob("*.expected.json"))


@pytest.fixture
def slow_routes(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the blocks of slow logs read by DuckDB and by the parser (small blocks: many of them)."""
    from rootsift.ingest import textrun, textslow

    routes = {"duckdb": 0, "python": 0}
    in_duckdb, in_python = textslow._in_duckdb, textslow._in_python

    def counted_duckdb(*args: object) -> object:
        routes["duckdb"] += 1
        return in_duckdb(*args)  # type: ignore[arg-type]

    def counted_python(*args: object) -> object:
        routes["python"] += 1
        return in_python(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(textslow, "_in_duckdb", counted_duckdb)
    monkeypatch.setattr(textslow, "_in_python", counted_python)
    monkeypatch.setattr(textrun, "FIRST_BLOCK_BYTES", 4 << 10)
    monkeypatch.setattr(textrun, "SQL_SLOW_LOG", True)
    return routes


@pytest.mark.parametrize("case", SLOW, ids=lambda p: p.name.removesuffix(".expected.json"))
def test_duckdb_reads_slow_logs_as_the_python_parser_does(
    rs: Rootsift, case: Path, monkeypatch: pytest.MonkeyPatch, slow_routes: dict[str, int]
) -> None:
    import json

    spec = json.loads(case.read_text())
    src = case.with_name(case.name.removesuffix(".expected.json") + ".log")
    options = {k: v for k, v in spec.get("options", {}).items() if k == "tz"}
    sql, py = _both_ways(rs, src, monkeypatch, format="mysql-slow", **options)
    assert sql == py


def _slow_entries(n: int, seed: int = 3) -> list[str]:
    import random
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
    from gen_logs import mysql_slow

    text = "\n".join(mysql_slow(random.Random(seed), n))
    head, *entries = text.split("\n# Time: ")
    return [head] + ["# Time: " + e for e in entries]


def test_duckdb_slow_log_blocks_mix_with_the_parsers_blocks(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_routes: dict[str, int]
) -> None:
    # entries DuckDB does not read (use db, no SET timestamp, Percona header lines, a banner,
    # non-ASCII, blank lines, no '# Time:', a truncated entry) among those it reads, in
    # blocks of a few KiB: the parser carries the database, the last time and entries waiting
    # for a time from block to block, and every event and reject is the whole-file parse's
    import random

    entries = _slow_entries(3000)
    odd = [
        "# Time: 2024-03-01T10:00:01.000000Z\n# User@Host: app[app] @ web1 [10.0.0.1]  Id: 5\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1\nuse shop;\n"
        "SET timestamp=1709287201;\nSELECT 1;",
        "# User@Host: app[app] @ web1 [10.0.0.1]  Id: 6\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1\nSELECT 'no time';",
        "# Time: 2024-03-01T10:00:02.000000Z\n# User@Host: app[app] @ web1 [10.0.0.1]  Id: 7\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1\nSELECT 'no set';",
        "# Time: 2024-03-01T10:00:03.000000Z\n# User@Host: app[app] @ web1 [10.0.0.1]  Id: 8\n"
        "# Schema: shop  Last_errno: 0  Killed: 0\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1709287203;\n"
        "SELECT 'percona';",
        "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:",
        "# Time: 2024-03-01T10:00:04.000000Z\n# User@Host: app[app] @ web1 [10.0.0.1]  Id: 9\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1709287204;\n"
        "SELECT 'naïve\u3000';",
        "# Time: 2024-03-01T10:00:05.000000Z\n# User@Host: app[app] @ web1 [10.0.0.1]  Id: 10\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1709287205;\n"
        "\nSELECT 'blank lines' ;\n\n",
        "# Time: 2024-03-01T10:00:06.000000Z\n# User@Host: truncated\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1",
    ]
    rng = random.Random(8)
    for at in sorted(rng.sample(range(1, len(entries)), 40), reverse=True):
        entries.insert(at, rng.choice(odd))
    src = tmp_path / "slow.log"
    src.write_text("\n".join(entries) + "\n")
    sql, py = _both_ways(rs, src, monkeypatch, format="mysql-slow", block_bytes=16 << 10)
    assert sql == py
    assert slow_routes["duckdb"] >= 10 and slow_routes["python"] >= 5
    assert sql[2][0] > 3000 and sql[2][1] >= 1


def test_duckdb_slow_log_reject_names_its_line_among_duckdb_blocks(
    rs: Rootsift, tmp_path: Path, slow_routes: dict[str, int]
) -> None:
    entries = _slow_entries(2000)
    at = 1200
    line = sum(e.count("\n") + 1 for e in entries[:at]) + 1
    entries.insert(
        at,
        "# Time: 2024-03-01T10:00:06.000000Z\n# User@Host: app[app] @ web1 [10.0.0.1]  Id: 1\n"
        "# Query_time: 0.001000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1",
    )
    src = tmp_path / "slow.log"
    src.write_text("\n".join(entries) + "\n")
    summary = rs.ingest(src, "slow", format="mysql-slow", block_bytes=16 << 10)
    assert (summary.events, summary.rejects) == (2000, 1)
    assert [(r["line"], r["reason"].split(" (")[0]) for r in summary.first_rejects] == [
        (line, "slow-log entry has a header but no statement")
    ]
    assert slow_routes["duckdb"] >= 5 and slow_routes["python"] >= 1


def test_slow_log_entry_longer_than_four_blocks_is_cut_and_continued_by_the_parser(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_routes: dict[str, int]
) -> None:
    entries = _slow_entries(300)
    long = "\n".join(f"  OR id = {i}" for i in range(8000))
    entries.insert(150, entries[150] + "\n" + long)
    del entries[151]
    src = tmp_path / "slow.log"
    src.write_text("\n".join(entries) + "\n")
    sql, py = _both_ways(rs, src, monkeypatch, format="mysql-slow", block_bytes=16 << 10)
    assert sql == py and sql[2] == (300, 0)
    assert slow_routes["duckdb"] >= 1 and slow_routes["python"] >= 2


def test_entry_blocks_cut_before_a_time_line_after_a_statement() -> None:
    from rootsift.ingest.textslow import entry_blocks

    text = (
        b"# Time: 1\n# User@Host: a\nSELECT 1;\n"  # 1-3
        b"# Time: 2\n# Time: 3\nSELECT 2;\n"  # 4-6: the '# Time: 3' follows a header line: no cut before it
        b"# Time: 4\nSELECT 3;\n"  # 7-8
    )
    got = list(entry_blocks(iter([(text, 1)]), 1 << 20))
    assert [(b.count(b"\n"), first, starts, ends, last) for b, first, starts, ends, last in got] == [
        (6, 1, True, True, False),
        (2, 7, True, True, True),
    ]
    forced = list(entry_blocks(iter([(b"SELECT 1;\n" * 10, 1), (b"SELECT 2;\n", 11)]), 16))
    assert [(first, starts, ends, last) for _, first, starts, ends, last in forced] == [
        (1, True, False, False),
        (11, False, True, True),
    ]


def test_whitespace_is_what_str_strip_removes() -> None:
    import sys

    from rootsift.ingest.formats.mysql_slow_sql import WHITESPACE

    assert set(WHITESPACE) == {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}


def test_duckdb_slow_log_use_lines_carry_the_database_across_blocks(
    rs: Rootsift, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slow_routes: dict[str, int]
) -> None:
    # "use db;" before "SET timestamp" (MySQL writes it when the database changes): the entry
    # and every later one, in this block and the next, have that database, read by DuckDB
    entries = _slow_entries(3000)
    for i, db in ((5, "shop"), (700, "`my-db`"), (1500, "a;b"), (2900, "x")):
        entries[i] = entries[i].replace("\nSET timestamp=", f"\nuse {db};\nSET timestamp=", 1)
    src = tmp_path / "slow.log"
    src.write_text("\n".join(entries) + "\n")
    sql, py = _both_ways(rs, src, monkeypatch, format="mysql-slow", block_bytes=16 << 10)
    assert sql == py and sql[2] == (3000, 0)
    assert slow_routes["duckdb"] >= 10 and slow_routes["python"] == 0
    assert ("db", "VARCHAR") in sql[1]
