"""Partition reassignment on a real 4-broker own cluster (ZooKeeper mode, /admin/reassign_partitions).

While an idempotent producer writes, the partition moves from its three replicas to a set that
replaces one of them (the leader, so leadership moves too) with the fourth broker: the new replica
catches up and joins the ISR, the controller finishes (new leader in a new epoch, ISR and topic
znode cut to the target, request removed), the removed broker deletes its log, and every
acknowledged record is read back from the new replica set.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from clusters.local import LocalCluster

pytestmark = pytest.mark.integration


def _produce(bootstrap: str, topic: str, stop: threading.Event, acked: list[int]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    value = 0

    def delivered(err: object, msg: object) -> None:
        if err is None:
            acked.append(int(msg.value()))  # type: ignore[attr-defined]

    while not stop.is_set():
        producer.produce(topic, str(value).encode(), partition=0, on_delivery=delivered)
        value += 1
        producer.poll(0.002)
    producer.flush(30)


def _read_all(bootstrap: str, topic: str) -> set[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: set[int] = set()
    idle = 0
    while idle < 6:
        messages = consumer.consume(10000, 0.5)
        idle = 0 if messages else idle + 1
        seen.update(int(m.value() or b"-1") for m in messages if not m.error())
    consumer.close()
    return seen


@pytest.mark.timeout(240)
def test_reassignment_moves_a_partition_and_loses_nothing() -> None:
    settings = {"min.insync.replicas": 2, "default.replication.factor": 3}
    with LocalCluster(4, settings=settings, session_timeout_ms=4000) as c:
        c.create_topic("moved", 1, 3)
        zk = c.zk()
        replicas = json.loads(zk.get("/brokers/topics/moved")[0])["partitions"]["0"]
        spare = next(b for b in c.broker_ids if b not in replicas)
        leader = c.wait_for_leader("moved", 0)
        target = [spare if r == leader else r for r in replicas]
        stop, acked = threading.Event(), []  # type: ignore[var-annotated]
        producer = threading.Thread(target=_produce, args=(c.bootstrap, "moved", stop, acked))
        producer.start()
        try:
            c.wait_for(lambda: len(acked) > 500, 60, "acknowledged writes before the move")
            epoch_before = c.partition_state("moved", 0)["leader_epoch"]  # type: ignore[index]
            request = {"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": target}]}
            zk.create("/admin/reassign_partitions", json.dumps(request).encode(), makepath=True)
            c.wait_for(
                lambda: zk.exists("/admin/reassign_partitions") is None, 90, "the reassignment to finish"
            )
            time.sleep(1)
        finally:
            stop.set()
            producer.join(60)
        topic = json.loads(zk.get("/brokers/topics/moved")[0])
        assert topic["partitions"]["0"] == target
        assert not topic["adding_replicas"] and not topic["removing_replicas"]
        state = c.partition_state("moved", 0)
        assert state is not None and state["leader"] in target and state["leader"] != leader
        assert sorted(state["isr"]) == sorted(target) and state["leader_epoch"] > epoch_before
        c.wait_for(
            lambda: not (c.data_dir(leader) / "moved-0").exists(), 30, "the removed replica's log gone"
        )
        assert (c.data_dir(spare) / "moved-0").is_dir()
        seen = _read_all(c.bootstrap, "moved")
        assert len(acked) > 500 and not set(acked) - seen
