"""Change events of the consul scenario: the streaming rollout on traffic routing, and
the everyday deploys, config pushes and node work around it (decoys)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from typing import Any

ACTORS = ["deploy-bot", "jenkins", "sre-oncall", "terraform", "chef-client", "spinnaker"]
DECOYS = [
    ("vault", "version_bump", "vault {a} -> {b}"),
    ("matchmaking", "version_bump", "matchmaking {a} -> {b}"),
    ("avatar-api", "config_push", "raise avatar-api http worker pool to {n}"),
    ("consul", "node_replacement", "replace consul non-voter {host} (disk SMART warnings)"),
    ("nomad", "config_push", "nomad client gc_interval 1m -> {n}m"),
    ("telemetry", "config_push", "increase statsd flush interval to {n}s"),
    ("chat", "version_bump", "chat {a} -> {b}"),
    ("edge-lb", "config_push", "rotate TLS certificates on edge load balancers"),
    ("consul", "config_push", "consul agent acl token ttl {n}h on game-server pool"),
    ("economy", "version_bump", "economy {a} -> {b}"),
]


def _iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def streaming_change(rng: random.Random, at: datetime, before: int, after: int) -> dict[str, Any]:
    """The culprit: streaming on the traffic-routing service, with 50 % more nodes."""
    return {
        "timestamp": _iso(at),
        "service": "traffic-routing",
        "change": "config_push",
        "description": (
            f"enable consul streaming (use_streaming_backend=true) on traffic-routing; "
            f"scale traffic-routing nodes {before} -> {after} ahead of end-of-year traffic"
        ),
        "actor": rng.choice(ACTORS),
    }


def decoy_changes(rng: random.Random, start: datetime, minutes: int) -> list[dict[str, Any]]:
    """Unrelated changes at seed-varied times over the whole window."""
    picked = rng.sample(DECOYS, rng.randrange(6, 9))
    rows = []
    for service, change, template in picked:
        at = start + timedelta(minutes=rng.randrange(30, minutes - 30))
        major, minor = rng.randrange(1, 9), rng.randrange(0, 30)
        desc = template.format(
            a=f"{major}.{minor}.{rng.randrange(0, 9)}",
            b=f"{major}.{minor + 1}.0",
            n=rng.randrange(2, 40),
            host=f"consul-nv{rng.randrange(10, 99)}",
        )
        rows.append(
            {
                "timestamp": _iso(at),
                "service": service,
                "change": change,
                "description": desc,
                "actor": rng.choice(ACTORS),
            }
        )
    return rows
