"""A real 3-broker own cluster on network namespaces: produce, consume, kill, restart, tear down.

Runs as root: real namespaces, veths, a bridge, an iptables rule, cgroups, ZooKeeper and brokers.
Every teardown asserts that nothing is left. Bring-up and tear-down times are printed (-s) and
kept in the test report's properties.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.factory import Cluster, build_cluster
from clusters.netns import NetnsNetwork, NetnsNode, existing_links, existing_namespaces
from clusters.state import ClusterState, cleanup_leftovers, process_alive
from clusters.system_def import BROKERS_DEFAULT as BROKER
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError
from tests.support.netns import leftovers

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

ROOT = Path(__file__).resolve().parents[2]
TIMINGS: dict[str, float] = {}


def unique(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(2)}"


def snapshot(cluster: Cluster) -> tuple[int | None, list[tuple[int, int | None]]]:
    state = cluster.state
    slot = int(state.info["slot"]) if state and "slot" in state.info else None
    pids = [(int(r["name"]), r.get("start")) for r in state.of_kind("pid")] if state else []
    return slot, pids


@pytest.fixture(scope="module")
def state_dir(scratch: Path) -> Path:
    return scratch / "state"


@pytest.fixture
def tmp_path(scratch: Path) -> Path:
    return Path(tempfile.mkdtemp(dir=scratch))


@pytest.fixture(scope="module")
def cluster(scratch: Path, state_dir: Path) -> Iterator[Cluster]:
    config = TestConfig(nodes=3, topics=1, partitions=2, replication_factor=3, min_insync=2)
    c = build_cluster(config, scratch / "work", name=unique("it"), state_dir=state_dir)
    started = time.monotonic()
    c.up()
    TIMINGS["netns_up_s"] = time.monotonic() - started
    TIMINGS["netns_nodes_s"] = c.timings["nodes_s"]
    try:
        from workloads import setup_topics

        setup_topics(config, c.bootstrap_servers())
        yield c
    finally:
        slot, pids = snapshot(c)
        started = time.monotonic()
        c.down()
        TIMINGS["netns_down_s"] = time.monotonic() - started
        print(f"\nnetns 3-broker cluster: bring-up {TIMINGS['netns_up_s']:.2f}s "
              f"(nodes {TIMINGS['netns_nodes_s']:.2f}s), tear-down {TIMINGS['netns_down_s']:.2f}s")  # fmt: skip
        assert leftovers(c.name, slot, pids, state_dir) == []


def test_nodes_have_namespaces_addresses_and_hostnames(cluster: Cluster) -> None:
    zk = cluster.zookeeper_node
    assert zk is not None
    for node in cluster.all_nodes:
        assert isinstance(node, NetnsNode)
        assert node.netns in existing_namespaces()
        assert node.address.startswith("10.77.")
        assert node.exec(["hostname"]).stdout.strip() == node.hostname
    n1, n3 = cluster.nodes[0], cluster.nodes[2]
    # Node to node through the bridge, even when the FORWARD chain ends in a DROP (as dockerd
    # leaves it): the cluster's own ACCEPT rule comes first. The DROP here is for this bridge only.
    drop = ["FORWARD", "-i", f"slbr-{cluster.name}", "-o", f"slbr-{cluster.name}", "-j", "DROP"]
    subprocess.run(["iptables", "-w", "-A", *drop], check=True)
    try:
        probe = f"import socket; socket.create_connection(('{zk.address}', 2181), 2).close(); print('ok')"
        assert n1.exec([sys.executable, "-c", probe]).stdout.strip() == "ok"
    finally:
        subprocess.run(["iptables", "-w", "-D", *drop], check=True)
    assert n3.exec(["cat", "/proc/net/dev"]).stdout.count("eth0") == 1


def test_produce_and_consume_from_the_controller(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    # Generous timeouts: on a loaded 2-core machine a replicated acks=all round trip can take seconds.
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers(), acks="all", request_timeout_ms=30000
    )
    acked: dict[int, tuple[int, int]] = {}
    for value in range(1, 41):
        meta = producer.send("t0", value=str(value).encode(), partition=value % 2).get(timeout=60)
        acked[value] = (meta.partition, meta.offset)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers(), enable_auto_commit=False, consumer_timeout_ms=5000
    )
    consumer.assign([TopicPartition("t0", 0), TopicPartition("t0", 1)])
    consumer.seek_to_beginning()
    seen: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + 20
    while len(seen) < len(acked) and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            for r in records:
                seen[int(r.value)] = (r.partition, r.offset)
    consumer.close()
    assert seen == acked


def test_leaders_and_isr_from_zookeeper(cluster: Cluster) -> None:
    states = cluster.sut.partition_state()
    assert set(states) == {("t0", 0), ("t0", 1)}
    for s in states.values():
        assert s["leader"] in {"n1", "n2", "n3"}
        isr = s["isr"]
        assert isinstance(isr, list) and s["leader"] in isr and set(isr) <= {"n1", "n2", "n3"}
    assert cluster.sut.controller() in {"n1", "n2", "n3"}
    assert cluster.sut.registered_brokers() == [1, 2, 3]


def test_kill_and_restart_a_broker_through_the_node_layer(cluster: Cluster) -> None:
    node = cluster.nodes[1]
    assert isinstance(node, NetnsNode)
    pid = node.daemon_pid(BROKER)
    assert pid is not None
    cluster.sut.kill(node)
    assert node.daemon_pid(BROKER) is None
    assert not process_alive(pid, None)
    started = time.monotonic()
    cluster.sut.start(node, wait_ready=True)
    TIMINGS["broker_restart_s"] = time.monotonic() - started
    assert node.daemon_pid(BROKER) not in (None, pid)
    # Graceful restart (SIGTERM, wait, start) and a freeze through cgroup.freeze.
    cluster.sut.restart(node)
    cluster.sut.wait_ready(node)
    cluster.sut.pause(node)
    assert node.daemon_paused(BROKER)
    cluster.sut.resume(node)
    assert not node.daemon_paused(BROKER)
    print(f"\nbroker restart after SIGKILL: {TIMINGS['broker_restart_s']:.2f}s until registered")


def test_status_describes_nodes_processes_and_partitions(cluster: Cluster) -> None:
    from harness.commands.cluster import describe

    info = json.loads(json.dumps(describe(cluster)))
    assert [n["name"] for n in info["nodes"]] == ["zk", "n1", "n2", "n3"]
    brokers = [n for n in info["nodes"] if n["role"] == "broker"]
    assert all(p["running"] and p["pid"] for n in brokers for p in n["processes"])
    assert {(p["topic"], p["partition"]) for p in info["partitions"]} == {("t0", 0), ("t0", 1)}
    assert all(p["leader"] and p["leader_epoch"] >= 0 and p["isr"] for p in info["partitions"])


def test_collect_copies_logs_and_data_dirs(cluster: Cluster, tmp_path: Path) -> None:
    cluster.collect(tmp_path)
    assert (tmp_path / "zk" / "logs" / "zookeeper.log").stat().st_size > 0
    for n in ("n1", "n2", "n3"):
        assert (tmp_path / n / "logs" / "broker.log").is_file()
        assert (tmp_path / n / "data" / "t0-0").is_dir()


def test_zookeeper_killed_and_started_through_the_sut(cluster: Cluster) -> None:
    from clusters.system_def import ZOOKEEPER_ROLE as ZOOKEEPER

    zk_node = cluster.zookeeper_node
    assert zk_node is not None
    before = zk_node.daemon_pid(ZOOKEEPER)
    cluster.sut.close()
    cluster.sut.kill(zk_node)
    assert zk_node.daemon_pid(ZOOKEEPER) is None
    cluster.sut.start(zk_node, wait_ready=True)
    assert zk_node.daemon_pid(ZOOKEEPER) not in (None, before)
    # Brokers reconnect (same sessions, or new registrations). A restarted ZooKeeper listens
    # before it takes sessions: on a loaded machine a first session may time out.
    deadline = time.monotonic() + 60
    registered: list[int] | str = []
    while registered != [1, 2, 3]:
        assert time.monotonic() < deadline, registered
        try:
            registered = cluster.sut.registered_brokers()
        except InfrastructureError as e:
            registered = str(e)
        time.sleep(0.2)


def test_a_name_clash_is_one_line_and_creates_nothing(tmp_path: Path, state_dir: Path) -> None:
    name = unique("cl")
    taken = f"sl-{name}-n2"
    subprocess.run(["ip", "netns", "add", taken], check=True)
    try:
        c = build_cluster(TestConfig(nodes=3), tmp_path, name=name, state_dir=state_dir)
        with pytest.raises(BadInput, match=f"{taken} already exists"):
            c.up()
        assert [n for n in existing_namespaces() if n.startswith(f"sl-{name}-")] == [taken]
        assert f"slbr-{name}" not in existing_links()
        assert not (state_dir / f"{name}.json").exists()
    finally:
        subprocess.run(["ip", "netns", "delete", taken], check=True)


CRASHING_CONTROLLER = """
import os, signal, sys
from pathlib import Path
from clusters.netns import NetnsNetwork
net = NetnsNetwork(sys.argv[1], ["n1", "n2"], Path(sys.argv[2]), Path(sys.argv[3]))
net.create()
net.nodes["n1"].start_daemon("sleeper", ["sleep", "600"], log_path=sys.argv[2] + "/sleeper.log")
net.nodes["n2"].start_daemon("sleeper", ["sleep", "600"], log_path=sys.argv[2] + "/sleeper.log")
net.nodes["n2"].pause_daemon("sleeper")
print("up", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_next_start_cleans_up_after_a_crashed_controller(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"  # a private one: other tests' live clusters are never touched
    name = unique("cr")
    result = subprocess.run(
        [sys.executable, "-c", CRASHING_CONTROLLER, name, str(tmp_path), str(state_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr
    state = ClusterState.load(state_dir / f"{name}.json")
    slot = int(state.info["slot"])
    pids = [(int(r["name"]), r.get("start")) for r in state.of_kind("pid")]
    assert len(pids) == 2 and all(process_alive(*p) for p in pids)
    assert f"sl-{name}-n1" in existing_namespaces()
    started = time.monotonic()
    assert cleanup_leftovers(state_dir) == [name]
    TIMINGS["leftover_cleanup_s"] = time.monotonic() - started
    assert leftovers(name, slot, pids, state_dir) == []


def test_clusters_coexist_on_distinct_subnets(tmp_path: Path, state_dir: Path) -> None:
    # Different state directories (as parallel test sessions have): the slot claim is machine-wide.
    first = NetnsNetwork(unique("co"), ["n1"], tmp_path, state_dir)
    second = NetnsNetwork(unique("co"), ["n1"], tmp_path, tmp_path / "other-state")
    try:
        first.create()
        second.create()
        assert first.slot != second.slot
        assert first.nodes["n1"].address != second.nodes["n1"].address
    finally:
        assert second.destroy() == []
        assert first.destroy() == []
