"""The group coordinator is fenced, and its successor resumes the group (issue 15), on real brokers
with a kafka-python and a confluent-kafka member committing all along.

1. The coordinator is frozen (SIGSTOP) past its ZooKeeper session, with a zombie OffsetCommit
   waiting in its socket (a member's id and generation, for a partition nobody else commits):
   another broker takes the group-coordinator lease and loads the group.
2. The new coordinator is frozen for a moment (its session lives on) with another zombie in its
   socket, and the lease is handed to a third broker meanwhile (a compare-and-set on the lease znode,
   as a broker claiming it does): the thawed coordinator still believes it coordinates, so its
   commit reaches ZooKeeper, where the lease check of the multi-op must refuse it.
Each zombie must be refused and must not land; the members must carry on at each new coordinator,
every commit they saw acknowledged must be in the final offsets, and the generation each member
sees must never go back (no restart at 1).
"""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import OffsetAndMetadata

from broker.groups.lease import PATH as LEASE_PATH
from broker.groups.lease import Lease, decode, encode
from broker.kafka_errors import NONE, NOT_COORDINATOR
from clusters.kafka_metadata import NO_ANSWER, coordinator_of
from clusters.local import LocalCluster
from tests.support.wire import Wire

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC, GROUP, PARTITIONS = "fence", "fenced", 4
ZOMBIE_TOPIC = "fence-zombie"  # only the zombie commits it
API_OFFSET_COMMIT, API_OFFSET_FETCH = 8, 9


class Member(threading.Thread):
    """A real group member: polls, commits what it read, and notes its generations and acks."""

    def __init__(self, kind: str, bootstrap: str) -> None:
        super().__init__(name=f"member-{kind}", daemon=True)
        self.kind = kind
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.generations: list[tuple[float, int]] = []  # (when, generation), each change
        self.acked: list[tuple[float, dict[int, int]]] = []  # (when, {partition: offset}) acknowledged
        self.member_id = ""
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            self._run_kafka_python() if self.kind == "kafka-python" else self._run_confluent()
        except BaseException as e:  # reported by the test
            self.failure = e

    def _saw_generation(self, generation: int) -> None:
        if generation > 0 and (not self.generations or self.generations[-1][1] != generation):
            self.generations.append((time.monotonic(), generation))

    def _run_kafka_python(self) -> None:
        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=GROUP,
            client_id="kafka-python",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            request_timeout_ms=10000,
        )
        try:
            c.subscribe([TOPIC])
            # The topic's partitions known before the first join. A group leader that assigned without
            # them rejoins once they arrive, and kafka-python 3.0.12 drops the end of such a rejoin when
            # poll() gives up while it is in flight: the assignment is never applied, heartbeats stay
            # off, the coordinator expires the member, and it never joins again.
            wait_for("kafka-python to see the topic", lambda: c.partitions_for_topic(TOPIC), 30)
            while not self.stop.is_set():
                polled = c.poll(timeout_ms=300)
                generation = c._coordinator._generation
                self.member_id = generation.member_id or self.member_id
                self._saw_generation(generation.generation_id)
                offsets = {tp: records[-1].offset + 1 for tp, records in polled.items() if records}
                if not offsets:
                    continue
                try:
                    c.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
                except Exception:
                    continue  # refused or unknown: not acknowledged
                self.acked.append((time.monotonic(), {tp.partition: o for tp, o in offsets.items()}))
        finally:
            c.close()

    def _run_confluent(self) -> None:
        c = ConfluentConsumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": GROUP,
                "client.id": "confluent-kafka",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
            }
        )
        try:
            # Joins once it knows the topic too, so either member may be the first to join and lead.
            wait_for(
                "confluent-kafka to see the topic",
                lambda: c.list_topics(TOPIC, 10).topics[TOPIC].partitions,
                30,
            )
            c.subscribe([TOPIC])
            while not self.stop.is_set():
                messages = c.consume(num_messages=200, timeout=0.3)
                self._saw_generation(confluent_generation(c))
                offsets: dict[int, int] = {}
                for m in messages:
                    partition, offset = m.partition(), m.offset()
                    if m.error() is None and partition is not None and offset is not None:
                        offsets[partition] = offset + 1
                if not offsets:
                    continue
                try:
                    done = c.commit(
                        offsets=[ConfluentTopicPartition(TOPIC, p, o) for p, o in offsets.items()],
                        asynchronous=False,
                    )
                except KafkaException:
                    continue
                if all(tp.error is None for tp in done or []):
                    self.acked.append((time.monotonic(), offsets))
        finally:
            c.close()


def confluent_generation(c: ConfluentConsumer) -> int:
    """librdkafka's serialised group metadata: b"CGMDv2:" and the generation (int32, host order)."""
    data = bytes(c.consumer_group_metadata())
    return struct.unpack("<i", data[7:11])[0] if data.startswith(b"CGMDv2:") else -1


def produce_until(bootstrap: str, stop: threading.Event) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=50)
    i = 0
    while not stop.is_set():
        producer.send(TOPIC, str(i).encode(), partition=i % PARTITIONS)
        i += 1
        time.sleep(0.01)
    producer.flush(30)
    producer.close()


def port(cluster: LocalCluster, broker_id: int) -> int:
    return int(cluster.address(broker_id).rsplit(":", 1)[1])


def coordinator(cluster: LocalCluster, asked: int) -> int | None:
    try:
        return coordinator_of("127.0.0.1", port(cluster, asked), GROUP, 0)
    except NO_ANSWER:
        return None


def coordinator_other_than(cluster: LocalCluster, old: int) -> int | None:
    """The coordinator as a broker other than `old` names it, when that is not `old`."""
    for asked in cluster.broker_ids:
        if asked != old and (found := coordinator(cluster, asked)) not in (None, old):
            return found
    return None


def committed(cluster: LocalCluster, broker_id: int, topic: str, partitions: list[int]) -> dict[int, int]:
    wire = Wire(port(cluster, broker_id))
    try:
        body: dict[str, object] = {
            "group_id": GROUP,
            "topics": [{"name": topic, "partition_indexes": partitions}],
        }
        answer: Any = wire.call(API_OFFSET_FETCH, 7, body)
    finally:
        wire.close()
    assert answer.error_code == 0, answer
    return {q.partition_index: q.committed_offset for t in answer.topics for q in t.partitions}


def send_zombie(broker_port: int, member: Member, partition: int) -> Wire:
    """An OffsetCommit with the member's id and generation, for a partition only zombies commit."""
    zombie = Wire(broker_port)
    zombie.sock.settimeout(60)
    partitions = [{"partition_index": partition, "committed_offset": 999, "committed_metadata": ""}]
    zombie.send(
        API_OFFSET_COMMIT,
        8,
        {
            "group_id": GROUP,
            "generation_id_or_member_epoch": member.generations[-1][1],
            "member_id": member.member_id,
            "topics": [{"name": ZOMBIE_TOPIC, "partitions": partitions}],
        },
    )
    return zombie


def zombie_answer(zombie: Wire) -> set[int]:
    answer: Any = zombie.receive(API_OFFSET_COMMIT, 8)
    zombie.close()
    return {int(q.error_code) for t in answer.topics for q in t.partitions}


def hand_lease_to(cluster: LocalCluster, broker_id: int) -> Lease:
    """Write the next lease for `broker_id` (its current registration), as a claiming broker does."""
    zk = cluster.zk()
    registration = zk.exists(f"/brokers/ids/{broker_id}")
    data, stat = zk.get(LEASE_PATH)
    current = decode(data, stat.version)
    assert current is not None and registration is not None
    lease = Lease(broker_id, int(registration.czxid), current.coordinator_epoch + 1)
    zk.set(LEASE_PATH, encode(lease), version=stat.version)
    return lease


def wait_for(what: str, check: Any, timeout: float, members: Sequence[Member] = ()) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{progress(members)}")


def progress(members: Sequence[Member]) -> str:
    """Where each member got to: which one is stuck is the first thing a timeout needs to say."""
    return "".join(
        f"; {m.kind}: generations {[g for _, g in m.generations]}, {len(m.acked)} acknowledged commits"
        + (f", failed with {m.failure!r}" if m.failure else "")
        for m in members
    )


def commit_after(members: list[Member], since: float) -> None:
    wait_for(
        "both members to commit at the new coordinator",
        lambda: all(m.acked and m.acked[-1][0] > since for m in members),
        60,
        members,
    )


@pytest.fixture
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=3) as local:
        local.create_topic(TOPIC, partitions=PARTITIONS, replication_factor=3)
        yield local


def test_a_deposed_coordinator_is_fenced_and_the_next_one_resumes_the_group(cluster: LocalCluster) -> None:
    stop_producing = threading.Event()
    producer = threading.Thread(target=produce_until, args=(cluster.bootstrap, stop_producing), daemon=True)
    producer.start()
    members = [Member("kafka-python", cluster.bootstrap), Member("confluent-kafka", cluster.bootstrap)]
    for member in members:
        member.start()
    kp = members[0]
    frozen: set[int] = set()
    try:
        wait_for(
            "both members to commit",
            lambda: all(len(m.acked) >= 2 and m.generations for m in members),
            60,
            members,
        )
        first = wait_for("the coordinator", lambda: coordinator(cluster, 1), 20)
        before = max(g for m in members for _, g in m.generations)
        # 1. Frozen past its session: the lease moves, and the thawed broker's zombie is refused.
        cluster.pause(first)
        frozen.add(first)
        zombie = send_zombie(port(cluster, first), kp, 0)
        second = wait_for(
            "another broker to take the lease", lambda: coordinator_other_than(cluster, first), 30
        )
        thawed = time.monotonic()
        cluster.resume(first)
        frozen.discard(first)
        codes = zombie_answer(zombie)
        # NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE when its session's end is noticed first
        assert codes and NONE not in codes, f"deposed broker {first} acknowledged the zombie: {codes}"
        commit_after(members, thawed)
        # 2. Frozen for a moment while the lease is handed on: only the multi-op's check can refuse.
        third = next(b for b in cluster.broker_ids if b not in (first, second))
        cluster.pause(second)
        frozen.add(second)
        zombie = send_zombie(port(cluster, second), kp, 1)
        hand_lease_to(cluster, third)
        handed = time.monotonic()
        cluster.resume(second)
        frozen.discard(second)
        codes = zombie_answer(zombie)
        assert codes == {NOT_COORDINATOR}, f"deposed broker {second} answered {codes}"
        wait_for(
            "the lease's holder to coordinate", lambda: coordinator_other_than(cluster, second) == third, 30
        )
        commit_after(members, handed)
    finally:
        for broker_id in frozen:
            cluster.resume(broker_id)
        stop_producing.set()
        for member in members:
            member.stop.set()
        for member in members:
            member.join(30)
        producer.join(30)
    for member in members:
        assert member.failure is None, f"{member.kind}: {member.failure!r}"
    assert committed(cluster, third, ZOMBIE_TOPIC, [0, 1]) == {0: -1, 1: -1}, "a zombie commit landed"
    final = committed(cluster, third, TOPIC, list(range(PARTITIONS)))
    for member in members:
        for _, offsets in member.acked:
            for partition, offset in offsets.items():
                assert final[partition] >= offset, (
                    f"{member.kind}'s acknowledged commit {offsets} is lost: {final}"
                )
        generations = [g for _, g in member.generations]
        assert generations == sorted(generations), f"{member.kind}'s generation went back: {generations}"
        assert min(generations[-1:]) >= before, (
            f"{member.kind}: generation {before} before, {generations} in all"
        )
