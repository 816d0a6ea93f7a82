"""broker.forwarding's pure pieces: a request's current leader epochs dropped, shares merged into one
answer per topic that the broker's own codec writes and kio reads back, internal requests told apart."""

from __future__ import annotations

import dataclasses
import uuid

from broker import protocol as p
from broker import wire
from broker.forwarding import (
    FORWARDED,
    PARTITION_APIS,
    _coordinator_unavailable,
    _merge,
    _unanswered,
    _unfenced,
    internal,
)
from broker.kafka_errors import COORDINATOR_NOT_AVAILABLE

FETCH = PARTITION_APIS[p.API_FETCH]
TOPIC = uuid.uuid4()


def fetch_request(epochs: list[int]) -> p.Request:
    parts = [{"partition": i, "current_leader_epoch": e, "fetch_offset": 0, "partition_max_bytes": 100}
             for i, e in enumerate(epochs)]  # fmt: skip
    body = p.build_request(p.API_FETCH, 16, {"max_wait": 100, "min_bytes": 1, "max_bytes": 1000,
                                             "topics": [{"topic_id": TOPIC, "partitions": parts}]})  # fmt: skip
    return p.Request(p.API_FETCH, 16, 1, "rdkafka", body)


def test_the_clients_leader_epochs_are_dropped_and_nothing_else_changes() -> None:
    request = fetch_request([0, 3, -1])
    unfenced = _unfenced(FETCH, request)
    parts = unfenced.body.topics[0].partitions
    assert [x.current_leader_epoch for x in parts] == [-1, -1, -1]
    assert [x.partition for x in parts] == [0, 1, 2] and unfenced.body.max_bytes == 1000
    already = fetch_request([-1])
    assert _unfenced(FETCH, already) is already


def test_shares_of_one_topic_merge_into_one_entry_that_librdkafka_can_read() -> None:
    local = {"error_code": 0, "session_id": 0, "responses": [{"topic": "t", "topic_id": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": 0, "high_watermark": 5, "last_stable_offset": 5,
         "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1, "records": b""}]}]}  # fmt: skip
    request = fetch_request([-1, -1])
    topic = request.body.topics[0]
    unreachable = _unanswered(FETCH, (dataclasses.replace(topic, partitions=topic.partitions[1:]),))
    merged = _merge(FETCH, True, [local, unreachable])
    assert len(merged["responses"]) == 1
    frame = wire.encode_response(p.API_FETCH, 16, 9, merged)
    assert frame is not None
    _, answer = p.parse_response(p.API_FETCH, 16, frame[4:])
    parts = answer.responses[0].partitions
    assert [(x.partition_index, int(x.error_code)) for x in parts] == [
        (0, 0),
        (1, 6),
    ]  # 6: NOT_LEADER_OR_FOLLOWER
    assert parts[1].records == b""  # never null: librdkafka refuses a null record set


def test_requests_from_brokers_and_passed_on_ones_are_internal() -> None:
    for client in (FORWARDED, "replica-fetcher-2", "controller-1", "txn-coordinator-3"):
        assert internal(p.Request(p.API_FETCH, 16, 1, client, None))
    assert not internal(p.Request(p.API_FETCH, 16, 1, "rdkafka", None))
    assert not internal(p.Request(p.API_FETCH, 16, 1, None, None))


def test_an_unreachable_coordinator_is_answered_coordinator_not_available_never_a_silent_commit() -> None:
    def answer(api_key: int, version: int, body: dict[str, object]) -> object:
        request = p.Request(api_key, version, 1, "c", p.build_request(api_key, version, body))
        data = _coordinator_unavailable(request)
        return None if data is None else p.build_response(api_key, version, data)

    join = answer(p.API_JOIN_GROUP, 5, {"group_id": "g", "member_id": "", "protocol_type": "consumer"})
    assert int(join.error_code) == COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
    commit = answer(p.API_OFFSET_COMMIT, 8, {"group_id": "g", "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5},
                                     {"partition_index": 1, "committed_offset": 7}]}]})  # fmt: skip
    parts = commit.topics[0].partitions  # type: ignore[attr-defined]
    assert [(x.partition_index, int(x.error_code)) for x in parts] == [
        (0, COORDINATOR_NOT_AVAILABLE),
        (1, COORDINATOR_NOT_AVAILABLE),
    ]
    fetch = answer(p.API_OFFSET_FETCH, 8, {"groups": [{"group_id": "g", "topics": None}]})
    assert int(fetch.groups[0].error_code) == COORDINATOR_NOT_AVAILABLE  # type: ignore[attr-defined]
    assert answer(p.API_ADD_PARTITIONS_TO_TXN, 4, {}) is None
