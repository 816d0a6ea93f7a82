"""Serving partitions and groups this broker does not lead by passing the request on to the broker
that does: what lets a broker claim every partition (broker.shared_identity) while Kafka's
replication keeps running underneath.

A Produce, Fetch, ListOffsets or OffsetForLeaderEpoch is split by each partition's real leader:
this broker serves its own share, sends every other share (the client's request cut down to those
partitions, in the client's version) to its leader over a broker connection, and merges the
answers into one response. A group or transaction request goes whole to the real coordinator.
Whatever the real leader answers (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, NOT_COORDINATOR, ...)
is passed on as it is, so clients retry as they would against Kafka. A leader that cannot be
reached answers NOT_LEADER_OR_FOLLOWER for its partitions, and one that coordinates answers
COORDINATOR_NOT_AVAILABLE (for each partition of an offset commit: an answer without an error
would read as a commit that happened).

A request passed on carries FORWARDED as its client id and is served by the broker it reaches,
whatever that broker believes about leadership: one hop at most. Requests between brokers
(replica fetches, the controller's, transaction markers) are never passed on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from broker import protocol as p
from broker.client import BrokerConnection, ConnectionClosed
from broker.handlers import ZERO_UUID, Handler, millis
from broker.kafka_errors import COORDINATOR_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER
from broker.metadata import BrokerAddress, ClusterMetadata

log = logging.getLogger(__name__)

FORWARDED = "strandline-forwarded"
INTERNAL_CLIENTS = (FORWARDED, "replica-fetcher-", "controller-", "txn-coordinator-")
IDLE_CONNECTIONS = 8  # per peer, kept for the next request; more are opened while many are in flight
SLACK_SECONDS = 10.0  # beyond the request's own wait (Fetch max_wait, Produce timeout)


@dataclass(frozen=True, slots=True)
class PartitionApi:
    """Where one API keeps its topics and partitions, in the request and in the response, and what
    a partition's answer holds besides its error (for a leader that cannot be reached)."""

    topics: str  # the request's list of topics
    name: str  # a topic's name field (before topic ids)
    partitions: str  # a request topic's list of partitions
    index: str  # a request partition's index field
    answers: str  # the response's list of topics
    answer_name: str
    answer_partitions: str
    answer_index: str
    unanswered: dict[str, Any]


PARTITION_APIS: dict[int, PartitionApi] = {
    p.API_PRODUCE: PartitionApi(
        "topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses", "index",
        {"base_offset": -1, "log_start_offset": -1, "record_errors": []},
    ),
    p.API_FETCH: PartitionApi(
        "topics", "topic", "partitions", "partition", "responses", "topic", "partitions", "partition_index",
        {"high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1, "records": b""},
    ),
    p.API_LIST_OFFSETS: PartitionApi(
        "topics", "name", "partitions", "partition_index", "topics", "name", "partitions", "partition_index",
        {"timestamp": -1, "offset": -1, "leader_epoch": -1},
    ),
    p.API_OFFSET_FOR_LEADER_EPOCH: PartitionApi(
        "topics", "topic", "partitions", "partition", "topics", "topic", "partitions", "partition",
        {"leader_epoch": -1, "end_offset": -1},
    ),
}  # fmt: skip

LOCAL = -1  # the share this broker serves itself


def internal(request: p.Request) -> bool:
    """A request from another broker (or passed on by one): served here, never passed on."""
    return (request.client_id or "").startswith(INTERNAL_CLIENTS)


def _wait_seconds(request: p.Request) -> float:
    """How long the peer may take: the request's own wait plus slack."""
    body = request.body
    if request.api_key == p.API_FETCH:
        return millis(body.max_wait) / 1000.0 + SLACK_SECONDS
    if request.api_key == p.API_PRODUCE:
        return millis(body.timeout) / 1000.0 + SLACK_SECONDS
    if request.api_key == p.API_JOIN_GROUP:  # waits for the rebalance
        return millis(getattr(body, "rebalance_timeout", body.session_timeout)) / 1000.0 + SLACK_SECONDS
    return SLACK_SECONDS * 3


class Peers:
    """Connections to the other brokers for requests passed on. Produce requests to one broker
    share one connection, taken in the order they arrived (asyncio's lock is first come, first
    served): a client's pipelined writes to a partition reach its leader in the client's order, as
    Kafka's per-connection ordering promises (an idempotent producer's sequence numbers count on
    it). Everything else takes an idle connection or a new one (a few are kept per broker), so a
    parked Fetch never holds up another request."""

    def __init__(self) -> None:
        self._idle: dict[tuple[str, int], list[BrokerConnection]] = defaultdict(list)
        self._produce: dict[tuple[str, int], BrokerConnection] = {}

    async def request(self, address: BrokerAddress, request: p.Request, body: Any) -> Any:
        """The peer's response, or None when the request has none (acks=0); ConnectionClosed when
        the peer cannot be reached or does not answer in time."""
        key = (address.host, address.port)
        produce = request.api_key == p.API_PRODUCE
        idle = self._idle[key]
        if produce:
            connection = self._produce.setdefault(
                key, BrokerConnection(address.host, address.port, FORWARDED)
            )
        else:
            connection = idle.pop() if idle else BrokerConnection(address.host, address.port, FORWARDED)
        try:
            if produce and body.acks == 0:
                await connection.send(request.api_key, request.api_version, body)
                response = None
            else:
                response = await connection.request(
                    request.api_key, request.api_version, body, timeout=_wait_seconds(request)
                )
        except (OSError, TimeoutError) as exc:
            connection.close()  # the produce connection opens again with its next request
            raise ConnectionClosed(f"{address.host}:{address.port}: {exc!r}") from None
        except BaseException:
            connection.close()
            raise
        if not produce:
            if len(idle) < IDLE_CONNECTIONS:
                idle.append(connection)
            else:
                connection.close()
        return response

    def close(self) -> None:
        for connections in [*self._idle.values(), list(self._produce.values())]:
            for connection in connections:
                connection.close()
        self._idle.clear()
        self._produce.clear()


class Forwarder:
    """Wraps a broker's handlers so that requests for what another broker leads or coordinates are
    passed on to it (see the module docstring). `coordinators` gives, per API key, the id of the
    broker that coordinates it (None: unknown, served here)."""

    def __init__(
        self,
        broker_id: int,
        metadata: ClusterMetadata,
        coordinators: dict[int, Callable[[p.Request], int | None]],
    ) -> None:
        self.broker_id = broker_id
        self.metadata = metadata
        self.coordinators = coordinators
        self.peers = Peers()

    def wrap(self, api_key: int, local: Handler) -> Handler:
        """The handler for `api_key` that serves here what is here and passes on the rest."""
        api = PARTITION_APIS.get(api_key)
        if api is not None:

            async def by_leader(request: p.Request) -> Any:
                if internal(request):
                    return await local(request)
                return await self._split(api, request, local)

            return by_leader
        coordinator = self.coordinators[api_key]

        async def to_coordinator(request: p.Request) -> Any:
            target = None if internal(request) else self._peer(coordinator(request))
            if target is None:
                return await local(request)
            try:
                return await self.peers.request(target, request, request.body)
            except ConnectionClosed as exc:
                answer = _coordinator_unavailable(request)
                if answer is None:
                    raise  # the client's connection closes: it asks for the coordinator again
                log.info("%s: coordinator unreachable: %s", p.api_name(request.api_key), exc)
                return answer

        return to_coordinator

    def _peer(self, broker_id: int | None) -> BrokerAddress | None:
        """The address of another live broker, or None: this broker, or nobody known."""
        if broker_id is None or broker_id == self.broker_id:
            return None
        return self.metadata.brokers().get(broker_id)

    def _leader(self, api: PartitionApi, topic: Any, index: int) -> int:
        """The broker id that really leads the partition, or LOCAL (here, unknown, or none: the
        local handler then answers with the error Kafka gives)."""
        name = getattr(topic, api.name, None)
        if name is None:  # topic ids (KIP-516)
            name = self.metadata.topic_name(getattr(topic, "topic_id", None) or ZERO_UUID)
        state = self.metadata.partition_state(name, index) if name is not None else None
        if state is None or state.leader < 0 or self._peer(state.leader) is None:
            return LOCAL
        return state.leader

    async def _split(self, api: PartitionApi, request: p.Request, local: Handler) -> Any:
        request = _unfenced(api, request)
        shares: dict[int, dict[int, tuple[Any, list[Any]]]] = defaultdict(dict)
        for position, topic in enumerate(getattr(request.body, api.topics)):
            for part in getattr(topic, api.partitions):
                leader = self._leader(api, topic, getattr(part, api.index))
                shares[leader].setdefault(position, (topic, []))[1].append(part)
        if set(shares) <= {LOCAL}:
            return await local(request)
        jobs = [self._serve_share(api, request, leader, share, local) for leader, share in shares.items()]
        answers = [answer for answer in await asyncio.gather(*jobs) if answer is not None]
        if not answers:  # acks=0
            return None
        first = getattr(request.body, api.topics)[0]
        by_id = not any(f.name == api.name for f in dataclasses.fields(first))
        return _merge(api, by_id, answers)

    async def _serve_share(
        self,
        api: PartitionApi,
        request: p.Request,
        leader: int,
        share: dict[int, tuple[Any, list[Any]]],
        local: Handler,
    ) -> dict[str, Any] | None:
        """One leader's share of the request, answered as a response dict (None: acks=0). Dicts,
        not kio objects: the merged Produce and Fetch answers go out through broker.wire, as the
        broker's own do (kio would write default-less tagged fields librdkafka cannot read)."""
        topics = tuple(
            dataclasses.replace(topic, **{api.partitions: tuple(parts)}) for topic, parts in share.values()
        )
        body = dataclasses.replace(request.body, **{api.topics: topics})
        if leader == LOCAL:
            data = await local(p.Request(request.api_key, request.api_version, request.correlation_id,
                                         request.client_id, body))  # fmt: skip
            return data if data is None or isinstance(data, dict) else dataclasses.asdict(data)
        address = self.metadata.brokers().get(leader)
        try:
            if address is None:
                raise ConnectionClosed(f"broker {leader} left")
            answer = await self.peers.request(address, request, body)
            return None if answer is None else dataclasses.asdict(answer)
        except ConnectionClosed:
            if request.api_key == p.API_PRODUCE and request.body.acks == 0:
                return None
            return _unanswered(api, topics)


def _coordinator_unavailable(request: p.Request) -> dict[str, Any] | None:
    """The answer to a request whose coordinator cannot be reached: COORDINATOR_NOT_AVAILABLE for
    the whole request, or for each of its partitions (offset commits) or groups (OffsetFetch v8+),
    so the client finds the coordinator again and retries. None where no such answer can be given
    (AddPartitionsToTxn: its v4+ error is for brokers' batches): the connection is closed."""
    body = request.body
    if request.api_key in (p.API_OFFSET_COMMIT, p.API_TXN_OFFSET_COMMIT):
        return {"topics": [{"name": topic.name, "partitions": [
            {"partition_index": part.partition_index, "error_code": COORDINATOR_NOT_AVAILABLE}
            for part in topic.partitions]} for topic in body.topics]}  # fmt: skip
    if request.api_key == p.API_OFFSET_FETCH and request.api_version >= 8:
        return {"groups": [{"group_id": group.group_id, "topics": [], "error_code": COORDINATOR_NOT_AVAILABLE}
                           for group in body.groups]}  # fmt: skip
    cls = p.response_class(request.api_key, request.api_version)
    if request.api_key == p.API_ADD_PARTITIONS_TO_TXN or not any(
        f.name == "error_code" for f in dataclasses.fields(cls)
    ):
        return None
    return {"error_code": COORDINATOR_NOT_AVAILABLE}


def _unfenced(api: PartitionApi, request: p.Request) -> p.Request:
    """The request with every partition's current_leader_epoch -1 (no fencing by epoch): Metadata
    under the shared id names no epochs, yet clients pick epochs up elsewhere (librdkafka from a
    ListOffsets answer) and, with one id for every leader, would stay fenced by an epoch that is no
    longer any leader's. Leadership is still checked by the real leader."""
    topics = []
    changed = False
    for topic in getattr(request.body, api.topics):
        parts = []
        for part in getattr(topic, api.partitions):
            if getattr(part, "current_leader_epoch", -1) != -1:
                part = dataclasses.replace(part, current_leader_epoch=-1)
                changed = True
            parts.append(part)
        topics.append(dataclasses.replace(topic, **{api.partitions: tuple(parts)}))
    if not changed:
        return request
    body = dataclasses.replace(request.body, **{api.topics: tuple(topics)})
    return p.Request(request.api_key, request.api_version, request.correlation_id, request.client_id, body)


def _unanswered(api: PartitionApi, topics: tuple[Any, ...]) -> dict[str, Any]:
    """NOT_LEADER_OR_FOLLOWER for every partition of a share whose leader did not answer: the
    client refreshes its metadata and tries again."""
    answers = []
    for topic in topics:
        parts = [
            {
                api.answer_index: getattr(part, api.index),
                "error_code": NOT_LEADER_OR_FOLLOWER,
                **api.unanswered,
            }
            for part in getattr(topic, api.partitions)
        ]
        answers.append(
            {
                api.answer_name: getattr(topic, api.name, None) or "",
                "topic_id": getattr(topic, "topic_id", None),
                api.answer_partitions: parts,
            }
        )
    return {api.answers: answers}


def _merge(api: PartitionApi, by_id: bool, answers: list[dict[str, Any]]) -> dict[str, Any]:
    """One response from the shares' responses: each topic once (by id where the version names
    topics by id), with the partitions of all."""
    merged: dict[Any, dict[str, Any]] = {}
    for answer in answers:
        for topic in answer[api.answers]:
            key = topic.get("topic_id") if by_id else topic.get(api.answer_name)
            if key in merged:
                merged[key][api.answer_partitions] = [
                    *merged[key][api.answer_partitions],
                    *topic[api.answer_partitions],
                ]
            else:
                merged[key] = dict(topic)
    return {**answers[0], api.answers: list(merged.values())}
