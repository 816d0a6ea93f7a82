"""The group APIs over kio: every supported version decodes, is answered and encodes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from broker import protocol as p
from broker.groups.coordinator import GroupCoordinator
from broker.groups.service import GROUP_ERROR_MIN_VERSION, GroupService
from broker.kafka_errors import NOT_COORDINATOR
from broker.metadata import BrokerAddress
from tests.support.group_requests import answer, join_data


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def service(tmp_path: Path, me: int = 1) -> GroupService:
    brokers = {1: BrokerAddress(1, "127.0.0.1", 9001), 2: BrokerAddress(2, "127.0.0.1", 9002)}
    return GroupService(GroupCoordinator(tmp_path), me, lambda: brokers, clock=Clock())


def call(svc: GroupService, api_key: int, version: int, data: dict[str, Any]) -> Any:
    return asyncio.run(answer(svc, api_key, version, data))


@pytest.mark.parametrize("version", range(p.VERSIONS[11][0], p.VERSIONS[11][1] + 1))
def test_join_sync_heartbeat_leave_every_version(tmp_path: Path, version: int) -> None:
    svc = service(tmp_path)
    joined = call(svc, 11, version, join_data())
    assert joined.error_code == 0 and joined.generation_id == 1 and joined.leader == joined.member_id
    assert [m.metadata for m in joined.members] == [b"meta"]
    member = joined.member_id
    sync_version = min(version, p.VERSIONS[14][1])
    synced = call(
        svc,
        14,
        sync_version,
        {
            "group_id": "g",
            "generation_id": 1,
            "member_id": member,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": b"parts"}],
        },
    )
    assert (synced.error_code, synced.assignment) == (0, b"parts")
    beat = call(svc, 12, min(version, 4), {"group_id": "g", "generation_id": 1, "member_id": member})
    assert beat.error_code == 0
    leave_version = min(version, 5)
    left = call(
        svc, 13, leave_version, {"group_id": "g", "member_id": member, "members": [{"member_id": member}]}
    )
    assert left.error_code == 0
    if leave_version >= 3:
        assert [(m.member_id, m.error_code) for m in left.members] == [(member, 0)]


@pytest.mark.parametrize("version", range(p.VERSIONS[10][0], p.VERSIONS[10][1] + 1))
def test_find_coordinator(tmp_path: Path, version: int) -> None:
    svc = service(tmp_path, me=2)
    found = call(svc, 10, version, {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]})
    if version >= 4:
        assert [(c.key, c.node_id, c.port) for c in found.coordinators] == [("g", 1, 9001), ("h", 1, 9001)]
    else:
        assert (found.node_id, found.host, found.port) == (1, "127.0.0.1", 9001)


@pytest.mark.parametrize("commit_version", range(p.VERSIONS[8][0], p.VERSIONS[8][1] + 1))
def test_offsets_every_version(tmp_path: Path, commit_version: int) -> None:
    svc = service(tmp_path)
    committed = call(
        svc,
        8,
        commit_version,
        {
            "group_id": "manual",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "t0",
                    "partitions": [{"partition_index": 1, "committed_offset": 42, "committed_metadata": "m"}],
                }
            ],
        },
    )
    assert [
        (t.name, [(q.partition_index, q.error_code) for q in t.partitions]) for t in committed.topics
    ] == [("t0", [(1, 0)])]
    for version in range(p.VERSIONS[9][0], p.VERSIONS[9][1] + 1):
        topics = [{"name": "t0", "partition_indexes": [1, 2]}]
        data = {"group_id": "manual", "topics": topics, "groups": [{"group_id": "manual", "topics": topics}]}
        fetched = call(svc, 9, version, data)
        topic_list = fetched.groups[0].topics if version >= 8 else fetched.topics
        got = [(q.partition_index, q.committed_offset) for t in topic_list for q in t.partitions]
        assert got == [(1, 42), (2, -1)]


def test_not_coordinator(tmp_path: Path) -> None:
    svc = service(tmp_path, me=2)
    assert call(svc, 11, 5, join_data()).error_code == NOT_COORDINATOR
    assert (
        call(svc, 12, 4, {"group_id": "g", "generation_id": 1, "member_id": "m"}).error_code
        == NOT_COORDINATOR
    )


@pytest.mark.parametrize("version", range(p.VERSIONS[9][0], p.VERSIONS[9][1] + 1))
def test_a_refused_offset_fetch_names_no_partition_from_v2(tmp_path: Path, version: int) -> None:
    """As Kafka answers: from v2 the error is the group's alone. librdkafka never consumes a
    partition whose own entry carries an error (until the next rebalance): with a coordinator that
    moved, its member held partitions it never read."""
    topics = [{"name": "t0", "partition_indexes": [0, 1]}]
    data = {"group_id": "g", "topics": topics, "groups": [{"group_id": "g", "topics": topics}]}
    fetched = call(service(tmp_path, me=2), 9, version, data)
    answered = fetched.groups[0] if version >= 8 else fetched
    partitions = [(q.partition_index, q.error_code) for t in answered.topics for q in t.partitions]
    if version >= GROUP_ERROR_MIN_VERSION:
        assert (answered.error_code, partitions) == (NOT_COORDINATOR, [])
    else:  # no error for the whole response before v2
        assert partitions == [(0, NOT_COORDINATOR), (1, NOT_COORDINATOR)]
