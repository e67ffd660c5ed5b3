"""procfs: golden files, kind and time detection, the corpus, and this machine's own /proc."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.formats import CORPORA, GOLDEN, check_golden, check_items, golden_cases, parse
from rootsift.ingest.formats import sniff
from rootsift.ingest.formats.procfs import kind_from_name
from rootsift.ingest.formats.procfs_keyed import snake
from rootsift.ingest.formats.procfs_tables import TCP_STATES
from rootsift.ingest.formats.snapshot_paths import host_from_path, time_in_name

FIXTURES = CORPORA / "procfs_fixtures" / "extracted" / "proc"
READ_KINDS = {"meminfo", "slabinfo", "sockstat", "sockstat6", "tcp", "tcp6", "status"}
READ_KINDS |= {"loadavg", "stat", "diskstats", "zoneinfo", "pressure/cpu", "pressure/io", "pressure/memory"}


@pytest.mark.parametrize("case", golden_cases("procfs"), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    check_golden(case)


def one(text: str, **options: object) -> dict[str, object]:
    events, rejects = parse("procfs", text, **options)
    assert not rejects, rejects
    assert len(events) == 1, events
    return events[0][1]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("meminfo_2020-01-02.10:15", datetime(2020, 1, 2, 10, 15, tzinfo=UTC)),
        ("metrics_2024-01-01T10:00:00Z.prom", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("node1_20240101T100000.txt", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("snap_2024-01-01_10-00-30.txt", datetime(2024, 1, 1, 10, 0, 30, tzinfo=UTC)),
        ("x_2024-01-01T12:00:00.25+02:00", datetime(2024, 1, 1, 10, 0, 0, 250000, tzinfo=UTC)),
        ("tcp.1704103200", datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("meminfo", None),
        ("meminfo_2024-01-01", None),  # a date alone is not a snapshot's time
        ("slabinfo_2024-13-01.10:00", None),  # month 13 is not a date
        ("status_12345", None),
    ],
)
def test_time_in_name(name: str, expected: datetime | None) -> None:
    assert time_in_name(name) == expected


@pytest.mark.parametrize(
    ("path", "host"),
    [
        ("snapshots/web01/proc/net/tcp", "web01"),
        ("gs-0417/40211/status", "gs-0417"),
        ("web01/2024-01-01/meminfo", "web01"),
        ("/proc/self/status", None),
        ("/proc/net/tcp", None),
        ("meminfo", None),
        ("-", None),
    ],
)
def test_host_from_path(path: str, host: str | None) -> None:
    assert host_from_path(path) == host


def test_kind_from_name_and_snake_case() -> None:
    kinds = ["meminfo_2020-01-02.10:15", "net_tcp6", "SLABINFO.txt", "sockstat6", "cgroups_x", "status", "stat"]
    assert [kind_from_name(n) for n in kinds] == ["meminfo", "tcp", "slabinfo", "sockstat", "cgroups", "status", None]
    kinds = ["vmstat.1704103200", "h/loadavg", "diskstats", "zoneinfo_x", "/proc/pressure/memory", "pressure_io"]
    assert [kind_from_name(n) for n in kinds] == ["vmstat", "loadavg", "diskstats", "zoneinfo", "pressure", "pressure"]
    assert kind_from_name("/proc/1/stat") is None and kind_from_name("proc/memory") is None
    assert kind_from_name("web/udp6") == "unread"
    assert snake("Active(file)") == "active_file" and snake("NFS_Unstable") == "nfs_unstable"
    assert snake("VmHWM") == "vm_hwm" and snake("FDSize") == "fd_size" and snake("DirectMap1G") == "direct_map_1g"
    assert snake("PPid") == "ppid" and snake("x86_Thread_features") == "x86_thread_features"


def test_meminfo_units_and_derived_fields() -> None:
    text = "MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 400 kB\nActive(file): 50 kB\nInactive(file): 25 kB\n"
    text += "SReclaimable: 5 kB\nHugePages_Total: 3\n"
    ev = one(text, source="meminfo", mtime=0.0)
    assert ev["mem_total_bytes"] == 1000 * 1024 and ev["huge_pages_total"] == 3
    assert ev["available_estimate_bytes"] == (100 + 50 + 25 + 5) * 1024
    assert ev["used_fraction"] == pytest.approx(0.6) and ev["used_fraction_from"] == "mem_available"
    old = one(text.replace("MemAvailable: 400 kB\n", ""), source="meminfo", mtime=0.0)
    assert old["used_fraction"] == pytest.approx(0.82) and old["used_fraction_from"] == "available_estimate"


def test_time_from_name_in_zone_else_mtime() -> None:
    ev = one("MemTotal: 1 kB\n", source="h/meminfo_2020-01-02.10:15", tz="Europe/Berlin")
    assert ev["timestamp"] == datetime(2020, 1, 2, 9, 15, tzinfo=UTC) and ev["host"] == "h"
    ev = one("MemTotal: 1 kB\n", source="meminfo", mtime=1577960100.0, host="gs-1")
    assert ev["timestamp"] == datetime(2020, 1, 2, 10, 15, tzinfo=UTC) and ev["host"] == "gs-1"


def test_content_decides_when_the_name_does_not() -> None:
    assert one("slabinfo - version: 2.1\nx 1 2 3 4 5 : tunables 0 0 0 : slabdata 1 1 0\n", source="a.txt")["kind"] == (
        "slabinfo"
    )
    assert one("MemTotal: 1 kB\n", source="slabinfo_wrongly_named")["kind"] == "meminfo"
    events, rejects = parse("procfs", "42 7\n", source="mystery.txt")
    assert not events and "cannot tell which /proc file" in rejects[0].reason


def test_sniff() -> None:
    for case in ("meminfo_cron.txt", "slabinfo_2_1.txt", "cgroups_leak.txt", "tcp.txt", "status_self.txt"):
        lines = (GOLDEN / "procfs" / case).read_text().splitlines()
        assert sniff(lines, case) == "procfs", case
    assert sniff(["hello world"], "meminfo") != "procfs"


def corpus_files() -> list[Path]:
    if not FIXTURES.is_dir():
        return []
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file())


def test_corpus_every_file() -> None:
    files = corpus_files()
    if not files:
        pytest.skip("corpus procfs_fixtures is absent")
    kinds = {}
    for path in files:
        events, rejects = parse("procfs", path.read_bytes(), source=str(path), mtime=0.0)
        check_items(events, rejects, path.read_bytes().count(b"\n") + 1)
        if path.name in READ_KINDS or path.relative_to(FIXTURES).as_posix() in READ_KINDS:
            assert events and not rejects, (path, rejects[:3])
            kinds[path.relative_to(FIXTURES).as_posix()] = events
        else:
            assert not events and rejects, path  # not a kind procfs reads: said so, line by line
    mem = kinds["meminfo"][0][1]
    assert mem["mem_total_bytes"] == 15666184 * 1024 and mem["sreclaimable_bytes"] == 1738124 * 1024
    assert mem["huge_pages_total"] == 0 and mem["used_fraction_from"] == "available_estimate"
    slabs = {ev["name"]: ev for _, ev in kinds["slabinfo"]}
    assert len(slabs) == 300
    assert slabs["pid_3"]["num_objs"] == 532 and slabs["pid_3"]["bytes"] == 532 * 576
    (_, tcp), (_, tcp6) = kinds["net/tcp"][0], kinds["net/tcp6"][0]
    assert (tcp["state_listen"], tcp["total"], tcp["listen_backlog"], tcp["ip_version"]) == (3, 3, 2, 4)
    assert (tcp6["state_close"], tcp6["total"], tcp6["ip_version"]) == (2, 2, 6)
    sock = kinds["net/sockstat"][0][1]
    assert (sock["sockets_used"], sock["tcp_tw"], sock["tcp_mem_pages"]) == (1602, 4, 22)
    status = kinds["26231/status"][0][1]
    assert (status["name"], status["pid"], status["vm_rss_bytes"]) == ("prometheus", 26231, 6716 * 1024)
    assert kinds["26235/status"][0][1]["threads"] == 51
    load = kinds["loadavg"][0][1]
    assert (load["load1"], load["load15"], load["procs_runnable"], load["procs_total"]) == (0.02, 0.05, 1, 497)
    stat = kinds["stat"][0][1]
    assert (stat["cpu_user_ms"], stat["ctxt"], stat["procs_blocked"], stat["cpus"]) == (3018540, 38014093, 1, 8)
    assert [ev["cpu"] for _, ev in kinds["stat"][1:]] == list(range(8))
    io = kinds["pressure/io"][0][1]
    assert (io["resource"], io["some_avg300_pct"], io["full_total_ms"]) == ("io", 3.85, 0.025)
    assert io["host"] == "extracted"  # the directory above proc/: pressure/ is part of the /proc layout
    zones = {ev.get("zone"): ev for _, ev in kinds["zoneinfo"]}
    assert set(zones) == {"DMA", "DMA32", "Normal", "Movable", "Device", None}
    assert zones["DMA"]["free_pages"] == 3952 and zones[None]["nr_active_anon"] == 547580
    disks = {ev["device"]: ev for _, ev in kinds["diskstats"]}
    assert len(disks) == 52 and disks["ram0"]["reads_completed"] == 0


def test_this_machines_meminfo() -> None:
    ev = one(Path("/proc/meminfo").read_text(), source="/proc/meminfo")
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert ev["mem_total_bytes"] == pytest.approx(physical, rel=0.03)
    used = ev["used_fraction"]
    assert isinstance(used, float) and 0.0 <= used <= 1.0
    assert "host" not in ev  # /proc itself names no host


def test_this_machines_tcp_and_self_status() -> None:
    for name in ("tcp", "tcp6"):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        text = path.read_text()
        ev = one(text, source=str(path))
        rows = [ln for ln in text.splitlines()[1:] if ln.strip()]
        counts = [ev["state_" + state] for state in TCP_STATES.values()]
        assert ev["total"] == len(rows) == sum(c for c in counts if isinstance(c, int))
        assert all(isinstance(c, int) for c in counts)
    status = one(Path("/proc/self/status").read_text(), source="/proc/self/status")
    assert status["pid"] == os.getpid() and status["uid"] == os.getuid()
    assert isinstance(status["vm_rss_bytes"], int) and status["vm_rss_bytes"] > 1 << 20


def test_this_machines_slabinfo_and_sockstat() -> None:
    sock = one(Path("/proc/net/sockstat").read_text(), source="/proc/net/sockstat")
    assert isinstance(sock["sockets_used"], int) and "tcp_inuse" in sock
    try:
        text = Path("/proc/slabinfo").read_text()
    except OSError:
        text = ""
    if not text.startswith("slabinfo - version: 2."):
        pytest.skip("/proc/slabinfo is not readable here")
    events, rejects = parse("procfs", text, source="/proc/slabinfo")
    assert not rejects and len(events) == text.count("\n") - 2


def copied(tmp_path: Path, name: str) -> tuple[Path, bytes]:
    """A copy of this machine's /proc/NAME under tmp_path/proc (skips when it cannot be read)."""
    try:
        data = (Path("/proc") / name).read_bytes()
    except OSError:
        pytest.skip(f"/proc/{name} is not readable here")
    path = tmp_path / "proc" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path, data


def events_of(path: Path, data: bytes) -> list[dict[str, object]]:
    events, rejects = parse("procfs", data, source=str(path), mtime=path.stat().st_mtime)
    assert not rejects, rejects[:3]
    return [ev for _, ev in events]


def test_this_machines_system_counters(tmp_path: Path) -> None:
    (load,) = events_of(*copied(tmp_path, "loadavg"))
    assert load["kind"] == "loadavg" and isinstance(load["load1"], float)
    assert 1 <= load["procs_runnable"] <= load["procs_total"]  # type: ignore[operator]
    stat = events_of(*copied(tmp_path, "stat"))
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    assert abs(stat[0]["btime"] - (time.time() - uptime)) < 5  # type: ignore[operator]
    assert stat[0]["cpus"] == len(stat) - 1 == os.sysconf("SC_NPROCESSORS_ONLN")
    cpu_total = sum(v for k, v in stat[0].items() if k.startswith("cpu_") and isinstance(v, int))
    assert 0.9 * uptime * 1000 < cpu_total / stat[0]["cpus"] < 1.1 * uptime * 1000  # type: ignore[operator]
    # free memory moves while the files are read (other processes allocate gigabytes on a
    # busy machine): the zones' free pages (zoneinfo) must fall between vmstat's free-page
    # counter read before and after them, within 20 %: the kernel sums the one into the
    # other. meminfo's MemFree is only an upper bound: on some VMs' kernels (6.18 on
    # Firecracker) it counts 24 GB free where the free-page counter holds 6.3 GB.
    (before,) = events_of(*copied(tmp_path, "meminfo"))
    (vm_before,) = events_of(*copied(tmp_path, "vmstat"))
    zones = events_of(*copied(tmp_path, "zoneinfo"))
    (vm_after,) = events_of(*copied(tmp_path, "vmstat"))
    (after,) = events_of(*copied(tmp_path, "meminfo"))
    page = os.sysconf("SC_PAGE_SIZE")
    lo, hi = sorted((vm_before["nr_free_pages"], vm_after["nr_free_pages"]))  # type: ignore[type-var]
    free = sum(ev.get("free_pages", 0) for ev in zones)  # type: ignore[misc]
    assert 0 < 0.8 * lo <= free <= 1.2 * hi, (free, lo, hi)  # type: ignore[operator]
    most = max(before["mem_free_bytes"], after["mem_free_bytes"])  # type: ignore[type-var]
    assert hi * page <= 1.2 * most, (hi * page, most)  # type: ignore[operator]
    disks = {ev["device"] for ev in events_of(*copied(tmp_path, "diskstats"))}
    assert {p.name.replace("!", "/") for p in Path("/sys/block").iterdir()} <= disks


def test_this_machines_pressure(tmp_path: Path) -> None:
    if not Path("/proc/pressure").is_dir():
        pytest.skip("this kernel has no /proc/pressure (CONFIG_PSI)")
    for resource in ("cpu", "memory", "io"):
        (ev,) = events_of(*copied(tmp_path, f"pressure/{resource}"))
        assert ev["kind"] == "pressure" and ev["resource"] == resource and ev["host"] == tmp_path.name
        assert all(0.0 <= ev[f"some_{s}_pct"] <= 100.0 for s in ("avg10", "avg60", "avg300"))  # type: ignore[operator]
        assert isinstance(ev["some_total_ms"], float)
    assert sniff(Path("/proc/pressure/memory").read_text().splitlines(), "memory") == "procfs"


def test_fixed_samples_sniff_as_procfs() -> None:
    for case in ("pressure_memory.txt", "stat_v2_6.txt", "diskstats_kernels.txt", "vmstat_short.txt"):
        assert sniff((GOLDEN / "procfs" / case).read_text().splitlines(), "x") == "procfs", case
    assert sniff(["0.02 0.04 0.05 1/497 11947"], "-") == "procfs"
    assert sniff(["1 2 sda 3 4 5 6"], "-") != "procfs"  # one row of numbers is not sure enough


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(
        ["meminfo", "slabinfo", "cgroups", "sockstat", "tcp6", "status", "x", "vmstat", "pressure/io", "loadavg"]
        + ["stat", "diskstats", "zoneinfo"]
    ),
    st.lists(st.text(alphabet=st.sampled_from("MemTotal:()kB 0123456789ABCDEF\t#slabinfo-version.2:=/,")), max_size=30),
)
def test_any_input(name: str, lines: list[str]) -> None:
    text = "\n".join(lines)
    events, rejects = parse("procfs", text, source=name)
    check_items(events, rejects, text.count("\n") + 1)


GOLDEN_INPUTS = sorted(p for p in (GOLDEN / "procfs").glob("*") if not p.name.endswith(".json"))


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(GOLDEN_INPUTS),
    st.lists(st.tuples(st.integers(0, 5000), st.sampled_from([":", " ", "\t", "\n", "x", "0", "kB", "-"]))),
)
def test_mutated_golden_inputs(path: Path, edits: list[tuple[int, str]]) -> None:
    text = path.read_text()
    for at, chunk in edits:
        at %= len(text) + 1
        text = text[:at] + chunk + text[at + 1 :]
    events, rejects = parse("procfs", text, source=path.stem)
    check_items(events, rejects, text.count("\n") + 1)
