"""The transactional APIs of the broker: kio requests in, response dicts out.

The transaction coordinator of every transactional id is the leader of `__transaction_state-0`
(FindCoordinator key type 1 creates the topic on first use, as Kafka does). It decides with the
sans-IO `TxnCoordinator`, makes each change durable in that partition (acks=all) before it answers,
loads the state anew whenever it becomes the partition's leader (another broker's transactions,
after a failover), and finishes what it finds prepared. Markers go out as WriteTxnMarkers to each
partition's leader (itself included, without a socket), retried until written; the offsets a
transaction commits for a group (TxnOffsetCommit) wait at the group coordinator until the marker
for `__consumer_offsets` arrives. A timer aborts transactions older than their timeout.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from collections.abc import Callable
from typing import Any

from broker.background import BackgroundTasks
from broker.client import BrokerConnection, ConnectionClosed
from broker.config import BrokerConfig
from broker.groups.service import GroupService
from broker.handlers import ApiHandlers, millis
from broker.kafka_errors import (
    COORDINATOR_NOT_AVAILABLE,
    NONE,
    NOT_COORDINATOR,
    NOT_LEADER_OR_FOLLOWER,
    OPERATION_NOT_ATTEMPTED,
    TRANSACTIONAL_ID_NOT_FOUND,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from broker.metadata import ClusterMetadata, TopicCreation
from broker.protocol import (
    API_ADD_OFFSETS_TO_TXN,
    API_ADD_PARTITIONS_TO_TXN,
    API_DESCRIBE_PRODUCERS,
    API_DESCRIBE_TRANSACTIONS,
    API_END_TXN,
    API_FIND_COORDINATOR,
    API_INIT_PRODUCER_ID,
    API_LIST_TRANSACTIONS,
    API_TXN_OFFSET_COMMIT,
    API_WRITE_TXN_MARKERS,
)
from broker.replica_manager import ReplicaManager
from broker.replication import Role
from broker.storage.group_offsets import CommittedOffset
from broker.transactions.coordinator import Decision, TxnCoordinator, TxnMetadata, TxnState
from broker.transactions.state_log import PARTITION, TOPIC, replay, state_batch

log = logging.getLogger(__name__)

CONSUMER_OFFSETS = "__consumer_offsets"  # the marker that commits or drops a transaction's offsets
KEY_TYPE_TRANSACTION = 1
STATE_WRITE_TIMEOUT_MS = 5000
MARKER_TIMEOUT_MS = 5000
MARKER_RETRY_S = 0.1


def wall_ms() -> float:
    return time.time() * 1000.0


class TxnService:
    def __init__(
        self,
        config: BrokerConfig,
        handlers: ApiHandlers,
        metadata: ClusterMetadata,
        groups: GroupService,
        clock: Callable[[], float] = wall_ms,
    ) -> None:
        self.config = config
        self.handlers = handlers
        self.replicas: ReplicaManager = handlers.replicas
        self.metadata = metadata
        self.groups = groups
        self.clock = clock
        self.coordinator = TxnCoordinator(config.transaction_version, config.transaction_max_timeout_ms)
        self._loaded_epoch: int | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._connections: dict[int, BrokerConnection] = {}
        self._tasks = BackgroundTasks()
        # group coordinator side: producer id -> group -> offsets awaiting the transaction's marker
        self.pending_offsets: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        self._find_group_coordinator = groups.find_coordinator
        self._init_idempotent = handlers.init_producer_id

    def install(self) -> None:
        for key, handler in (
            (API_FIND_COORDINATOR, self.find_coordinator),
            (API_INIT_PRODUCER_ID, self.init_producer_id),
            (API_ADD_PARTITIONS_TO_TXN, self.add_partitions_to_txn),
            (API_ADD_OFFSETS_TO_TXN, self.add_offsets_to_txn),
            (API_END_TXN, self.end_txn),
            (API_WRITE_TXN_MARKERS, self.write_txn_markers),
            (API_TXN_OFFSET_COMMIT, self.txn_offset_commit),
            (API_DESCRIBE_PRODUCERS, self.describe_producers),
            (API_DESCRIBE_TRANSACTIONS, self.describe_transactions),
            (API_LIST_TRANSACTIONS, self.list_transactions),
        ):
            self.handlers.register(key, handler)

    # --- who coordinates ------------------------------------------------------------------------
    def coordinator_id(self) -> int | None:
        """The broker that coordinates every transaction: the state partition's leader (None: none)."""
        return self._state_leader()

    def _state_leader(self) -> int | None:
        state = self.metadata.partition_state(TOPIC, PARTITION)
        if state is None or state.leader < 0 or state.leader not in self.metadata.brokers():
            return None
        return state.leader

    def _is_coordinator(self) -> bool:
        """Leader of the state partition, with its state loaded (reloaded after every election)."""
        partition = self.replicas.partitions.get((TOPIC, PARTITION))
        if partition is None or partition.replica.role is not Role.LEADER:
            if self._loaded_epoch is not None:
                log.info("broker %d is no longer the transaction coordinator", self.config.broker_id)
                self.coordinator.unload()
                self._loaded_epoch = None
            return False
        epoch = partition.replica.leader_epoch
        if self._loaded_epoch != epoch:
            self.coordinator.load(replay(partition.log))
            self._loaded_epoch = epoch
            log.info(
                "broker %d coordinates transactions (epoch %d): loaded %d transactional ids",
                self.config.broker_id,
                epoch,
                len(self.coordinator.txns),
            )
            for meta in self.coordinator.preparing():
                self._tasks.spawn(self._complete(meta))
        return True

    async def _ensure_state_topic(self) -> None:
        if TOPIC in self.metadata.topics():
            return
        live = len(self.metadata.brokers())
        rf = max(1, min(self.config.transaction_state_replication_factor, live))
        error, message = await self.metadata.create_topic(TopicCreation(TOPIC, 1, rf), timeout_ms=2000)
        if error != NONE:
            log.info("creating %s: error %d %s", TOPIC, error, message or "")

    async def find_coordinator(self, request: Any) -> dict[str, Any]:
        body = request.body
        if getattr(body, "key_type", 0) != KEY_TYPE_TRANSACTION:
            return await self._find_group_coordinator(request)
        version = request.api_version
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]
        await self._ensure_state_topic()
        leader = self._state_leader()
        address = self.metadata.brokers().get(leader) if leader is not None else None
        answers = []
        for key in keys:
            if address is None:
                answers.append(
                    {
                        "key": key,
                        "error_code": COORDINATOR_NOT_AVAILABLE,
                        "error_message": None,
                        "node_id": -1,
                        "host": "",
                        "port": -1,
                    }
                )
            else:
                answers.append(
                    {
                        "key": key,
                        "error_code": NONE,
                        "error_message": None,
                        "node_id": address.broker_id,
                        "host": address.host,
                        "port": address.port,
                    }
                )
        if version >= 4:
            return {"coordinators": answers}
        return answers[0]

    # --- making changes durable -----------------------------------------------------------------
    def _lock(self, transactional_id: str) -> asyncio.Lock:
        lock = self._locks.get(transactional_id)
        if lock is None:
            lock = self._locks[transactional_id] = asyncio.Lock()
        return lock

    async def _persist(self, meta: TxnMetadata) -> int:
        """Append the new state to `__transaction_state` (acks=all), then apply it."""
        result = await self.replicas.produce(TOPIC, PARTITION, state_batch(meta), -1, STATE_WRITE_TIMEOUT_MS)
        if result.error != NONE:
            log.warning(
                "transaction %s: state not replicated (error %d)", meta.transactional_id, result.error
            )
            if result.error in (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION):
                return NOT_COORDINATOR
            return COORDINATOR_NOT_AVAILABLE
        if self._is_coordinator():
            self.coordinator.apply(meta)
        return NONE

    async def _carry_out(self, decision: Decision) -> int:
        """Persist a decision's change and start its markers; the error to answer."""
        if decision.new is None:
            return decision.error
        error = await self._persist(decision.new)
        if error != NONE:
            return error
        if decision.markers:
            self._tasks.spawn(self._complete(decision.new))
        return decision.error

    # --- InitProducerId -------------------------------------------------------------------------
    async def init_producer_id(self, request: Any) -> dict[str, Any]:
        body = request.body
        tid = body.transactional_id
        if tid is None:
            return await self._init_idempotent(request)
        answer = {"error_code": NOT_COORDINATOR, "producer_id": -1, "producer_epoch": -1}
        if not self._is_coordinator():
            return answer
        async with self._lock(tid):
            fresh = None
            if self.coordinator.needs_producer_id(tid):
                fresh = await self.metadata.allocate_producer_id()
            if not self._is_coordinator():
                return answer
            decision = self.coordinator.init_producer_id(
                tid,
                millis(body.transaction_timeout),
                getattr(body, "producer_id", -1),
                getattr(body, "producer_epoch", -1),
                fresh,
                self.clock(),
            )
            error = await self._carry_out(decision)
            if error != NONE or decision.new is None:
                return {**answer, "error_code": error}
            return {
                "error_code": NONE,
                "producer_id": decision.new.producer_id,
                "producer_epoch": decision.new.producer_epoch,
            }

    # --- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------
    async def add_partitions_to_txn(self, request: Any) -> dict[str, Any]:
        body = request.body
        if request.api_version <= 3:
            transactions = [
                (
                    body.v3_and_below_transactional_id,
                    body.v3_and_below_producer_id,
                    body.v3_and_below_producer_epoch,
                    False,
                    body.v3_and_below_topics,
                )
            ]
        else:
            transactions = [
                (t.transactional_id, t.producer_id, t.producer_epoch, t.verify_only, t.topics)
                for t in body.transactions
            ]
        results = []
        for tid, pid, epoch, verify_only, topics in transactions:
            wanted = [(t.name, int(i)) for t in topics for i in t.partitions]
            errors = await self._add_partitions(tid, pid, epoch, verify_only, wanted)
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (name, index), error in errors.items():
                by_topic.setdefault(name, []).append(
                    {"partition_index": index, "partition_error_code": error}
                )
            results.append(
                {
                    "transactional_id": tid,
                    "topic_results": [
                        {"name": name, "results_by_partition": parts} for name, parts in by_topic.items()
                    ],
                }
            )
        if request.api_version <= 3:
            return {"results_by_topic_v3_and_below": results[0]["topic_results"]}
        return {"error_code": NONE, "results_by_transaction": results}

    async def _add_partitions(
        self, tid: str, pid: int, epoch: int, verify_only: bool, wanted: list[tuple[str, int]]
    ) -> dict[tuple[str, int], int]:
        if not self._is_coordinator():
            return {key: NOT_COORDINATOR for key in wanted}
        known = self.metadata.topics()
        unknown = {key for key in wanted if key[1] not in known.get(key[0], {})}
        if unknown:  # Kafka answers the unknown ones and OPERATION_NOT_ATTEMPTED for the rest
            return {
                key: UNKNOWN_TOPIC_OR_PARTITION if key in unknown else OPERATION_NOT_ATTEMPTED
                for key in wanted
            }
        async with self._lock(tid):
            if verify_only:
                return {key: self.coordinator.verify(tid, pid, epoch, key) for key in wanted}
            decision = self.coordinator.add_partitions(tid, pid, epoch, frozenset(wanted), self.clock())
            error = await self._carry_out(decision)
        return {key: error for key in wanted}

    async def add_offsets_to_txn(self, request: Any) -> dict[str, Any]:
        body = request.body
        if not self._is_coordinator():
            return {"error_code": NOT_COORDINATOR}
        async with self._lock(body.transactional_id):
            decision = self.coordinator.add_partitions(
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                frozenset(),
                self.clock(),
                groups=frozenset([body.group_id]),
            )
            return {"error_code": await self._carry_out(decision)}

    # --- EndTxn and the markers -----------------------------------------------------------------
    async def end_txn(self, request: Any) -> dict[str, Any]:
        body = request.body
        answer: dict[str, Any] = {"error_code": NOT_COORDINATOR, "producer_id": -1, "producer_epoch": -1}
        if not self._is_coordinator():
            return answer
        async with self._lock(body.transactional_id):
            decision = self.coordinator.end_txn(
                body.transactional_id,
                body.producer_id,
                body.producer_epoch,
                bool(body.committed),
                request.api_version,
            )
            error = await self._carry_out(decision)
        meta = self.coordinator.txns.get(body.transactional_id)
        if error == NONE and meta is not None:
            answer.update(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)
        answer["error_code"] = error
        return answer

    async def _complete(self, meta: TxnMetadata) -> None:
        """Write the prepared transaction's markers everywhere, then record it complete."""
        commit = meta.state is TxnState.PREPARE_COMMIT
        pending: set[tuple[str, int]] = set(meta.partitions)
        if meta.groups:
            pending.add((CONSUMER_OFFSETS, 0))
        coordinator_epoch = self._loaded_epoch if self._loaded_epoch is not None else 0
        while pending:
            if self.coordinator.txns.get(meta.transactional_id) != meta or not self._is_coordinator():
                return  # superseded, or no longer the coordinator (the next one finishes it)
            written = await self._send_markers(meta, commit, coordinator_epoch, sorted(pending))
            pending -= written
            if pending:
                await asyncio.sleep(MARKER_RETRY_S)
        async with self._lock(meta.transactional_id):
            decision = self.coordinator.markers_written(meta.transactional_id, meta.producer_epoch)
            error = await self._carry_out(decision)
        if error != NONE:
            log.warning("transaction %s: completion not recorded (error %d)", meta.transactional_id, error)
        else:
            log.debug("transaction %s %s", meta.transactional_id, "committed" if commit else "aborted")

    async def _send_markers(
        self, meta: TxnMetadata, commit: bool, coordinator_epoch: int, partitions: list[tuple[str, int]]
    ) -> set[tuple[str, int]]:
        """One round of WriteTxnMarkers to the partitions' leaders; the partitions now marked."""
        by_leader: dict[int, list[tuple[str, int]]] = {}
        for topic, index in partitions:
            if topic == CONSUMER_OFFSETS:
                leader = self.groups.coordinator_id()
            else:
                state = self.metadata.partition_state(topic, index)
                leader = state.leader if state is not None else None
            if leader is not None and leader >= 0:
                by_leader.setdefault(leader, []).append((topic, index))
        written: set[tuple[str, int]] = set()
        for leader, keys in by_leader.items():
            topics: dict[str, list[int]] = {}
            for topic, index in keys:
                topics.setdefault(topic, []).append(index)
            marker = {
                "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "transaction_result": commit,
                "coordinator_epoch": coordinator_epoch,
                "topics": [{"name": t, "partition_indexes": idx} for t, idx in topics.items()],
            }
            try:
                results = await self._write_markers_at(leader, marker)
            except (ConnectionClosed, OSError, TimeoutError) as exc:
                log.info("markers for %s to broker %d: %s", meta.transactional_id, leader, exc)
                continue
            written |= {key for key, error in results.items() if error == NONE}
        return written

    async def _write_markers_at(self, broker_id: int, marker: dict[str, Any]) -> dict[tuple[str, int], int]:
        if broker_id == self.config.broker_id:
            return await self._write_marker_locally(
                marker["producer_id"],
                marker["producer_epoch"],
                marker["transaction_result"],
                marker["coordinator_epoch"],
                [(t["name"], i) for t in marker["topics"] for i in t["partition_indexes"]],
            )
        address = self.metadata.brokers().get(broker_id)
        if address is None:
            return {}
        connection = self._connections.get(broker_id)
        if connection is None or (connection.host, connection.port) != (address.host, address.port):
            if connection is not None:
                connection.close()
            connection = BrokerConnection(
                address.host, address.port, f"txn-coordinator-{self.config.broker_id}"
            )
            self._connections[broker_id] = connection
        response = await connection.request(
            API_WRITE_TXN_MARKERS, 1, {"markers": [marker]}, timeout=MARKER_TIMEOUT_MS / 1000 + 2
        )
        return {
            (t.name, int(p.partition_index)): int(p.error_code)
            for m in response.markers
            for t in m.topics
            for p in t.partitions
        }

    # --- WriteTxnMarkers (partition leader side) ------------------------------------------------
    async def write_txn_markers(self, request: Any) -> dict[str, Any]:
        results = []
        for m in request.body.markers:
            keys = [(t.name, int(i)) for t in m.topics for i in t.partition_indexes]
            errors = await self._write_marker_locally(
                m.producer_id, m.producer_epoch, bool(m.transaction_result), m.coordinator_epoch, keys
            )
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (name, index), error in errors.items():
                by_topic.setdefault(name, []).append({"partition_index": index, "error_code": error})
            results.append(
                {
                    "producer_id": m.producer_id,
                    "topics": [{"name": n, "partitions": parts} for n, parts in by_topic.items()],
                }
            )
        return {"markers": results}

    async def _write_marker_locally(
        self,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        coordinator_epoch: int,
        keys: list[tuple[str, int]],
    ) -> dict[tuple[str, int], int]:
        jobs = []
        for topic, index in keys:
            if topic == CONSUMER_OFFSETS:
                jobs.append(self._complete_offsets(producer_id, commit))
            else:
                jobs.append(
                    self.replicas.write_marker(
                        topic,
                        index,
                        producer_id,
                        producer_epoch,
                        commit,
                        coordinator_epoch,
                        MARKER_TIMEOUT_MS,
                    )
                )
        return dict(zip(keys, await asyncio.gather(*jobs), strict=True))

    # --- TxnOffsetCommit (group coordinator side) -----------------------------------------------
    async def txn_offset_commit(self, request: Any) -> dict[str, Any]:
        body = request.body
        coordinator = self.groups.coordinator_id() == self.config.broker_id
        topics = []
        for topic in body.topics:
            parts = []
            for part in topic.partitions:
                if coordinator:
                    offsets = self.pending_offsets.setdefault(body.producer_id, {}).setdefault(
                        body.group_id, {}
                    )
                    offsets[(topic.name, part.partition_index)] = CommittedOffset(
                        part.committed_offset,
                        getattr(part, "committed_leader_epoch", -1),
                        part.committed_metadata,
                    )
                parts.append(
                    {
                        "partition_index": part.partition_index,
                        "error_code": NONE if coordinator else NOT_COORDINATOR,
                    }
                )
            topics.append({"name": topic.name, "partitions": parts})
        return {"topics": topics}

    async def _complete_offsets(self, producer_id: int, commit: bool) -> int:
        """The `__consumer_offsets` marker: store (commit) or drop (abort) the producer's offsets."""
        if self.groups.coordinator_id() != self.config.broker_id:
            return NOT_COORDINATOR
        by_group = self.pending_offsets.pop(producer_id, {})
        if not commit:
            return NONE
        for group_id, offsets in by_group.items():
            self.groups.coordinator.store.commit(group_id, offsets)
            if self.groups.replica is not None:
                try:
                    await self.groups.replica.write(group_id, offsets)
                except Exception as exc:
                    log.warning("group %s: transactional offsets not written to ZooKeeper: %s", group_id, exc)
                    self.pending_offsets.setdefault(producer_id, {})[group_id] = offsets
                    return COORDINATOR_NOT_AVAILABLE
        return NONE

    async def describe_producers(self, request: Any) -> dict[str, Any]:
        """The producers a partition's leader knows, with the first offset of each one's open
        transaction (`kafka-transactions.sh describe-producers`, `find-hanging`)."""
        topics = []
        for topic in request.body.topics:
            parts = []
            for index in topic.partition_indexes:
                partition, error = self.replicas.check_leader(topic.name, index, -1)
                producers = []
                if partition is not None and error == NONE:
                    producers = [
                        {
                            "producer_id": pid,
                            "producer_epoch": epoch,
                            "last_sequence": sequence,
                            "last_timestamp": -1,
                            "coordinator_epoch": -1,
                            "current_txn_start_offset": partition.txns.open.get(pid, -1),
                        }
                        for pid, epoch, sequence in partition.producers.active()
                    ]
                parts.append(
                    {
                        "partition_index": index,
                        "error_code": error,
                        "error_message": None,
                        "active_producers": producers,
                    }
                )
            topics.append({"name": topic.name, "partitions": parts})
        return {"topics": topics}

    # --- DescribeTransactions / ListTransactions (admin tools, kafka-transactions.sh) -------------
    async def describe_transactions(self, request: Any) -> dict[str, Any]:
        coordinator = self._is_coordinator()
        states = []
        for tid in request.body.transactional_ids:
            meta = self.coordinator.txns.get(tid) if coordinator else None
            error = NONE if meta else (TRANSACTIONAL_ID_NOT_FOUND if coordinator else NOT_COORDINATOR)
            topics: dict[str, list[int]] = {}
            for topic, index in sorted(meta.partitions if meta else ()):
                topics.setdefault(topic, []).append(index)
            states.append(
                {
                    "error_code": error,
                    "transactional_id": tid,
                    "transaction_state": meta.state.value if meta else "",
                    "transaction_timeout": meta.timeout_ms if meta else 0,
                    "transaction_start_time": datetime.datetime.fromtimestamp(
                        (meta.started_ms if meta else 0) / 1000.0, datetime.UTC
                    ),
                    "producer_id": meta.producer_id if meta else -1,
                    "producer_epoch": meta.producer_epoch if meta else -1,
                    "topics": [{"topic": t, "partitions": idx} for t, idx in topics.items()],
                }
            )
        return {"transaction_states": states}

    async def list_transactions(self, request: Any) -> dict[str, Any]:
        body = request.body
        if not self._is_coordinator():
            return {"error_code": NONE, "unknown_state_filters": [], "transaction_states": []}
        known = {state.value for state in TxnState}
        wanted = set(body.state_filters or ())
        pids = set(body.producer_id_filters or ())
        now = self.clock()
        min_ms = getattr(body, "duration_filter", -1)
        listed = [
            {
                "transactional_id": m.transactional_id,
                "producer_id": m.producer_id,
                "transaction_state": m.state.value,
            }
            for m in self.coordinator.txns.values()
            if (not wanted or m.state.value in wanted)
            and (not pids or m.producer_id in pids)
            and (min_ms < 0 or now - m.started_ms >= min_ms)
        ]
        return {
            "error_code": NONE,
            "unknown_state_filters": sorted(wanted - known),
            "transaction_states": listed,
        }

    # --- timeouts -------------------------------------------------------------------------------
    async def abort_expired(self) -> None:
        if not self._is_coordinator():
            return
        for meta in self.coordinator.expired(self.clock()):
            async with self._lock(meta.transactional_id):
                current = self.coordinator.txns.get(meta.transactional_id)
                if current is None or current.state is not TxnState.ONGOING:
                    continue
                log.info(
                    "transaction %s timed out after %d ms: aborting", meta.transactional_id, meta.timeout_ms
                )
                await self._carry_out(Decision(NONE, meta, True))

    async def run_timeouts(self) -> None:
        interval = self.config.transaction_abort_check_interval_ms / 1000.0
        while True:
            await asyncio.sleep(interval)
            try:
                await self.abort_expired()
            except Exception:
                log.exception("transaction timeout check failed")

    def close(self) -> None:
        self._tasks.cancel_all()
        for connection in self._connections.values():
            connection.close()


def install(
    handlers: ApiHandlers, config: BrokerConfig, metadata: ClusterMetadata, groups: GroupService
) -> tuple[TxnService, asyncio.Task[None]]:
    """Route the transactional APIs to the service; returns it and its timeout task."""
    service = TxnService(config, handlers, metadata, groups)
    service.install()
    task = asyncio.get_running_loop().create_task(service.run_timeouts())
    return service, task
