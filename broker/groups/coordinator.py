"""The consumer-group coordinator: Kafka's classic group protocol as a sans-IO state machine.

`GroupCoordinator` is fed requests (plain dataclasses) and clock ticks, each with `now` in
milliseconds, and returns completions: (token, response) pairs. A token is whatever the caller uses
to answer a request later (the asyncio service, `broker.groups.service`, uses a Future): JoinGroup and SyncGroup are
barriers, answered when the whole group has joined (or the rebalance timeout passed) and when the
leader has sent the assignment. Committed offsets are written durably (fsync) before a commit is
acknowledged (broker.storage.group_offsets), and in ZooKeeper mode also to ZooKeeper, from where
OffsetFetch answers, so a new coordinator resumes where the old one was (broker.zk_offsets).

Group states follow Kafka's GroupMetadata: Empty -> PreparingRebalance -> CompletingRebalance ->
Stable, back to PreparingRebalance when members join, leave or miss their session timeout.

A durable coordinator (ZooKeeper mode) also stores each group's metadata (Kafka's
GroupMetadataValue: generation, protocol, leader, members and their assignments) whenever a
generation begins and when its assignment arrives: it hands out a `StoreGroup` (`take_stores`) and
holds every answer about that group until the caller reports the record stored (`stored`) or not
(`store_failed`: then it gives up all its groups, as a coordinator that lost its partition does).
So no member ever hears of a generation that is not durable, and the next coordinator `load`s the
groups and carries on from their last generation instead of starting again at 1.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections import Counter
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.kafka_errors import (
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
    """Named as JoinGroup's response fields: the group service answers with its fields as they are."""

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
    """Named as SyncGroup's response fields: the group service answers with its fields as they are."""

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


def refused(result: Any, error_code: int) -> Any:
    """The same answer with an error instead (a held answer whose group record was not stored)."""
    if isinstance(result, JoinResult):
        return JoinResult(error_code, member_id=result.member_id)
    if isinstance(result, SyncResult):
        return SyncResult(error_code)
    if isinstance(result, HeartbeatResult):
        return HeartbeatResult(error_code)
    if isinstance(result, LeaveResult):
        return LeaveResult(error_code, tuple((m, i, error_code) for m, i, _ in result.members))
    return result


# --- what is stored of a group ----------------------------------------------------------------
@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: bytes = b""


@dataclass(frozen=True)
class GroupRecord:
    """A group as its coordinator stored it (Kafka's GroupMetadataValue), for the next coordinator.

    `state` is Empty, CompletingRebalance (a generation began; its assignment was not stored) or
    Stable (the assignment of this generation is in `members`).
    """

    group_id: str
    generation_id: int
    state: GroupState
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: tuple[StoredMember, ...] = ()


@dataclass(eq=False)
class StoreGroup:
    """Store `record` (fenced by the coordinator epoch); `release` holds the answers waiting for it."""

    record: GroupRecord
    release: list[Completion] = field(default_factory=list)


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
    stores: list[StoreGroup] = field(default_factory=list)  # records being stored, oldest first

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


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """How the coordinator runs its groups (Kafka's GroupConfig: group.min.session.timeout.ms,
    group.max.session.timeout.ms, group.initial.rebalance.delay.ms)."""

    min_session_timeout_ms: int = 1000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 0  # how long a new generation of an empty group waits

    def allows_session_timeout(self, session_timeout_ms: int) -> bool:
        """A member's session timeout within the bounds (else INVALID_SESSION_TIMEOUT)."""
        return self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms


class GroupCoordinator:
    """All groups this broker coordinates, and their committed offsets (stored under state_dir).

    `durable`: store group records (`take_stores`) and hold the answers they concern until stored.
    """

    def __init__(
        self, state_dir: Path, settings: GroupSettings = GroupSettings(), *, durable: bool = False
    ) -> None:
        self.store = GroupOffsetStore(state_dir)
        self.groups: dict[str, Group] = {}
        self.settings = settings
        self.durable = durable
        self._outbox: list[StoreGroup] = []

    # --- storing group records ------------------------------------------------------------------
    def take_stores(self) -> list[StoreGroup]:
        """The records to store, in the order they must be written (each one once)."""
        stores, self._outbox = self._outbox, []
        return stores

    def pending(self, store: StoreGroup) -> bool:
        """`store` is still awaited (not stored, and its group not given up since)."""
        group = self.groups.get(store.record.group_id)
        return group is not None and store in group.stores

    def stored(self, store: StoreGroup) -> list[Completion]:
        """`store`'s record is durable: let out the answers it held."""
        if not self.pending(store):
            return []  # given up meanwhile (unloaded): its answers went out as errors
        self.groups[store.record.group_id].stores.remove(store)
        return store.release

    def store_failed(self, store: StoreGroup, error_code: int) -> list[Completion]:
        """`store`'s record was not stored (fenced: NOT_COORDINATOR; ZooKeeper unreachable:
        COORDINATOR_NOT_AVAILABLE): what this broker holds in memory is no longer what the next
        coordinator will load, so it gives up every group; they are loaded again from the store."""
        if not self.pending(store):
            return []
        log.warning(
            "group %s: generation %d not stored (error %d): unloading all groups",
            store.record.group_id,
            store.record.generation_id,
            error_code,
        )
        return self.unload(error_code)

    def _store(self, group: Group) -> None:
        """Store the group as it is now; its answers wait for it (`_route`)."""
        if not self.durable:
            return
        members = tuple(
            StoredMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.protocol_type,
                m.protocols,
                m.session_timeout_ms,
                m.rebalance_timeout_ms,
                m.assignment if group.state is GroupState.STABLE else b"",
            )
            for m in group.members.values()
        )
        if not members:
            state = GroupState.EMPTY
        elif group.state is GroupState.STABLE:
            state = GroupState.STABLE
        else:
            state = GroupState.COMPLETING_REBALANCE
        record = GroupRecord(
            group.group_id,
            group.generation_id,
            state,
            group.protocol_type,
            group.protocol_name,
            group.leader_id,
            members,
        )
        store = StoreGroup(record)
        group.stores.append(store)
        self._outbox.append(store)

    def _route(self, group_id: str, out: list[Completion]) -> list[Completion]:
        """Answers about a group with a record being stored wait for it (the latest one)."""
        group = self.groups.get(group_id)
        if group is not None and group.stores and out:
            group.stores[-1].release.extend(out)
            return []
        return out

    def load(self, records: Iterable[GroupRecord], now: float) -> list[Completion]:
        """Take over the stored groups (a new coordinator): Kafka's loadGroup.

        Members get a fresh session timeout to find this coordinator. A Stable group carries on in
        its generation (members heartbeat and commit as before); a group whose last generation never
        stored its assignment rebalances, into the next generation. Generations never go back.
        """
        out = self.unload()
        for record in records:
            group = Group(
                record.group_id,
                generation_id=record.generation_id,
                protocol_type=record.protocol_type,
                protocol_name=record.protocol_name,
                leader_id=record.leader_id,
            )
            for m in record.members:
                group.members[m.member_id] = Member(
                    m.member_id,
                    m.client_id,
                    m.group_instance_id,
                    m.protocol_type,
                    m.protocols,
                    m.session_timeout_ms,
                    m.rebalance_timeout_ms,
                    now,
                    m.assignment,
                )
            self.groups[group.group_id] = group
            if not group.members:
                group.protocol_name = group.protocol_type = group.leader_id = None
                continue
            if group.leader_id not in group.members:
                group.leader_id = next(iter(group.members))
            if record.state is GroupState.STABLE:
                group.state = GroupState.STABLE
            else:
                group.state = GroupState.COMPLETING_REBALANCE
                out += self._prepare_rebalance(group, now, "loaded before its assignment was stored")
            log.info(
                "group %s: loaded at generation %d (%s, %d member(s))",
                group.group_id,
                group.generation_id,
                group.state.value,
                len(group.members),
            )
        return out

    # --- JoinGroup ------------------------------------------------------------------------------
    def join(self, token: Token, request: JoinRequest, now: float) -> list[Completion]:
        """A member (re)joins; answered now (an error, or the current generation) or at the barrier."""
        return self._route(request.group_id, self._join(token, request, now))

    def _join(self, token: Token, request: JoinRequest, now: float) -> list[Completion]:
        if not request.group_id:
            return [(token, JoinResult(INVALID_GROUP_ID, member_id=request.member_id))]
        if not self.settings.allows_session_timeout(request.session_timeout_ms):
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
            group.initial_join_not_before = now + self.settings.initial_rebalance_delay_ms
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
            self._store(group)
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
        self._store(group)  # the generation is durable before any member hears of it
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
        return self._route(request.group_id, self._sync(token, request, now))

    def _sync(self, token: Token, request: SyncRequest, now: float) -> list[Completion]:
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
            self._store(group)
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
        return self._route(group_id, self._heartbeat(token, group_id, generation_id, member_id, now))

    def _heartbeat(
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
        return self._route(group_id, self._leave(token, group_id, members, now))

    def _leave(
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
            out += self._route(group.group_id, self._tick_group(group, now))
        return out

    def _tick_group(self, group: Group, now: float) -> list[Completion]:
        out: list[Completion] = []
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

    def unload(self, error_code: int = NOT_COORDINATOR) -> list[Completion]:
        """This broker stopped coordinating: every waiting request, and every answer held for a
        record being stored, gets `error_code` (NOT_COORDINATOR: the client finds the coordinator)."""
        out: list[Completion] = []
        for group in self.groups.values():
            for store in group.stores:
                out += [(token, refused(result, error_code)) for token, result in store.release]
            for member in group.members.values():
                if member.awaiting_join is not None:
                    out.append((member.awaiting_join, JoinResult(error_code, member_id=member.member_id)))
                if member.awaiting_sync is not None:
                    out.append((member.awaiting_sync, SyncResult(error_code)))
        self.groups.clear()
        self._outbox.clear()
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
