"""A cluster's datasets (docs/clickhouse.md, "Deploying on a cluster"): two ClickHouse
servers of this machine (scripts/clickhouse_server.py) that are the two shards of cluster
``two``, over ClickHouse's native protocol, with the tables the docs' DDL makes on each
node (a local MergeTree table of rootsift's shape, a ``Distributed`` table in front
sharded by ``#sample``; without ``ON CLUSTER`` and replication, which need a Keeper). A
scenario's telemetry is ingested by rootsift into one node's own database, copied through
the ``Distributed`` tables onto both shards, and every analysis its manifest asks for must
find the same on the cluster as on the one node, to the engines' tolerances (found by it:
"the first N events" an analysis reads were whichever shard answered first, another set
each run; they are the first by the table's sort key now, ``Backend.row_order``). Ingest through a ``Distributed`` dataset
is on both shards when it returns; what needs ``ON CLUSTER`` DDL fails saying so."""

from __future__ import annotations

import json
import re
import secrets
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from helpers.backends import HAVE_CLICKHOUSE_CONNECT, USER, needs_clickhouse, server_script
from helpers.server import free_port
from helpers.store import write_jsonl
from rootsift import Rootsift, scenarios
from rootsift.cli import main
from test_analyses_chdb import SCALE, SEED, commands, compare

pytestmark = needs_clickhouse

SCENARIOS = ["upgrade", "cascade", "consul", "memleak"]
"""Their manifests ask for compare, profile-diff, canary, investigate, explain, changes, trends."""
CLUSTER = "two"


@dataclass
class Cluster:
    addresses: list[str]
    password: str

    def url(self, database: str, node: int = 0) -> str:
        return f"http://{USER}:{self.password}@{self.addresses[node].removeprefix('http://')}/{database}"

    def client(self, node: int) -> Any:
        import clickhouse_connect

        host, port = self.addresses[node].removeprefix("http://").split(":")
        return clickhouse_connect.get_client(host=host, port=int(port), username=USER, password=self.password)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """Two servers, each one shard of cluster ``two`` (its ``remote_servers`` names both)."""
    if not HAVE_CLICKHOUSE_CONNECT:
        pytest.skip("clickhouse-connect is not installed")
    root = Path(tempfile.mkdtemp(prefix="rootsift-test-cluster-"))
    tcp = [free_port(), free_port()]
    shards = "".join(f"<shard><replica><host>127.0.0.1</host><port>{p}</port></replica></shard>" for p in tcp)
    (root / "cluster.xml").write_text(f"<remote_servers><{CLUSTER}>{shards}</{CLUSTER}></remote_servers>")
    password = secrets.token_urlsafe(12)
    nodes = []
    try:
        for i, port in enumerate(tcp):
            options = ["--tcp-port", str(port), "--config-extra", str(root / "cluster.xml")]
            nodes.append(
                server_script().launch(
                    root / f"node{i}", root / f"node{i}.log", *options, "--user", USER, "--password", password
                )
            )
        yield Cluster([address for address, _ in nodes], password)
    finally:
        for _, process in nodes:
            process.terminate()
            process.wait(timeout=30)


def shard(cluster: Cluster, dataset: str, one: str, two: str) -> None:
    """The docs' cluster DDL for ``dataset`` (node by node), and its rows of node A's own
    table copied through the ``Distributed`` table onto both shards."""
    a = cluster.client(0)
    ddl = a.command(f"SHOW CREATE TABLE {one}.`{dataset}`").replace("\\n", "\n").replace("\\'", "'")
    local = re.sub(r"^CREATE TABLE \S+", f"CREATE TABLE {two}.`{dataset}_local`", ddl, count=1)
    comment = a.command(f"SELECT comment FROM system.tables WHERE database = '{one}' AND name = '{dataset}'")
    for node in (0, 1):
        client = cluster.client(node)
        client.command(f"CREATE DATABASE IF NOT EXISTS {two}")
        client.command(local)
        client.command(
            f"CREATE TABLE {two}.`{dataset}` AS {two}.`{dataset}_local` "
            f"ENGINE = Distributed('{CLUSTER}', '{two}', '{dataset}_local', `#sample`) COMMENT %(c)s",
            parameters={"c": comment},
        )
    a.command(
        f"INSERT INTO {two}.`{dataset}` SELECT * FROM {one}.`{dataset}`",
        settings={"distributed_foreground_insert": 1},
    )


def local_rows(cluster: Cluster, dataset: str, two: str) -> list[int]:
    return [int(cluster.client(n).command(f"SELECT count() FROM {two}.`{dataset}_local`")) for n in (0, 1)]


def cli(cluster: Cluster, database: str, data: Path, *argv: str) -> Result:
    env = {"ROOTSIFT_BACKEND": "clickhouse", "ROOTSIFT_CLICKHOUSE_URL": cluster.url(database)}
    return CliRunner(env=env).invoke(main, [*argv, "--data", str(data)])


def as_json(result: Result) -> Any:
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return lines[0] if len(lines) == 1 else lines


@pytest.fixture(scope="module", params=SCENARIOS)
def sharded(request: pytest.FixtureRequest, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Sharded:
    """A scenario on node A alone (database ``one_<name>``) and on the two shards (``two_<name>``)."""
    name = str(request.param)
    root = tmp_path_factory.mktemp(f"cluster-{name}")
    scenarios.generate(name, root / "out", SEED, scale=SCALE)
    one, two = f"one_{name}", f"two_{name}"
    with Rootsift(root / "data", engine="clickhouse", clickhouse_url=cluster.url(one)) as rs:
        for summary in scenarios.ingest(rs, root / "out"):
            assert summary.rejects == 0, summary.first_rejects
        names = [d.name for d in rs.datasets()]
    for dataset in names:
        shard(cluster, dataset, one, two)
    return Sharded(root / "data", one, two, names, commands(name, root / "out"))


@dataclass
class Sharded:
    data: Path
    one: str
    two: str
    datasets: list[str]
    argv: list[list[str]]


def test_every_analysis_finds_the_same_on_two_shards_as_on_one_node(cluster: Cluster, sharded: Sharded) -> None:
    for name in sharded.datasets:
        rows = local_rows(cluster, name, sharded.two)
        assert min(rows) > 0.3 * sum(rows), f"{name}: the shards hold {rows}: not spread by #sample"
    for argv in sharded.argv:
        one, two = (cli(cluster, db, sharded.data, *argv, "--json") for db in (sharded.one, sharded.two))
        where = "rootsift " + " ".join(argv)
        assert one.exit_code in (0, 1) and two.exit_code == one.exit_code, f"{where}\n{one.output}\n{two.output}"
        a, b = as_json(one), as_json(two)
        looks = a if isinstance(a, list) else [a]
        assert looks and all(x.get("findings") or x.get("metrics") for x in looks), f"{where}: nothing to compare"
        differences = compare(a, b, "")
        assert not differences, f"{where}: the cluster differs from one node\n" + "\n".join(differences[:20])


def test_datasets_are_the_distributed_tables_with_their_shards_parts(cluster: Cluster, sharded: Sharded) -> None:
    one = {d["name"]: d for d in as_json(cli(cluster, sharded.one, sharded.data, "datasets", "--json"))["datasets"]}
    two = {d["name"]: d for d in as_json(cli(cluster, sharded.two, sharded.data, "datasets", "--json"))["datasets"]}
    assert sorted(two) == sorted(one)  # the local tables behind them are no datasets
    for name, d in two.items():
        assert (d["events"], d["first"], d["last"]) == (one[name]["events"], one[name]["first"], one[name]["last"])
        sql = f"SELECT count() FROM system.parts WHERE database = '{sharded.two}' AND table = '{name}_local' AND active"
        parts = sum(int(cluster.client(n).command(sql)) for n in (0, 1))
        assert d["segments"] == parts > 0 and d["bytes_on_disk"] > 0


def test_ingest_into_a_distributed_dataset_is_on_both_shards_when_it_returns(
    cluster: Cluster, sharded: Sharded, tmp_path: Path
) -> None:
    with Rootsift(sharded.data, engine="clickhouse", clickhouse_url=cluster.url(sharded.two)) as rs:
        texts = {d: [f for f, i in rs.backend.fields(d).items() if i.type == "VARCHAR"] for d in sharded.datasets}
        name = next(d for d in sharded.datasets if texts[d])
        before = local_rows(cluster, name, sharded.two)
        rows = [{"timestamp": f"2024-03-02T00:00:{k % 60:02d}Z", texts[name][0]: f"v{k % 7}"} for k in range(3000)]
        # several blocks: on a cluster each is visible once written (no pending table to attach)
        summary = rs.ingest(write_jsonl(tmp_path / "more.jsonl", rows), name, block_bytes=20_000)
        assert summary.events == len(rows) and summary.blocks > 1
        after = local_rows(cluster, name, sharded.two)
        assert sum(after) - sum(before) == len(rows) and all(a > b for a, b in zip(after, before, strict=True))
    new = write_jsonl(tmp_path / "new.jsonl", [{"timestamp": "2024-03-02T00:00:00Z", "brand_new": 1.5}])
    refused = cli(cluster, sharded.two, sharded.data, "ingest", str(new), "-d", name)
    assert refused.exit_code == 1, refused.output
    assert f"is a Distributed table over cluster '{CLUSTER}': its new field 'brand_new' needs" in refused.output
    assert "ON CLUSTER" in refused.output and sum(local_rows(cluster, name, sharded.two)) == sum(after)
    kept = cli(cluster, sharded.two, sharded.data, "retention", name, "--keep", "1d")
    local = f"{sharded.two}.{name}_local"
    assert kept.exit_code == 2 and f"ALTER TABLE {local} ON CLUSTER {CLUSTER} DROP PARTITION" in kept.output
    assert sum(local_rows(cluster, name, sharded.two)) == sum(after)  # nothing deleted
    # the cluster's standing retention is its local tables' TTL (the operator's DDL), shown as such
    for node in (0, 1):
        cluster.client(node).command(
            f"ALTER TABLE {local} MODIFY TTL toDateTime(timestamp) + INTERVAL 3650 DAY DELETE",
            settings={"materialize_ttl_after_modify": 0},
        )
    shown = cli(cluster, sharded.two, sharded.data, "retention", name, "--json")
    assert shown.exit_code == 0 and as_json(shown)["standing"]["keep"] == "3650d", shown.output
