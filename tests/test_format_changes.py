"""Change events: ``git-log`` on a real repository made here, ``k8s-events`` on Kubernetes
Event objects (List, watch stream, JSON lines, events.k8s.io/v1), both stored with the
conventional ``change.kind`` and queryable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers.formats import GOLDEN, check_golden, check_items, golden_cases, parse
from rootsift.api import Rootsift
from rootsift.ingest.formats.k8s_events import service_of
from rootsift.ingest.sniff import sniff_head
from rootsift.query.spec import Calculation, QuerySpec

GIT_FORMAT = "--format=%H%x1f%cI%x1f%an%x1f%ae%x1f%s"
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("case", golden_cases("changes"), ids=lambda p: p.name)
def test_golden(case: Path) -> None:
    check_golden(case)


def git(repo: Path, *args: str, when: str | None = None) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    if when:
        env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if subprocess.run(["git", "--version"], capture_output=True).returncode:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.name", "Grace Hopper")
    git(repo, "config", "user.email", "grace@example.com")
    (repo / "routing").mkdir()
    for i, (when, name, subject) in enumerate(
        [
            ("2024-03-04T09:00:00+01:00", "routing/config.hcl", "routing: initial config"),
            ("2024-03-05T08:20:00Z", "routing/nodes.tf", "routing: enable streaming; 6 -> 9 nodes"),
            ("2024-03-05T09:00:00-05:00", "README", 'docs: say\twhat changed, "quoted"'),
        ]
    ):
        (repo / name).write_text(f"v{i}\n")
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", subject, when=when)
    return repo


def test_git_log_of_a_real_repository(repo: Path) -> None:
    text = git(repo, "log", GIT_FORMAT, "--name-only")
    events, rejects = parse("git-log", text)
    assert not rejects
    hashes = git(repo, "rev-list", "HEAD").split()
    assert [ev["commit"] for _, ev in events] == hashes
    assert [ev["timestamp"] for _, ev in events] == [
        datetime(2024, 3, 5, 14, 0, tzinfo=UTC),
        datetime(2024, 3, 5, 8, 20, tzinfo=UTC),
        datetime(2024, 3, 4, 8, 0, tzinfo=UTC),
    ]
    newest, middle, first = (ev for _, ev in events)
    assert newest["description"] == 'docs: say\twhat changed, "quoted"' and newest["files"] == "README"
    assert middle["change"] == {"kind": "commit"} and middle["files_changed"] == 1
    assert first["author"] == "Grace Hopper" and first["author_email"] == "grace@example.com"
    assert sniff_head(text.encode(), "changes.log") == "git-log"
    # without files, in the four-field form, with the author date
    plain, rejects = parse("git-log", git(repo, "log", "--format=%H%x1f%aI%x1f%an%x1f%s"))
    assert not rejects and [ev["commit"] for _, ev in plain] == hashes and "files" not in plain[0][1]


def test_git_log_name_status_takes_the_new_path_of_a_rename(repo: Path) -> None:
    git(repo, "mv", "routing/nodes.tf", "routing/nodes_v2.tf")
    git(repo, "commit", "-q", "-m", "rename", when="2024-03-06T00:00:00Z")
    events, rejects = parse("git-log", git(repo, "log", "-1", GIT_FORMAT, "--name-status"))
    assert not rejects and events[0][1]["files"] == "routing/nodes_v2.tf"


def test_git_log_ingested_with_a_service_label_and_queried(repo: Path, tmp_path: Path) -> None:
    log = tmp_path / "changes.log"
    log.write_text(git(repo, "log", GIT_FORMAT, "--name-only"))
    with Rootsift(tmp_path / "data") as rs:
        summary = rs.ingest(log, "changes", labels={"service": "traffic-routing"})
        assert (summary.format, summary.events, summary.rejects) == ("git-log", 3, 0)
        spec = QuerySpec("changes", breakdowns=["change.kind", "service"], calculations=[Calculation.parse("count")])
        assert rs.query(spec).rows == [["commit", "traffic-routing", 3]]


def test_git_log_bad_lines_are_rejected_with_their_numbers() -> None:
    good = "a" * 40 + "\x1f2024-03-05T08:20:00Z\x1fAda\x1fx@y\x1fok"
    text = "\n".join(
        [
            "stray text",
            good,
            "",
            "src/a.py",
            "b" * 40 + "\x1f2024-03-05 08:20\x1fAda\x1fno offset",  # not %cI
            "src/b.py",
            "c" * 40 + "\x1fonly three",
        ]
    )
    events, rejects = parse("git-log", text)
    assert [(n, ev["files"]) for n, ev in events] == [(2, "src/a.py")]
    assert [r.line for r in rejects] == [1, 5, 6, 7]
    assert (
        "strict ISO 8601" in rejects[1].reason and "line 5" in rejects[2].reason and "this one 2" in rejects[3].reason
    )


def k8s_event(reason: str, kind: str, name: str, **extra: Any) -> dict[str, Any]:
    """A core/v1 Event as the API server returns it."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.17b9c4e2a1d3f0aa", "namespace": "shop"},
        "involvedObject": {"apiVersion": "apps/v1", "kind": kind, "name": name, "namespace": "shop"},
        "reason": reason,
        "message": f"{reason} {name}",
        "source": {"component": "deployment-controller"},
        "firstTimestamp": "2024-03-05T08:30:00Z",
        "lastTimestamp": "2024-03-05T08:31:00Z",
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        **extra,
    }


def test_k8s_events_list_fields_and_kinds() -> None:
    events, rejects = parse("k8s-events", (GOLDEN / "changes" / "k8s_events_list.json").read_bytes())
    kinds = [(ev["reason"], ev["change"]["kind"]) for _, ev in events]  # type: ignore[index]
    assert kinds == [
        ("ScalingReplicaSet", "scale"),
        ("Pulled", "deploy"),
        ("Killing", "restart"),
        ("BackOff", "restart"),
        ("LeaderElection", "election"),
        ("NodeNotReady", "node"),
        ("FailedScheduling", "failure"),
        ("SuccessfulRescale", "scale"),
    ]
    backoff = events[3][1]
    assert backoff["timestamp"] == datetime(2024, 3, 5, 8, 31, 55, tzinfo=UTC)  # lastTimestamp, not firstTimestamp
    assert backoff["k8s"] == {
        "object": {"kind": "Pod", "name": "cart-0"},
        "namespace": {"name": "shop"},
        "event": {"name": "cart-0.17b9c4e2a1d3f069", "count": 17, "first_timestamp": "2024-03-05T08:12:00Z"},
    }
    assert (backoff["host"], backoff["service"], backoff["type"]) == ("node-b-2", "cart", "Warning")
    election = events[4][1]
    assert election["timestamp"] == datetime(2024, 3, 5, 8, 32, 0, 118244, tzinfo=UTC)  # eventTime when no last
    assert [(r.line, "no reason" in r.reason) for r in rejects] == [(225, True)]
    assert sniff_head((GOLDEN / "changes" / "k8s_events_list.json").read_bytes(), "events.json") == "k8s-events"


def test_k8s_events_stream_json_lines_and_broken_objects() -> None:
    one = json.dumps(k8s_event("ScalingReplicaSet", "Deployment", "checkout"), indent=2)
    two = json.dumps(k8s_event("Killing", "Pod", "checkout-7d9f8b6c5d-x2x7q"))
    broken = '{"kind": "Event", "reason": "Started", "message": "unterminated\n'
    text = one + "\n" + broken + two + "\n" + "No resources found in shop namespace.\n" + one
    events, rejects = parse("k8s-events", text)
    n_one = one.count("\n") + 1
    assert [n for n, _ in events] == [1, n_one + 2, n_one + 4]
    assert [ev["service"] for _, ev in events] == ["checkout"] * 3
    assert [r.line for r in rejects] == [n_one + 1, n_one + 3]
    assert "string is not closed" in rejects[0].reason and "outside any JSON object" in rejects[1].reason
    check_items(events, rejects, text.count("\n") + 1)


def test_k8s_events_k8s_io_v1_and_a_compact_list() -> None:
    new = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-0.1", "namespace": "shop"},
        "regarding": {"kind": "StatefulSet", "name": "web", "namespace": "shop"},
        "reason": "SuccessfulCreate",
        "note": "create Pod web-3 in StatefulSet web successful",
        "eventTime": "2024-03-05T08:40:00.000001Z",
        "series": {"count": 4, "lastObservedTime": "2024-03-05T08:45:00.5Z"},
        "reportingController": "statefulset-controller",
        "type": "Normal",
    }
    doc = {"kind": "EventList", "apiVersion": "events.k8s.io/v1", "items": [new, new], "metadata": {}}
    events, rejects = parse("k8s-events", json.dumps(doc))
    assert not rejects and len(events) == 2
    ev = events[0][1]
    assert ev["timestamp"] == datetime(2024, 3, 5, 8, 40, 0, 1, tzinfo=UTC)  # eventTime before series
    assert (ev["change"], ev["description"], ev["service"]) == ({"kind": "scale"}, new["note"], "web")
    assert (ev["source"], ev["k8s"]["event"]["count"]) == ("statefulset-controller", 4)  # type: ignore[index]


def test_k8s_service_from_workload_names() -> None:
    assert service_of("Pod", "checkout-7d9f8b6c5d-x2x7q") == "checkout"
    assert service_of("ReplicaSet", "checkout-7d9f8b6c5d") == "checkout"
    assert service_of("Pod", "web-12") == "web" and service_of("Deployment", "api-v2") == "api-v2"
    assert service_of("Node", "node-a-1") is None and service_of("Pod", "") is None


def test_formats_lists_both(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "rootsift.cli", "formats", "--json"], capture_output=True, text=True, cwd=ROOT
    )
    names = {f["name"] for f in json.loads(res.stdout)["formats"]}
    assert {"git-log", "k8s-events"} <= names


def test_k8s_events_ingested_end_to_end(tmp_path: Path) -> None:
    src = tmp_path / "events.json"
    src.write_bytes((GOLDEN / "changes" / "k8s_events_list.json").read_bytes())
    with Rootsift(tmp_path / "data") as rs:
        summary = rs.ingest(src, "changes")
        assert (summary.format, summary.events, summary.rejects) == ("k8s-events", 8, 1)
        spec = QuerySpec("changes", where='change.kind = "restart"', breakdowns=["k8s.object.name"])
        spec.calculations = [Calculation.parse("count")]
        assert sorted(rs.query(spec).rows) == [["cart-0", 1], ["checkout-6b5f9c8d7e-q8w2p", 1]]
