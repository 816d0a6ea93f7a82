"""The sans-IO group coordinator: join/sync barriers, timeouts via ticks, offsets that survive restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from broker.groups.coordinator import (
    GroupCoordinator,
    GroupSettings,
    GroupState,
    JoinRequest,
    JoinResult,
    SyncRequest,
    SyncResult,
)
from broker.kafka_errors import (
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
)
from broker.storage.group_offsets import FILE_NAME, CommittedOffset

SESSION = 10_000
REBALANCE = 5_000  # below the session timeout, so barriers end before sessions do


def join_request(
    member_id: str = "", protocols: tuple[tuple[str, bytes], ...] = (("range", b"m"),)
) -> JoinRequest:
    return JoinRequest("g", member_id, "consumer", protocols, SESSION, REBALANCE, client_id="c")


def results(completions: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out = dict(completions)
    assert len(out) == len(completions), "a token was answered twice"
    return out


@pytest.fixture
def coordinator(tmp_path: Path) -> GroupCoordinator:
    return GroupCoordinator(tmp_path)


def stable_pair(c: GroupCoordinator) -> tuple[str, str]:
    """A joins alone (generation 1), B joins, A rejoins: generation 2 with A leading, both synced."""
    a = results(c.join("a1", join_request(), 0))["a1"]
    a_id = a.member_id
    c.sync("as1", SyncRequest("g", a.generation_id, a_id, ((a_id, b"all"),)), 0)
    assert results(c.join("b1", join_request(), 10)) == {}
    assert results(c.heartbeat("h", "g", 1, a_id, 20))["h"].error_code == REBALANCE_IN_PROGRESS
    done = results(c.join("a2", join_request(a_id), 30))
    a2, b1 = done["a2"], done["b1"]
    assert a2.generation_id == b1.generation_id == 2
    assert a2.leader == b1.leader == a_id
    assert {m.member_id for m in a2.members} == {a_id, b1.member_id} and b1.members == ()
    assert results(c.sync("bs", SyncRequest("g", 2, b1.member_id), 40)) == {}
    synced = results(c.sync("as2", SyncRequest("g", 2, a_id, ((a_id, b"p0"), (b1.member_id, b"p1"))), 50))
    assert synced["as2"] == SyncResult(NONE, b"p0", "consumer", "range")
    assert synced["bs"].assignment == b"p1"
    assert c.groups["g"].state is GroupState.STABLE
    return a_id, b1.member_id


def test_single_member_and_a_second_one(coordinator: GroupCoordinator) -> None:
    a_id, b_id = stable_pair(coordinator)
    assert results(coordinator.heartbeat("h", "g", 2, b_id, 60))["h"].error_code == NONE
    # a follower that rejoins with the same protocols in a stable group just gets the generation back
    again = results(coordinator.join("b2", join_request(b_id), 70))["b2"]
    assert (again.error_code, again.generation_id, again.members) == (NONE, 2, ())
    assert results(coordinator.sync("bs", SyncRequest("g", 2, b_id), 80))["bs"].assignment == b"p1"


def test_leader_rejoin_in_a_stable_group_then_a_silent_leader_expires(coordinator: GroupCoordinator) -> None:
    """The coordinator's side of the CI log of test_broker_groups (Kafka's behaviour at each step).

    The leader assigned nothing (no topic metadata yet) and rejoins once metadata arrives; the
    follower hears of it on its heartbeat; then the leader's client never applies its SyncGroup answer
    and stops heartbeating: its session expires, and its LeaveGroup on close finds no such member.
    """
    a_id, b_id = stable_pair(coordinator)
    assert results(coordinator.join("a3", join_request(a_id), 100)) == {}  # the leader rejoins: rebalance
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert results(coordinator.heartbeat("h", "g", 2, b_id, 110))["h"].error_code == REBALANCE_IN_PROGRESS
    done = results(coordinator.join("b3", join_request(b_id), 120))
    assert {r.generation_id for r in done.values()} == {3} and done["a3"].leader == a_id
    assert results(coordinator.sync("bs", SyncRequest("g", 3, b_id), 130)) == {}
    synced = results(coordinator.sync("as", SyncRequest("g", 3, a_id, ((a_id, b"p23"), (b_id, b"p01"))), 140))
    assert synced["bs"].assignment == b"p01" and synced["as"].assignment == b"p23"
    now = 140
    while now <= 140 + SESSION:  # B heartbeats, A is silent
        now += 3000
        coordinator.heartbeat("hb", "g", coordinator.groups["g"].generation_id, b_id, now)
        results(coordinator.tick(now))
    group = coordinator.groups["g"]
    assert list(group.members) == [b_id] and group.state is GroupState.PREPARING_REBALANCE
    assert results(coordinator.heartbeat("h", "g", 3, b_id, now))["h"].error_code == REBALANCE_IN_PROGRESS
    left = results(coordinator.leave("l", "g", [(a_id, None)], now + 1))["l"]
    assert (left.error_code, left.members) == (NONE, ((a_id, None, UNKNOWN_MEMBER_ID),))
    b = results(coordinator.join("b4", join_request(b_id), now + 2))["b4"]
    assert (b.generation_id, b.leader, [m.member_id for m in b.members]) == (4, b_id, [b_id])


def test_rebalance_timeout_drops_members_that_do_not_rejoin(coordinator: GroupCoordinator) -> None:
    a = results(coordinator.join("a1", join_request(), 0))["a1"]
    coordinator.sync("as", SyncRequest("g", 1, a.member_id, ((a.member_id, b"x"),)), 0)
    assert results(coordinator.join("b1", join_request(), 100)) == {}
    assert results(coordinator.tick(100 + REBALANCE - 1)) == {}
    done = results(coordinator.tick(100 + REBALANCE))
    b = done["b1"]
    assert (b.error_code, b.generation_id, b.leader) == (NONE, 2, b.member_id)
    assert list(coordinator.groups["g"].members) == [b.member_id]
    assert (
        results(coordinator.heartbeat("h", "g", 1, a.member_id, REBALANCE + 200))["h"].error_code
        == UNKNOWN_MEMBER_ID
    )


def test_session_timeout_triggers_rebalance(coordinator: GroupCoordinator) -> None:
    a_id, b_id = stable_pair(coordinator)
    now = 50
    while now < 50 + SESSION + 500:  # A heartbeats every 3 s, B is gone
        now += 3000
        coordinator.heartbeat("ha", "g", coordinator.groups["g"].generation_id, a_id, now)
        results(coordinator.tick(now))
    group = coordinator.groups["g"]
    assert group.state is GroupState.PREPARING_REBALANCE and list(group.members) == [a_id]
    assert results(coordinator.heartbeat("h", "g", 2, a_id, now))["h"].error_code == REBALANCE_IN_PROGRESS
    a = results(coordinator.join("a3", join_request(a_id), now + 1))["a3"]
    assert (a.generation_id, [m.member_id for m in a.members]) == (3, [a_id])


def test_leave_and_last_member_leaving_empties_the_group(coordinator: GroupCoordinator) -> None:
    a_id, b_id = stable_pair(coordinator)
    left = results(coordinator.leave("l", "g", [(b_id, None), ("nobody", None)], 100))["l"]
    assert left.members == ((b_id, None, NONE), ("nobody", None, UNKNOWN_MEMBER_ID))
    assert coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert results(coordinator.join("a", join_request(a_id), 110))["a"].generation_id == 3
    coordinator.leave("l2", "g", [(a_id, None)], 120)
    group = coordinator.groups["g"]
    assert (group.state, group.generation_id, group.members) == (GroupState.EMPTY, 4, {})


def test_sync_timeout_removes_members_that_never_synced(coordinator: GroupCoordinator) -> None:
    a = results(coordinator.join("a", join_request(), 0))["a"]
    b_join = results(coordinator.join("b", join_request(), 1))
    assert b_join == {}  # the join of B is waiting for A
    done = results(coordinator.join("a2", join_request(a.member_id), 2))
    b_id = done["b"].member_id
    assert results(coordinator.sync("bs", SyncRequest("g", 2, b_id), 3)) == {}
    out = results(coordinator.tick(2 + REBALANCE))  # the leader A never sent SyncGroup
    assert out["bs"].error_code == REBALANCE_IN_PROGRESS
    assert list(coordinator.groups["g"].members) == [b_id]


def test_errors(coordinator: GroupCoordinator) -> None:
    bad = JoinRequest("g", "", "consumer", (("range", b""),), 10, REBALANCE)
    assert results(coordinator.join("x", bad, 0))["x"].error_code == INVALID_SESSION_TIMEOUT
    assert results(coordinator.join("x", join_request("ghost"), 0))["x"].error_code == UNKNOWN_MEMBER_ID
    a = results(coordinator.join("a", join_request(), 0))["a"]
    other = JoinRequest("g", "", "consumer", (("roundrobin", b""),), SESSION, REBALANCE)
    assert results(coordinator.join("x", other, 1))["x"].error_code == INCONSISTENT_GROUP_PROTOCOL
    connect = JoinRequest("g", "", "connect", (("range", b""),), SESSION, REBALANCE)
    assert results(coordinator.join("x", connect, 1))["x"].error_code == INCONSISTENT_GROUP_PROTOCOL
    assert (
        results(coordinator.sync("s", SyncRequest("g", 7, a.member_id), 2))["s"].error_code
        == ILLEGAL_GENERATION
    )
    assert results(coordinator.heartbeat("h", "g", 7, a.member_id, 2))["h"].error_code == ILLEGAL_GENERATION
    assert results(coordinator.heartbeat("h", "nog", 1, a.member_id, 2))["h"].error_code == UNKNOWN_MEMBER_ID
    coordinator.join("b", join_request(), 3)  # now preparing a rebalance
    assert (
        results(coordinator.sync("s", SyncRequest("g", 1, a.member_id), 4))["s"].error_code
        == REBALANCE_IN_PROGRESS
    )


def test_protocol_vote(coordinator: GroupCoordinator) -> None:
    both = (("roundrobin", b"r"), ("range", b"g"))
    a = results(coordinator.join("a", join_request(protocols=both), 0))["a"]
    assert a.protocol_name == "roundrobin"
    coordinator.join("b", join_request(protocols=(("range", b"g2"), ("roundrobin", b"r2"))), 1)
    coordinator.join("c", join_request(protocols=(("range", b"g3"),)), 2)
    done = results(coordinator.join("a2", join_request(a.member_id, both), 3))
    assert {r.protocol_name for r in done.values()} == {"range"}
    leader = done["a2"]
    assert sorted(m.metadata for m in leader.members) == [b"g", b"g2", b"g3"]


def test_initial_rebalance_delay_gathers_members(tmp_path: Path) -> None:
    c = GroupCoordinator(tmp_path, GroupSettings(initial_rebalance_delay_ms=3000))
    assert results(c.join("a", join_request(), 0)) == {}
    assert results(c.join("b", join_request(), 1000)) == {}
    done = results(c.tick(3000))
    assert {r.generation_id for r in done.values()} == {1} and len(done) == 2


def test_offsets_commit_fetch_and_survive_restart(tmp_path: Path) -> None:
    c = GroupCoordinator(tmp_path)
    a_id, b_id = stable_pair(c)
    offsets = {("t0", 0): CommittedOffset(42, 3, "m"), ("t0", 1): CommittedOffset(7)}
    assert c.commit_offsets("g", 2, a_id, offsets, 100) == {("t0", 0): NONE, ("t0", 1): NONE}
    assert set(c.commit_offsets("g", 1, a_id, offsets, 100).values()) == {ILLEGAL_GENERATION}
    assert set(c.commit_offsets("g", 2, "ghost", offsets, 100).values()) == {UNKNOWN_MEMBER_ID}
    assert set(c.commit_offsets("g", -1, "", offsets, 100).values()) == {
        UNKNOWN_MEMBER_ID
    }  # the group is active
    # a consumer with manual assignment commits with generation -1 to a group without members
    assert c.commit_offsets("manual", -1, "", {("t1", 0): CommittedOffset(5)}, 100) == {("t1", 0): NONE}
    assert set(c.commit_offsets("stale", 3, "x", offsets, 100).values()) == {ILLEGAL_GENERATION}
    too_big = {("t0", 0): CommittedOffset(1, -1, "x" * 5000)}
    assert c.commit_offsets("manual", -1, "", too_big, 100) == {("t0", 0): 12}
    c.close()
    with open(tmp_path / FILE_NAME, "ab") as f:
        f.write(b'{"group":"g","offsets":[["t0",0,99')  # a commit torn by a crash: never acknowledged
    restarted = GroupCoordinator(tmp_path)
    fetched = restarted.fetch_offsets("g", [("t0", 0), ("t0", 1), ("t0", 2)])
    assert [(f.offset, f.leader_epoch, f.metadata) for f in fetched.values()] == [
        (42, 3, "m"),
        (7, -1, ""),
        (-1, -1, ""),
    ]
    assert list(restarted.fetch_offsets("manual", None)) == [("t1", 0)]
    assert restarted.commit_offsets("manual", -1, "", {("t1", 0): CommittedOffset(6)}, 0) == {("t1", 0): NONE}
    restarted.store.compact()
    restarted.close()
    again = GroupCoordinator(tmp_path)
    assert again.fetch_offsets("manual", None)[("t1", 0)].offset == 6
    assert again.fetch_offsets("g", None)[("t0", 0)].offset == 42


def test_unload_answers_waiters(coordinator: GroupCoordinator) -> None:
    a = results(coordinator.join("a", join_request(), 0))["a"]
    coordinator.join("b", join_request(), 1)
    out = results(coordinator.unload())
    assert isinstance(out["b"], JoinResult) and out["b"].error_code == 16
    assert coordinator.groups == {}
    assert a.error_code == NONE
