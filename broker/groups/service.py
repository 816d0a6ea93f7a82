"""The group APIs of the broker: kio requests in, response dicts out, answered by the coordinator.

`GroupService` turns each request into a call of the sans-IO `GroupCoordinator`
(`broker.groups.coordinator`) and awaits its completion. Who coordinates is an election
(`CoordinatorElection`): in ZooKeeper mode the holder of the group-coordinator lease
(broker.groups.lease), which fences every write the coordinator makes (broker.zk_offsets); a
standalone broker coordinates alone. A broker that does not hold the lease answers NOT_COORDINATOR;
one that just took it loads the stored groups first and answers COORDINATOR_LOAD_IN_PROGRESS
meanwhile (heartbeats get NONE, as in Kafka); one whose write was fenced gives up its groups.
`install` wires it into the broker's request dispatcher and timers.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, Protocol

from broker.background import BackgroundTasks
from broker.config import BrokerConfig
from broker.groups.coordinator import (
    Completion,
    FetchedOffset,
    GroupCoordinator,
    GroupRecord,
    JoinRequest,
    JoinResult,
    LeaveResult,
    StoreGroup,
    SyncRequest,
    SyncResult,
)
from broker.groups.zk_lease import ZkLease
from broker.handlers import ApiHandlers
from broker.kafka_errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NONE,
    NOT_COORDINATOR,
    UNKNOWN_MEMBER_ID,
)
from broker.metadata import ClusterMetadata
from broker.storage.group_offsets import CommittedOffset
from broker.zk_offsets import Fenced, ZkOffsets

log = logging.getLogger(__name__)


def _millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


TICK_SECONDS = 0.1
LOAD_RETRY_MS = 500.0
# From OffsetFetch v2 a refused fetch carries its error once, for the group, and no partitions (Kafka's
# TOP_LEVEL_ERROR_AND_NULL_TOPICS_MIN_VERSION); below, each partition carries it. librdkafka takes a
# partition's own error as final: it drops that partition from its assignment until the next
# rebalance and never consumes it, where a group error makes it find the coordinator and ask again.
GROUP_ERROR_MIN_VERSION = 2


class CoordinatorElection(Protocol):
    """Who coordinates the groups, and the fence this broker's writes carry."""

    def coordinator(self) -> int | None: ...
    def held_version(self) -> int | None: ...  # None: this broker does not coordinate
    def fenced(self, version: int) -> None: ...  # a write under `version` was refused
    def tick(self) -> None: ...


class LowestLiveBroker:
    """Without ZooKeeper (a standalone broker, or a test): the live broker with the lowest id."""

    def __init__(self, broker_id: int, brokers: Callable[[], dict[int, Any]]) -> None:
        self.broker_id = broker_id
        self._brokers = brokers

    def coordinator(self) -> int | None:
        live = self._brokers()
        return min(live) if live else None

    def held_version(self) -> int | None:
        return 0 if self.coordinator() == self.broker_id else None

    def fenced(self, version: int) -> None:
        pass

    def tick(self) -> None:
        pass


class GroupStore(Protocol):
    """Where a coordinator's group state is kept, fenced by the lease version (broker.zk_offsets)."""

    def write(
        self, group: str, offsets: dict[tuple[str, int], CommittedOffset], lease_version: int | None = None
    ) -> Awaitable[None]: ...
    def write_group(self, record: GroupRecord, lease_version: int | None = None) -> Awaitable[None]: ...
    def read(
        self, group: str, partitions: Iterable[tuple[str, int]] | None
    ) -> Awaitable[dict[tuple[str, int], CommittedOffset]]: ...
    def read_groups(self) -> Awaitable[list[GroupRecord]]: ...


class GroupService:
    """Answers the group APIs for the broker: NOT_COORDINATOR unless this broker is the coordinator."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        broker_id: int,
        brokers: Callable[[], dict[int, Any]],
        clock: Callable[[], float] | None = None,
        election: CoordinatorElection | None = None,
        replica: GroupStore | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.broker_id = broker_id
        self._brokers = brokers
        self._clock = clock
        self.election: CoordinatorElection = election or LowestLiveBroker(broker_id, brokers)
        # Where group state is kept (broker.zk_offsets), in ZooKeeper mode: writes are fenced there.
        self.replica = replica
        coordinator.durable = replica is not None
        self._loaded: int | None = None  # the lease version the groups in memory were loaded under
        self._loading: int | None = None
        self._load_not_before = 0.0
        self._tasks = BackgroundTasks()

    def now(self) -> float:
        if self._clock is not None:
            return self._clock()
        return asyncio.get_running_loop().time() * 1000.0

    def coordinator_id(self) -> int | None:
        """The broker that coordinates every group (FindCoordinator's answer)."""
        return self.election.coordinator()

    def _status(self) -> tuple[int, int | None]:
        """(NONE, the lease version) when this broker coordinates with its groups loaded; else
        (NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS, the version held or None)."""
        held = self.election.held_version()
        if self._loaded is not None and held != self._loaded:
            log.info(
                "broker %d no longer coordinates under lease version %d: unloading groups",
                self.broker_id,
                self._loaded,
            )
            self._loaded = None
            self._after(self.coordinator.unload())
        if held is None:
            return NOT_COORDINATOR, None
        if self._loaded is None:
            self._start_load(held)
            if self._loaded is None:
                return COORDINATOR_LOAD_IN_PROGRESS, held
        return NONE, held

    def lease_changed(self) -> None:
        """The election's view changed: unload or load now, not at the next request."""
        self._status()

    def _start_load(self, version: int) -> None:
        if self.replica is None:
            self._after(self.coordinator.load((), self.now()))
            self._loaded = version
            return
        if self._loading == version or self.now() < self._load_not_before:
            return
        self._loading = version
        self._tasks.spawn(self._load(version, self.replica.read_groups()))

    async def _load(self, version: int, reading: Awaitable[list[GroupRecord]]) -> None:
        """Kafka's loadGroupsForPartition: the stored groups, read after every earlier write."""
        try:
            records = await reading
        except Exception as e:
            log.warning("loading the groups failed (retrying): %r", e)
            self._load_not_before = self.now() + LOAD_RETRY_MS
            return
        finally:
            if self._loading == version:
                self._loading = None
        if self.election.held_version() != version or self._loaded is not None:
            return  # the lease moved on meanwhile
        self._after(self.coordinator.load(records, self.now()))
        self._loaded = version
        log.info(
            "broker %d coordinates the groups (lease version %d): loaded %s",
            self.broker_id,
            version,
            ", ".join(f"{r.group_id} at generation {r.generation_id}" for r in records) or "no group",
        )

    @staticmethod
    def _resolve(completions: list[Completion]) -> None:
        for token, result in completions:
            if isinstance(token, asyncio.Future) and not token.done():
                token.set_result(result)

    def _after(self, completions: list[Completion]) -> None:
        """Answer what is done, and write the group records the coordinator asked to store."""
        self._resolve(completions)
        for store in self.coordinator.take_stores():
            version = self._loaded
            if self.replica is None or version is None:
                self._resolve(self.coordinator.store_failed(store, NOT_COORDINATOR))
                continue
            self._tasks.spawn(self._stored(store, self.replica.write_group(store.record, version), version))

    async def _stored(self, store: StoreGroup, writing: Awaitable[None], version: int) -> None:
        try:
            await writing
        except Fenced:
            self.election.fenced(version)
            self._give_up(store, NOT_COORDINATOR, version)
        except Exception as e:
            log.warning("group %s: metadata not written to ZooKeeper: %r", store.record.group_id, e)
            self._give_up(store, COORDINATOR_NOT_AVAILABLE, version)
        else:
            self._after(self.coordinator.stored(store))

    def _give_up(self, store: StoreGroup, error_code: int, version: int) -> None:
        """A record was not stored: the groups in memory are not what the store holds; unload them
        (they are loaded again while this broker still holds the lease)."""
        if self._loaded == version and self.coordinator.pending(store):
            self._loaded = None
        self._after(self.coordinator.store_failed(store, error_code))

    async def _wait(self, start: Callable[[asyncio.Future[Any]], list[Completion]]) -> Any:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._after(start(future))
        return await future

    def tick(self) -> None:
        self.election.tick()
        if self._status()[0] == NONE:
            self._after(self.coordinator.tick(self.now()))

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
            if key_type != 0 or chosen is None or chosen not in live:
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
        error, _ = self._status()
        if error != NONE:
            result = JoinResult(error, member_id=body.member_id)
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
        response = {**asdict(result), "skip_assignment": False}
        if request.api_version < 7:
            response["protocol_name"] = result.protocol_name or ""  # nullable only from v7
        return response

    async def sync_group(self, request: Any) -> dict[str, Any]:
        body = request.body
        error, _ = self._status()
        if error != NONE:
            result = SyncResult(error)
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
        return asdict(result)

    async def heartbeat(self, request: Any) -> dict[str, Any]:
        body = request.body
        error, _ = self._status()
        if error == COORDINATOR_LOAD_IN_PROGRESS:
            return {"error_code": NONE}  # Kafka answers heartbeats blindly while it loads the group
        if error != NONE:
            return {"error_code": error}
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
        error, _ = self._status()
        if error != NONE:
            result = LeaveResult(error, tuple((m, i, error) for m, i in members))
        else:
            result = await self._wait(
                lambda token: self.coordinator.leave(token, body.group_id, members, self.now())
            )
        if version >= 3:
            return {
                "error_code": result.error_code if result.error_code != UNKNOWN_MEMBER_ID else NONE,
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
        status, version = self._status()
        if status != NONE:
            errors = {key: status for key in offsets}
        else:
            errors = self.coordinator.commit_offsets(
                body.group_id, body.generation_id_or_member_epoch, body.member_id, offsets, self.now()
            )
            accepted = {key: offsets[key] for key, error in errors.items() if error == NONE}
            if self.replica is not None and accepted:
                try:  # fenced by the lease version the commit was validated under
                    await self.replica.write(body.group_id, accepted, version)
                except Fenced:  # deposed: another broker coordinates now
                    log.warning(
                        "group %s: commit refused: lease version %s was fenced", body.group_id, version
                    )
                    assert version is not None
                    self.election.fenced(version)
                    errors.update({key: NOT_COORDINATOR for key in accepted})
                    self._status()
                except Exception as e:  # not replicated: not acknowledged
                    log.warning("group %s: offsets not written to ZooKeeper: %r", body.group_id, e)
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
        # Offsets are read from the store, which the lease fences: no need to wait for the load.
        coordinator = self._status()[0] in (NONE, COORDINATOR_LOAD_IN_PROGRESS)
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
            if error != NONE and request.api_version >= GROUP_ERROR_MIN_VERSION:
                fetched = {}  # the group's error alone, as Kafka answers (see GROUP_ERROR_MIN_VERSION)
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

    `zk`: the broker's ZooKeeper client in ZooKeeper mode (the lease is there, and committed
    offsets and group metadata are kept there). The caller cancels the tick task with its other
    timers when the broker stops.
    """
    coordinator = GroupCoordinator(Path(config.log_dirs[0]))
    service = GroupService(coordinator, config.broker_id, metadata.brokers)
    if zk is not None:
        lease = ZkLease(zk, config.broker_id, on_change=service.lease_changed)
        service.election = lease
        service.replica = ZkOffsets(zk, fence=lease.held_version)
        coordinator.durable = True
    for api_key, handler in service.handlers().items():
        handlers.register(api_key, handler)
    ticks = asyncio.get_running_loop().create_task(service.run_ticks())
    log.info("group coordinator installed (offsets in %s)", coordinator.store.path)
    return service, ticks
