"""Telemetry writers of the consul scenario: Prometheus text exposition per server, as
Consul's prometheus sink names its metrics (``consul_kvs_apply`` a summary in ms,
``consul_raft_boltdb_freelistBytes`` a gauge), every sample carrying its ms timestamp."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

HEADER = """# HELP consul_kvs_apply Time taken to complete an update to the KV store (ms).
# TYPE consul_kvs_apply summary
# HELP consul_raft_commitTime Time to commit a new entry to the Raft log on the leader (ms).
# TYPE consul_raft_commitTime summary
# HELP consul_raft_leader_lastContact Time since the leader last contacted its followers (ms).
# TYPE consul_raft_leader_lastContact gauge
# HELP consul_raft_boltdb_freelistBytes Bytes of the BoltDB freelist written with every commit.
# TYPE consul_raft_boltdb_freelistBytes gauge
# HELP consul_server_isLeader Whether this server is the Raft leader.
# TYPE consul_server_isLeader gauge
"""


@dataclass
class Scrape:
    """One server's scrape: what its agent reported at ``at``."""

    at: datetime
    freelist_bytes: int
    is_leader: bool
    apply_ms: list[float] = field(default_factory=list)  # KV applies observed in the window (leader)
    commit_ms: float = 0.0
    last_contact_ms: float = 0.0


@dataclass
class ServerMetrics:
    """The cumulative summary state of one server's prometheus sink, and its text."""

    lines: list[str] = field(default_factory=list)
    apply_sum: float = 0.0
    apply_count: int = 0

    def add(self, s: Scrape) -> None:
        ts = int(s.at.timestamp() * 1000)
        out = self.lines
        out.append(f"consul_server_isLeader {1 if s.is_leader else 0} {ts}")
        out.append(f"consul_raft_boltdb_freelistBytes {s.freelist_bytes} {ts}")
        if not s.is_leader:
            return  # the sink expires leader-only series on followers
        obs = sorted(s.apply_ms)
        for q in ("0.5", "0.9", "0.99"):
            value = _quantile(obs, float(q))
            text = "NaN" if value is None else f"{value:.3f}"
            out.append(f'consul_kvs_apply{{quantile="{q}"}} {text} {ts}')
        self.apply_sum += sum(obs)
        self.apply_count += len(obs)
        out.append(f"consul_kvs_apply_sum {self.apply_sum:.3f} {ts}")
        out.append(f"consul_kvs_apply_count {self.apply_count} {ts}")
        out.append(f'consul_raft_commitTime{{quantile="0.5"}} {s.commit_ms:.3f} {ts}')
        out.append(f"consul_raft_leader_lastContact {s.last_contact_ms:.3f} {ts}")

    def text(self) -> str:
        return HEADER + "\n".join(self.lines) + "\n"


def _quantile(sorted_obs: list[float], q: float) -> float | None:
    if not sorted_obs:
        return None
    return sorted_obs[min(len(sorted_obs) - 1, int(q * len(sorted_obs)))]
