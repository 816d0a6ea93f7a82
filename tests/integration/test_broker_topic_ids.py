"""Kafka 4's protocol against a real 3-broker own cluster: topics by id, and Kafka 4's floors.

Requests are crafted with kio over raw sockets, so the versions are exactly the ones under test:
Fetch v13/v17 by topic id read back exactly what was produced; Produce v13 writes by id; an
unknown id gets UNKNOWN_TOPIC_ID per partition on a connection that stays open; a version below
Kafka 4's floor is refused as Kafka 4 refuses it; topic ids survive a broker restart; and the
replica fetchers between brokers use Fetch v17.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecords

from broker import protocol as p
from clusters.local import LocalCluster
from tests.support.wire import Wire, one_record_batch

pytestmark = pytest.mark.integration

UNKNOWN_TOPIC_ID = 100
UNSUPPORTED_VERSION = 35


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, settings={"min.insync.replicas": 2, "default.replication.factor": 3}) as c:
        yield c


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def topic_metadata(cluster: LocalCluster, broker_id: int, topic: str) -> tuple[uuid.UUID, int]:
    """(topic id, leader of partition 0) as broker `broker_id` hands them out (Metadata v12),
    once it has them (a broker learns a new topic from ZooKeeper a moment after its creation)."""
    deadline = time.monotonic() + 30
    while True:
        wire = Wire(_port(cluster.address(broker_id)))
        try:
            meta: Any = wire.call(p.API_METADATA, 12, {"topics": [{"name": topic}]})
        finally:
            wire.close()
        (entry,) = meta.topics
        if entry.partitions and entry.partitions[0].leader_id >= 0:
            return entry.topic_id, entry.partitions[0].leader_id
        assert time.monotonic() < deadline, f"broker {broker_id} does not know {topic}: {entry}"
        time.sleep(0.1)


def fetch_by_id(
    wire: Wire, version: int, topic_id: uuid.UUID, offset: int, partitions: tuple[int, ...] = (0,)
) -> Any:
    return wire.call(
        p.API_FETCH,
        version,
        {
            "max_wait": 100,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "topics": [
                {
                    "topic_id": topic_id,
                    "partitions": [
                        {"partition": i, "fetch_offset": offset, "partition_max_bytes": 1 << 20}
                        for i in partitions
                    ],
                }
            ],
            "forgotten_topics_data": [],
        },
    )


def read_by_id(wire: Wire, version: int, topic_id: uuid.UUID, end: int) -> list[tuple[int, int]]:
    """(offset, value) of every record below `end`, fetched by topic id from offset 0."""
    read: list[tuple[int, int]] = []
    offset = 0
    deadline = time.monotonic() + 60
    while offset < end:
        assert time.monotonic() < deadline, f"fetch v{version} stalled at offset {offset} of {end}"
        response = fetch_by_id(wire, version, topic_id, offset)
        (topic,) = response.responses
        assert topic.topic_id == topic_id
        (part,) = topic.partitions
        assert part.error_code.value == 0, part.error_code
        records = MemoryRecords(bytes(part.records or b""))
        while records.has_next():
            batch = records.next_batch()
            for record in batch:
                if record.offset >= offset:
                    read.append((record.offset, int(record.value)))
            offset = max(offset, batch.next_offset)
    return read


def test_fetch_by_topic_id_reads_back_what_was_produced(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    cluster.create_topic("ids", 1, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    futures = {i: producer.send("ids", str(i).encode()) for i in range(2000)}
    producer.flush(60)
    acked = sorted((f.get(timeout=30).offset, i) for i, f in futures.items())
    producer.close()
    topic_id, leader = topic_metadata(cluster, 1, "ids")
    assert topic_id.int != 0
    wire = Wire(_port(cluster.address(leader)))
    try:
        for version in (13, 17):
            assert read_by_id(wire, version, topic_id, len(acked)) == acked
    finally:
        wire.close()


def test_produce_by_topic_id_and_unknown_ids(cluster: LocalCluster) -> None:
    cluster.create_topic("pids", 2, 3)
    topic_id, leader = topic_metadata(cluster, 2, "pids")
    wire = Wire(_port(cluster.address(leader)))
    try:
        produced: Any = wire.call(
            p.API_PRODUCE,
            13,
            {
                "acks": -1,
                "timeout": 10_000,
                "topic_data": [
                    {
                        "topic_id": topic_id,
                        "partition_data": [{"index": 0, "records": one_record_batch(b"41")}],
                    }
                ],
            },
        )
        (topic,) = produced.responses
        assert topic.topic_id == topic_id
        assert [(r.index, r.error_code.value, r.base_offset) for r in topic.partition_responses] == [
            (0, 0, 0)
        ]
        assert read_by_id(wire, 17, topic_id, 1) == [(0, 41)]

        stranger = uuid.uuid4()
        fetched = fetch_by_id(wire, 17, stranger, 0, partitions=(0, 1))
        (topic,) = fetched.responses
        assert topic.topic_id == stranger
        assert [(q.partition_index, q.error_code.value) for q in topic.partitions] == [
            (0, UNKNOWN_TOPIC_ID),
            (1, UNKNOWN_TOPIC_ID),
        ]
        refused: Any = wire.call(
            p.API_PRODUCE,
            13,
            {
                "acks": 1,
                "timeout": 1000,
                "topic_data": [
                    {
                        "topic_id": stranger,
                        "partition_data": [{"index": 0, "records": one_record_batch(b"1")}],
                    }
                ],
            },
        )
        assert [r.error_code.value for r in refused.responses[0].partition_responses] == [UNKNOWN_TOPIC_ID]
        # the connection is still open and in step
        versions: Any = wire.call(p.API_API_VERSIONS, 4, {})
        assert versions.error_code.value == 0
    finally:
        wire.close()


def test_versions_below_kafka_4s_floor_are_refused(cluster: LocalCluster) -> None:
    port = _port(cluster.address(1))
    # ApiVersions of a version the broker does not know: UNSUPPORTED_VERSION and its ranges (v0 body)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">ihhih", 10, p.API_API_VERSIONS, 99, 3, -1))
        size, correlation_id, error, count = struct.unpack(">iihi", _read(sock, 14))
        ranges = dict(
            (key, (low, high))
            for key, low, high in struct.iter_unpack(">hhh", _read(sock, size - 10)[: 6 * count])
        )
    assert (correlation_id, error) == (3, UNSUPPORTED_VERSION)
    assert ranges[p.API_FETCH] == (4, 17)
    assert ranges[p.API_PRODUCE] == (0, 13)  # listed from v0 as Kafka 4 lists it (KAFKA-18659) ...
    # ... but Produce v2 is refused as Kafka 4 refuses it: the connection is closed
    body = b"\xff\xff" + struct.pack(">hii", 1, 1000, 0)  # null transactional id, acks, timeout, []
    header = struct.pack(">hhih", p.API_PRODUCE, 2, 4, -1)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
        assert sock.recv(100) == b""
    deadline = time.monotonic() + 10
    line = "Produce (api 0) v2 is not supported: this broker accepts v3-v13"
    while line not in cluster.log_path(1).read_text():
        assert time.monotonic() < deadline, "no log line for the refused version"
        time.sleep(0.1)


def test_topic_ids_survive_restarts_and_replicas_fetch_by_id(cluster: LocalCluster) -> None:
    cluster.create_topic("stable", 1, 3)
    before = {b: topic_metadata(cluster, b, "stable")[0] for b in (1, 2, 3)}
    assert len(set(before.values())) == 1
    cluster.stop_broker(3)
    cluster.start(3)
    cluster.wait_for_isr("stable", 0, [1, 2, 3], timeout=60)
    assert topic_metadata(cluster, 3, "stable")[0] == before[1]
    fetches = {
        line.split("client ", 1)[1].split(" (")[0] + line.rsplit(" uses ", 1)[1]
        for b in (1, 2, 3)
        for line in cluster.log_path(b).read_text().splitlines()
        if "'replica-fetcher-" in line and " uses Fetch " in line
    }
    assert "'replica-fetcher-3'Fetch v17" in fetches
    assert all(f.endswith("Fetch v17") for f in fetches), fetches


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "closed"
        data += chunk
    return data
