"""The group coordinator inside real brokers, driven by real consumers (kafka-python, librdkafka).

One module-scoped 3-broker cluster (ZooKeeper + brokers as local processes): consumer groups with
subscribe() split partitions, commit and resume; when the coordinator (the holder of the
group-coordinator lease, as FindCoordinator names it) is killed, the group moves to another broker
and consumption carries on; committed offsets survive kill -9 of the coordinator.

Each test stands alone: the fixture's topic `g0` holds values 0..199 and nobody writes to it again;
a test that needs more data makes its own topic. Waits are deadlines on progress (generous, for a
loaded 2-core CI machine), never "nothing arrived for a while".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import CommitFailedError, IllegalStateError, KafkaTimeoutError, RebalanceInProgressError

from clusters.kafka_metadata import coordinator_of
from clusters.local import LocalCluster

pytestmark = pytest.mark.integration

PARTITIONS = 4
FIXTURE_VALUES = range(200)  # what the fixture writes to g0, i % 4 -> partition


def produce(bootstrap: str, topic: str, values: Iterable[int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=20)
    for i in values:
        producer.send(topic, str(i).encode(), partition=i % PARTITIONS)
    producer.flush(60)
    producer.close()


def consumer(bootstrap: str, group: str, **extra: object) -> KafkaConsumer:
    settings: dict[str, object] = {
        "bootstrap_servers": bootstrap,
        "group_id": group,
        "auto_offset_reset": "earliest",
        "enable_auto_commit": False,
        "session_timeout_ms": 6000,
        "heartbeat_interval_ms": 500,
    }
    settings.update(extra)
    return KafkaConsumer(**settings)


def subscribe(c: KafkaConsumer, topic: str) -> None:
    """Subscribe, then wait until the consumer's metadata lists every partition of the topic.

    Without this the group leader may assign before its first metadata answer (kafka-python logs
    "No partition metadata for topic"), hand out nothing, and rejoin once the metadata arrives.
    kafka-python 3.0.12 loses such a metadata-triggered rejoin when its SyncGroup answer comes after
    a poll() timeout: the next poll sees no reason to rejoin (the assignment snapshot was already
    updated) and never applies the assignment nor re-enables heartbeats, so the member sits with an
    empty assignment until the coordinator expires its session.
    """
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while len(c.partitions_for_topic(topic)) < PARTITIONS:
        assert time.monotonic() < deadline, f"no metadata for {topic}"
        time.sleep(0.1)


def read_to_end(c: KafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    """True when the consumer holds two partitions and its position in each is at the end."""
    assigned = c.assignment()
    try:
        return len(assigned) == 2 and all(c.position(tp, timeout_ms=5000) >= ends[tp] for tp in assigned)
    except (IllegalStateError, KafkaTimeoutError):  # revoked meanwhile, or no position yet
        return False


def end_offsets(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    probe = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return dict(probe.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)]))
    finally:
        probe.close()


def read_until(c: KafkaConsumer, done: Callable[[list[int]], bool], timeout: float) -> list[int]:
    """Poll until done(values) is true; fail after timeout seconds."""
    values: list[int] = []
    deadline = time.monotonic() + timeout
    while not done(values):
        assert time.monotonic() < deadline, f"read only {len(values)} values in {timeout}s"
        for records in c.poll(timeout_ms=500).values():
            values.extend(int(r.value) for r in records)
    return values


def group_coordinator(cluster: LocalCluster, group: str) -> int:
    """The broker that coordinates `group`, as a running broker names it (FindCoordinator)."""
    deadline = time.monotonic() + 30
    while True:
        for broker_id in cluster.broker_ids:
            if cluster.running(broker_id):
                host, port = cluster.address(broker_id).rsplit(":", 1)
                found = coordinator_of(host, int(port), group, 0)
                if found is not None:
                    return found
        assert time.monotonic() < deadline, f"no coordinator for {group}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(brokers=3) as local:
        local.create_topic("g0", partitions=PARTITIONS, replication_factor=3)
        produce(local.bootstrap, "g0", FIXTURE_VALUES)
        yield local


def test_two_consumers_share_partitions_and_resume_from_commits(cluster: LocalCluster) -> None:
    topic = "split"  # its own topic: this test writes more values after the commits
    cluster.create_topic(topic, partitions=PARTITIONS, replication_factor=3)
    produce(cluster.bootstrap, topic, range(200))
    ends = end_offsets(cluster.bootstrap, topic)
    seen: dict[str, list[int]] = {}
    assignments: dict[str, set[TopicPartition]] = {}
    caught_up: dict[str, bool] = {}
    committed: dict[str, bool] = {}
    errors: list[BaseException] = []
    stop = threading.Event()  # both caught up: end this round
    finished = threading.Event()  # both committed in the same round

    def end_round() -> None:
        if len(committed) == 2 and all(committed.values()):
            finished.set()
        else:  # a rebalance came between catching up and committing: another round
            committed.clear()
            caught_up.clear()
            stop.clear()

    both_subscribed = threading.Barrier(2, timeout=60)
    round_over = threading.Barrier(2, action=end_round, timeout=60)

    def run(name: str) -> None:
        c = consumer(cluster.address(3), "split")  # bootstrap via a broker that is not the coordinator
        try:
            subscribe(c, topic)
            both_subscribed.wait()
            values: list[int] = []
            deadline = time.monotonic() + 90
            # Both stay members until both hold two partitions read to the end and both committed
            # them: a consumer that left early would hand its partitions to the other one.
            while not finished.is_set():
                while not stop.is_set():
                    assert time.monotonic() < deadline, f"{name} holds {c.assignment()} of {ends}"
                    for records in c.poll(timeout_ms=500).values():
                        values.extend(int(r.value) for r in records)
                    caught_up[name] = read_to_end(c, ends)
                    if len(caught_up) == 2 and all(caught_up.values()):
                        stop.set()
                assignments[name] = set(c.assignment())
                seen[name] = list(values)
                try:
                    c.commit()
                    committed[name] = True
                except (CommitFailedError, RebalanceInProgressError):
                    committed[name] = False
                round_over.wait()
        except BaseException as error:
            errors.append(error)
            stop.set()
            both_subscribed.abort()
            round_over.abort()
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    assert not any(t.is_alive() for t in threads)
    if errors:
        raise errors[0]
    assert len(assignments["a"]) == len(assignments["b"]) == 2
    assert not assignments["a"] & assignments["b"]
    assert set(seen["a"] + seen["b"]) == set(range(200))

    produce(cluster.bootstrap, topic, range(200, 240))
    ends = end_offsets(cluster.bootstrap, topic)
    later = consumer(cluster.bootstrap, "split")
    subscribe(later, topic)
    reached: dict[TopicPartition, int] = {}
    resumed: list[int] = []
    deadline = time.monotonic() + 60
    while any(reached.get(tp, 0) < end for tp, end in ends.items()):
        assert time.monotonic() < deadline, f"resumed consumer reached only {reached} of {ends}"
        for tp, records in later.poll(timeout_ms=500).items():
            resumed.extend(int(r.value) for r in records)
            reached[tp] = records[-1].offset + 1
    later.close()
    assert set(resumed) == set(range(200, 240))  # nothing before the committed offsets


def test_librdkafka_commits_and_reads_back(cluster: LocalCluster) -> None:
    c = ConfluentConsumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "group.id": "rdkafka",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe(["g0"])
    values: list[int] = []
    deadline = time.monotonic() + 60
    while len(values) < 100 and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is not None and not message.error():
            values.append(int(message.value() or b"-1"))
    c.commit(asynchronous=False)
    committed = c.committed([ConfluentTopicPartition("g0", p) for p in range(PARTITIONS)], timeout=10)
    c.close()
    assert len(values) >= 100
    assert sum(tp.offset for tp in committed if tp.offset >= 0) >= 100


def test_group_moves_when_the_coordinator_dies(cluster: LocalCluster) -> None:
    c = consumer(cluster.bootstrap, "failover")
    killed = None
    try:
        subscribe(c, "g0")
        first = read_until(c, lambda values: len(values) >= 20, timeout=60)
        killed = group_coordinator(cluster, "failover")
        cluster.kill(killed)
        everything = set(FIXTURE_VALUES)
        rest = read_until(c, lambda values: set(first + values) >= everything, timeout=60)
        assert set(first + rest) == everything
        deadline = time.monotonic() + 30  # its registration lives until its session expires
        while group_coordinator(cluster, "failover") == killed:
            assert time.monotonic() < deadline, f"the group stayed with killed broker {killed}"
            time.sleep(0.2)
    finally:
        c.close()
        if killed is not None and not cluster.running(killed):
            cluster.start(killed)


def test_committed_offsets_survive_kill_9(cluster: LocalCluster) -> None:
    # Both consumers bootstrap through the coordinator, so they ask it (and only it) for the
    # coordinator: after its restart it names whichever broker took the lease meanwhile.
    cluster.wait_for_leader("g0", 0)
    coordinator = group_coordinator(cluster, "durable")
    c = consumer(cluster.address(coordinator), "durable")
    subscribe(c, "g0")
    taken = read_until(c, lambda values: len(values) >= 30, timeout=60)
    c.commit()
    expected = {TopicPartition("g0", p): c.committed(TopicPartition("g0", p)) for p in range(PARTITIONS)}
    c.close()
    assert sum(v or 0 for v in expected.values()) >= 30 and taken
    cluster.kill(coordinator)
    cluster.start(coordinator)
    again = consumer(cluster.address(coordinator), "durable")
    after = {tp: again.committed(tp) for tp in expected}
    again.close()
    assert after == expected
