"""Writes any broker makes besides its own state: topic creation and producer id blocks."""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
import uuid

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.kafka_errors import (
    INVALID_REPLICA_ASSIGNMENT,
    INVALID_REPLICATION_FACTOR,
    REQUEST_TIMED_OUT,
    TOPIC_ALREADY_EXISTS,
)
from broker.metadata import TopicCreation, assign_replicas
from broker.zookeeper.cache import MetadataCache
from broker.zookeeper.layout import PRODUCER_ID_BLOCK, TOPICS, encode_topic, parse_json

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_SIZE = 1000


async def create_topic(
    cache: MetadataCache, creation: TopicCreation, timeout_ms: int, rng: random.Random
) -> tuple[int, str | None]:
    """Write /brokers/topics/<name> and wait (bounded) until the controller elected its leaders."""
    live = sorted(cache.brokers)
    if creation.name in cache.topics:
        return TOPIC_ALREADY_EXISTS, f"Topic '{creation.name}' already exists."
    if creation.assignment is None:
        if creation.replication_factor > len(live):
            return (
                INVALID_REPLICATION_FACTOR,
                f"Replication factor: {creation.replication_factor} larger than available brokers: {len(live)}.",
            )
        assignment = assign_replicas(live, creation.num_partitions, creation.replication_factor, rng)
    else:
        assignment = creation.assignment
        if sorted(assignment) != list(range(len(assignment))) or any(
            len(set(r)) != len(r) or not r for r in assignment.values()
        ):
            return INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1, each with distinct brokers"
    topic_id = uuid.UUID(int=rng.getrandbits(128), version=4)
    data = encode_topic(topic_id, assignment)
    try:
        await asyncio.to_thread(cache.zk.create, f"{TOPICS}/{creation.name}", data, makepath=True)
    except NodeExistsError:
        return TOPIC_ALREADY_EXISTS, f"Topic '{creation.name}' already exists."
    log.info("created topic %s with assignment %s", creation.name, assignment)
    # Kafka answers once the controller has elected leaders; wait for the states (bounded).
    deadline = time.monotonic() + max(timeout_ms, 0) / 1000.0
    while time.monotonic() < deadline:
        states = [cache.states.get((creation.name, p)) for p in assignment]
        if all(s is not None and s.leader >= 0 for s in states):
            return 0, None
        await cache.wait_for_states(deadline - time.monotonic())
    if timeout_ms <= 0:
        return 0, None
    return REQUEST_TIMED_OUT, "topic created; leaders not elected within the timeout"


class ProducerIds:
    """Producer ids from blocks of PRODUCER_ID_BLOCK_SIZE claimed in ZooKeeper (compare-and-set)."""

    def __init__(self, cache: MetadataCache, broker_id: int) -> None:
        self.cache = cache
        self.broker_id = broker_id
        self._free: list[int] = []

    async def allocate(self) -> int:
        if not self._free:
            start = await asyncio.to_thread(self._claim_block)
            self._free = list(range(start + PRODUCER_ID_BLOCK_SIZE - 1, start - 1, -1))
        return self._free.pop()

    def _claim_block(self) -> int:
        zk = self.cache.zk
        while True:
            try:
                data, stat = zk.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = None, None
            current = parse_json(data)
            start = int(current["block_end"]) + 1 if current else 0
            block = json.dumps(
                {
                    "version": 1,
                    "broker": self.broker_id,
                    "block_start": str(start),
                    "block_end": str(start + PRODUCER_ID_BLOCK_SIZE - 1),
                }
            ).encode()
            try:
                if stat is None:
                    zk.create(PRODUCER_ID_BLOCK, block)
                else:
                    zk.set(PRODUCER_ID_BLOCK, block, version=stat.version)
                return start
            except (NodeExistsError, BadVersionError):
                continue
