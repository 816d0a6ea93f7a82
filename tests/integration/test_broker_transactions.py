"""Kafka transactions on a real 3-broker own cluster (real ZooKeeper) with unmodified clients.

kafka-python and confluent-kafka (librdkafka) run transactions against the own broker: a committed
transaction is visible to read_committed consumers, an aborted one is not (and read_uncommitted
consumers see both), a second producer with the same transactional.id fences the first, and the
transaction coordinator's state survives the loss of its broker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

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


def kill_coordinator(cluster: LocalCluster) -> int:
    """Kill the transaction coordinator (the leader of __transaction_state-0) and wait for its
    successor; returns the killed broker."""
    coordinator = cluster.wait_for_leader("__transaction_state", 0)
    cluster.kill(coordinator)
    cluster.wait_for(
        lambda: (
            (s := cluster.partition_state("__transaction_state", 0)) and s["leader"] not in (-1, coordinator)
        ),
        30,
        "a new transaction coordinator",
    )
    return coordinator


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

    # the coordinator dies with the transaction open and so does its producer: the successor (the
    # new leader of __transaction_state-0) loads the state, and a new instance's InitProducerId
    # makes it abort the orphaned transaction before the new one begins
    successor.begin_transaction()
    successor.send("txkp", b"6", partition=0)
    successor.flush()
    coordinator = kill_coordinator(cluster)
    third = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="kp-1")
    third.init_transactions()
    third.begin_transaction()
    third.send("txkp", b"7", partition=0)
    third.commit_transaction()
    third.close()
    successor.close(timeout=1)
    cluster.start(coordinator)
    assert read_values(cluster.bootstrap, "txkp", 2, "read_committed") == [1, 2, 3, 4, 5, 7]


def test_confluent_kafka_commit_abort_coordinator_failover_and_fencing(cluster: LocalCluster) -> None:
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    cluster.create_topic("txck", 2, 3)
    conf = {
        "bootstrap.servers": cluster.bootstrap,
        "transactional.id": "ck-1",
        "transaction.timeout.ms": 20000,
    }
    producer = Producer(conf)
    producer.init_transactions(30)
    producer.begin_transaction()
    for v in (1, 2, 3):
        producer.produce("txck", str(v).encode(), partition=v % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce("txck", b"10", partition=0)
    producer.flush(10)
    producer.abort_transaction(30)

    # the coordinator (leader of __transaction_state-0) dies with a transaction open; its
    # successor loads the state from the replicated topic and the transaction commits there
    producer.begin_transaction()
    producer.produce("txck", b"4", partition=1)
    producer.flush(10)
    coordinator = kill_coordinator(cluster)
    producer.commit_transaction(60)
    cluster.start(coordinator)

    # a second instance with the same transactional.id fences the first (a zombie): the zombie's
    # open transaction is aborted, its commit refused
    producer.begin_transaction()
    producer.produce("txck", b"30", partition=0)
    producer.flush(10)
    successor = Producer(conf)
    successor.init_transactions(30)
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction(30)
    assert fenced.value.args[0].fatal() or fenced.value.args[0].txn_requires_abort()
    successor.begin_transaction()
    successor.produce("txck", b"5", partition=0)
    successor.commit_transaction(30)

    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "txck-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition("txck", p, 0) for p in range(2)])
    values: list[int] = []
    deadline = time.monotonic() + 20
    while len(values) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            values.append(int(msg.value()))
    time.sleep(0.5)  # the zombie's 30 must not follow
    while (msg := consumer.poll(0.5)) is not None:
        if msg.error() is None:
            values.append(int(msg.value()))
    consumer.close()
    assert sorted(values) == [1, 2, 3, 4, 5]


def test_abandoned_transaction_times_out(cluster: LocalCluster) -> None:
    """A producer that vanishes mid-transaction: the coordinator aborts it, the LSO moves on."""
    from kafka import KafkaProducer

    cluster.create_topic("txto", 1, 3)
    abandoned = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, transactional_id="to-1", transaction_timeout_ms=1000
    )
    abandoned.init_transactions()
    abandoned.begin_transaction()
    abandoned.send("txto", b"66", partition=0)
    abandoned.flush()
    later = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="to-2")
    later.init_transactions()
    later.begin_transaction()
    later.send("txto", b"7", partition=0)
    later.commit_transaction()
    later.close()
    # blocked behind the open transaction until the timeout aborts it
    deadline = time.monotonic() + 20
    while (values := read_values(cluster.bootstrap, "txto", 1, "read_committed")) != [7]:
        assert time.monotonic() < deadline, f"read_committed still sees {values}"
    abandoned.close(timeout=1)


def test_admin_apis_describe_and_list_transactions(cluster: LocalCluster) -> None:
    """kafka-transactions.sh's APIs answer from the coordinator's state, over the same connection."""
    from broker.client import BrokerConnection

    cluster.create_topic("txad", 1, 3)
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="ad-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("txad", b"1", partition=0)
    producer.flush()
    coordinator = cluster.wait_for_leader("__transaction_state", 0)
    host, port = cluster.address(coordinator).rsplit(":", 1)

    async def ask() -> tuple[object, object]:
        connection = BrokerConnection(host, int(port), "test")
        try:
            listed = await connection.request(
                66, 1, {"state_filters": ["Ongoing"], "producer_id_filters": []}
            )
            described = await connection.request(65, 0, {"transactional_ids": ["ad-1", "nobody"]})
            return listed, described
        finally:
            connection.close()

    async def producers() -> object:
        leader = cluster.wait_for_leader("txad", 0)
        lhost, lport = cluster.address(leader).rsplit(":", 1)
        connection = BrokerConnection(lhost, int(lport), "test")
        try:
            return await connection.request(61, 0, {"topics": [{"name": "txad", "partition_indexes": [0]}]})
        finally:
            connection.close()

    listed, described = asyncio.run(ask())
    (topic,) = asyncio.run(producers()).topics  # type: ignore[attr-defined]
    (active,) = topic.partitions[0].active_producers
    assert active.current_txn_start_offset == 0  # the open transaction holds the LSO at 0
    producer.abort_transaction()
    producer.close()
    assert [s.transactional_id for s in listed.transaction_states] == ["ad-1"]  # type: ignore[attr-defined]
    found, missing = described.transaction_states  # type: ignore[attr-defined]
    assert (found.transaction_state, [t.topic for t in found.topics]) == ("Ongoing", ["txad"])
    assert int(missing.error_code) == 105  # TRANSACTIONAL_ID_NOT_FOUND


def test_offsets_committed_with_the_transaction(cluster: LocalCluster) -> None:
    """Consume-transform-produce: a group's offsets sent in a transaction count only if it commits."""
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    cluster.create_topic("txof", 1, 3)
    tp = TopicPartition("txof", 0)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id="of-1")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("txof", b"1", partition=0)
    producer.send_offsets_to_transaction({tp: OffsetAndMetadata(5, "", -1)}, "of-group")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("txof", b"2", partition=0)
    producer.send_offsets_to_transaction({tp: OffsetAndMetadata(7, "", -1)}, "of-group")
    producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap, group_id="of-group", enable_auto_commit=False
    )
    deadline = time.monotonic() + 10
    while (committed := consumer.committed(tp)) != 5:
        assert time.monotonic() < deadline, f"committed offset {committed}, expected 5"
        time.sleep(0.2)
    time.sleep(1)  # the aborted transaction's markers are written by now: its 7 must not appear
    assert consumer.committed(tp) == 5
    consumer.close()


def test_a_transactional_api_left_out_is_answered_with_its_error(tmp_path: Path) -> None:
    """A system without transactions (`unsupported.apis`): a client that asks anyway gets
    UNSUPPORTED_VERSION in the API's own response on a connection that stays open; ApiVersions
    leaves the APIs out, so kafka-python refuses the transaction itself, naming the API."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    from broker import protocol as p
    from tests.support.standalone import standalone_broker
    from tests.support.wire import Wire

    txn_apis = "AddPartitionsToTxn,AddOffsetsToTxn,EndTxn,TxnOffsetCommit,WriteTxnMarkers"
    with standalone_broker(tmp_path, f"unsupported.apis={txn_apis}\n") as port:
        wire = Wire(port)
        wire.call(
            p.API_CREATE_TOPICS,
            5,
            {"topics": [{"name": "t", "num_partitions": 2, "replication_factor": 1}], "timeout": 5000},
        )
        end = wire.call(
            26, 3, {"transactional_id": "x", "producer_id": 1, "producer_epoch": 0, "committed": True}
        )
        assert int(end.error_code) == 35  # type: ignore[attr-defined]
        added = wire.call(
            24,
            3,
            {
                "v3_and_below_transactional_id": "x",
                "v3_and_below_producer_id": 1,
                "v3_and_below_producer_epoch": 0,
                "v3_and_below_topics": [{"name": "t", "partitions": [0, 1]}],
            },
        )
        (topic,) = added.results_by_topic_v3_and_below  # type: ignore[attr-defined]
        assert [int(r.partition_error_code) for r in topic.results_by_partition] == [35, 35]
        offered = wire.call(p.API_API_VERSIONS, 3, {})  # the same connection still serves
        keys = {int(k.api_key) for k in offered.api_keys}  # type: ignore[attr-defined]
        assert p.API_PRODUCE in keys and not keys & {24, 25, 26, 27, 28}
        wire.close()
        producer = KafkaProducer(
            bootstrap_servers=f"127.0.0.1:{port}", transactional_id="x", max_block_ms=5000
        )
        with pytest.raises(KafkaError, match="AddPartitionsToTxn|EndTxn|not support"):
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("t", b"1", partition=0)
            producer.commit_transaction()
        producer.close(timeout=1)


def late_end_txn(cluster: LocalCluster, version: int, topic: str, replication_factor: int) -> None:
    """KAFKA-17754 with kafka-python (the driver's, speaking EndTxn v5): the EndTxn of a
    transaction, arriving again after the producer began its next one (as a retransmission held up
    in the network does), commits that next one early under transaction version 1, so the records
    of a transaction the producer then aborts are read committed; version 2 bumped the epoch at the
    first commit, and the late request is fenced."""
    from broker.transactions.service import API_END_TXN
    from foundation.config import TestConfig
    from tests.support.wire import Wire
    from workloads.clients.kafka_python_txn import KafkaPythonTxnProducer

    cluster.create_topic(topic, 1, replication_factor)
    producer = KafkaPythonTxnProducer(TestConfig(workload="txn"), cluster.bootstrap.split(","), topic)
    producer.begin()
    assert producer.send(topic, 0, 1).type == "ok"
    manager = producer._producer._transaction_manager
    first = manager.producer_id_and_epoch
    late = {"transactional_id": topic, "producer_id": first.producer_id,
            "producer_epoch": first.epoch, "committed": True}  # fmt: skip
    assert producer.commit() == ("ok", None)
    assert manager.producer_id_and_epoch.epoch == first.epoch + (1 if version == 2 else 0)
    producer.begin()
    assert producer.send(topic, 0, 2).type == "ok"
    # the first transaction's EndTxn again, late, as the client's retransmission would arrive
    coordinator = cluster.wait_for_leader("__transaction_state", 0)
    wire = Wire(int(cluster.address(coordinator).rsplit(":", 1)[1]))
    answer = wire.call(API_END_TXN, 5, late)
    wire.close()
    assert int(answer.error_code) == (0 if version == 1 else 90)  # type: ignore[attr-defined]  # PRODUCER_FENCED
    outcome, _error = producer.abort()
    producer.close()
    values = read_values(cluster.bootstrap, topic, 1, "read_committed")
    if version == 1:
        assert values == [1, 2] and outcome == "info"  # 2's abort came too late: it was read
    else:
        assert values == [1] and outcome == "fail"


def test_a_late_end_txn_ends_the_next_transaction_with_version_1() -> None:
    with LocalCluster(1, settings={"transaction.version": 1}) as one:
        late_end_txn(one, 1, "late-v1", 1)


def test_a_late_end_txn_is_fenced_with_version_2(cluster: LocalCluster) -> None:
    late_end_txn(cluster, 2, "late-v2", 3)
