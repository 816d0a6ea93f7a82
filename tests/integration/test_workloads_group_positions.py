"""A kafka-python group member resumes a partition it gets back from the group's committed offset,
never from the position it had before an eager rebalance it took several generations to finish.

kafka-python 3.0.12 keeps a revoked partition's position until the next assignment replaces the
set, and keeps it for a partition it gets back. This is how issue 15's seed-11 run (own broker,
safe settings) ended `nonmonotonic-commit`: a member that had revoked t0-0 at offset 0 rejoined
only after the coordinator moved; meanwhile another member read t0-0 up to 80 and committed 80;
given t0-0 back, the member read from 0 and committed 10. The driver's `RevokingListener` drops
the positions when the partitions are revoked, as Kafka's Java consumer does.

The sequence is staged with a single broker: the member (the driver's own group consumer) reads
offsets 0..9 and commits 10; a rival joins; the member polls once, briefly, so that it revokes and
sends its JoinGroup but applies no new assignment; the rival (client id "a-rival", which the range
assignor sorts first) takes the partition, reads up to 80 and commits 80, then leaves; the member
gets the partition back and must read from 80.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CommitFailedError, RebalanceInProgressError
from kafka.structs import OffsetAndMetadata

from clusters.local import LocalCluster
from foundation.config import TestConfig
from workloads.clients.kafka_python import KafkaPythonGroupConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC, GROUP = "t", "g"
TP = TopicPartition(TOPIC, 0)
DEADLINE_S = 60.0  # generous: a loaded 2-core CI machine


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"waited {DEADLINE_S:.0f} s for {what}"
        time.sleep(0.05)


def test_member_resumes_from_the_groups_commit_after_a_rejoin_that_spanned_generations() -> None:
    with LocalCluster(brokers=1) as cluster:
        cluster.create_topic(TOPIC, partitions=1, replication_factor=1)
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        for value in range(100):
            producer.send(TOPIC, str(value).encode(), partition=0)
        producer.flush(30)
        producer.close()

        member = KafkaPythonGroupConsumer(TestConfig(), [cluster.bootstrap], GROUP)
        member.subscribe([TOPIC])
        first: list[int] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(first) < 10:
            assert time.monotonic() < deadline, f"the member read only {first}"
            first += [r.offset for r in member.poll(0.5, 10 - len(first))]
        assert first == list(range(10))
        member.commit({(TOPIC, 0): 10})

        rival = KafkaConsumer(
            bootstrap_servers=cluster.bootstrap,
            group_id=GROUP,
            client_id="a-rival",  # member ids start with the client id: the range assignor picks it
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
        )
        try:
            rival.subscribe([TOPIC])
            rival.poll(timeout_ms=100)  # its JoinGroup starts a rebalance
            coordinator = member._consumer._coordinator
            wait_for(lambda: coordinator.rejoin_needed, "the member's heartbeat to see the rebalance")

            # One short poll at a time until the member has revoked and sent its JoinGroup; the
            # poll returns before the join completes, so no new assignment is applied.
            def rejoining() -> bool:
                member.poll(0.001, 10)
                return bool(coordinator.rejoining)

            wait_for(rejoining, "the member to rejoin")

            read: list[int] = []
            deadline = time.monotonic() + DEADLINE_S
            while not read or read[-1] < 79:
                assert time.monotonic() < deadline, f"the rival read only {read[-3:]}"
                batches = rival.poll(timeout_ms=300, max_records=10)
                read += [r.offset for records in batches.values() for r in records if r.offset < 80]
            assert read[0] == 10, "the rival must start from the member's commit"
            while True:
                try:
                    rival.commit({TP: OffsetAndMetadata(80, "", -1)})
                    break
                except (CommitFailedError, RebalanceInProgressError):  # the member's session expired
                    assert time.monotonic() < deadline, "the rival could not commit 80"
                    rival.poll(timeout_ms=300, max_records=1)  # rejoin
            assert rival.committed(TP) == 80
        finally:
            rival.close()  # LeaveGroup: the partition goes back to the member

        again: list[int] = []
        deadline = time.monotonic() + DEADLINE_S
        while not again:
            assert time.monotonic() < deadline, "the member never got the partition back"
            again = [r.offset for r in member.poll(0.5, 10)]
        member.close()
        assert again[0] == 80, (
            f"the member resumed from {again[0]}, its own position before the rebalance, "
            "not from the group's committed offset 80"
        )
