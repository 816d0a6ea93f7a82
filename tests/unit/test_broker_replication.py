"""The sans-IO replication state machine, the controller's election rules, producer de-duplication."""

from __future__ import annotations

from broker.controller import elect_leader, initial_state
from broker.producer_state import ERR_OUT_OF_ORDER_SEQUENCE, Duplicate, ProducerState
from broker.replication import HighWatermarkAdvanced, PartitionReplica, Role, WriteIsr


def leader(
    isr: tuple[int, ...] = (1, 2, 3), leo: int = 0, hw: int = 0, lag_ms: int = 1000
) -> PartitionReplica:
    replica = PartitionReplica(broker_id=1, lag_time_max_ms=lag_ms)
    replica.become_leader(
        leader_epoch=5,
        isr=isr,
        replicas=(1, 2, 3),
        zk_version=7,
        log_end_offset=leo,
        high_watermark=hw,
        now_ms=0,
    )
    return replica


def test_hw_is_the_minimum_leo_of_the_isr() -> None:
    r = leader()
    assert r.on_local_append(10) == []
    assert r.on_follower_fetch(2, 10, now_ms=1) == []  # follower 3 has not fetched yet
    assert r.on_follower_fetch(3, 6, now_ms=1) == [HighWatermarkAdvanced(6)]
    assert r.on_follower_fetch(3, 10, now_ms=2) == [HighWatermarkAdvanced(10)]
    assert r.acks_all_done(9) and not r.acks_all_done(10)


def test_hw_never_goes_back() -> None:
    r = leader(leo=10, hw=8)
    assert r.high_watermark == 8
    r.on_follower_fetch(2, 3, now_ms=1)
    assert r.high_watermark == 8


def test_lagging_follower_leaves_the_isr_and_hw_advances_after_the_write() -> None:
    r = leader(lag_ms=1000)
    r.on_local_append(5)
    r.on_follower_fetch(2, 5, now_ms=100)
    assert r.on_tick(now_ms=900) == []
    r.on_follower_fetch(2, 5, now_ms=1400)
    actions = r.on_tick(now_ms=1500)
    assert actions == [WriteIsr((1, 2), 5, 7, "shrink: [3] lagging")]
    assert r.on_tick(now_ms=1600) == []  # one write in flight at a time
    assert r.state_changed(isr=(1, 2), replicas=(1, 2, 3), zk_version=8) == [HighWatermarkAdvanced(5)]


def test_caught_up_follower_rejoins_the_isr() -> None:
    r = leader(isr=(1, 2))
    r.on_local_append(4)
    r.on_follower_fetch(2, 4, now_ms=1)
    assert r.high_watermark == 4
    assert r.on_follower_fetch(3, 2, now_ms=2) == []
    actions = r.on_follower_fetch(3, 4, now_ms=3)
    assert actions == [WriteIsr((1, 2, 3), 5, 7, "expand: 3 caught up")]


def test_follower_hw_is_capped_by_its_log_end() -> None:
    r = PartitionReplica(broker_id=2, lag_time_max_ms=1000)
    r.become_follower(leader_id=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2), zk_version=1)
    assert r.role is Role.FOLLOWER
    r.log_end_offset = 5
    assert r.on_leader_high_watermark(9) == [HighWatermarkAdvanced(5)]
    r.on_truncated(3)
    assert r.high_watermark == 3


def test_clean_election_prefers_isr_order_and_drops_dead_members() -> None:
    e = elect_leader(
        replicas=(1, 2, 3), isr=(1, 2, 3), live={2, 3}, unclean_allowed=False, policy="first-in-isr"
    )
    assert (e.leader, e.isr, e.unclean) == (2, (2, 3), False)


def test_longest_log_policy() -> None:
    e = elect_leader(
        replicas=(1, 2, 3),
        isr=(1, 2, 3),
        live={2, 3},
        unclean_allowed=False,
        policy="longest-log",
        log_ends={2: 10, 3: 12},
    )
    assert e.leader == 3


def test_no_live_isr_member_means_offline_unless_unclean() -> None:
    clean = elect_leader(
        replicas=(1, 2, 3), isr=(1,), live={2, 3}, unclean_allowed=False, policy="first-in-isr"
    )
    assert clean.leader == -1 and clean.isr == (1,)
    unclean = elect_leader(
        replicas=(1, 2, 3), isr=(1,), live={2, 3}, unclean_allowed=True, policy="first-in-isr"
    )
    assert (unclean.leader, unclean.isr, unclean.unclean) == (2, (2,), True)


def test_initial_state_uses_live_replicas() -> None:
    assert initial_state((3, 1, 2), {1, 2}).leader == 1


def test_producer_sequences_deduplicate_and_reject_gaps() -> None:
    state = ProducerState()
    assert state.check(7, 0, 0) is None
    state.record(7, 0, 0, 4, base_offset=100)
    assert state.check(7, 0, 0) == Duplicate(100, 104)
    assert state.check(7, 0, 5) is None
    assert state.check(7, 0, 9) == ERR_OUT_OF_ORDER_SEQUENCE
    state.truncate(100)
    assert state.check(7, 0, 9) is None  # forgotten after truncation
