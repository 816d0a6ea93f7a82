"""Unmodified Kafka clients against a real 3-broker own cluster (real ZooKeeper): acks=all, RF=3.

Each client produces N records with acks=all and reads them back: none lost, none duplicated,
every acknowledged offset holds the value it was acknowledged for.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator

import pytest

from clusters.local import LocalCluster

pytestmark = pytest.mark.integration

N = 10_000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, settings={"min.insync.replicas": 2, "default.replication.factor": 3}) as c:
        yield c


def check_exact(acked: dict[int, int], read: list[tuple[int, int]]) -> None:
    """acked: value -> acknowledged offset; read: (offset, value) pairs from a consumer."""
    values = [v for _, v in read]
    assert len(acked) == N
    assert len(values) == len(set(values)), "duplicates read"
    by_value = dict((v, o) for o, v in read)
    missing = [v for v in acked if v not in by_value]
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:5]}"
    moved = [v for v, o in acked.items() if by_value[v] != o]
    assert not moved, f"{len(moved)} records read at another offset than acknowledged"


def test_kafka_python(cluster: LocalCluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster.create_topic("kp", 1, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5, retries=5)
    futures = {i: producer.send("kp", str(i).encode()) for i in range(N)}
    producer.flush(60)
    acked = {i: f.get(timeout=30).offset for i, f in futures.items()}
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=3000
    )
    tp = TopicPartition("kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    read = [(m.offset, int(m.value)) for m in consumer]
    consumer.close()
    check_exact(acked, read)


def test_confluent_kafka(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic("ck", 1, 3)]).values():
        future.result(30)
    cluster.wait_for_leader("ck", 0)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": True}
    )
    acked: dict[int, int] = {}
    errors: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[int(msg.value())] = msg.offset()  # type: ignore[attr-defined]

    for i in range(N):
        producer.produce("ck", str(i).encode(), on_delivery=delivered)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "ck-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("ck", 0, 0)])
    read: list[tuple[int, int]] = []
    idle = 0
    while len(read) < N and idle < 10:
        messages = consumer.consume(5000, 1.0)
        idle = 0 if messages else idle + 1
        read += [(m.offset() or 0, int(m.value() or b"-1")) for m in messages if not m.error()]
    consumer.close()
    check_exact(acked, read)


def test_aiokafka(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    cluster.create_topic("ak", 1, 3)

    async def run() -> tuple[dict[int, int], list[tuple[int, int]]]:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=True)
        await producer.start()
        try:
            futures = {i: await producer.send("ak", str(i).encode()) for i in range(N)}
            acked = {i: (await f).offset for i, f in futures.items()}
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tp = TopicPartition("ak", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            read: list[tuple[int, int]] = []
            while len(read) < N:
                batch = await consumer.getmany(timeout_ms=3000)
                if not batch:
                    break
                for messages in batch.values():
                    read += [(m.offset, int(m.value)) for m in messages]
        finally:
            await consumer.stop()
        return acked, read

    acked, read = asyncio.run(run())
    check_exact(acked, read)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (scripts/setup.sh installs it)")
def test_kcat(cluster: LocalCluster) -> None:
    cluster.create_topic("kc", 1, 3)
    lines = "".join(f"{i}\n" for i in range(N))
    produce = subprocess.run(
        [
            "kcat",
            "-b",
            cluster.bootstrap,
            "-P",
            "-t",
            "kc",
            "-p",
            "0",
            "-X",
            "acks=all",
            "-X",
            "enable.idempotence=true",
        ],
        input=lines.encode(),
        capture_output=True,
        timeout=60,
    )
    assert produce.returncode == 0, produce.stderr.decode()[-2000:]
    consume = subprocess.run(
        [
            "kcat",
            "-b",
            cluster.bootstrap,
            "-C",
            "-t",
            "kc",
            "-p",
            "0",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %s\n",
        ],
        capture_output=True,
        timeout=60,
    )
    assert consume.returncode == 0, consume.stderr.decode()[-2000:]
    read = [
        tuple(int(x) for x in line.split()) for line in consume.stdout.decode().splitlines() if line.strip()
    ]
    values = [v for _, v in read]
    # kcat exits 0 only once every message was delivered (acks=all): all N acknowledged
    assert sorted(values) == list(range(N)), f"read {len(values)} values, {len(set(values))} distinct"
    offsets = [o for o, _ in read]
    assert offsets == list(range(N))
