"""API handlers over a real ReplicaManager and log store, in process (no sockets, no ZooKeeper)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.errors import ErrorCode

from broker import protocol as p
from broker.config import BrokerConfig, Listener
from broker.errors import BadBrokerConfig
from broker.handlers import ApiHandlers
from broker.metadata import BrokerAddress, StandaloneMetadata
from broker.partition_state import PartitionState
from broker.replica_manager import ReplicaManager


def batch(values: list[bytes], producer_id: int = -1, sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=int(time.time() * 1000), key=None, value=value, headers=[])
    return bytes(builder.build())


def request(api_key: int, version: int, body: dict[str, Any]) -> p.Request:
    return p.Request(api_key, version, 1, "test", p.build_request(api_key, version, body))


def setup(tmp_path: Path, **overrides: Any) -> tuple[ApiHandlers, ReplicaManager]:
    config = BrokerConfig(broker_id=1, listener=Listener("127.0.0.1", 0), log_dirs=(tmp_path,), **overrides)
    replicas = ReplicaManager(config)
    metadata = StandaloneMetadata(replicas, BrokerAddress(1, "127.0.0.1", 9092))
    handlers = ApiHandlers(config, replicas, metadata)
    return handlers, replicas


def produce(handlers: ApiHandlers, records: bytes, acks: int = -1) -> Any:
    body = {
        "acks": acks,
        "timeout": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }
    response = asyncio.run(handlers.handle(request(p.API_PRODUCE, 9, body)))
    return None if response is None else response.responses[0].partition_responses[0]


def fetch(handlers: ApiHandlers, offset: int, replica_id: int = -1) -> Any:
    body = {
        "replica_id": replica_id,
        "max_wait": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "session_epoch": -1,
        "topics": [
            {
                "topic": "t",
                "partitions": [{"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    response = asyncio.run(handlers.handle(request(p.API_FETCH, 12, body)))
    return response.responses[0].partitions[0]


def create(handlers: ApiHandlers) -> None:
    body = {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}], "timeout": 1000}
    response = asyncio.run(handlers.handle(request(p.API_CREATE_TOPICS, 7, body)))
    assert response.topics[0].error_code.value == 0


def test_produce_then_fetch_reads_back_below_the_hw(tmp_path: Path) -> None:
    handlers, _ = setup(tmp_path)
    create(handlers)
    first = produce(handlers, batch([b"1", b"2", b"3"]))
    assert (first.error_code.value, first.base_offset) == (0, 0)
    assert produce(handlers, batch([b"4"])).base_offset == 3
    result = fetch(handlers, 0)
    assert result.error_code.value == 0 and result.high_watermark == 4 and result.records
    assert fetch(handlers, 5).error_code.value == 1  # OFFSET_OUT_OF_RANGE


def test_acks_zero_gets_no_response(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path)
    create(handlers)
    assert produce(handlers, batch([b"1"]), acks=0) is None
    assert replicas.partitions[("t", 0)].log.log_end_offset == 1


def test_corrupt_batch_is_refused(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path)
    create(handlers)
    bad = bytearray(batch([b"hello"]))
    bad[-2] ^= 0x55
    assert produce(handlers, bytes(bad)).error_code.value == 2  # CORRUPT_MESSAGE
    assert replicas.partitions[("t", 0)].log.log_end_offset == 0


def test_retried_idempotent_batch_gets_its_original_offsets(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path)
    create(handlers)
    records = batch([b"a", b"b"], producer_id=42, sequence=0)
    assert produce(handlers, records).base_offset == 0
    assert produce(handlers, records).base_offset == 0  # the retry is not appended again
    assert replicas.partitions[("t", 0)].log.log_end_offset == 2
    gap = batch([b"c"], producer_id=42, sequence=5)
    assert produce(handlers, gap).error_code.value == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER


def test_min_insync_replicas_refuses_acks_all(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path, min_insync_replicas=2)
    create(handlers)
    assert produce(handlers, batch([b"1"])).error_code.value == 19  # NOT_ENOUGH_REPLICAS
    assert produce(handlers, batch([b"1"]), acks=1).error_code.value == 0


def test_follower_fetch_moves_the_hw_and_acks_wait_for_it(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path, min_insync_replicas=2)
    replicas.apply_state(
        "t", 0, PartitionState(leader=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2), zk_version=0)
    )

    async def scenario() -> tuple[int, int]:
        body = {
            "acks": -1,
            "timeout": 5000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch([b"x", b"y"])}]}],
        }
        pending = asyncio.ensure_future(handlers.handle(request(p.API_PRODUCE, 9, body)))
        await asyncio.sleep(0.05)
        assert not pending.done()  # the follower has not fetched the records yet
        hw_before = replicas.partitions[("t", 0)].replica.high_watermark
        replicas.read(replicas.partitions[("t", 0)], 2, 2, 1 << 20)  # the follower asks for offset 2
        response = await asyncio.wait_for(pending, 1)
        return hw_before, response.responses[0].partition_responses[0].error_code.value

    hw_before, error = asyncio.run(scenario())
    assert hw_before == 0 and error == 0
    assert fetch(handlers, 0).high_watermark == 2


def test_offset_for_leader_epoch(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path)
    replicas.apply_state(
        "t", 0, PartitionState(leader=1, leader_epoch=0, isr=(1,), replicas=(1,), zk_version=0)
    )
    produce(handlers, batch([b"1", b"2"]))
    replicas.apply_state(
        "t", 0, PartitionState(leader=1, leader_epoch=1, isr=(1,), replicas=(1,), zk_version=1)
    )
    produce(handlers, batch([b"3"]))
    body = {
        "replica_id": 2,
        "topics": [
            {"topic": "t", "partitions": [{"partition": 0, "current_leader_epoch": 1, "leader_epoch": 0}]}
        ],
    }
    response = asyncio.run(handlers.handle(request(p.API_OFFSET_FOR_LEADER_EPOCH, 4, body)))
    result = response.topics[0].partitions[0]
    assert (result.error_code.value, result.leader_epoch, result.end_offset) == (0, 0, 2)


def test_topics_by_id_in_metadata_fetch_and_produce(tmp_path: Path) -> None:
    import uuid

    handlers, _ = setup(tmp_path)
    create(handlers)
    meta = asyncio.run(handlers.handle(request(p.API_METADATA, 13, {"topics": [{"name": "t"}]})))
    topic_id = meta.topics[0].topic_id
    assert topic_id.int != 0
    stranger = uuid.uuid4()
    by_id = asyncio.run(
        handlers.handle(
            request(
                p.API_METADATA, 12, {"topics": [{"name": None, "topic_id": i} for i in (topic_id, stranger)]}
            )
        )
    )
    assert [(t.name, t.topic_id, t.error_code.value) for t in by_id.topics] == [
        ("t", topic_id, 0),
        (None, stranger, 100),
    ]
    produced = asyncio.run(
        handlers.handle(
            request(
                p.API_PRODUCE,
                13,
                {
                    "acks": 1,
                    "timeout": 1000,
                    "topic_data": [
                        {"topic_id": i, "partition_data": [{"index": 0, "records": batch([b"7"])}]}
                        for i in (topic_id, stranger)
                    ],
                },
            )
        )
    )
    assert [(t.topic_id, t.partition_responses[0].error_code.value) for t in produced.responses] == [
        (topic_id, 0),
        (stranger, 100),
    ]
    for version in (13, 15, 17):
        body = {
            "max_wait": 0,
            "min_bytes": 0,
            "topics": [
                {
                    "topic_id": i,
                    "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}],
                }
                for i in (topic_id, stranger)
            ],
            "forgotten_topics_data": [],
        }
        fetched = asyncio.run(handlers.handle(request(p.API_FETCH, version, body)))
        known, unknown = fetched.responses
        assert (known.topic_id, known.partitions[0].error_code.value) == (topic_id, 0)
        assert known.partitions[0].records
        assert (unknown.topic_id, unknown.partitions[0].error_code.value) == (stranger, 100)


def test_standalone_topic_ids_survive_a_restart(tmp_path: Path) -> None:
    handlers, replicas = setup(tmp_path)
    create(handlers)
    before = handlers.metadata.topic_id("t")
    replicas.close()
    config = BrokerConfig(broker_id=1, listener=Listener("127.0.0.1", 0), log_dirs=(tmp_path,))
    restarted = ReplicaManager(config)
    restarted.load_logs()  # as broker.app does before it builds the metadata
    metadata = StandaloneMetadata(restarted, BrokerAddress(1, "127.0.0.1", 9092))
    assert metadata.topic_id("t") == before
    assert metadata.topic_name(before) == "t"


def test_unsupported_apis_are_left_out_of_api_versions_and_refused(tmp_path: Path) -> None:
    """`unsupported.apis=InitProducerId`: the broker imitates a system without idempotence. A
    transactional API is answered with its error (UNSUPPORTED_VERSION); any other closes."""
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "unsupported.apis": "InitProducerId,CreateTopics"}
    )
    assert config.unsupported_apis == ("InitProducerId", "CreateTopics")
    handlers, _ = setup(tmp_path)
    handlers.withdraw(config.unsupported_apis)
    offered = asyncio.run(handlers.api_versions(request(p.API_API_VERSIONS, 3, {})))
    keys = {k["api_key"] for k in offered["api_keys"]}
    assert p.API_INIT_PRODUCER_ID not in keys and p.API_CREATE_TOPICS not in keys and p.API_PRODUCE in keys
    # InitProducerId is read and answered with Kafka's error for it: the connection stays open
    parsed = p.parse_request(
        p.encode_request(
            p.API_INIT_PRODUCER_ID,
            4,
            7,
            "test",
            p.build_request(
                p.API_INIT_PRODUCER_ID, 4, {"transactional_id": "t-1", "transaction_timeout": 1000}
            ),
        )[4:],
        handlers.accepted,
    )
    answer = asyncio.run(handlers.handle(parsed))
    assert (int(answer.error_code), answer.producer_id) == (35, -1)  # UNSUPPORTED_VERSION
    header = p.KEY_VERSION_CID.pack(p.API_CREATE_TOPICS, 5, 7)
    with pytest.raises(p.FrameError, match="unknown or unsupported api key 19"):  # the connection closes
        p.parse_request(header + b"\0" * 16, handlers.accepted)
    with pytest.raises(BadBrokerConfig, match="unsupported.apis: unknown API Transactions"):
        handlers.withdraw(("Transactions",))


def test_denied_apis_are_offered_but_answered_with_an_authorization_error(tmp_path: Path) -> None:
    """`denied.apis=InitProducerId`: the broker imitates a system that lists producer ids but
    refuses them (Kafka without the IdempotentWrite ACL): an idempotent producer cannot start."""
    config = BrokerConfig.from_properties({"broker.id": "1", "denied.apis": "InitProducerId"})
    assert config.denied_apis == ("InitProducerId",)
    handlers, _ = setup(tmp_path)
    handlers.deny(config.denied_apis)
    offered = asyncio.run(handlers.api_versions(request(p.API_API_VERSIONS, 3, {})))
    assert p.API_INIT_PRODUCER_ID in {k["api_key"] for k in offered["api_keys"]}
    body = {"transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1, "producer_epoch": -1}
    answer = asyncio.run(handlers.handle(request(p.API_INIT_PRODUCER_ID, 4, body)))
    assert (answer.error_code, answer.producer_id) == (ErrorCode.cluster_authorization_failed, -1)
    answer = asyncio.run(
        handlers.handle(request(p.API_INIT_PRODUCER_ID, 4, {**body, "transactional_id": "tx"}))
    )
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
    with pytest.raises(BadBrokerConfig, match="denied.apis: cannot deny Produce"):
        handlers.deny(("Produce",))
