"""A kafka-python group leader whose metadata moves finishes the rejoin it starts, although the
workload's polls (0.1 s) give up before that JoinGroup/SyncGroup completes.

kafka-python 3.0.12 drives a rejoin only while `need_rejoin()` asks for one; the leader's own
assignment inside the rejoin updates the snapshot that made it ask, so the rejoin was left half
done (assignment never applied, heartbeats off) and the member never joined again. The driver's
`finish_dropped_rejoin` asks again. Staged with one broker: the member subscribes to two topics,
one of which does not exist yet, leads and is assigned the other's partitions; a second member
(kafka-python's own consumer, polled in turn) joins, so that a rejoin waits for it and outlasts a
poll; the second topic is created, the metadata moves, and the member must be assigned its
partition too.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer

from clusters.local import LocalCluster
from foundation.config import TestConfig
from workloads.clients.base import TopicPartition
from workloads.clients.kafka_python import KafkaPythonGroupConsumer
from workloads.queue import MAX_POLL_RECORDS, POLL_TIMEOUT_S

# slow: it passed about 19 of 20 times with the repair (6-26 s); the one failure is not understood
# (a just-created topic's metadata seems to come and go at the leader), so CI does not run it.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(120)]

FIRST, LATER, GROUP = "t", "u", "g"
DEADLINE_S = 30.0  # generous for a loaded 2-core machine; the hang never ends


def poll(member: KafkaPythonGroupConsumer, held: set[TopicPartition], other: KafkaConsumer | None) -> None:
    """One poll of each member, as the workload polls; `held` follows the member's callbacks."""
    member.poll(POLL_TIMEOUT_S, MAX_POLL_RECORDS)
    if other is not None:
        other.poll(timeout_ms=int(POLL_TIMEOUT_S * 1000))
    for event in member.rebalances():
        (held.difference_update if event.kind == "revoked" else held.update)(event.partitions)


def poll_until_assigned(
    member: KafkaPythonGroupConsumer,
    held: set[TopicPartition],
    wanted: TopicPartition,
    other: KafkaConsumer | None = None,
) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while wanted not in held:
        assert time.monotonic() < deadline, (
            f"after {DEADLINE_S:.0f} s the member holds {sorted(held)}, not {wanted}"
        )
        poll(member, held, other)


def test_leader_finishes_the_rejoin_its_metadata_change_began() -> None:
    with LocalCluster(brokers=1) as cluster:
        cluster.create_topic(FIRST, partitions=2, replication_factor=1)  # one for each member
        member = KafkaPythonGroupConsumer(TestConfig(), [cluster.bootstrap], GROUP)
        try:
            member.subscribe([FIRST, LATER])
            held: set[TopicPartition] = set()
            poll_until_assigned(member, held, (FIRST, 0))
            other = KafkaConsumer(
                FIRST,
                bootstrap_servers=cluster.bootstrap,
                group_id=GROUP,
                session_timeout_ms=6000,
                heartbeat_interval_ms=1000,
                enable_auto_commit=False,
            )
            try:
                deadline = time.monotonic() + DEADLINE_S
                while not other.assignment():  # joined: the leader rejoined with it
                    assert time.monotonic() < deadline, "the second member never joined"
                    poll(member, held, other)
                cluster.create_topic(LATER, partitions=1, replication_factor=1)
                poll_until_assigned(member, held, (LATER, 0), other)
            finally:
                other.close()
        finally:
            member.close()
