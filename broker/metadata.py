"""The metadata layer the request handlers see: brokers, topics, partition states, and its writes.

Two implementations: `StandaloneMetadata` (no zookeeper.connect: one broker, in memory, leader
of everything — for quick single-node use) and `broker.zookeeper.ZkCluster` (Kafka's ZooKeeper mode).
Both push partition states into the ReplicaManager through `apply_state`.
"""

from __future__ import annotations

import itertools
import random
import uuid
from dataclasses import dataclass
from typing import Protocol

from broker.kafka_errors import INVALID_REPLICATION_FACTOR, TOPIC_ALREADY_EXISTS
from broker.partition_state import PartitionState
from broker.replica_manager import ReplicaManager
from broker.replication import WriteIsr

_LEGAL_TOPIC_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    broker_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class TopicCreation:
    name: str
    num_partitions: int
    replication_factor: int
    assignment: dict[int, tuple[int, ...]] | None = None


class ClusterMetadata(Protocol):
    def brokers(self) -> dict[int, BrokerAddress]: ...
    def controller_id(self) -> int: ...
    def cluster_id(self) -> str: ...
    def topics(self) -> dict[str, dict[int, tuple[int, ...]]]: ...
    def topic_id(self, topic: str) -> uuid.UUID: ...
    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...
    def partition_state(self, topic: str, index: int) -> PartitionState | None: ...
    async def create_topic(self, creation: TopicCreation, timeout_ms: int) -> tuple[int, str | None]: ...
    async def write_isr(self, topic: str, index: int, action: WriteIsr) -> int | None: ...
    async def allocate_producer_id(self) -> int: ...


def validate_topic_name(name: str) -> str | None:
    if not name or name in (".", "..") or len(name) > 249:
        return "invalid topic name length"
    if not set(name) <= _LEGAL_TOPIC_CHARS:
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'"
    return None


def assign_replicas(
    brokers: list[int], num_partitions: int, replication_factor: int, rng: random.Random
) -> dict[int, tuple[int, ...]]:
    """Kafka's round-robin assignment: partition p's replicas start at broker (start + p)."""
    ordered = sorted(brokers)
    start = rng.randrange(len(ordered))
    shift = rng.randrange(len(ordered))
    assignment = {}
    for p in range(num_partitions):
        first = (start + p) % len(ordered)
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % max(1, len(ordered) - 1)) % len(ordered)])
        # the shift formula can repeat a broker when RF is large; fall back to a plain rotation
        if len(set(replicas)) != len(replicas):
            replicas = [ordered[(first + k) % len(ordered)] for k in range(replication_factor)]
        assignment[p] = tuple(replicas)
    return assignment


def standalone_topic_id(topic: str) -> uuid.UUID:
    """A standalone broker keeps no metadata store and never deletes a topic: an id derived from the
    name is the same after every restart, for the topic's whole life."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"strandline:{topic}")


class StandaloneMetadata:
    """One broker, no ZooKeeper: every partition's leader is this broker, epoch 0, ISR [self]."""

    def __init__(
        self, replicas: ReplicaManager, address: BrokerAddress, rng: random.Random | None = None
    ) -> None:
        self._rng = rng if rng is not None else random.Random()
        self._replicas = replicas
        self._address = address
        self._topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self._ids: dict[str, uuid.UUID] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._producer_ids = itertools.count(self._rng.randrange(1000, 1_000_000) * 1000)
        me = address.broker_id
        for topic, index in list(replicas.partitions):
            self._topics.setdefault(topic, {})[index] = (me,)
        for topic, parts in self._topics.items():
            self._ids[topic] = standalone_topic_id(topic)
            for index in parts:
                self._set(topic, index, PartitionState(me, 0, (me,), 0, replicas=(me,)))

    def _set(self, topic: str, index: int, state: PartitionState) -> None:
        self._states[(topic, index)] = state
        self._replicas.apply_state(topic, index, state)

    def brokers(self) -> dict[int, BrokerAddress]:
        return {self._address.broker_id: self._address}

    def controller_id(self) -> int:
        return self._address.broker_id

    def cluster_id(self) -> str:
        return "strandline-standalone"

    def topics(self) -> dict[str, dict[int, tuple[int, ...]]]:
        return self._topics

    def topic_id(self, topic: str) -> uuid.UUID:
        return self._ids.get(topic, uuid.UUID(int=0))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, known in self._ids.items():
            if known == topic_id:
                return name
        return None

    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        return self._states.get((topic, index))

    async def create_topic(self, creation: TopicCreation, timeout_ms: int) -> tuple[int, str | None]:
        if creation.name in self._topics:
            return TOPIC_ALREADY_EXISTS, f"Topic '{creation.name}' already exists."
        if creation.replication_factor != 1:
            return INVALID_REPLICATION_FACTOR, "standalone broker: replication factor must be 1"
        me = self._address.broker_id
        self._topics[creation.name] = {p: (me,) for p in range(creation.num_partitions)}
        self._ids[creation.name] = standalone_topic_id(creation.name)
        for p in range(creation.num_partitions):
            self._set(creation.name, p, PartitionState(me, 0, (me,), 0, replicas=(me,)))
        return 0, None

    async def write_isr(self, topic: str, index: int, action: WriteIsr) -> int | None:
        state = self._states[(topic, index)]
        if state.zk_version != action.state.zk_version:
            return None
        new = PartitionState(
            state.leader, state.leader_epoch, action.state.isr, state.zk_version + 1, replicas=state.replicas
        )
        self._states[(topic, index)] = new
        return new.zk_version

    async def allocate_producer_id(self) -> int:
        return next(self._producer_ids)
