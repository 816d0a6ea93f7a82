"""Kafka API handlers: a decoded request in, a response dict (or None for acks=0) out.

Handlers know the ReplicaManager and the ClusterMetadata, never sockets. Responses are dicts
turned into the right kio version by broker.protocol.build_response.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from broker import protocol as p
from broker import wire
from broker.config import BrokerConfig
from broker.errors import BadBrokerConfig
from broker.kafka_errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_PARTITIONS,
    INVALID_REPLICATION_FACTOR,
    INVALID_TOPIC_EXCEPTION,
    LEADER_NOT_AVAILABLE,
    NONE,
    NOT_LEADER_OR_FOLLOWER,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from broker.metadata import (
    ClusterMetadata,
    TopicCreation,
    validate_topic_name,
)
from broker.replica_manager import DEBUG_REPLICA_ID, Partition, ReplicaManager
from broker.transactions.refusal import REFUSALS, Refusal

log = logging.getLogger(__name__)

Handler = Callable[[p.Request], Awaitable[Any]]
ZERO_UUID = uuid.UUID(int=0)
EARLIEST_LOCAL_TIMESTAMP = -4  # ListOffsets v8+ (KIP-405): no tiered storage, so the log start
LATEST_TIERED_TIMESTAMP = -5  # ListOffsets v9+ (KIP-1005): nothing is tiered, so offset -1
READ_COMMITTED = 1  # Fetch's isolation level (KIP-98)


async def _refuse(refusal: Refusal, request: p.Request) -> dict[str, Any]:
    log.info(
        "refused %s v%d: not offered (unsupported.apis)", p.api_name(request.api_key), request.api_version
    )
    return refusal(request.body, request.api_version)


def millis(value: Any) -> int:
    """kio hands durations over as timedelta; the wire has milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


class ApiHandlers:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, metadata: ClusterMetadata) -> None:
        self.config = config
        self.replicas = replicas
        self.metadata = metadata
        self._handlers: dict[int, Handler] = {
            p.API_PRODUCE: self.produce,
            p.API_FETCH: self.fetch,
            p.API_LIST_OFFSETS: self.list_offsets,
            p.API_METADATA: self.metadata_request,
            p.API_API_VERSIONS: self.api_versions,
            p.API_CREATE_TOPICS: self.create_topics,
            p.API_INIT_PRODUCER_ID: self.init_producer_id,
            p.API_OFFSET_FOR_LEADER_EPOCH: self.offset_for_leader_epoch,
        }
        # What ApiVersions offers: each API with a handler, in its range (broker.protocol.VERSIONS).
        self.versions: dict[int, tuple[int, int]] = {key: p.VERSIONS[key] for key in self._handlers}
        # Withdrawn APIs still answered, with their error response (`withdraw`): not offered.
        self.refused: dict[int, tuple[int, int]] = {}

    def register(self, api_key: int, handler: Handler) -> None:
        """Extra APIs (the group and transaction coordinators) plug in here, offered in their range."""
        self.versions[api_key] = p.VERSIONS[api_key]
        self._handlers[api_key] = handler

    def intercept(self, api_key: int, wrap: Callable[[Handler], Handler]) -> None:
        """Put `wrap(handler)` in place of the API's handler (broker.shared_identity), if offered."""
        handler = self._handlers.get(api_key)
        if handler is not None and api_key in self.versions:
            self._handlers[api_key] = wrap(handler)

    def withdraw(self, names: tuple[str, ...]) -> None:
        """Leave out the APIs named (`unsupported.apis`): not offered in ApiVersions. A request for a
        transactional one is answered with its error response (UNSUPPORTED_VERSION, on a connection
        that stays open, broker.transactions.refusal); for any other the connection closes."""
        keys = {name: key for key, name in p.API_NAMES.items() if key != p.API_API_VERSIONS}
        unknown = [name for name in names if name not in keys]
        if unknown:
            raise BadBrokerConfig(
                f"unsupported.apis: unknown API {', '.join(unknown)} (known: {', '.join(sorted(keys))})"
            )
        for name in names:
            key = keys[name]
            versions = self.versions.pop(key, None)
            self._handlers.pop(key, None)
            refusal = REFUSALS.get(key)
            if refusal is not None and versions is not None:
                self.refused[key] = versions
                self._handlers[key] = functools.partial(_refuse, refusal)

    @property
    def accepted(self) -> dict[int, tuple[int, int]]:
        """The versions a request may have to be read: those offered and those refused."""
        return {**self.versions, **self.refused}

    def deny(self, names: tuple[str, ...]) -> None:
        """Keep offering the APIs named (`denied.apis`) but answer each request with an
        authorization error, as Kafka answers a principal without the ACL: InitProducerId gets
        CLUSTER_AUTHORIZATION_FAILED (TRANSACTIONAL_ID_AUTHORIZATION_FAILED with a transactional
        id), so an idempotent producer cannot start."""
        deniable = {p.API_NAMES[p.API_INIT_PRODUCER_ID]: (p.API_INIT_PRODUCER_ID, self._deny_producer_id)}
        unknown = [name for name in names if name not in deniable]
        if unknown:
            raise BadBrokerConfig(
                f"denied.apis: cannot deny {', '.join(unknown)} (deniable: {', '.join(deniable)}; "
                "unsupported.apis leaves any API out)"
            )
        for name in names:
            key, handler = deniable[name]
            self._handlers[key] = handler

    async def _deny_producer_id(self, request: p.Request) -> dict[str, Any]:
        transactional = getattr(request.body, "transactional_id", None) is not None
        error = TRANSACTIONAL_ID_AUTHORIZATION_FAILED if transactional else CLUSTER_AUTHORIZATION_FAILED
        return {"error_code": error, "producer_id": -1, "producer_epoch": -1}

    async def handle(self, request: p.Request) -> Any:
        """Returns the response body (a kio dataclass) or None when no response is due."""
        data = await self._handlers[request.api_key](request)
        if data is None:
            return None
        if isinstance(data, dict):
            return p.build_response(request.api_key, request.api_version, data)
        return data

    async def respond(self, request: p.Request) -> bytes | None:
        """The whole response frame (or None for acks=0): hot APIs through broker.wire, others kio."""
        data = await self._handlers[request.api_key](request)
        if data is None:
            return None
        if isinstance(data, dict):
            frame = wire.encode_response(request.api_key, request.api_version, request.correlation_id, data)
            if frame is not None:
                return frame
            data = p.build_response(request.api_key, request.api_version, data)
        return p.encode_response(request.api_key, request.api_version, request.correlation_id, data)

    def _check_leader(
        self, topic: str, index: int, current_leader_epoch: int
    ) -> tuple[Partition | None, int]:
        partition, error = self.replicas.check_leader(topic, index, current_leader_epoch)
        if error == UNKNOWN_TOPIC_OR_PARTITION and index in self.metadata.topics().get(topic, {}):
            error = NOT_LEADER_OR_FOLLOWER  # it exists, just not here: clients refresh metadata
        return partition, error

    # --- ApiVersions ----------------------------------------------------------------------------
    async def api_versions(self, request: p.Request) -> dict[str, Any]:
        return {
            "error_code": NONE,
            "api_keys": [
                {"api_key": key, "min_version": low, "max_version": high}
                for key, (low, high) in p.advertised_versions(self.versions).items()
            ],
        }

    # --- Metadata -------------------------------------------------------------------------------
    async def metadata_request(self, request: p.Request) -> dict[str, Any]:
        body = request.body
        all_topics = self.metadata.topics()
        unknown_ids: list[uuid.UUID] = []
        if body.topics is None or (request.api_version == 0 and not body.topics):
            names = sorted(all_topics)
        else:
            names = []
            for t in body.topics:
                if t.name is not None:
                    names.append(t.name)
                    continue
                # v10+ may name a topic by its id alone (KIP-516)
                topic_id = getattr(t, "topic_id", None)
                name = self.metadata.topic_name(topic_id) if topic_id else None
                if name is None:
                    unknown_ids.append(topic_id or ZERO_UUID)
                else:
                    names.append(name)
        auto_create = self.config.auto_create_topics and getattr(body, "allow_auto_topic_creation", True)
        topics = []
        for name in names:
            if name not in all_topics and auto_create and validate_topic_name(name) is None:
                await self.metadata.create_topic(
                    TopicCreation(name, self.config.num_partitions, self.config.default_replication_factor),
                    timeout_ms=2000,
                )
                all_topics = self.metadata.topics()
            topics.append(self._topic_metadata(name, all_topics.get(name)))
        for topic_id in unknown_ids:
            topics.append(
                {"error_code": UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id, "partitions": []}
            )
        brokers = self.metadata.brokers()
        return {
            "brokers": [
                {"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": None}
                for b in brokers.values()
            ],
            "cluster_id": self.metadata.cluster_id(),
            "controller_id": self.metadata.controller_id(),
            "topics": topics,
        }

    def _topic_metadata(self, name: str, assignment: dict[int, tuple[int, ...]] | None) -> dict[str, Any]:
        if assignment is None:
            return {
                "error_code": UNKNOWN_TOPIC_OR_PARTITION,
                "name": name,
                "topic_id": ZERO_UUID,
                "partitions": [],
            }
        live = self.metadata.brokers()
        partitions = []
        for index, replicas in sorted(assignment.items()):
            state = self.metadata.partition_state(name, index)
            if state is None or state.leader < 0 or state.leader not in live:
                error, leader, epoch, isr = (
                    LEADER_NOT_AVAILABLE,
                    -1,
                    state.leader_epoch if state else -1,
                    state.isr if state else (),
                )
            else:
                error, leader, epoch, isr = NONE, state.leader, state.leader_epoch, state.isr
            partitions.append(
                {
                    "error_code": error,
                    "partition_index": index,
                    "leader_id": leader,
                    "leader_epoch": epoch,
                    "replica_nodes": list(replicas),
                    "isr_nodes": list(isr),
                    "offline_replicas": [r for r in replicas if r not in live],
                }
            )
        return {
            "error_code": NONE,
            "name": name,
            "topic_id": self.metadata.topic_id(name),
            "is_internal": False,
            "partitions": partitions,
            "topic_authorized_operations": -2147483648,
        }

    # --- CreateTopics ---------------------------------------------------------------------------
    async def create_topics(self, request: p.Request) -> dict[str, Any]:
        body = request.body
        timeout = millis(body.timeout)
        results = []
        jobs = []
        for topic in body.topics:
            jobs.append(self._create_one(topic, timeout, getattr(body, "validate_only", False)))
        for topic, (error, message, partitions, rf) in zip(
            body.topics, await asyncio.gather(*jobs), strict=True
        ):
            results.append(
                {
                    "name": topic.name,
                    "topic_id": self.metadata.topic_id(topic.name),
                    "error_code": error,
                    "error_message": message,
                    "num_partitions": partitions,
                    "replication_factor": rf,
                    "configs": [],
                }
            )
        return {"topics": results}

    async def _create_one(
        self, topic: Any, timeout_ms: int, validate_only: bool
    ) -> tuple[int, str | None, int, int]:
        problem = validate_topic_name(topic.name)
        if problem:
            return INVALID_TOPIC_EXCEPTION, problem, -1, -1
        assignment = None
        if topic.assignments:
            assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
            partitions = len(assignment)
            rf = len(next(iter(assignment.values())))
        else:
            partitions = topic.num_partitions if topic.num_partitions != -1 else self.config.num_partitions
            rf = (
                topic.replication_factor
                if topic.replication_factor != -1
                else self.config.default_replication_factor
            )
        if partitions <= 0:
            return INVALID_PARTITIONS, "Number of partitions must be larger than 0.", -1, -1
        if rf <= 0:
            return INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.", -1, -1
        if validate_only:
            return NONE, None, partitions, rf
        error, message = await self.metadata.create_topic(
            TopicCreation(topic.name, partitions, rf, assignment), timeout_ms
        )
        return error, message, partitions, rf

    # --- InitProducerId -------------------------------------------------------------------------
    async def init_producer_id(self, request: p.Request) -> dict[str, Any]:
        body = request.body
        if body.transactional_id is not None:
            # no transactions: the coordinator a transactional producer needs does not exist here
            return {
                "error_code": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "producer_id": -1,
                "producer_epoch": -1,
            }
        old_id = getattr(body, "producer_id", -1)
        old_epoch = getattr(body, "producer_epoch", -1)
        if old_id >= 0 and 0 <= old_epoch < 32766:
            return {"error_code": NONE, "producer_id": old_id, "producer_epoch": old_epoch + 1}
        producer_id = await self.metadata.allocate_producer_id()
        return {"error_code": NONE, "producer_id": producer_id, "producer_epoch": 0}

    # --- Produce --------------------------------------------------------------------------------
    async def produce(self, request: p.Request) -> dict[str, Any] | None:
        body = request.body
        acks = body.acks
        timeout = millis(body.timeout)
        jobs = []
        keys: list[tuple[str | None, uuid.UUID, int]] = []
        by_id = request.api_version >= wire.PRODUCE_TOPIC_IDS
        for topic in body.topic_data:
            name, topic_id = self._topic_key(topic, "name", by_id)
            for part in topic.partition_data:
                keys.append((name, topic_id, part.index))
                if name is not None:
                    jobs.append(self.replicas.produce(name, part.index, part.records, acks, timeout))
        results = iter(await asyncio.gather(*jobs))
        if acks == 0:
            return None
        by_topic: dict[tuple[str | None, uuid.UUID], list[dict[str, Any]]] = {}
        for name, topic_id, index in keys:
            entry: dict[str, Any] = {"index": index, "record_errors": []}
            if name is None:
                entry.update(error_code=UNKNOWN_TOPIC_ID, base_offset=-1, log_start_offset=-1)
            else:
                result = next(results)
                if result.error == UNKNOWN_TOPIC_OR_PARTITION and index in self.metadata.topics().get(
                    name, {}
                ):
                    result.error = NOT_LEADER_OR_FOLLOWER
                entry.update(
                    error_code=result.error,
                    base_offset=result.base_offset,
                    log_start_offset=result.log_start_offset,
                )
            by_topic.setdefault((name, topic_id), []).append(entry)
        return {
            "responses": [
                {"name": name or "", "topic_id": topic_id, "partition_responses": parts}
                for (name, topic_id), parts in by_topic.items()
            ]
        }

    def _topic_key(self, topic: Any, name_field: str, by_id: bool) -> tuple[str | None, uuid.UUID]:
        """(name, id) of a request's topic entry; the name is None for an id this broker does not know."""
        if by_id:
            topic_id = topic.topic_id or ZERO_UUID
            return self.metadata.topic_name(topic_id), topic_id
        name = getattr(topic, name_field)
        return name, self.metadata.topic_id(name)

    # --- Fetch ----------------------------------------------------------------------------------
    async def fetch(self, request: p.Request) -> dict[str, Any]:
        body = request.body
        # v15+ (KIP-903): the follower's id moved into the tagged ReplicaState
        replica_id = (
            body.replica_state.replica_id
            if request.api_version >= wire.FETCH_REPLICA_STATE
            else body.replica_id
        )
        max_wait = millis(body.max_wait) / 1000.0
        max_bytes = body.max_bytes
        by_id = request.api_version >= wire.FETCH_TOPIC_IDS
        topics = [(self._topic_key(topic, "topic", by_id), topic.partitions) for topic in body.topics]
        watched: list[tuple[Partition, int, int]] = []
        committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
        result, found = self._fetch_once(topics, replica_id, max_bytes, watched, committed)
        if found < body.min_bytes and max_wait > 0 and not self._has_error(result):
            # Park until the HW (consumer) or log end (follower) passes a fetch offset with
            # enough bytes below it, a partition's state changes, or max_wait passes: no log
            # reads meanwhile, one read when it completes.
            parked = self.replicas.park_fetch(watched, replica_id >= 0, body.min_bytes, max_wait)
            try:
                await parked.future
            finally:
                self.replicas.unpark(parked)
            result, _ = self._fetch_once(topics, replica_id, max_bytes, None, committed)
        return {"error_code": NONE, "session_id": 0, "responses": result}

    @staticmethod
    def _has_error(result: list[dict[str, Any]]) -> bool:
        return any(part["error_code"] != NONE for topic in result for part in topic["partitions"])

    def _fetch_once(
        self,
        topics: list[tuple[tuple[str | None, uuid.UUID], Any]],
        replica_id: int,
        max_bytes: int,
        watched: list[tuple[Partition, int, int]] | None,
        read_committed: bool = False,
    ) -> tuple[list[dict[str, Any]], int]:
        """Read every partition once; `watched` collects (partition, fetch offset, bytes read).

        Reading committed (isolation level 1), a consumer gets records below the last stable offset
        and the aborted transactions among them, whose records it drops itself (KIP-98)."""
        total = 0
        responses = []
        for (name, topic_id), requested in topics:
            parts = []
            for req in requested:
                if name is None:
                    partition, error = None, UNKNOWN_TOPIC_ID
                else:
                    epoch = getattr(req, "current_leader_epoch", -1)
                    partition, error = self._check_leader(name, req.partition, epoch)
                entry: dict[str, Any] = {
                    "partition_index": req.partition,
                    "error_code": error,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    # Kafka sends an empty record set with an error, never null: librdkafka's
                    # parser refuses a null one (a protocol error for the whole response)
                    "records": b"",
                }
                if partition is not None and error == NONE:
                    room = max(0, max_bytes - total)
                    limit = min(req.partition_max_bytes, room) if total else req.partition_max_bytes
                    if limit > 0 or total == 0:
                        error, records = self.replicas.read(
                            partition, replica_id, req.fetch_offset, max(limit, 1), read_committed
                        )
                    else:
                        error, records = NONE, b""
                    total += len(records)
                    hw = partition.replica.high_watermark
                    lso = partition.last_stable_offset()
                    entry.update(
                        error_code=error,
                        high_watermark=hw,
                        last_stable_offset=lso,
                        log_start_offset=partition.log.log_start_offset,
                        records=records,
                    )
                    if read_committed and records:
                        entry["aborted_transactions"] = [
                            {"producer_id": a.producer_id, "first_offset": a.first_offset}
                            for a in partition.txns.aborted_between(req.fetch_offset, lso)
                        ]
                    if watched is not None:
                        watched.append((partition, req.fetch_offset, len(records)))
                parts.append(entry)
            responses.append({"topic": name or "", "topic_id": topic_id, "partitions": parts})
        return responses, total

    # --- ListOffsets ----------------------------------------------------------------------------
    async def list_offsets(self, request: p.Request) -> dict[str, Any]:
        body = request.body
        replica_id = body.replica_id
        topics = []
        for topic in body.topics:
            parts = []
            for req in topic.partitions:
                epoch = getattr(req, "current_leader_epoch", -1)
                partition, error = self._check_leader(topic.name, req.partition_index, epoch)
                if replica_id == DEBUG_REPLICA_ID and partition is not None:
                    error = NONE  # the controller's longest-log query may ask any replica
                entry: dict[str, Any] = {
                    "partition_index": req.partition_index,
                    "error_code": error,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                if partition is not None and error == NONE:
                    plog = partition.log
                    if req.timestamp in (-2, EARLIEST_LOCAL_TIMESTAMP):
                        offset = plog.log_start_offset
                    elif req.timestamp == LATEST_TIERED_TIMESTAMP:
                        offset = -1
                    elif req.timestamp == -1 or req.timestamp == -3:
                        if replica_id != -1:
                            offset = plog.log_end_offset
                        elif getattr(body, "isolation_level", 0) == READ_COMMITTED:
                            offset = partition.last_stable_offset()
                        else:
                            offset = partition.replica.high_watermark
                    else:
                        offset = self._offset_for_time(partition, req.timestamp)
                    entry.update(offset=offset, leader_epoch=partition.replica.leader_epoch)
                parts.append(entry)
            topics.append({"name": topic.name, "partitions": parts})
        return {"topics": topics}

    @staticmethod
    def _offset_for_time(partition: Partition, timestamp: int) -> int:
        """The first offset whose batch max timestamp is >= timestamp (batch granularity), or -1."""
        from broker.storage import parse_batches

        offset = partition.log.log_start_offset
        hw = partition.replica.high_watermark
        while offset < hw:
            data = partition.log.read(offset, 1024 * 1024, hw)
            headers = parse_batches(data, check_crc=False, allow_partial_tail=True) if data else []
            if not headers:
                break
            for h in headers:
                if h.max_timestamp >= timestamp:
                    return max(h.base_offset, partition.log.log_start_offset)
            offset = headers[-1].last_offset + 1
        return -1

    # --- OffsetForLeaderEpoch -------------------------------------------------------------------
    async def offset_for_leader_epoch(self, request: p.Request) -> dict[str, Any]:
        body = request.body
        topics = []
        for topic in body.topics:
            parts = []
            for req in topic.partitions:
                partition, error = self._check_leader(topic.topic, req.partition, req.current_leader_epoch)
                entry: dict[str, Any] = {
                    "partition": req.partition,
                    "error_code": error,
                    "leader_epoch": -1,
                    "end_offset": -1,
                }
                if partition is not None and error == NONE:
                    epoch, end = partition.log.epochs.end_offset_for(req.leader_epoch)
                    entry.update(leader_epoch=epoch, end_offset=end)
                parts.append(entry)
            topics.append({"topic": topic.topic, "partitions": parts})
        return {"topics": topics}
