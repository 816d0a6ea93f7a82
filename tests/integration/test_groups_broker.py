"""The group coordinator inside real brokers, driven by real consumers (kafka-python, librdkafka).

One module-scoped 3-broker cluster (ZooKeeper + brokers as local processes): consumer groups with
subscribe() split partitions, commit and resume; when the coordinator (lowest live broker id) is
killed, the group moves to the next broker and consumption carries on; committed offsets survive
kill -9 of the coordinator.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from broker.localcluster import LocalCluster

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20)
    for i in range(start, start + count):
        producer.send(topic, str(i).encode(), partition=i % partitions)
    producer.flush(30)
    producer.close()


def consumer(bootstrap: str, group: str, **extra: object) -> KafkaConsumer:
    settings: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
        "consumer_timeout_ms": 3000,
    }
    settings.update(extra)
    return KafkaConsumer(**settings)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=3) as local:
        local.create_topic("g0", partitions=4, replication_factor=3)
        for p in range(4):
            local.wait_for_leader("g0", p)
        produce(local.bootstrap, "g0", 200, 4)
        yield local


def test_two_consumers_share_partitions_and_resume_from_commits(cluster: LocalCluster) -> None:
    seen: dict[str, list[int]] = {}
    assignments: dict[str, set[TopicPartition]] = {}
    barrier = threading.Barrier(2)

    def run(name: str) -> None:
        c = consumer(cluster.address(3), "split")  # bootstrap via a broker that is not the coordinator
        c.subscribe(["g0"])
        barrier.wait()
        values: list[int] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            batch = c.poll(timeout_ms=300)
            for records in batch.values():
                values.extend(int(r.value) for r in records)
            if len(c.assignment()) == 2 and not batch and values:
                break
        assignments[name] = set(c.assignment())
        c.commit()
        seen[name] = values
        c.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(assignments["a"]) == len(assignments["b"]) == 2
    assert not assignments["a"] & assignments["b"]
    everything = seen["a"] + seen["b"]
    assert set(everything) == set(range(200))

    produce(cluster.bootstrap, "g0", 40, 4, start=200)
    later = consumer(cluster.bootstrap, "split")
    later.subscribe(["g0"])
    resumed = sorted(int(m.value) for m in later)
    later.close()
    assert resumed == list(range(200, 240))  # nothing before the committed offsets


def test_librdkafka_commits_and_reads_back(cluster: LocalCluster) -> None:
    c = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "rdkafka",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["g0"])
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 100 and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is not None and not message.error():
            values.append(int(message.value()))
    c.commit(asynchronous=False)
    committed = c.committed([ConfluentTopicPartition("g0", p) for p in range(4)], timeout=10)
    c.close()
    assert len(values) >= 100
    assert sum(tp.offset for tp in committed if tp.offset >= 0) >= 100


def test_group_moves_when_the_coordinator_dies(cluster: LocalCluster) -> None:
    c = consumer(cluster.bootstrap, "failover", consumer_timeout_ms=20000)
    c.subscribe(["g0"])
    first = [int(next(c).value) for _ in range(20)]
    assert first
    cluster.kill(1)  # the lowest live id: the coordinator
    try:
        rest = []
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline and len(set(first + rest)) < 240:
            for records in c.poll(timeout_ms=500).values():
                rest.extend(int(r.value) for r in records)
        c.close()
        assert set(first + rest) == set(range(240))
    finally:
        cluster.start(1)


def test_committed_offsets_survive_kill_9(cluster: LocalCluster) -> None:
    # Runs after the failover test restarted broker 1, so broker 1 coordinates again; both
    # consumers bootstrap through it, so they ask it (and only it) for the coordinator.
    cluster.wait_for_leader("g0", 0)
    c = consumer(cluster.address(1), "durable")
    c.subscribe(["g0"])
    taken = [next(c) for _ in range(30)]
    c.commit()
    expected = {TopicPartition("g0", p): c.committed(TopicPartition("g0", p)) for p in range(4)}
    c.close()
    assert sum(v or 0 for v in expected.values()) >= 30 and taken
    cluster.kill(1)
    cluster.start(1)
    again = consumer(cluster.address(1), "durable")
    after = {tp: again.committed(tp) for tp in expected}
    again.close()
    assert after == expected
