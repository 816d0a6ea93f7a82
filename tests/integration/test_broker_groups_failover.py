"""Committed offsets survive the group coordinator: after the coordinator (the holder of the
group-coordinator lease, as FindCoordinator names it) is killed, the next coordinator answers
OffsetFetch with what the old one acknowledged (broker.zk_offsets), so a group never resumes from an
older offset."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

from clusters.kafka_metadata import coordinator_of
from clusters.local import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_committed_offsets_survive_a_killed_coordinator() -> None:
    with LocalCluster(brokers=3, settings={"min.insync.replicas": 2}) as cluster:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.create_topics([NewTopic("t", 2, 3)])
        admin.close()
        tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="g", enable_auto_commit=False)
        consumer.commit({tp0: OffsetAndMetadata(7, "", -1), tp1: OffsetAndMetadata(3, "m", -1)})
        consumer.close()
        host, port = cluster.address(1).rsplit(":", 1)
        coordinator = coordinator_of(host, int(port), "g", 0)
        assert coordinator is not None
        cluster.kill(coordinator)
        deadline = time.monotonic() + 60
        while coordinator in cluster.live_brokers() and time.monotonic() < deadline:
            time.sleep(0.2)
        after = KafkaConsumer(bootstrap_servers=cluster.bootstrap, group_id="g", enable_auto_commit=False)
        try:
            assert after.committed(tp0) == 7
            assert after.committed(tp1) == 3
            # kafka-python names the coordinator's connection "coordinator-<id>"
            assert str(after._coordinator.coordinator_id).rsplit("-", 1)[-1] != str(coordinator)
        finally:
            after.close()
