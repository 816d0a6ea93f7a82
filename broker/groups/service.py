"""The group APIs of the broker: kio requests in, response dicts out, answered by the coordinator.

`GroupService` turns each request into a call of the sans-IO `GroupCoordinator`
(`broker.groups.coordinator`) and awaits its completion; this broker answers NOT_COORDINATOR unless
it is the live broker with the lowest id (`coordinator_id`). `install` wires it into the broker's
request dispatcher and timers.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.config import BrokerConfig
from broker.groups.coordinator import (
    Completion,
    FetchedOffset,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    LeaveResult,
    SyncRequest,
    SyncResult,
)
from broker.handlers import ApiHandlers
from broker.kafka_errors import COORDINATOR_NOT_AVAILABLE, NONE, NOT_COORDINATOR
from broker.metadata import ClusterMetadata
from broker.storage.group_offsets import CommittedOffset
from broker.zk_offsets import ZkOffsets

log = logging.getLogger(__name__)


def _millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


# Apache Kafka 4.1's ranges (docs/broker-protocol.md). OffsetCommit/OffsetFetch v10 (topics by id)
# were still unstable in 4.1, not listed by its brokers; v9 answers classic groups as v8 does.
GROUP_API_VERSIONS: dict[int, tuple[int, int]] = {
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
}
TICK_SECONDS = 0.1


class GroupService:
    """Answers the group APIs for the broker: NOT_COORDINATOR unless this broker is the coordinator."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        broker_id: int,
        brokers: Callable[[], dict[int, Any]],
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id
        self._brokers = brokers
        self._clock = clock
        self._was_coordinator = False
        # Where committed offsets are replicated (broker.zk_offsets), in ZooKeeper mode.
        self.replica: ZkOffsets | None = None

    def now(self) -> float:
        if self._clock is not None:
            return self._clock()
        return asyncio.get_running_loop().time() * 1000.0

    def coordinator_id(self) -> int | None:
        """The live broker with the lowest id coordinates every group (all brokers agree on it)."""
        live = self._brokers()
        return min(live) if live else None

    def _is_coordinator(self) -> bool:
        mine = self.coordinator_id() == self.broker_id
        if self._was_coordinator and not mine:
            if self.coordinator.groups:
                log.info("broker %d is no longer the group coordinator; unloading groups", self.broker_id)
            self._resolve(self.coordinator.unload())
        self._was_coordinator = mine
        return mine

    @staticmethod
    def _resolve(completions: list[Completion]) -> None:
        for token, result in completions:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(result)

    async def _wait(self, start: Callable[[asyncio.Future[Any]], list[Completion]]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._resolve(start(future))
        return await future

    def tick(self) -> None:
        if self._is_coordinator():
            self._resolve(self.coordinator.tick(self.now()))

    async def run_ticks(self) -> None:
        while True:
            await asyncio.sleep(TICK_SECONDS)
            try:
                self.tick()
            except Exception:
                log.exception("group coordinator tick failed")

    def handlers(self) -> dict[int, Callable[[Any], Any]]:
        return {
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.find_coordinator,
            11: self.join_group,
            12: self.heartbeat,
            13: self.leave_group,
            14: self.sync_group,
        }

    # --- FindCoordinator ------------------------------------------------------------------------
    async def find_coordinator(self, request: Any) -> dict[str, Any]:
        body = request.body
        version = request.api_version
        key_type = getattr(body, "key_type", 0)
        keys = list(body.coordinator_keys) if version >= 4 else [body.key]
        live = self._brokers()
        chosen = self.coordinator_id()
        answers = []
        for key in keys:
            if key_type != 0 or chosen is None:
                error = COORDINATOR_NOT_AVAILABLE
                answers.append(
                    {
                        "key": key,
                        "error_code": error,
                        "error_message": None,
                        "node_id": -1,
                        "host": "",
                        "port": -1,
                    }
                )
            else:
                address = live[chosen]
                answers.append(
                    {
                        "key": key,
                        "error_code": NONE,
                        "error_message": None,
                        "node_id": chosen,
                        "host": address.host,
                        "port": address.port,
                    }
                )
        if version >= 4:
            return {"coordinators": answers}
        return answers[0]

    # --- JoinGroup / SyncGroup / Heartbeat / LeaveGroup -----------------------------------------
    async def join_group(self, request: Any) -> dict[str, Any]:
        body = request.body
        if not self._is_coordinator():
            result = JoinResult(NOT_COORDINATOR, member_id=body.member_id)
        else:
            session = _millis(body.session_timeout)
            rebalance = _millis(getattr(body, "rebalance_timeout", session))
            join = JoinRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                protocol_type=body.protocol_type,
                protocols=tuple((p.name, bytes(p.metadata)) for p in body.protocols),
                session_timeout_ms=session,
                rebalance_timeout_ms=rebalance if rebalance > 0 else session,
                client_id=request.client_id or "",
                group_instance_id=getattr(body, "group_instance_id", None),
            )
            result = await self._wait(lambda token: self.coordinator.join(token, join, self.now()))
        return {
            "error_code": result.error_code,
            "generation_id": result.generation_id,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name
            if request.api_version >= 7
            else (result.protocol_name or ""),
            "leader": result.leader,
            "skip_assignment": False,
            "member_id": result.member_id,
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "metadata": m.metadata}
                for m in result.members
            ],
        }

    async def sync_group(self, request: Any) -> dict[str, Any]:
        body = request.body
        if not self._is_coordinator():
            result = SyncResult(NOT_COORDINATOR)
        else:
            sync = SyncRequest(
                group_id=body.group_id,
                generation_id=body.generation_id,
                member_id=body.member_id,
                assignments=tuple((a.member_id, bytes(a.assignment)) for a in body.assignments),
                protocol_type=getattr(body, "protocol_type", None),
                protocol_name=getattr(body, "protocol_name", None),
            )
            result = await self._wait(lambda token: self.coordinator.sync(token, sync, self.now()))
        return {
            "error_code": result.error_code,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol_name,
            "assignment": result.assignment,
        }

    async def heartbeat(self, request: Any) -> dict[str, Any]:
        body = request.body
        if not self._is_coordinator():
            return {"error_code": NOT_COORDINATOR}
        result = await self._wait(
            lambda token: self.coordinator.heartbeat(
                token, body.group_id, body.generation_id, body.member_id, self.now()
            )
        )
        return {"error_code": result.error_code}

    async def leave_group(self, request: Any) -> dict[str, Any]:
        body = request.body
        version = request.api_version
        if version >= 3:
            members = [(m.member_id, m.group_instance_id) for m in body.members]
        else:
            members = [(body.member_id, None)]
        if not self._is_coordinator():
            result = LeaveResult(NOT_COORDINATOR, tuple((m, i, NOT_COORDINATOR) for m, i in members))
        else:
            result = await self._wait(
                lambda token: self.coordinator.leave(token, body.group_id, members, self.now())
            )
        if version >= 3:
            return {
                "error_code": result.error_code if result.error_code == NOT_COORDINATOR else NONE,
                "members": [
                    {"member_id": m, "group_instance_id": i, "error_code": e} for m, i, e in result.members
                ],
            }
        return {"error_code": result.members[0][2] if result.members else result.error_code}

    # --- OffsetCommit / OffsetFetch -------------------------------------------------------------
    async def offset_commit(self, request: Any) -> dict[str, Any]:
        body = request.body
        offsets: dict[tuple[str, int], CommittedOffset] = {}
        for topic in body.topics:
            for part in topic.partitions:
                offsets[(topic.name, part.partition_index)] = CommittedOffset(
                    part.committed_offset,
                    getattr(part, "committed_leader_epoch", -1),
                    part.committed_metadata,
                )
        if not self._is_coordinator():
            errors = {key: NOT_COORDINATOR for key in offsets}
        else:
            errors = self.coordinator.commit_offsets(
                body.group_id, body.generation_id_or_member_epoch, body.member_id, offsets, self.now()
            )
            accepted = {key: offsets[key] for key, error in errors.items() if error == NONE}
            if self.replica is not None and accepted:
                try:
                    await self.replica.write(body.group_id, accepted)
                except Exception as e:  # not replicated: not acknowledged
                    log.warning("group %s: offsets not written to ZooKeeper: %s", body.group_id, e)
                    errors.update({key: COORDINATOR_NOT_AVAILABLE for key in accepted})
        topics: dict[str, list[dict[str, Any]]] = {}
        for (name, index), error in errors.items():
            topics.setdefault(name, []).append({"partition_index": index, "error_code": error})
        return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}

    async def _fetch_replicated(
        self, group_id: str, wanted: list[tuple[str, int]] | None
    ) -> tuple[dict[tuple[str, int], FetchedOffset], int]:
        """Committed offsets as ZooKeeper holds them (what every coordinator acknowledged)."""
        assert self.replica is not None
        try:
            stored = await self.replica.read(group_id, wanted)
        except Exception as e:
            log.warning("group %s: offsets not readable from ZooKeeper: %s", group_id, e)
            failed = FetchedOffset(-1, -1, "", COORDINATOR_NOT_AVAILABLE)
            return {key: failed for key in wanted or []}, COORDINATOR_NOT_AVAILABLE
        keys = sorted(stored) if wanted is None else wanted
        fetched = {}
        for key in keys:
            c = stored.get(key)
            fetched[key] = (
                FetchedOffset(-1, -1, "")
                if c is None
                else FetchedOffset(c.offset, c.leader_epoch, c.metadata)
            )
        return fetched, NONE

    async def offset_fetch(self, request: Any) -> dict[str, Any]:
        body = request.body
        if request.api_version >= 8:
            groups = [(g.group_id, g.topics) for g in body.groups]
        else:
            groups = [(body.group_id, body.topics)]
        coordinator = self._is_coordinator()
        answers = []
        for group_id, topics in groups:
            wanted = None
            if topics is not None:
                wanted = [(t.name, index) for t in topics for index in t.partition_indexes]
            if coordinator and self.replica is not None:
                fetched, error = await self._fetch_replicated(group_id, wanted)
            elif coordinator:
                fetched = self.coordinator.fetch_offsets(group_id, wanted)
                error = NONE
            else:
                failed = FetchedOffset(-1, -1, "", NOT_COORDINATOR)
                fetched = {key: failed for key in wanted or []}
                error = NOT_COORDINATOR
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for (name, index), entry in fetched.items():
                by_topic.setdefault(name, []).append(
                    {
                        "partition_index": index,
                        "committed_offset": entry.offset,
                        "committed_leader_epoch": entry.leader_epoch,
                        "metadata": entry.metadata,
                        "error_code": entry.error_code,
                    }
                )
            answers.append(
                {
                    "group_id": group_id,
                    "topics": [{"name": name, "partitions": parts} for name, parts in by_topic.items()],
                    "error_code": error,
                }
            )
        if request.api_version >= 8:
            return {"groups": answers}
        answer = answers[0]
        return {"topics": answer["topics"], "error_code": answer["error_code"]}


def install(
    handlers: ApiHandlers, config: BrokerConfig, metadata: ClusterMetadata, zk: Any | None
) -> tuple[GroupService, asyncio.Task[None]]:
    """Route the group APIs to a coordinator under the first log dir; returns it and its tick task.

    `zk`: the broker's ZooKeeper client in ZooKeeper mode (committed offsets are replicated there).
    The caller cancels the tick task with its other timers when the broker stops.
    """
    coordinator = GroupCoordinator(Path(config.log_dirs[0]))
    service = GroupService(coordinator, config.broker_id, metadata.brokers)
    if zk is not None:
        service.replica = ZkOffsets(zk)
    for api_key, handler in service.handlers().items():
        handlers.register(api_key, GROUP_API_VERSIONS[api_key], handler)
    ticks = asyncio.get_running_loop().create_task(service.run_ticks())
    log.info("group coordinator installed (offsets in %s)", coordinator.store.path)
    return service, ticks
