"""Crashes against a real 3-broker own cluster with a real ZooKeeper.

- SIGKILL of the leader: leadership moves to an ISR member within the session timeout, an
  idempotent producer with retries carries on, and no acknowledged record is lost.
- A follower killed and given a torn tail recovers (truncates the torn batch) and rejoins the ISR.
- The KIP-101 scenario, scripted: with replication.truncation=high-watermark a restarted follower
  truncates to its stale checkpointed HW and is then elected: acknowledged records are lost.
  The same sequence with leader-epoch truncation loses nothing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.local import LocalCluster

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 3000


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    settings = {"min.insync.replicas": 2, "replica.lag.time.max.ms": 2000}
    with LocalCluster(3, settings=settings, session_timeout_ms=SESSION_TIMEOUT_MS) as c:
        yield c


def read_all(bootstrap: str, topic: str, expected: int) -> dict[int, list[int]]:
    """value -> offsets at which it was read (from the beginning, up to the HW)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"{topic}-reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen: dict[int, list[int]] = {}
    idle = 0
    count = 0
    while idle < (3 if count >= expected else 15):
        messages = consumer.consume(10000, 0.5)
        idle = 0 if messages else idle + 1
        for m in messages:
            if not m.error():
                seen.setdefault(int(m.value() or b"-1"), []).append(m.offset() or 0)
                count += 1
    consumer.close()
    return seen


def test_leader_sigkill_moves_leadership_and_loses_nothing(cluster: LocalCluster) -> None:
    from confluent_kafka import Producer

    cluster.create_topic("failover", 1, 3)
    cluster.wait_for_isr("failover", 0, [1, 2, 3])
    leader = cluster.wait_for_leader("failover", 0)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 2,
            "enable.idempotence": True,
            "message.timeout.ms": 60000,
        }
    )
    acked: dict[int, int] = {}
    errors: list[str] = []
    stop = threading.Event()

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[int(msg.value())] = msg.offset()  # type: ignore[attr-defined]

    def produce() -> None:
        i = 0
        while not stop.is_set():
            producer.produce("failover", str(i).encode(), on_delivery=delivered)
            i += 1
            producer.poll(0)
            if i % 200 == 0:
                time.sleep(0.01)
        producer.flush(60)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        cluster.wait_for(lambda: len(acked) > 2000, 30, "first acknowledgements")
        killed_at = time.monotonic()
        cluster.kill(leader)
        new_leader = cluster.wait_for_leader("failover", 0, not_in={leader}, timeout=30)
        moved_after = time.monotonic() - killed_at
        state = cluster.partition_state("failover", 0)
        assert state is not None and new_leader in state["isr"] and state["leader_epoch"] >= 1
        assert moved_after < SESSION_TIMEOUT_MS / 1000 + 2.0, f"leadership moved after {moved_after:.1f}s"
        before = len(acked)
        cluster.wait_for(lambda: len(acked) > before + 2000, 30, "acknowledgements from the new leader")
        cluster.start(leader)
        cluster.wait_for_isr("failover", 0, [1, 2, 3], timeout=30)
    finally:
        stop.set()
        thread.join(90)
    assert not errors, errors[:5]
    seen = read_all(cluster.bootstrap, "failover", len(acked))
    lost = [v for v in acked if v not in seen]
    duplicated = [v for v, offsets in seen.items() if len(offsets) > 1]
    moved = [v for v, o in acked.items() if v in seen and seen[v][0] != o]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged records lost"
    assert not duplicated, f"{len(duplicated)} duplicates"
    assert not moved


def _active_segment(data_dir: Path, topic: str) -> Path:
    return sorted((data_dir / f"{topic}-0").glob("*.log"))[-1]


def test_torn_tail_is_truncated_and_follower_rejoins_isr(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    cluster.create_topic("torn", 1, 3)
    cluster.wait_for_isr("torn", 0, [1, 2, 3])
    leader = cluster.wait_for_leader("torn", 0)
    follower = next(b for b in cluster.broker_ids if b != leader)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5)
    futures = [producer.send("torn", str(i).encode()) for i in range(3000)]
    producer.flush(30)
    assert all(f.get(10).offset is not None for f in futures)
    cluster.kill(follower)
    segment = _active_segment(cluster.data_dir(follower), "torn")
    good = segment.read_bytes()
    assert good, "the follower had replicated nothing"
    with segment.open("ab") as out:  # a torn write: the first 100 bytes of a batch, then the crash
        out.write(good[:100])
    more = [producer.send("torn", str(i).encode()) for i in range(3000, 4000)]
    producer.flush(30)
    assert all(f.get(30).offset is not None for f in more)
    producer.close()
    cluster.start(follower)
    cluster.wait_for_isr("torn", 0, [1, 2, 3], timeout=30)
    log_text = cluster.log_path(follower).read_text(errors="replace")
    assert "torn batch" in log_text, "recovery did not report the torn tail"
    seen = read_all(cluster.bootstrap, "torn", 4000)
    assert sorted(seen) == list(range(4000))
    assert all(len(offsets) == 1 for offsets in seen.values())


@pytest.mark.parametrize("variant", ["high-watermark", "leader-epoch"])
def test_kip101_restarted_follower_elected(variant: str) -> None:
    """KIP-101 scenario 1, scripted so it happens every time.

    Leader 1, followers 2 and 3, all in the ISR, 2000 records acknowledged (acks=all). HW
    checkpoints are rare, so follower 2's checkpointed HW is stale. Then 3, 2 and 1 are killed
    and 2 restarts: with high-watermark truncation it truncates to its stale HW at once; it is the
    only live ISR member, so once 1's session expires the controller elects it. 3 comes back and
    follows 2. High-watermark truncation loses acknowledged records; leader-epoch loses none.
    """
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    settings = {
        "min.insync.replicas": 2,
        "replication.truncation": variant,
        "replica.high.watermark.checkpoint.interval.ms": 600_000,
    }
    with LocalCluster(3, settings=settings, session_timeout_ms=SESSION_TIMEOUT_MS) as c:
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        admin.create_topics([NewTopic("kip101", replica_assignments={0: [1, 2, 3]})])
        admin.close()
        c.wait_for_isr("kip101", 0, [1, 2, 3])
        assert c.wait_for_leader("kip101", 0) == 1
        producer = KafkaProducer(bootstrap_servers=c.bootstrap, acks="all", linger_ms=5)
        futures = {i: producer.send("kip101", str(i).encode()) for i in range(2000)}
        producer.flush(30)
        acked = {i: f.get(10).offset for i, f in futures.items()}
        producer.close()
        for broker_id in (3, 2, 1):
            c.kill(broker_id)
        c.start(2)
        assert c.wait_for_leader("kip101", 0, not_in={1}, timeout=30) == 2
        c.start(3)
        c.wait_for_isr("kip101", 0, [2, 3], timeout=30)
        seen = read_all(c.bootstrap, "kip101", 0 if variant == "high-watermark" else len(acked))
        lost = [v for v in acked if v not in seen]
        log_text = c.log_path(2).read_text(errors="replace")
    if variant == "high-watermark":
        assert "high-watermark truncation" in log_text
        assert lost, "the pre-KIP-101 protocol should have lost acknowledged records"
    else:
        assert not lost, f"leader-epoch truncation lost {len(lost)} acknowledged records"


def test_paused_leader_loses_its_session_and_rejoins_as_follower(cluster: LocalCluster) -> None:
    """SIGSTOP the leader past the session timeout: a new leader is elected; once resumed, the old
    one notices its expired session, registers again, follows, and rejoins the ISR."""
    from kafka import KafkaProducer

    cluster.create_topic("paused", 1, 3)
    cluster.wait_for_isr("paused", 0, [1, 2, 3])
    leader = cluster.wait_for_leader("paused", 0)
    producer = KafkaProducer(
        bootstrap_servers=cluster.bootstrap, acks="all", linger_ms=5, retries=20, request_timeout_ms=4000
    )
    first = [producer.send("paused", str(i).encode()) for i in range(500)]
    producer.flush(30)
    assert all(f.get(10).offset is not None for f in first)
    cluster.pause(leader)
    try:
        new_leader = cluster.wait_for_leader("paused", 0, not_in={leader}, timeout=30)
        more = [producer.send("paused", str(i).encode()) for i in range(500, 1000)]
        producer.flush(60)
        assert all(f.get(30).offset is not None for f in more)
    finally:
        cluster.resume(leader)
    producer.close()
    cluster.wait_for(lambda: leader in cluster.live_brokers(), 30, f"broker {leader} to register again")
    cluster.wait_for_isr("paused", 0, [1, 2, 3], timeout=30)
    state = cluster.partition_state("paused", 0)
    assert state is not None and state["leader"] == new_leader
    seen = read_all(cluster.bootstrap, "paused", 1000)
    assert sorted(seen) == list(range(1000))
    assert all(len(offsets) == 1 for offsets in seen.values())


def test_a_leader_restarted_before_its_session_expired_gets_a_new_epoch_elsewhere() -> None:
    """A SIGKILLed leader started again at once takes its registration over long before its old
    session (30 s) expires; the controller sees the newer registration (Kafka's broker epoch) and
    elects another ISR member in a new epoch, and the dead follower's session expiry is not needed."""
    with LocalCluster(3, settings={"min.insync.replicas": 2}, session_timeout_ms=30000) as c:
        c.create_topic("bounce", 3, 3)
        controller = c.controller()
        # a leader that is not the controller (a dead controller's znode stays until its session expires)
        leaders = {p: c.wait_for_leader("bounce", p) for p in range(3)}
        partition = next(p for p, leader in leaders.items() if leader != controller)
        leader = leaders[partition]
        c.wait_for_isr("bounce", partition, [1, 2, 3])
        before = c.partition_state("bounce", partition)
        assert before is not None
        started = time.monotonic()
        c.kill(leader)
        c.start(leader)
        new_leader = c.wait_for_leader("bounce", partition, not_in={leader}, timeout=25)
        after = c.partition_state("bounce", partition)
        assert after is not None and after["leader_epoch"] > before["leader_epoch"]
        assert new_leader != leader and time.monotonic() - started < 30
        c.wait_for_isr("bounce", partition, [1, 2, 3], timeout=30)
