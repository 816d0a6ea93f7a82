"""The asyncio driver of the follower side: one fetch loop per leader broker, for all its partitions.

What a follower does (truncate by high watermark or by leader epoch, fetch, append, handle an
offset out of the leader's range) is decided by broker.follower.FollowerReplica, one per followed
partition; this module batches its requests per leader, sends them, feeds each partition's answer
back and carries out the actions on the partition's log through the ReplicaManager.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from broker import protocol as p
from broker.client import BrokerConnection, ConnectionClosed
from broker.config import BrokerConfig
from broker.follower import (
    Append,
    Backoff,
    FollowerAction,
    FollowerReplica,
    ListLeaderOffsets,
    ReplicaView,
    RestartAt,
    Truncate,
)
from broker.kafka_errors import FENCED_LEADER_EPOCH, NONE
from broker.metadata import BrokerAddress
from broker.partition_state import PartitionState
from broker.replica_manager import Partition, ReplicaManager
from broker.storage import StorageError, UnexpectedAppendOffsetError, parse_batches

log = logging.getLogger(__name__)

# Kafka 4.1's newest Fetch: topics by id (v13+), the follower's id in ReplicaState (v15+).
FETCH_VERSION = 17
# Until the follower knows a topic's id (a topic znode it has not read yet) it fetches by name.
FETCH_BY_NAME_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
LIST_OFFSETS_VERSION = 4
RETRY_SECONDS = 0.1
FETCH_MAX_BYTES = 16 * 1024 * 1024
PARTITION_MAX_BYTES = 4 * 1024 * 1024


@dataclass(eq=False)
class _Followed:
    """A followed partition: its follower's decisions, and the replica as they read it."""

    partition: Partition
    follower: FollowerReplica
    view: ReplicaView


def _by_topic(
    followed: list[_Followed], fields: Callable[[_Followed], dict[str, int]]
) -> dict[str, list[dict[str, int]]]:
    """A request's partitions by topic: each with its index, the leader epoch we follow (the leader
    refuses a request from another epoch) and the request's own `fields`."""
    topics: dict[str, list[dict[str, int]]] = {}
    for f in followed:
        part = f.partition
        topics.setdefault(part.topic, []).append(
            {"partition": part.index, "current_leader_epoch": f.follower.leader_epoch, **fields(f)}
        )
    return topics


@dataclass(frozen=True)
class FollowingBroker:
    """What every leader's fetcher works with on the broker that follows: its config and replicas,
    where the other brokers are now, and a topic's id (without it, topics are fetched by name)."""

    config: BrokerConfig
    replicas: ReplicaManager
    addresses: Callable[[], dict[int, BrokerAddress]]
    topic_ids: Callable[[str], uuid.UUID] | None = None


class LeaderFetcher:
    """Fetches every partition this broker follows from one leader broker."""

    def __init__(self, leader_id: int, broker: FollowingBroker) -> None:
        self.leader_id = leader_id
        self.broker = broker
        self.followed: dict[tuple[str, int], _Followed] = {}
        self._task: asyncio.Task[None] | None = None
        self._conn: BrokerConnection | None = None
        self._changed = asyncio.Event()

    def add(self, partition: Partition, leader_epoch: int) -> None:
        follower = FollowerReplica(self.broker.config.truncation, self.leader_id, leader_epoch)
        followed = _Followed(partition, follower, ReplicaView(partition))
        self._carry_out(followed, follower.start(followed.view), b"")
        self.followed[partition.key] = followed
        self._changed.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    def remove(self, key: tuple[str, int]) -> None:
        self.followed.pop(key, None)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._conn is not None:
            self._conn.close()

    async def _run(self) -> None:
        while self.followed:
            try:
                conn = await self._connection()
                if conn is None:
                    await self._pause()
                    continue
                pending = [f for f in self.followed.values() if f.follower.asks_epoch]
                if pending:
                    await self._truncate_by_epoch(conn, pending)
                ready = [f for f in self.followed.values() if not f.follower.asks_epoch]
                if not ready:
                    await self._pause()
                    continue
                await self._fetch(conn, ready)
            except ConnectionClosed as exc:
                log.info("fetcher for leader %d: %s", self.leader_id, exc)
                self._conn = None
                await self._pause()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("fetcher for leader %d failed; retrying", self.leader_id)
                self._conn = None
                await self._pause()

    async def _pause(self) -> None:
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), RETRY_SECONDS)
        except TimeoutError:
            pass

    async def _connection(self) -> BrokerConnection | None:
        address = self.broker.addresses().get(self.leader_id)
        if address is None:
            return None
        conn = self._conn
        if conn is not None and (conn.host, conn.port) != (address.host, address.port):
            conn.close()
            conn = None
        if conn is None or not conn.connected:
            conn = BrokerConnection(
                address.host, address.port, f"replica-fetcher-{self.broker.config.broker_id}"
            )
            try:
                await conn.connect()
            except (OSError, TimeoutError):
                return None
            self._conn = conn
        return conn

    async def _truncate_by_epoch(self, conn: BrokerConnection, pending: list[_Followed]) -> None:
        topics = _by_topic(pending, lambda f: {"leader_epoch": f.follower.epoch_request(f.view)})
        body = {
            "replica_id": self.broker.config.broker_id,
            "topics": [{"topic": t, "partitions": parts} for t, parts in topics.items()],
        }
        response = await conn.request(p.API_OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, body)
        for topic in response.topics:
            for result in topic.partitions:
                found = self.followed.get((topic.topic, result.partition))
                if found is None or found not in pending:
                    continue
                f = found
                if result.error_code.value != NONE:
                    log.info(
                        "%s-%d: OffsetForLeaderEpoch from %d: error %s; retrying",
                        topic.topic,
                        result.partition,
                        self.leader_id,
                        result.error_code.name,
                    )
                    continue
                actions = f.follower.on_epoch_answer(NONE, result.leader_epoch, result.end_offset, f.view)
                self._carry_out(f, actions, b"")

    async def _fetch(self, conn: BrokerConnection, ready: list[_Followed]) -> None:
        topics = _by_topic(
            ready,
            lambda f: {
                "fetch_offset": f.partition.log.log_end_offset,
                "last_fetched_epoch": -1,
                "log_start_offset": f.partition.log.log_start_offset,
                "partition_max_bytes": PARTITION_MAX_BYTES,
            },
        )
        topic_ids = self.broker.topic_ids
        ids = {name: topic_ids(name) for name in topics} if topic_ids else {}
        by_id = bool(ids) and all(i.int for i in ids.values())
        version = FETCH_VERSION if by_id else FETCH_BY_NAME_VERSION
        names = {topic_id: name for name, topic_id in ids.items()}
        body = {
            "replica_id": self.broker.config.broker_id,
            "replica_state": {"replica_id": self.broker.config.broker_id, "replica_epoch": -1},
            "max_wait": self.broker.config.replica_fetch_wait_max_ms,
            "min_bytes": 1,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": 0,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [
                {"topic": t, "topic_id": ids.get(t), "partitions": parts} for t, parts in topics.items()
            ],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        wait_s = self.broker.config.replica_fetch_wait_max_ms / 1000.0
        response = await conn.request(p.API_FETCH, version, body, timeout=wait_s + 10.0)
        backoff = False
        for topic in response.responses:
            name = names.get(topic.topic_id, "") if by_id else topic.topic
            for result in topic.partitions:
                found = self.followed.get((name, result.partition_index))
                if found is None or found not in ready:
                    continue  # stopped following (or re-added for a new epoch) meanwhile
                actions = found.follower.on_fetch_answer(result.error_code.value, result.high_watermark)
                if result.error_code.value not in (NONE, FENCED_LEADER_EPOCH):
                    log.debug("%s-%d: fetch error %s", name, result.partition_index, result.error_code.name)
                if any(isinstance(a, ListLeaderOffsets) for a in actions):
                    await self._out_of_range(conn, found)
                backoff |= self._carry_out(found, actions, result.records or b"")
        if backoff:
            await self._pause()

    def _carry_out(self, f: _Followed, actions: list[FollowerAction], records: bytes) -> bool:
        """Apply the follower's actions to the partition; True when it asked to back off."""
        backoff = False
        partition = f.partition
        for action in actions:
            if isinstance(action, Truncate):
                self.broker.replicas.truncate(partition, action.offset, action.reason)
                if action.forget_epochs_from:
                    partition.log.epochs.truncate_from_end(action.offset)
            elif isinstance(action, Append):
                self._append(f, records, action.leader_high_watermark)
            elif isinstance(action, RestartAt):
                partition.log.truncate_to(action.offset)
                partition.replica.on_truncated(partition.log.log_end_offset)
            elif isinstance(action, Backoff):
                backoff = True
        return backoff

    def _append(self, f: _Followed, records: bytes, leader_hw: int) -> None:
        partition = f.partition
        try:
            self.broker.replicas.follower_append(partition, records, leader_hw)
        except UnexpectedAppendOffsetError:
            headers = parse_batches(records, check_crc=False, allow_partial_tail=True)
            retry = (
                f.follower.on_append_out_of_order(headers[0].base_offset, leader_hw, f.view)
                if headers
                else []
            )
            if not retry:
                raise
            for action in retry:
                if isinstance(action, Truncate):
                    self.broker.replicas.truncate(partition, action.offset, action.reason)
                elif isinstance(action, Append):
                    self.broker.replicas.follower_append(partition, records, action.leader_high_watermark)
        except StorageError:
            log.exception("%s-%d: follower append failed", partition.topic, partition.index)

    async def _out_of_range(self, conn: BrokerConnection, f: _Followed) -> None:
        """Our fetch offset is outside the leader's log: ask where it starts and ends."""
        part = f.partition
        body = {
            "replica_id": self.broker.config.broker_id,
            "isolation_level": 0,
            "topics": [
                {
                    "name": part.topic,
                    "partitions": [
                        {
                            "partition_index": part.index,
                            "current_leader_epoch": f.follower.leader_epoch,
                            "timestamp": ts,
                        }
                        for ts in (-1, -2)
                    ],
                }
            ],
        }
        response = await conn.request(p.API_LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
        results = response.topics[0].partitions
        if any(r.error_code.value != NONE for r in results):
            return
        leader_end, leader_start = results[0].offset, results[1].offset
        self._carry_out(f, f.follower.on_leader_offsets(leader_start, leader_end, f.view), b"")


class FetcherManager:
    """Routes followed partitions to the LeaderFetcher of their current leader."""

    def __init__(self, broker: FollowingBroker) -> None:
        self.broker = broker
        self.fetchers: dict[int, LeaderFetcher] = {}

    def on_partition_state(self, partition: Partition, state: PartitionState, follow: bool) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(partition.key)
        if follow and state.leader >= 0 and state.leader != self.broker.config.broker_id:
            leader_fetcher = self.fetchers.get(state.leader)
            if leader_fetcher is None:
                leader_fetcher = self.fetchers[state.leader] = LeaderFetcher(state.leader, self.broker)
            leader_fetcher.add(partition, state.leader_epoch)

    def brokers_changed(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher._changed.set()

    def stop(self) -> None:
        for fetcher in self.fetchers.values():
            fetcher.stop()
