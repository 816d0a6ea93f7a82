"""The own broker with `shared.node.id` (a stand-in for third-party brokers that do not know each
other): three real brokers over real ZooKeeper, RF 3, min.insync.replicas 2, each answering as node
111, alone, leader of every partition, while the real leaders are spread over the three. Unmodified
kafka-python and confluent-kafka (librdkafka: one broker id at three addresses) write with acks=all
and read back exactly what was acknowledged through any one broker; a consumer group reads on
across a failover of a real leader underneath."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from broker import protocol as p
from clusters.local import LocalCluster
from tests.support.wire import Wire

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SHARED = 111
PARTITIONS = 3
N = 1500


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    settings = {"min.insync.replicas": 2, "default.replication.factor": 3, "shared.node.id": SHARED}
    with LocalCluster(3, settings=settings) as c:
        c.create_topic("spread", PARTITIONS, 3)
        yield c


def leaders(cluster: LocalCluster, topic: str) -> dict[int, int]:
    """The real leader of each partition (ZooKeeper's state, not what the brokers answer)."""
    return {index: cluster.wait_for_leader(topic, index) for index in range(PARTITIONS)}


def ask(cluster: LocalCluster, broker_id: int, api_key: int, version: int, body: dict[str, Any]) -> Any:
    wire = Wire(cluster.ports[broker_id])
    try:
        return wire.call(api_key, version, body)
    finally:
        wire.close()


def test_every_broker_answers_as_the_shared_id_alone_and_leads_every_partition(cluster: LocalCluster) -> None:
    assert len(set(leaders(cluster, "spread").values())) > 1, "the real leaders should be spread"
    for broker_id in cluster.broker_ids:
        port = cluster.ports[broker_id]
        answer = ask(cluster, broker_id, p.API_METADATA, 12, {"topics": [{"name": "spread"}]})
        assert [(b.node_id, b.host, b.port) for b in answer.brokers] == [(SHARED, "127.0.0.1", port)]
        assert answer.controller_id == SHARED
        parts = answer.topics[0].partitions
        assert sorted(x.partition_index for x in parts) == list(range(PARTITIONS))
        for part in parts:
            assert (part.error_code, part.leader_id, part.leader_epoch) == (0, SHARED, -1)
            assert list(part.replica_nodes) == list(part.isr_nodes) == [SHARED] * 3
        coordinator = ask(cluster, broker_id, p.API_FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
        assert (coordinator.error_code, coordinator.node_id, coordinator.port) == (0, SHARED, port)


def exact(acked: dict[int, tuple[int, int]], read: dict[int, tuple[int, int]]) -> None:
    """Every acknowledged value read once, at the partition and offset it was acknowledged at."""
    assert len(acked) == N
    missing = [v for v in acked if v not in read]
    assert not missing, f"{len(missing)} acknowledged records not read, e.g. {missing[:5]}"
    moved = [v for v, at in acked.items() if read[v] != at]
    assert not moved, f"{len(moved)} records read elsewhere than acknowledged, e.g. {moved[:5]}"


def test_kafka_python_writes_and_reads_back_through_one_broker(cluster: LocalCluster) -> None:
    """Through broker 1 alone: it forwards the partitions brokers 2 and 3 really lead."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster.create_topic("kp", PARTITIONS, 3)
    one = cluster.address(1)
    producer = KafkaProducer(bootstrap_servers=one, acks="all", linger_ms=5, retries=5)
    futures = {i: producer.send("kp", str(i).encode(), partition=i % PARTITIONS) for i in range(N)}
    producer.flush(60)
    acked = {i: (f.get(timeout=30).partition, f.get(timeout=30).offset) for i, f in futures.items()}
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=one, enable_auto_commit=False, consumer_timeout_ms=3000)
    tps = [TopicPartition("kp", i) for i in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    read = {int(m.value): (m.partition, m.offset) for m in consumer}
    consumer.close()
    exact(acked, read)


def test_confluent_kafka_group_reads_on_across_a_failover_underneath(cluster: LocalCluster) -> None:
    """librdkafka keys brokers by id: one id at three addresses is one broker whose address moves.
    An idempotent producer writes (five requests in flight, passed on in order), a real leader is
    killed, and a group member reads every acknowledged record and commits through whichever
    broker it holds."""
    import confluent_kafka as ck

    cluster.create_topic("ck", PARTITIONS, 3)
    producer = ck.Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True}
    )
    acked: dict[int, tuple[int, int]] = {}

    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked[int(msg.value())] = (msg.partition(), msg.offset())

    for i in range(N // 2):
        producer.produce("ck", str(i).encode(), partition=i % PARTITIONS, on_delivery=delivered)
    producer.flush(30)
    victim = cluster.wait_for_leader("ck", 0)
    cluster.kill(victim)
    cluster.wait_for_leader("ck", 0, not_in={victim})
    for i in range(N // 2, N):
        producer.produce("ck", str(i).encode(), partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "readers",
                            "auto.offset.reset": "earliest", "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["ck"])
    read: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + 40
    while len(read) < N and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            read[int(message.value())] = (message.partition(), message.offset())
    committed = consumer.commit(asynchronous=False)
    consumer.close()
    cluster.start(victim)
    exact(acked, read)
    # the idempotent producer's order holds per partition through the broker that passed it on
    for partition in range(PARTITIONS):
        offsets = [acked[v][1] for v in sorted(acked) if acked[v][0] == partition]
        assert offsets == sorted(offsets), f"partition {partition}: written out of the producer's order"
    assert committed is not None and all(tp.error is None for tp in committed)
