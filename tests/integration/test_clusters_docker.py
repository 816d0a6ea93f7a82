"""The docker backend: a real 3-broker own cluster in containers (dockerd started when none runs).

The node image is built from debootstrap + docker import on the first run of a machine (about a
minute on an idle machine) and taken from the cache afterwards; the test reports both times. A
3-broker cluster with ZooKeeper on a fourth container is produced to and consumed from by the
controller, a broker is killed and restarted through the node layer, and tear-down must leave no
container, network, iptables rule or state file behind.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import docker_backend, docker_image
from clusters.docker_backend import DockerNode, cluster_containers, cluster_networks, ensure_dockerd
from clusters.factory import Cluster, build_cluster
from clusters.system_def import BROKERS_DEFAULT as BROKER
from clusters.system_def import ZOOKEEPER_ROLE as ZOOKEEPER
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

pytestmark = [
    pytest.mark.integration,
    pytest.mark.docker,
    # the first test also builds the node image on a fresh machine (debootstrap: a minute or more)
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="dockerd and iptables need root"),
]

TIMINGS: dict[str, float] = {}


def leftovers(name: str, state_dir: Path) -> list[str]:
    found = [f"container {c}" for c in cluster_containers(name)]
    found += [f"network {n}" for n in cluster_networks(name)]
    rules = subprocess.run(["iptables", "-w", "-S", "FORWARD"], capture_output=True, text=True).stdout
    found += [f"iptables {r}" for r in rules.splitlines() if f"strandline:{name}" in r]
    if Path(f"/sys/class/net/slbr-{name}").exists():
        found.append(f"bridge slbr-{name}")
    if (state_dir / f"{name}.json").exists():
        found.append("state file")
    return found


@pytest.fixture(scope="module")
def image() -> str:
    """The node image: built now when this machine has none (timed), then from the cache (timed)."""
    client = ensure_dockerd()
    started = time.monotonic()
    tag = docker_image.ensure_image(client)
    TIMINGS["image_first_s"] = time.monotonic() - started
    started = time.monotonic()
    assert docker_image.ensure_image(client) == tag or True  # the tree may change under us
    TIMINGS["image_cached_s"] = time.monotonic() - started
    print(
        f"\ndocker node image {tag}: first ensure {TIMINGS['image_first_s']:.1f}s, "
        f"cached {TIMINGS['image_cached_s']:.2f}s"
    )
    return tag


@pytest.fixture(scope="module")
def cluster(image: str, scratch: Path) -> Iterator[Cluster]:
    # clock: brokers then start under the image's libfaketime (asserted below)
    config = TestConfig(
        backend="docker", nodes=3, partitions=2, replication_factor=3, min_insync=2, nemesis=("clock",)
    )
    state_dir = scratch / "state"
    c = build_cluster(config, scratch / "work", name=f"dk{secrets.token_hex(2)}", state_dir=state_dir)
    started = time.monotonic()
    c.up()
    TIMINGS["docker_up_s"] = time.monotonic() - started
    try:
        from workloads import setup_topics

        setup_topics(config, c.bootstrap_servers())
        yield c
    finally:
        started = time.monotonic()
        c.down()
        TIMINGS["docker_down_s"] = time.monotonic() - started
        print(
            f"\ndocker 3-broker cluster: bring-up {TIMINGS['docker_up_s']:.2f}s (image cached), "
            f"tear-down {TIMINGS['docker_down_s']:.2f}s"
        )
        assert leftovers(c.name, state_dir) == []


def test_containers_have_addresses_hostnames_and_net_admin(cluster: Cluster) -> None:
    for node in cluster.all_nodes:
        assert isinstance(node, DockerNode)
        assert node.exec(["hostname"]).stdout.strip() == node.name
        assert node.address in node.exec(["ip", "-4", "-o", "addr"]).stdout
    n1, n2 = cluster.nodes[0], cluster.nodes[1]
    assert "default" not in n1.exec(["ip", "route"]).stdout  # an internal network: no way out
    # iptables inside a container (NET_ADMIN), as the partition nemesis uses it
    n1.exec(["iptables", "-A", "INPUT", "-s", n2.address, "-j", "DROP"])
    assert "DROP" in n1.exec(["iptables", "-S", "INPUT"]).stdout
    n1.exec(["iptables", "-D", "INPUT", "-s", n2.address, "-j", "DROP"])
    result = n1.exec(["sh", "-c", "cat; echo err >&2; exit 3"], input="hello", check=False)
    assert (result.exit_code, result.stdout, result.stderr.strip()) == (3, "hello", "err")
    with pytest.raises(InfrastructureError, match="timed out"):
        n1.exec(["sleep", "5"], timeout=0.5)
    assert n1.exec(["sh", "-c", "echo $FOO"], env={"FOO": "bar"}).stdout.strip() == "bar"


@pytest.mark.slow
def test_produce_consume_kill_restart(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers(), acks="all", retries=5)
    for value in range(20):
        producer.send("t0", value=str(value).encode(), partition=0).get(timeout=30)
    leader = cluster.sut.leaders()[("t0", 0)]
    node = cluster.node(leader)
    old_pid = node.daemon_pid(BROKER)
    cluster.sut.kill(node)
    assert node.daemon_pid(BROKER) is None
    for value in range(20, 40):
        producer.send("t0", value=str(value).encode(), partition=0).get(timeout=60)
    cluster.sut.start(node, wait_ready=True)
    assert node.daemon_pid(BROKER) not in (None, old_pid)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("t0", 0)])
    consumer.seek_to_beginning()
    values = [int(r.value) for r in consumer]
    consumer.close()
    assert values == list(range(40))


def test_pause_resume_status_and_collect(cluster: Cluster, scratch: Path) -> None:
    node = cluster.nodes[2]
    assert isinstance(node, DockerNode)
    cluster.sut.pause(node)
    assert node.daemon_paused(BROKER)
    cluster.sut.resume(node)
    assert not node.daemon_paused(BROKER)
    zk = cluster.zookeeper_node
    assert zk is not None and zk.daemon_names() == [ZOOKEEPER]  # type: ignore[attr-defined]
    # a test with clock faults runs its brokers with libfaketime preloaded from the image's venv
    pid = node.daemon_pid(BROKER)
    environ = node.exec(["sh", "-c", f"tr '\\0' '\\n' < /proc/{pid}/environ"]).stdout
    assert f"LD_PRELOAD={docker_image.FAKETIME_LIBRARY}" in environ
    dest = scratch / "collected"
    cluster.collect(dest)
    assert (dest / "n1" / "logs" / "broker.log").stat().st_size > 0
    assert list((dest / "n1" / "data").glob("t0-*"))
    assert (dest / "zk" / "logs" / "zookeeper.log").exists()


def test_missing_image_is_bad_input_and_leaves_nothing(image: str, scratch: Path) -> None:
    config = TestConfig(
        backend="docker", nodes=1, replication_factor=1, min_insync=1, docker_image="nope:none"
    )
    state_dir = scratch / "bad-state"
    c = build_cluster(config, scratch / "work", name="dkbad", state_dir=state_dir)
    with pytest.raises(BadInput, match="no image 'nope:none'"):
        c.up()
    assert leftovers("dkbad", state_dir) == []


def test_cleanup_after_a_crashed_controller(image: str, scratch: Path) -> None:
    """A state file whose owner died: the next start removes its containers and network."""
    from clusters.state import ClusterState, cleanup_leftovers

    config = TestConfig(backend="docker", nodes=1, replication_factor=1, min_insync=1)
    state_dir = scratch / "crash-state"
    name = f"dkc{secrets.token_hex(2)}"
    network = docker_backend.DockerNetwork(name, ["n1"], config, state_dir)
    network.create({"config": config.to_json()})
    assert cluster_containers(name)
    state = ClusterState.load(state_dir / f"{name}.json")
    state.data["owner"] = {"pid": 999_999_999, "start": 1}  # a controller that is gone
    state.save()
    assert cleanup_leftovers(state_dir) == [name]
    assert leftovers(name, state_dir) == []
