"""Throughput of the own broker: 3 brokers, RF=3, acks=all, min.insync.replicas=2 (local processes).

    .venv/bin/python tests/perf/bench_broker.py [--records 200000] [--kafka-python-records 20000]

Prints produce and consume messages/s for confluent-kafka (batched, linger 5 ms) and for
kafka-python sending one record at a time (waiting for each acknowledgement).
Not collected by pytest (no test_ prefix): it is a measurement, not a check.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from clusters.local import LocalCluster  # noqa: E402


def confluent(cluster: LocalCluster, records: int) -> tuple[float, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster.create_topic("bench-ck", 1, 3)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 1_000_000,
            "enable.idempotence": True,
        }
    )
    acked = 0

    def delivered(err: object, _msg: object) -> None:
        nonlocal acked
        if err is None:
            acked += 1

    payloads = [str(i).encode() for i in range(records)]
    start = time.perf_counter()
    for i, value in enumerate(payloads):
        while True:
            try:
                producer.produce("bench-ck", value, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    produce_rate = acked / (time.perf_counter() - start)
    assert acked == records, f"only {acked} of {records} acknowledged"

    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap, "group.id": "bench", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition("bench-ck", 0, 0)])
    read = 0
    start = time.perf_counter()
    while read < records:
        read += sum(1 for m in consumer.consume(10_000, 1.0) if not m.error())
    consume_rate = read / (time.perf_counter() - start)
    consumer.close()
    return produce_rate, consume_rate


def kafka_python(cluster: LocalCluster, records: int) -> tuple[float, float]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    cluster.create_topic("bench-kp", 1, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=0)
    start = time.perf_counter()
    for i in range(records):
        producer.send("bench-kp", str(i).encode()).get(30)
    produce_rate = records / (time.perf_counter() - start)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    tp = TopicPartition("bench-kp", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    start = time.perf_counter()
    read = 0
    for _ in consumer:
        read += 1
        if read == records:
            break
    consume_rate = read / (time.perf_counter() - start)
    consumer.close()
    return produce_rate, consume_rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--kafka-python-records", type=int, default=5_000)
    args = parser.parse_args()
    with LocalCluster(3, settings={"min.insync.replicas": 2}) as cluster:
        produce, consume = confluent(cluster, args.records)
        print(
            f"confluent-kafka batched, acks=all RF=3: produce {produce:,.0f} msg/s, consume {consume:,.0f} msg/s"
        )
        produce, consume = kafka_python(cluster, args.kafka_python_records)
        print(
            f"kafka-python one at a time, acks=all RF=3: produce {produce:,.0f} msg/s, consume {consume:,.0f} msg/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
