"""The consumer-group coordinator: Kafka's classic group protocol as a sans-IO state machine.

`GroupCoordinator` is fed requests (plain dataclasses) and clock ticks, each with `now` in
milliseconds, and returns completions: (token, response) pairs. A token is whatever the caller uses
to answer a request later (the asyncio adapter below uses a Future): JoinGroup and SyncGroup are
barriers, answered when the whole group has joined (or the rebalance timeout passed) and when the
leader has sent the assignment. Committed offsets are written durably (fsync) before a commit is
acknowledged (broker.storage.group_offsets), and in ZooKeeper mode also to ZooKeeper, from where
OffsetFetch answers, so a new coordinator resumes where the old one was (broker.zk_offsets).

Group states follow Kafka's GroupMetadata: Empty -> PreparingRebalance -> CompletingRebalance ->
Stable, back to PreparingRebalance when members join, leave or miss their session timeout.

`install(handlers, broker)` wires the coordinator into the broker's request dispatcher: this broker
coordinates every group while it is the live broker with the lowest id (see `coordinator_id`).
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker.kafka_errors import (
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    NONE,
    NOT_COORDINATOR,
    OFFSET_METADATA_TOO_LARGE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from broker.storage.group_offsets import CommittedOffset, GroupOffsetStore

if TYPE_CHECKING:
    from broker.zk_offsets import ZkOffsets

log = logging.getLogger(__name__)

MAX_METADATA_BYTES = 4096  # offset.metadata.max.bytes

Token = Hashable
Completion = tuple[Token, Any]


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


# --- requests and responses ---------------------------------------------------------------------
@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str  # "" for a new member
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), most preferred first
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()  # only the leader gets them


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()  # from the leader: (member id, assignment)
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class SyncResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class HeartbeatResult:
    error_code: int


@dataclass(frozen=True)
class LeaveResult:
    error_code: int
    members: tuple[tuple[str, str | None, int], ...] = ()  # (member id, instance id, error)


@dataclass(frozen=True)
class FetchedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    error_code: int = NONE


# --- state ----------------------------------------------------------------------------------
@dataclass
class Member:
    member_id: str
    client_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    last_heartbeat: float
    assignment: bytes = b""
    awaiting_join: Token | None = None
    awaiting_sync: Token | None = None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    rebalance_deadline: float = 0.0  # PreparingRebalance: when the join barrier gives up
    initial_join_not_before: float = 0.0  # group.initial.rebalance.delay.ms
    sync_deadline: float = 0.0  # CompletingRebalance: when missing SyncGroups give up

    def candidate_protocols(self) -> set[str]:
        sets = [{name for name, _ in m.protocols} for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def supports(self, protocol_type: str, protocols: Iterable[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        return protocol_type == self.protocol_type and bool(names & self.candidate_protocols())

    def select_protocol(self) -> str:
        """Kafka's vote: each member backs its most preferred protocol that everyone supports."""
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(name for name, _ in member.protocols if name in candidates)] += 1
        return max(sorted(votes), key=lambda name: votes[name])


class GroupCoordinator:
    """All groups this broker coordinates, and their committed offsets (stored under state_dir)."""

    def __init__(
        self,
        state_dir: Path,
        *,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 1_800_000,
        initial_rebalance_delay_ms: int = 0,
    ) -> None:
        self.store = GroupOffsetStore(state_dir)
        self.groups: dict[str, Group] = {}
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms

    # --- JoinGroup ------------------------------------------------------------------------------
    def join(self, token: Token, request: JoinRequest, now: float) -> list[Completion]:
        """A member (re)joins; answered now (an error, or the current generation) or at the barrier."""
        if not request.group_id:
            return [(token, JoinResult(INVALID_GROUP_ID, member_id=request.member_id))]
        if not self.min_session_timeout_ms <= request.session_timeout_ms <= self.max_session_timeout_ms:
            return [(token, JoinResult(INVALID_SESSION_TIMEOUT, member_id=request.member_id))]
        group = self.groups.get(request.group_id)
        if group is None:
            if request.member_id:
                return [(token, JoinResult(UNKNOWN_MEMBER_ID, member_id=request.member_id))]
            group = self.groups[request.group_id] = Group(request.group_id)
        if not group.supports(request.protocol_type, request.protocols):
            return [(token, JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id=request.member_id))]
        out: list[Completion] = []
        if not request.member_id:
            member_id = f"{request.client_id or 'member'}-{uuid.uuid4()}"
            member = Member(
                member_id,
                request.client_id,
                request.group_instance_id,
                request.protocol_type,
                tuple(request.protocols),
                request.session_timeout_ms,
                request.rebalance_timeout_ms,
                now,
            )
            group.members[member_id] = member
            if group.protocol_type is None:
                group.protocol_type = request.protocol_type
            member.awaiting_join = token
            log.info("group %s: new member %s", group.group_id, member_id)
            out += self._prepare_rebalance(group, now, f"{member_id} joined")
            out += self._maybe_complete_join(group, now)
            return out
        known = group.members.get(request.member_id)
        if known is None:
            return [(token, JoinResult(UNKNOWN_MEMBER_ID, member_id=request.member_id))]
        return self._rejoin(token, group, known, request, now)

    def _rejoin(
        self, token: Token, group: Group, member: Member, request: JoinRequest, now: float
    ) -> list[Completion]:
        out: list[Completion] = []
        member.last_heartbeat = now
        same_protocols = tuple(request.protocols) == member.protocols
        member.protocols = tuple(request.protocols)
        member.session_timeout_ms = request.session_timeout_ms
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if group.state is GroupState.PREPARING_REBALANCE:
            if member.awaiting_join is not None and member.awaiting_join != token:
                out.append(
                    (member.awaiting_join, JoinResult(REBALANCE_IN_PROGRESS, member_id=member.member_id))
                )
            member.awaiting_join = token
            out += self._maybe_complete_join(group, now)
        elif group.state is GroupState.COMPLETING_REBALANCE and same_protocols:
            out.append((token, self._join_result(group, member)))  # it missed the first response
        elif group.state is GroupState.STABLE and same_protocols and member.member_id != group.leader_id:
            out.append((token, self._join_result(group, member)))
        else:
            member.awaiting_join = token
            out += self._prepare_rebalance(group, now, f"{member.member_id} rejoined")
            out += self._maybe_complete_join(group, now)
        return out

    def _join_result(self, group: Group, member: Member) -> JoinResult:
        protocol = group.protocol_name or ""
        members: tuple[JoinMember, ...] = ()
        if member.member_id == group.leader_id:
            members = tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata_for(protocol))
                for m in group.members.values()
            )
        return JoinResult(
            NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            member_id=member.member_id,
            members=members,
        )

    def _prepare_rebalance(self, group: Group, now: float, reason: str) -> list[Completion]:
        out: list[Completion] = []
        if group.state is GroupState.PREPARING_REBALANCE:
            return out
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                if member.awaiting_sync is not None:
                    out.append((member.awaiting_sync, SyncResult(REBALANCE_IN_PROGRESS)))
                    member.awaiting_sync = None
        for member in group.members.values():
            member.assignment = b""
        if group.state is GroupState.EMPTY:
            group.initial_join_not_before = now + self.initial_rebalance_delay_ms
        else:
            group.initial_join_not_before = now
        group.state = GroupState.PREPARING_REBALANCE
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline = now + timeout
        log.info(
            "group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation_id, reason
        )
        return out

    def _maybe_complete_join(self, group: Group, now: float) -> list[Completion]:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return []
        everyone = all(m.awaiting_join is not None for m in group.members.values())
        if (everyone and now >= group.initial_join_not_before) or now >= group.rebalance_deadline:
            return self._complete_join(group, now)
        return []

    def _complete_join(self, group: Group, now: float) -> list[Completion]:
        out: list[Completion] = []
        for member in [m for m in group.members.values() if m.awaiting_join is None]:
            log.info("group %s: %s did not rejoin in time", group.group_id, member.member_id)
            out += self._remove_member(group, member)
        group.generation_id += 1
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = group.protocol_type = group.leader_id = None
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            return out
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        group.sync_deadline = now + max(m.rebalance_timeout_ms for m in group.members.values())
        log.info(
            "group %s: generation %d, protocol %s, leader %s, %d member(s)",
            group.group_id,
            group.generation_id,
            group.protocol_name,
            group.leader_id,
            len(group.members),
        )
        for member in group.members.values():
            assert member.awaiting_join is not None
            out.append((member.awaiting_join, self._join_result(group, member)))
            member.awaiting_join = None
            member.last_heartbeat = now
        return out

    def _remove_member(self, group: Group, member: Member) -> list[Completion]:
        out: list[Completion] = []
        del group.members[member.member_id]
        if member.awaiting_join is not None:
            out.append((member.awaiting_join, JoinResult(UNKNOWN_MEMBER_ID, member_id=member.member_id)))
        if member.awaiting_sync is not None:
            out.append((member.awaiting_sync, SyncResult(UNKNOWN_MEMBER_ID)))
        if group.leader_id == member.member_id:
            group.leader_id = next(iter(group.members), None)
        return out

    def _member_gone(self, group: Group, member: Member, now: float, reason: str) -> list[Completion]:
        """Remove a member and move the group on (rebalance, or finish a pending join)."""
        out = self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            out += self._prepare_rebalance(group, now, reason)
        out += self._maybe_complete_join(group, now)
        return out

    # --- SyncGroup ------------------------------------------------------------------------------
    def sync(self, token: Token, request: SyncRequest, now: float) -> list[Completion]:
        group = self.groups.get(request.group_id)
        member = group.members.get(request.member_id) if group else None
        if group is None or member is None:
            return [(token, SyncResult(UNKNOWN_MEMBER_ID))]
        if request.generation_id != group.generation_id:
            return [(token, SyncResult(ILLEGAL_GENERATION))]
        if (request.protocol_type is not None and request.protocol_type != group.protocol_type) or (
            request.protocol_name is not None and request.protocol_name != group.protocol_name
        ):
            return [(token, SyncResult(INCONSISTENT_GROUP_PROTOCOL))]
        member.last_heartbeat = now
        if group.state is GroupState.PREPARING_REBALANCE:
            return [(token, SyncResult(REBALANCE_IN_PROGRESS))]
        if group.state is GroupState.STABLE:
            return [(token, self._sync_result(group, member))]
        out: list[Completion] = []
        if member.awaiting_sync is not None and member.awaiting_sync != token:
            out.append((member.awaiting_sync, SyncResult(REBALANCE_IN_PROGRESS)))
        member.awaiting_sync = token
        if member.member_id == group.leader_id:
            assignments = dict(request.assignments)
            for other in group.members.values():
                other.assignment = assignments.get(other.member_id, b"")
            group.state = GroupState.STABLE
            log.info("group %s: stable at generation %d", group.group_id, group.generation_id)
            for other in group.members.values():
                if other.awaiting_sync is not None:
                    out.append((other.awaiting_sync, self._sync_result(group, other)))
                    other.awaiting_sync = None
        return out

    @staticmethod
    def _sync_result(group: Group, member: Member) -> SyncResult:
        return SyncResult(NONE, member.assignment, group.protocol_type, group.protocol_name)

    # --- Heartbeat and LeaveGroup ---------------------------------------------------------------
    def heartbeat(
        self, token: Token, group_id: str, generation_id: int, member_id: str, now: float
    ) -> list[Completion]:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group else None
        if group is None or member is None:
            return [(token, HeartbeatResult(UNKNOWN_MEMBER_ID))]
        if generation_id != group.generation_id:
            return [(token, HeartbeatResult(ILLEGAL_GENERATION))]
        member.last_heartbeat = now
        if group.state is GroupState.PREPARING_REBALANCE:
            return [(token, HeartbeatResult(REBALANCE_IN_PROGRESS))]
        return [(token, HeartbeatResult(NONE))]

    def leave(
        self, token: Token, group_id: str, members: Iterable[tuple[str, str | None]], now: float
    ) -> list[Completion]:
        group = self.groups.get(group_id)
        results = []
        out: list[Completion] = []
        for member_id, instance_id in members:
            member = group.members.get(member_id) if group else None
            if group is None or member is None:
                results.append((member_id, instance_id, UNKNOWN_MEMBER_ID))
                continue
            log.info("group %s: %s left", group_id, member_id)
            out += self._member_gone(group, member, now, f"{member_id} left")
            results.append((member_id, instance_id, NONE))
        top = NONE if group is not None else UNKNOWN_MEMBER_ID
        out.append((token, LeaveResult(top, tuple(results))))
        return out

    # --- timers ---------------------------------------------------------------------------------
    def tick(self, now: float) -> list[Completion]:
        """Expire sessions, and end join or sync barriers whose timeout passed."""
        out: list[Completion] = []
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if group.members.get(member.member_id) is not member:
                    continue  # removed meanwhile (a finished barrier drops members that did not rejoin)
                waiting = member.awaiting_join is not None or member.awaiting_sync is not None
                if not waiting and now - member.last_heartbeat > member.session_timeout_ms:
                    log.info("group %s: session of %s expired", group.group_id, member.member_id)
                    out += self._member_gone(group, member, now, f"{member.member_id} session expired")
            if group.state is GroupState.PREPARING_REBALANCE:
                out += self._maybe_complete_join(group, now)
            elif group.state is GroupState.COMPLETING_REBALANCE and now >= group.sync_deadline:
                late = [m for m in group.members.values() if m.awaiting_sync is None]
                for member in late:
                    log.info("group %s: %s did not sync in time", group.group_id, member.member_id)
                    out += self._remove_member(group, member)
                out += self._prepare_rebalance(group, now, "SyncGroup timed out")
                out += self._maybe_complete_join(group, now)
        return out

    def unload(self) -> list[Completion]:
        """This broker stopped coordinating: answer every waiting request with NOT_COORDINATOR."""
        out: list[Completion] = []
        for group in self.groups.values():
            for member in group.members.values():
                if member.awaiting_join is not None:
                    out.append(
                        (member.awaiting_join, JoinResult(NOT_COORDINATOR, member_id=member.member_id))
                    )
                if member.awaiting_sync is not None:
                    out.append((member.awaiting_sync, SyncResult(NOT_COORDINATOR)))
        self.groups.clear()
        return out

    # --- offsets --------------------------------------------------------------------------------
    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: dict[tuple[str, int], CommittedOffset],
        now: float,
    ) -> dict[tuple[str, int], int]:
        """Validate and durably store offsets; returns the error code per partition."""

        def every(code: int) -> dict[tuple[str, int], int]:
            return {key: code for key in offsets}

        if not group_id:
            return every(INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return every(ILLEGAL_GENERATION)
            group = self.groups[group_id] = Group(group_id)
        elif not (generation_id < 0 and group.state is GroupState.EMPTY):  # else: a manual-assignment commit
            member = group.members.get(member_id)
            if member is None:
                return every(UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return every(ILLEGAL_GENERATION)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return every(REBALANCE_IN_PROGRESS)
            member.last_heartbeat = now
        errors = {}
        accepted = {}
        for key, committed in offsets.items():
            if committed.metadata is not None and len(committed.metadata.encode()) > MAX_METADATA_BYTES:
                errors[key] = OFFSET_METADATA_TOO_LARGE
            else:
                errors[key] = NONE
                accepted[key] = committed
        self.store.commit(group_id, accepted)
        return errors

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[tuple[str, int]] | None
    ) -> dict[tuple[str, int], FetchedOffset]:
        """Committed offsets; -1 for a partition without one; every committed one when partitions is None."""
        stored = self.store.fetch(group_id)
        keys = sorted(stored) if partitions is None else list(partitions)
        result = {}
        for key in keys:
            committed = stored.get(key)
            if committed is None:
                result[key] = FetchedOffset(-1, -1, "")
            else:
                result[key] = FetchedOffset(committed.offset, committed.leader_epoch, committed.metadata)
        return result

    def close(self) -> None:
        self.store.close()


# --- the asyncio adapter: kio requests in, response dicts out --------------------------------------
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


def install(handlers: Any, broker: Any) -> GroupService:
    """Hook called by broker.app: route the group APIs to a coordinator under the first log dir."""
    config = broker.config
    coordinator = GroupCoordinator(Path(config.log_dirs[0]))
    service = GroupService(
        coordinator, config.broker_id, lambda: broker.metadata.brokers() if broker.metadata else {}
    )
    zk = getattr(getattr(broker, "cluster", None), "zk", None)
    if zk is not None:
        from broker.zk_offsets import ZkOffsets

        service.replica = ZkOffsets(zk)
    for api_key, handler in service.handlers().items():
        handlers.register(api_key, GROUP_API_VERSIONS[api_key], handler)
    task = asyncio.get_running_loop().create_task(service.run_ticks())
    timers = getattr(broker, "_timers", None)
    if isinstance(timers, list):
        timers.append(task)  # cancelled with the broker's other timers on stop
    log.info("group coordinator installed (offsets in %s)", coordinator.store.path)
    return service
