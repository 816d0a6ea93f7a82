"""The Apache Kafka system under test (clusters/kafka.py) on real nodes.

1. Always: the whole KafkaSystem lifecycle (unpack a distribution tarball on every node, render
   server.properties, format the storage, start, wait for every broker in the metadata, leaders
   with epochs and ISRs, kill, restart, pause, collect logs and data dirs, teardown) on a netns
   cluster, with a stand-in distribution: a tarball laid out like Kafka's whose
   `bin/kafka-storage.sh` writes meta.properties as Kafka's does and whose
   `bin/kafka-server-start.sh` turns the rendered KRaft server.properties into an own-broker
   configuration and runs the own broker (ZooKeeper for it runs on the controller, on the
   cluster's bridge address). Real processes, real Kafka clients; only the server binary differs.
2. With `STRANDLINE_KAFKA_TARBALL` (a path or URL of a real Kafka distribution, marker `kafka`):
   the same lifecycle against Apache Kafka itself. Without it the test is reported as not run,
   with that reason.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import zookeeper
from clusters.factory import Cluster, build_cluster
from clusters.kafka import KAFKA, KafkaSystem
from clusters.netns import NetnsNetwork
from foundation.config import TestConfig
from tests.support.kafka_stand_in import stand_in_tarball

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

TIMINGS: dict[str, float] = {}


@pytest.fixture(scope="module")
def cluster(scratch: Path) -> Iterator[Cluster]:
    tarball = scratch / "kafka_stand-in.tgz"
    tarball.write_bytes(b"")  # named by the config; written once ZooKeeper's address is known
    config = TestConfig(
        system="kafka", nodes=3, partitions=2, replication_factor=3, min_insync=2, kafka_tarball=str(tarball)
    )
    state_dir = scratch / "state"
    c = build_cluster(config, scratch / "work", name=f"kf{secrets.token_hex(2)}", state_dir=state_dir)
    assert isinstance(c.sut, KafkaSystem) and c.zookeeper_node is None
    network = c.network
    assert isinstance(network, NetnsNetwork)
    network.create({"system": "kafka", "config": config.to_json(), "name": c.name})
    zk_proc = None
    try:
        cfg = zookeeper.write_server_files(
            scratch / "zookeeper", client_port=2181, client_address=network.bridge_address
        )
        with open(scratch / "zookeeper.log", "wb") as log:
            zk_proc = subprocess.Popen(zookeeper.command(cfg), stdout=log, stderr=subprocess.STDOUT)
        stand_in_tarball(tarball, f"{network.bridge_address}:2181")
        started = time.monotonic()
        c.sut.setup()
        TIMINGS["kafka_setup_s"] = time.monotonic() - started
        from workloads import setup_topics

        setup_topics(config, c.bootstrap_servers())
        yield c
    finally:
        c.down()
        if zk_proc is not None:
            zk_proc.kill()
            zk_proc.wait()
        assert not (state_dir / f"{c.name}.json").exists()


def test_every_node_got_the_distribution_its_config_and_formatted_storage(cluster: Cluster) -> None:
    sut = cluster.sut
    for i, node in enumerate(cluster.nodes, start=1):
        lay = sut.layout(node)
        assert node.exec(["test", "-x", f"{lay.install_dir}/bin/kafka-server-start.sh"]).ok
        properties = node.exec(["cat", lay.config_path]).stdout
        assert f"node.id={i}" in properties and "process.roles=broker,controller" in properties
        assert "min.insync.replicas=2" in properties
        meta = node.exec(["cat", f"{lay.data_dir}/meta.properties"]).stdout
        assert f"cluster.id={sut.cluster_id}" in meta and f"node.id={i}" in meta
        assert node.daemon_pid(KAFKA) is not None


def test_leaders_epochs_and_isr_come_from_the_metadata(cluster: Cluster) -> None:
    deadline = time.monotonic() + 30
    while True:
        states = cluster.sut.partition_state()
        if len(states) == 2 and all(s["leader"] and len(s["isr"]) == 3 for s in states.values()):
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.5)
    names = {n.name for n in cluster.nodes}
    for state in states.values():
        assert state["leader"] in names and set(state["isr"]) == names
        assert isinstance(state["leader_epoch"], int) and state["leader_epoch"] >= 0
    assert cluster.sut.controller() in names
    assert set(cluster.sut.leaders()) == {("t0", 0), ("t0", 1)}


def test_produce_kill_restart_consume(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers(), acks="all", retries=5)
    for value in range(10):
        producer.send("t0", value=str(value).encode(), partition=1).get(timeout=30)
    node = cluster.node(cluster.sut.leaders()[("t0", 1)])
    cluster.sut.kill(node)
    assert node.daemon_pid(KAFKA) is None
    for value in range(10, 20):
        producer.send("t0", value=str(value).encode(), partition=1).get(timeout=60)
    cluster.sut.start(node, wait_ready=True)
    cluster.sut.pause(node)
    assert node.daemon_paused(KAFKA)  # type: ignore[attr-defined]
    cluster.sut.restart(node)  # resumes, SIGTERM, start
    assert not node.daemon_paused(KAFKA)  # type: ignore[attr-defined]
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers(), consumer_timeout_ms=10_000)
    consumer.assign([TopicPartition("t0", 1)])
    consumer.seek_to_beginning()
    values = [int(r.value) for r in consumer]
    consumer.close()
    assert values == list(range(20))


def test_collect_logs_and_data_dirs(cluster: Cluster, scratch: Path) -> None:
    dest = scratch / "collected"
    cluster.collect(dest)
    for node in cluster.nodes:
        assert (dest / node.name / "logs" / "kafka.out").stat().st_size > 0
        assert (dest / node.name / "data" / "meta.properties").exists()
        assert list((dest / node.name / "data").glob("t0-*"))


# --- real Apache Kafka, when a distribution is provided -------------------------------------------

KAFKA_TARBALL = os.environ.get("STRANDLINE_KAFKA_TARBALL", "")


@pytest.mark.kafka
@pytest.mark.skipif(
    not KAFKA_TARBALL,
    reason="not run: STRANDLINE_KAFKA_TARBALL is not set (no Apache Kafka distribution to test against)",
)
def test_apache_kafka_on_netns(scratch: Path) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from workloads import setup_topics

    config = TestConfig(
        system="kafka", nodes=3, partitions=2, replication_factor=3, min_insync=2, kafka_tarball=KAFKA_TARBALL
    )
    state_dir = scratch / "real-state"
    with build_cluster(config, scratch / "real", name=f"ak{secrets.token_hex(2)}", state_dir=state_dir) as c:
        print(f"\nApache Kafka 3-node KRaft cluster on netns: bring-up {c.timings['up_s']:.1f}s")
        setup_topics(config, c.bootstrap_servers())
        producer = KafkaProducer(bootstrap_servers=c.bootstrap_servers(), acks="all")
        for value in range(10):
            producer.send("t0", value=str(value).encode(), partition=0).get(timeout=30)
        node = c.node(c.sut.leaders()[("t0", 0)])
        c.sut.kill(node)
        for value in range(10, 20):
            producer.send("t0", value=str(value).encode(), partition=0).get(timeout=60)
        c.sut.start(node, wait_ready=True)
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=c.bootstrap_servers(), consumer_timeout_ms=10_000)
        consumer.assign([TopicPartition("t0", 0)])
        consumer.seek_to_beginning()
        assert [int(r.value) for r in consumer] == list(range(20))
        consumer.close()
        assert c.sut.partition_state()[("t0", 0)]["leader_epoch"] >= 1
    assert not (state_dir / f"{c.name}.json").exists()
