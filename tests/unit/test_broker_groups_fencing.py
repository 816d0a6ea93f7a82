"""A durable, fenced group coordinator (issue 15): no member hears of a generation before it is
stored, a deposed coordinator's commit is refused, and the next coordinator carries the group on
from its stored generation.

The state machine is driven directly; the service is driven with kio requests over a fake of what
ZooKeeper does for it (a store whose writes check the lease version, as the multi-op does); the
real multi-op is tried in tests/integration/test_broker_groups_fencing.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.groups.coordinator import (
    GroupCoordinator,
    GroupRecord,
    GroupState,
    HeartbeatResult,
    JoinRequest,
    JoinResult,
    StoreGroup,
    SyncRequest,
    SyncResult,
)
from broker.groups.service import GroupService
from broker.kafka_errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    ILLEGAL_GENERATION,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
)
from broker.metadata import BrokerAddress
from broker.storage.group_offsets import CommittedOffset
from broker.zk_offsets import Fenced
from tests.support.group_requests import answer, join_data

SESSION, REBALANCE = 10_000, 5_000


def join_request(member_id: str = "", client: str = "c") -> JoinRequest:
    return JoinRequest("g", member_id, "consumer", (("range", b"m"),), SESSION, REBALANCE, client_id=client)


def drain(c: GroupCoordinator, stored: list[GroupRecord] | None = None) -> dict[Any, Any]:
    """Store everything the coordinator asked to store (in order); the answers that were let out."""
    out: dict[Any, Any] = {}
    while stores := c.take_stores():
        for store in stores:
            if stored is not None:
                stored.append(store.record)
            out.update(c.stored(store))
    return out


def stable_group(c: GroupCoordinator, stored: list[GroupRecord]) -> tuple[str, str]:
    """Two members, generation 2, both synced: every step through the store."""
    c.join("a1", join_request(), 0)
    a_id = drain(c, stored)["a1"].member_id
    c.sync("as1", SyncRequest("g", 1, a_id, ((a_id, b"all"),)), 0)
    drain(c, stored)
    c.join("b1", join_request(client="b"), 10)
    done = dict(c.join("a2", join_request(a_id), 20)) | drain(c, stored)
    b_id = done["b1"].member_id
    assert done["a2"].generation_id == done["b1"].generation_id == 2
    c.sync("bs", SyncRequest("g", 2, b_id), 30)
    c.sync("as2", SyncRequest("g", 2, a_id, ((a_id, b"p0"), (b_id, b"p1"))), 40)
    synced = drain(c, stored)
    assert synced["bs"].assignment == b"p1" and synced["as2"].assignment == b"p0"
    return a_id, b_id


def test_no_member_hears_of_a_generation_before_it_is_stored(tmp_path: Path) -> None:
    c = GroupCoordinator(tmp_path, durable=True)
    assert c.join("a1", join_request(), 0) == []  # the barrier completed, but generation 1 is not stored
    [store] = c.take_stores()
    assert (store.record.generation_id, store.record.state) == (1, GroupState.COMPLETING_REBALANCE)
    a_id = store.record.members[0].member_id
    # a member that joins again meanwhile is held too (it would learn of generation 1)
    assert c.join("a1-again", join_request(a_id), 1) == []
    answers = dict(c.stored(store))
    assert answers["a1"].generation_id == answers["a1-again"].generation_id == 1
    assert c.sync("as", SyncRequest("g", 1, a_id, ((a_id, b"p"),)), 2) == []
    [synced] = c.take_stores()
    assert synced.record.state is GroupState.STABLE and synced.record.members[0].assignment == b"p"
    assert dict(c.stored(synced))["as"] == SyncResult(NONE, b"p", "consumer", "range")


def test_a_record_not_stored_gives_up_every_group(tmp_path: Path) -> None:
    c = GroupCoordinator(tmp_path, durable=True)
    c.join("a1", join_request(), 0)
    [store] = c.take_stores()
    assert c.store_failed(store, NOT_COORDINATOR) == [
        ("a1", JoinResult(NOT_COORDINATOR, member_id=store.record.members[0].member_id))
    ]
    assert c.groups == {} and c.take_stores() == []
    assert c.stored(store) == [] and c.store_failed(store, NOT_COORDINATOR) == []  # answered once


def test_the_next_coordinator_carries_a_stable_group_on_in_its_generation(tmp_path: Path) -> None:
    stored: list[GroupRecord] = []
    old = GroupCoordinator(tmp_path / "old", durable=True)
    a_id, b_id = stable_group(old, stored)
    new = GroupCoordinator(tmp_path / "new", durable=True)
    assert new.load([stored[-1]], 1000) == []
    group = new.groups["g"]
    assert (group.state, group.generation_id, group.leader_id) == (GroupState.STABLE, 2, a_id)
    assert {m: group.members[m].assignment for m in group.members} == {a_id: b"p0", b_id: b"p1"}
    # the members carry on without a rebalance: heartbeats, commits and a follower's rejoin
    assert dict(new.heartbeat("h", "g", 2, b_id, 1100))["h"] == HeartbeatResult(NONE)
    offsets = {("t", 0): CommittedOffset(5)}
    assert new.commit_offsets("g", 2, a_id, offsets, 1200) == {("t", 0): NONE}
    assert new.commit_offsets("g", 1, a_id, offsets, 1200) == {("t", 0): ILLEGAL_GENERATION}
    assert dict(new.join("b2", join_request(b_id), 1300))["b2"].generation_id == 2
    # a member that never comes back expires with its fresh session; the generation goes on from 2
    now = 1300
    while b_id in new.groups["g"].members:
        now += 1000
        new.heartbeat("h", "g", new.groups["g"].generation_id, a_id, now)
        drain(new).clear()
        new.tick(now)
    assert now <= 1000 + SESSION + 2000
    rejoined = dict(new.join("a3", join_request(a_id), now)) | drain(new)
    assert rejoined["a3"].generation_id == 3


def test_a_group_loaded_before_its_assignment_was_stored_rebalances_into_the_next_generation(
    tmp_path: Path,
) -> None:
    old = GroupCoordinator(tmp_path / "old", durable=True)
    old.join("a1", join_request(), 0)
    [store] = old.take_stores()
    a_id = store.record.members[0].member_id
    old.stored(store)  # generation 1 began; the leader's SyncGroup never reached the old coordinator
    new = GroupCoordinator(tmp_path / "new", durable=True)
    new.load([store.record], 500)
    assert new.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert (
        dict(new.sync("as", SyncRequest("g", 1, a_id, ((a_id, b"p"),)), 600))["as"].error_code
        == REBALANCE_IN_PROGRESS
    )
    assert new.join("a2", join_request(a_id), 700) == []
    [next_generation] = new.take_stores()
    assert next_generation.record.generation_id == 2
    assert dict(new.stored(next_generation))["a2"].generation_id == 2


def test_an_empty_group_keeps_its_generation(tmp_path: Path) -> None:
    new = GroupCoordinator(tmp_path, durable=True)
    new.load([GroupRecord("g", 7, GroupState.EMPTY)], 0)
    assert new.groups["g"].state is GroupState.EMPTY
    new.join("a", join_request(), 10)
    assert dict(drain(new))["a"].generation_id == 8


# --- the service, over a fake of ZooKeeper's fenced store ------------------------------------------
@dataclass
class FakeZooKeeper:
    """The lease's version and what was stored; writes check the version (the multi-op's check)."""

    lease_version: int = 0
    offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    groups: dict[str, GroupRecord] = field(default_factory=dict)


def settled(value: Any = None, error: BaseException | None = None) -> asyncio.Future[Any]:
    future = asyncio.get_running_loop().create_future()
    future.set_exception(error) if error is not None else future.set_result(value)
    return future


class FakeStore:
    """GroupStore over FakeZooKeeper; the work is done when asked, as broker.zk_offsets submits it."""

    def __init__(self, zk: FakeZooKeeper) -> None:
        self.zk = zk
        self.loading: asyncio.Future[list[GroupRecord]] | None = None  # set: loads wait for it

    def _fenced(self, version: int | None) -> Fenced | None:
        return Fenced(f"version {version}") if version != self.zk.lease_version else None

    def write(
        self, group: str, offsets: dict[tuple[str, int], CommittedOffset], lease_version: int | None = None
    ) -> Awaitable[None]:
        if error := self._fenced(lease_version):
            return settled(error=error)
        self.zk.offsets.setdefault(group, {}).update(offsets)
        return settled()

    def write_group(self, record: GroupRecord, lease_version: int | None = None) -> Awaitable[None]:
        if error := self._fenced(lease_version):
            return settled(error=error)
        self.zk.groups[record.group_id] = record
        return settled()

    def read(
        self, group: str, partitions: Iterable[tuple[str, int]] | None
    ) -> Awaitable[dict[tuple[str, int], CommittedOffset]]:
        stored = self.zk.offsets.get(group, {})
        return settled({k: v for k, v in stored.items() if partitions is None or k in set(partitions)})

    def read_groups(self) -> Awaitable[list[GroupRecord]]:
        return self.loading if self.loading is not None else settled(list(self.zk.groups.values()))


class LeaseView:
    """One broker's view of the lease: `(holder, version)` as its watch last delivered it."""

    def __init__(self, me: int, holder: int, version: int) -> None:
        self.me, self.holder, self.version = me, holder, version
        self.fenced_version = -1

    def coordinator(self) -> int | None:
        return self.holder

    def held_version(self) -> int | None:
        mine = self.holder == self.me and self.version > self.fenced_version
        return self.version if mine else None

    def fenced(self, version: int) -> None:
        self.fenced_version = max(self.fenced_version, version)

    def tick(self) -> None:
        pass


BROKERS = {b: BrokerAddress(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)}


def broker(tmp_path: Path, me: int, zk: FakeZooKeeper, view: LeaseView) -> GroupService:
    coordinator = GroupCoordinator(tmp_path / f"broker-{me}")
    return GroupService(
        coordinator, me, lambda: BROKERS, clock=lambda: 0.0, election=view, replica=FakeStore(zk)
    )


async def settle(svc: GroupService | None = None) -> None:
    """Let spawned loads and writes run (the fakes answer at once)."""
    if svc is not None:
        svc.tick()
    for _ in range(5):
        await asyncio.sleep(0)


def commit_data(generation: int, member_id: str, offset: int) -> dict[str, Any]:
    parts = [{"partition_index": 0, "committed_offset": offset, "committed_metadata": ""}]
    return {
        "group_id": "g",
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "topics": [{"name": "t", "partitions": parts}],
    }


def commit_errors(response: Any) -> set[int]:
    return {int(q.error_code) for t in response.topics for q in t.partitions}


async def join_and_sync(svc: GroupService, member_id: str = "") -> tuple[str, int]:
    joined = await answer(svc, 11, 7, join_data(member_id))
    assert joined.error_code == NONE, joined
    member, generation = joined.member_id, joined.generation_id
    sync = {
        "group_id": "g",
        "generation_id": generation,
        "member_id": member,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "assignments": [{"member_id": member, "assignment": b"all"}],
    }
    assert (await answer(svc, 14, 5, sync)).error_code == NONE
    return member, generation


def test_a_deposed_coordinators_commit_is_refused_and_the_next_one_carries_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        zk = FakeZooKeeper(lease_version=1)
        a_view, b_view = LeaseView(1, 1, 1), LeaseView(2, 1, 1)
        a, b = broker(tmp_path, 1, zk, a_view), broker(tmp_path, 2, zk, b_view)
        await settle(a)  # broker 1 holds the lease: it loads (nothing) first
        member, generation = await join_and_sync(a)
        assert commit_errors(await answer(a, 8, 8, commit_data(generation, member, 10))) == {NONE}
        assert (await answer(b, 8, 8, commit_data(generation, member, 11))).topics[0].partitions[
            0
        ].error_code == NOT_COORDINATOR
        # Broker 2 takes the lease; broker 1 has not heard of it yet (its watch is late).
        zk.lease_version = 2
        b_view.holder, b_view.version = 2, 2
        refused = await answer(a, 8, 8, commit_data(generation, member, 5))
        assert commit_errors(refused) == {NOT_COORDINATOR}, "the deposed coordinator acknowledged a commit"
        assert zk.offsets["g"][("t", 0)].offset == 10
        assert a_view.held_version() is None and a.coordinator.groups == {}  # it gave its groups up
        # FindCoordinator, wherever asked, names the lease's holder as that broker sees it.
        found = await answer(b, 10, 3, {"key": "g", "key_type": 0})
        assert (found.error_code, found.node_id, found.port) == (NONE, 2, 9002)
        # The new coordinator loads the group and carries on in the same generation.
        beat = {"group_id": "g", "generation_id": generation, "member_id": member}
        assert (await answer(b, 12, 4, beat)).error_code == NONE  # answered blindly while it loads
        await settle()
        assert (await answer(b, 12, 4, beat)).error_code == NONE
        assert commit_errors(await answer(b, 8, 8, commit_data(generation, member, 12))) == {NONE}
        assert zk.offsets["g"][("t", 0)].offset == 12
        _, rejoined = await join_and_sync(b, member)  # the leader rejoins: a rebalance, on from there
        assert rejoined == generation + 1 == zk.groups["g"].generation_id

    asyncio.run(scenario())


def test_a_deposed_coordinators_group_write_is_refused(tmp_path: Path) -> None:
    async def scenario() -> None:
        zk = FakeZooKeeper(lease_version=1)
        view = LeaseView(1, 1, 1)
        deposed = broker(tmp_path, 1, zk, view)
        await settle(deposed)
        zk.lease_version = 2  # another broker took the lease; this one has not heard of it
        joined = await answer(deposed, 11, 7, join_data())
        assert joined.error_code == NOT_COORDINATOR and "g" not in zk.groups
        assert view.held_version() is None and deposed.coordinator.groups == {}

    asyncio.run(scenario())


def test_a_new_coordinator_answers_load_in_progress_until_it_has_loaded(tmp_path: Path) -> None:
    async def scenario() -> None:
        zk = FakeZooKeeper(lease_version=3)
        zk.groups["g"] = GroupRecord("g", 4, GroupState.EMPTY)
        svc = broker(tmp_path, 1, zk, LeaseView(1, 1, 3))
        store = svc.replica
        assert isinstance(store, FakeStore)
        store.loading = asyncio.get_running_loop().create_future()
        assert (await answer(svc, 11, 7, join_data())).error_code == COORDINATOR_LOAD_IN_PROGRESS
        assert (
            await answer(svc, 12, 4, {"group_id": "g", "generation_id": 4, "member_id": "m"})
        ).error_code == NONE
        store.loading.set_result(list(zk.groups.values()))
        await settle()
        _, generation = await join_and_sync(svc)
        assert generation == 5 and zk.groups["g"].generation_id == 5

    asyncio.run(scenario())


def test_a_failed_store_refuses_what_it_held_and_what_waits(tmp_path: Path) -> None:
    c = GroupCoordinator(tmp_path, durable=True)
    c.join("a1", join_request(), 0)
    c.join("b1", join_request(client="b"), 0)
    stores: list[StoreGroup] = c.take_stores()
    assert [s.record.generation_id for s in stores] == [1]
    assert c.pending(stores[0])
    refused = dict(c.store_failed(stores[0], NOT_COORDINATOR))
    assert {r.error_code for r in refused.values()} == {NOT_COORDINATOR} and set(refused) == {"a1", "b1"}
    assert not c.pending(stores[0])


class UnreadableStore(FakeStore):
    def read(
        self, group: str, partitions: Iterable[tuple[str, int]] | None
    ) -> Awaitable[dict[tuple[str, int], CommittedOffset]]:
        return settled(error=ConnectionError("session expired"))


def test_offsets_the_store_cannot_read_are_the_groups_error_not_each_partitions(tmp_path: Path) -> None:
    """ZooKeeper unreadable (this broker's session just expired): COORDINATOR_NOT_AVAILABLE for the
    group and no partition, so librdkafka finds the coordinator again and asks there; an error on
    each partition made it drop them from its assignment and never consume them."""

    async def scenario() -> None:
        zk = FakeZooKeeper()
        svc = broker(tmp_path, 1, zk, LeaseView(1, 1, 0))
        svc.replica = UnreadableStore(zk)
        topics = [{"name": "t", "partition_indexes": [0, 1]}]
        fetched = await answer(svc, 9, 9, {"groups": [{"group_id": "g", "topics": topics}]})
        [group] = fetched.groups
        assert (group.error_code, list(group.topics)) == (COORDINATOR_NOT_AVAILABLE, [])

    asyncio.run(scenario())
