"""HTTP access logs: nginx (combined, timing, any log_format), Apache (LogFormat), Jetty (NCSA)."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, GOLDEN, check_golden, check_items, golden_cases, jsonable, parse
from rootsift.errors import UsageError
from rootsift.ingest import formats
from rootsift.ingest.formats.access_fields import (
    parse_clf_time,
    seconds_to_ms,
    split_request,
    unescape_apache,
    unescape_nginx,
)
from rootsift.ingest.formats.access_logformat import read_log_format

COMBINED_LINE = '10.0.0.1 - - [21/Nov/2026:10:00:00 +0000] "GET /a?b=1 HTTP/1.1" 200 612 "-" "curl/8.0"'
TIMING_LINE = COMBINED_LINE + ' rt=0.125 uct="0.001" uht="0.120" urt="0.124"'
APACHE_LOGS = CORPORA / "apache_access_logs" / "apache_logs" / "apache_logs"
NGINX_PLUS = CORPORA / "apache_access_logs" / "nginx_json_plus_logs" / "nginxplus_json_logs"


@pytest.mark.parametrize("path", golden_cases("access"), ids=lambda p: p.name.removesuffix(".expected.json"))
def test_golden(path: Path) -> None:
    check_golden(path)


# --- field conversions ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "fields"),
    [
        ("GET /a/b?x=1&y HTTP/1.1", {"method": "GET", "path": "/a/b", "query": "x=1&y", "protocol": "HTTP/1.1"}),
        ("GET /a? HTTP/1.0", {"method": "GET", "path": "/a", "query": "", "protocol": "HTTP/1.0"}),
        ("GET /", {"method": "GET", "path": "/"}),
        ("GET /a b HTTP/1.1", {"method": "GET", "path": "/a b", "protocol": "HTTP/1.1"}),
        ("GET /a b", {"request": "GET /a b"}),
        ("\\x16\\x03\\x01\\x00", {"request": "\\x16\\x03\\x01\\x00"}),
        ("get / HTTP/1.1", {"request": "get / HTTP/1.1"}),
        ("GET", {"request": "GET"}),
        ("", {}),
        ("-", {}),
    ],
)
def test_split_request(text: str, fields: dict[str, str]) -> None:
    ev: dict[str, object] = {}
    split_request(ev, text, unescape_nginx)
    assert ev == fields


def test_seconds_to_ms_is_exact_for_three_decimals() -> None:
    assert seconds_to_ms("0.007") == 7.0
    assert seconds_to_ms("12.345") == 12345.0
    assert seconds_to_ms("2") == 2000.0
    assert seconds_to_ms("0.5") == 500.0
    assert seconds_to_ms(".125") == 125.0
    assert seconds_to_ms("1.5e3") == 1_500_000.0
    for bad in ("fast", "nan", "inf"):
        with pytest.raises(ValueError):
            seconds_to_ms(bad)


def test_unescape() -> None:
    assert unescape_nginx("caf\\xC3\\xA9 \\x22q\\x22") == 'café "q"'
    assert unescape_nginx("\\xE4\\xE5") == "\\xe4\\xe5"  # not UTF-8: the bytes stay visible
    assert unescape_apache('a \\"b\\" \\\\ \\n \\x41') == 'a "b" \\ \n A'


# --- nginx ---------------------------------------------------------------------------


def one(name: str, line: str, **options: object) -> dict[str, object]:
    events, rejects = parse(name, line + "\n", **options)
    assert not rejects, rejects
    assert len(events) == 1
    return jsonable(events)[0][1]


@pytest.mark.parametrize(
    ("urt", "ms", "attempts"),
    [
        ("0.002, 0.004 : 0.001", 7.0, 3),
        ("0.100", 100.0, 1),
        ("-", None, None),
        ("-, 0.030", 30.0, 2),
        ("0.001, 0.002", 3.0, 2),
    ],
)
def test_nginx_upstream_lists(urt: str, ms: float | None, attempts: int | None) -> None:
    line = COMBINED_LINE + f' rt=0.125 uct="-" uht="-" urt="{urt}"'
    ev = one("nginx", line)
    assert ev.get("upstream_response_time_ms") == ms
    assert ev.get("upstream_attempts") == attempts
    assert "upstream_connect_time_ms" not in ev


def test_nginx_upstream_addr_and_status_keep_text_and_last_attempt() -> None:
    fmt = "$remote_addr [$time_local] $status $upstream_addr $upstream_status $upstream_response_time"
    line = "10.0.0.1 [21/Nov/2026:10:00:00 +0000] 200 10.0.0.2:80, 10.0.0.3:80 : unix:/tmp/s 502, 504 : 200 1.000, 1.500 : 0.250"
    ev = one("nginx", line, log_format=fmt)
    assert ev["upstream_addr"] == "10.0.0.2:80, 10.0.0.3:80 : unix:/tmp/s"
    assert ev["upstream_addr_last"] == "unix:/tmp/s"
    assert ev["upstream_status"] == "502, 504 : 200"
    assert ev["upstream_status_last"] == 200
    assert ev["upstream_response_time_ms"] == 2750.0
    assert ev["upstream_attempts"] == 3


def test_nginx_braced_and_touching_variables() -> None:
    fmt = "${remote_addr}|${request_time}s|$upstream_cache_status$status|$connection"
    ev = one("nginx", "1.2.3.4|0.250s|HIT200|17", log_format=fmt)
    assert ev["remote_addr"] == "1.2.3.4"
    assert ev["request_time_ms"] == 250.0
    assert ev["upstream_cache_status"] == "HIT"
    assert ev["status"] == 200
    assert ev["connection"] == 17


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("nginx", "$request$remote_addr$remote_addr$remote_addr"), ("nginx", "$host$uri"), ("apache", "%r%u %>s")],
)
def test_touching_variables_that_both_take_any_text_are_a_usage_error(name: str, fmt: str) -> None:
    # Found by tests/test_parser_properties.py: the regex tried every split of the line
    # between the touching values, O(n^k) for k of them (a 1 KiB line never finished).
    with pytest.raises(UsageError, match="--log-format: .* touch and both may hold any text"):
        parse(name, "\x00" * 1024 + "\n", log_format=fmt)


def test_nginx_unknown_variables_become_fields_and_msec_is_the_time() -> None:
    fmt = '$msec "$http_x_request_id" $ssl_protocol $request_length $my_custom_time'
    ev = one("nginx", '1700000000.250 "abc-123" TLSv1.3 523 0.042', log_format=fmt)
    assert ev["timestamp"] == "2023-11-14T22:13:20.250000+00:00"
    assert ev["http_x_request_id"] == "abc-123"
    assert ev["ssl_protocol"] == "TLSv1.3"
    assert ev["request_length"] == 523
    assert ev["my_custom_time_ms"] == 42.0


def test_nginx_without_time_uses_file_time() -> None:
    events, rejects = parse("nginx", "200 /a\n", log_format="$status $uri", mtime=1700000000.0)
    assert not rejects
    assert jsonable(events)[0][1] == {"status": 200, "uri": "/a", "timestamp": "2023-11-14T22:13:20+00:00"}


def test_nginx_bad_number_is_a_reject_naming_the_variable() -> None:
    fmt = '$remote_addr [$time_local] "$request" "$request_time"'
    events, rejects = parse("nginx", '1.2.3.4 [21/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" "soon"\n', log_format=fmt)
    assert not events
    assert rejects[0].line == 1 and "$request_time 'soon' is not a duration" in rejects[0].reason


def test_nginx_reject_names_column_and_expectation() -> None:
    _, rejects = parse("nginx", COMBINED_LINE.replace(" 200 ", " OK ") + "\n", log_format="combined")
    assert rejects[0].reason == "does not match log_format combined at column 65: expected $status"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("log_format t escape=json '$a ' '\"$b\"';", ("t", "json", '$a "$b"')),
        ('log_format main "$remote_addr - $status";', ("main", "default", "$remote_addr - $status")),
        ("escape=none $a $b", ("custom", "none", "$a $b")),
        ("'$a' ' $b'", ("custom", "default", "$a $b")),
        ("$a $b ", ("custom", "default", "$a $b ")),
    ],
)
def test_read_log_format(text: str, expected: tuple[str, str, str]) -> None:
    assert read_log_format(text) == expected


@pytest.mark.parametrize("text", ["no variables here", "escape=xml $a", "log_format onlyname;"])
def test_read_log_format_errors(text: str) -> None:
    with pytest.raises(UsageError):
        read_log_format(text)


def test_nginx_escape_none_allows_quotes_in_values() -> None:
    fmt = 'escape=none $remote_addr "$http_user_agent" $status'
    ev = one("nginx", '1.2.3.4 "a "quoted" agent" 200', log_format=fmt)
    assert ev["http_user_agent"] == 'a "quoted" agent' and ev["status"] == 200


def test_nginx_detects_the_format_from_the_first_lines() -> None:
    data = "\n".join([TIMING_LINE] * 3 + [COMBINED_LINE]) + "\n"
    events, rejects = parse("nginx", data)
    assert [e.get("request_time_ms") for _, e in events] == [125.0] * 3
    assert [r.line for r in rejects] == [4]
    assert "log_format upstream_time" in rejects[0].reason


# --- Apache ----------------------------------------------------------------------------


def test_apache_logformat_directives() -> None:
    fmt = r'LogFormat "%h %l %u %t \"%r\" %>s %b %I %O %{us}T %k %{User-Agent}i %P" weird'
    line = '1.2.3.4 - - [21/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 - 312 845 15300 3 curl/8 4242'
    ev = one("apache", line, log_format=fmt)
    assert ev["body_bytes_sent"] == 0
    assert (ev["request_length"], ev["bytes_sent"], ev["request_time_ms"]) == (312, 845, 15.3)
    assert (ev["keepalive_requests"], ev["http_user_agent"], ev["pid"]) == (3, "curl/8", 4242)


def test_apache_named_formats_and_epoch_times() -> None:
    ev = one("apache", '1.2.3.4 - - [21/Nov/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 5 2', log_format="common_T")
    assert ev["request_time_ms"] == 2000.0
    ev = one("apache", '1700000000123 "GET /x?y HTTP/1.1" %q', log_format='%{msec}t "%r" %%q')
    assert ev["timestamp"] == "2023-11-14T22:13:20.123000+00:00"
    assert (ev["path"], ev["query"]) == ("/x", "y")


@pytest.mark.parametrize("fmt", ["plain text", "LogFormat no quotes here"])
def test_apache_log_format_errors_name_the_flag(fmt: str) -> None:
    with pytest.raises(UsageError, match="--log-format"):
        parse("apache", "x\n", log_format=fmt)


# --- sniffing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "name", "expected"),
    [
        ([TIMING_LINE] * 5, "access.log", "nginx"),
        ([COMBINED_LINE] * 5, "access.log", "apache"),
        ([COMBINED_LINE] * 5, "/var/log/nginx/access.log", "nginx"),
        ([COMBINED_LINE] * 5, "2026_11_21.request.log", "jetty"),
        ([COMBINED_LINE.replace(' "-" "curl/8.0"', " ")] * 5, "out.log", "jetty"),
        ([COMBINED_LINE + ' "10.1.1.1"'] * 5, "access.log", "nginx"),
        ([COMBINED_LINE + " 1234"] * 5, "access.log", "apache"),
        (['{"version":6,"nginx_version":"1.9.4","connections":{"accepted":1}}'] * 5, "nginx.json", None),
        (["2026-11-21 10:00:00 UTC [123] LOG:  statement: select 1"] * 5, "postgresql.log", None),
    ],
)
def test_sniff(lines: list[str], name: str, expected: str | None) -> None:
    got = formats.sniff(lines, name)
    assert (got if got in ("nginx", "apache", "jetty") else None) == expected


# --- corpora -------------------------------------------------------------------------------


def test_corpus_apache_logs() -> None:
    if not APACHE_LOGS.exists():
        pytest.skip("corpus apache_access_logs not present")
    data = APACHE_LOGS.read_bytes()
    lines = data.decode("utf-8", "replace").split("\n")[:50]
    assert formats.sniff(lines, APACHE_LOGS.name) == "apache"
    events, rejects = parse("apache", data)
    assert rejects == []
    assert len(events) == 10_000
    check_items(events, rejects, 10_000)
    first = jsonable(events[:1])[0][1]
    assert first["remote_addr"] == "83.149.9.216"
    assert first["timestamp"] == "2015-05-17T10:05:03+00:00"
    assert first["path"] == "/presentations/logstash-monitorama-2013/images/kibana-search.png"
    assert (first["status"], first["body_bytes_sent"]) == (200, 203023)
    statuses = Counter(ev["status"] for _, ev in events)
    assert statuses[200] == 9126 and statuses[404] == 213 and statuses[500] == 3
    assert [n for n, ev in events if ev.get("truncated")] == [8899]
    assert sum(1 for _, ev in events if "query" in ev) > 1000


def test_corpus_nginx_plus_status_json_is_not_an_access_log() -> None:
    if not NGINX_PLUS.exists():
        pytest.skip("corpus nginx_json_plus_logs not present")
    lines = NGINX_PLUS.read_text(errors="replace").split("\n")[:50]
    for name in ("nginx", "apache", "jetty"):
        assert formats.get(name).sniff(lines, NGINX_PLUS.name) == 0.0
    events, rejects = parse("nginx", NGINX_PLUS.read_bytes())
    assert events == [] and len(rejects) == 500


# --- fuzzing ---------------------------------------------------------------------------------

_PIECES = [*' -[]"/:.,=\\x0123456789?%$\t', "\\x16", "é", "GET ", " HTTP/1.1", "[21/Nov/2026:10:00:00 +0000]", " - - "]
_ALPHABET = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
_GOLDEN_INPUTS = sorted(p for p in (GOLDEN / "access").iterdir() if not p.name.endswith(".json"))


@settings(max_examples=150, deadline=None)
@given(st.lists(_ALPHABET, max_size=8), st.sampled_from(["nginx", "apache", "jetty"]))
def test_fuzz_random_lines(lines: list[str], name: str) -> None:
    data = "\n".join(lines)
    events, rejects = parse(name, data)
    check_items(events, rejects, data.count("\n") + 1)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_GOLDEN_INPUTS), st.data())
def test_fuzz_mutated_golden(path: Path, data: st.DataObject) -> None:
    raw = bytearray(path.read_bytes())
    for _ in range(data.draw(st.integers(1, 6))):
        pos = data.draw(st.integers(0, max(len(raw) - 1, 0)))
        raw[pos : pos + data.draw(st.integers(0, 3))] = data.draw(st.binary(max_size=3))
    name = path.name.split("_")[0]
    events, rejects = parse(name, bytes(raw))
    check_items(events, rejects, raw.count(b"\n") + 1)


@settings(max_examples=150, deadline=None)
@given(st.text(st.sampled_from(list(' "[]$_{}abcdefmorstu')), max_size=40), _ALPHABET)
def test_fuzz_random_log_formats(fmt: str, line: str) -> None:
    try:
        events, rejects = parse("nginx", line, log_format=fmt)
    except UsageError:
        return
    check_items(events, rejects, line.count("\n") + 1)


def test_many_unquoted_unknown_variables_do_not_backtrack_explosively() -> None:
    fmt = " ".join(f"$v{i}" for i in range(14)) + " [$time_local]"
    line = " ".join(["a b c"] * 40)  # matches no split: every way to cut it must fail fast
    events, rejects = parse("nginx", line + "\n", log_format=fmt)
    assert not events and "does not match log_format custom" in rejects[0].reason


def test_nginx_escape_none_last_quoted_value_may_hold_quotes() -> None:
    fmt = 'escape=none $remote_addr "$request" "$http_user_agent"'
    ev = one("nginx", '1.2.3.4 "GET / HTTP/1.1" "a " b" c"', log_format=fmt)
    assert ev["http_user_agent"] == 'a " b" c' and ev["path"] == "/"


def test_times_without_offset_are_read_in_the_given_zone_not_cached_across_zones() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    assert parse_clf_time("10/Oct/2000:13:55:36", berlin).utcoffset() == timedelta(hours=2)
    assert parse_clf_time("10/Oct/2000:13:55:36", UTC).utcoffset() == timedelta(0)
    assert parse_clf_time("10/Oct/2000:13:55:36 -0700", berlin).utcoffset() == timedelta(hours=-7)
    ev = one("apache", "[2026-01-15 08:00:00] 200", log_format="[%{%Y-%m-%d %H:%M:%S}t] %>s", tz="America/New_York")
    assert ev["timestamp"] == "2026-01-15T08:00:00-05:00"


def test_a_tail_pair_never_overwrites_the_lines_own_fields() -> None:
    """Found by test_parser_properties: ``timestamp=uct="0.001"`` in a tail replaced the
    request's time with the text ``uct=``."""
    line = (
        '10.0.0.5 - - [21/Nov/2026:10:00:00 +0000] "GET /a HTTP/1.1" 200 51 "-" "curl" '
        'rt=0.125 timestamp=uct="0.001" status=7 urt="0.124"'
    )
    ((_, ev),), rejects = parse("nginx", line)
    assert not rejects
    assert ev["timestamp"].isoformat() == "2026-11-21T10:00:00+00:00" and ev["status"] == 200  # type: ignore[union-attr]
    assert ev["request_time_ms"] == 125.0 and ev["upstream_response_time_ms"] == 124.0
    assert ev["extra"] == 'timestamp=uct= "0.001" status=7'
