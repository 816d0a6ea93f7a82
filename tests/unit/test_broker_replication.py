"""The sans-IO replication state machine, the controller's election rules, producer de-duplication."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.controller import elect_leader, initial_state
from broker.follower import leader_epoch_truncation
from broker.kafka_errors import OUT_OF_ORDER_SEQUENCE_NUMBER
from broker.partition_state import LeaderAndIsr, PartitionState
from broker.producer_state import Duplicate, ProducerState
from broker.replication import (
    HighWatermarkAdvanced,
    PartitionReplica,
    Role,
    WriteIsr,
)
from broker.storage import LeaderEpochCache


def leader(
    isr: tuple[int, ...] = (1, 2, 3), leo: int = 0, hw: int = 0, lag_ms: int = 1000
) -> PartitionReplica:
    replica = PartitionReplica(broker_id=1, lag_time_max_ms=lag_ms, high_watermark=hw)
    replica.become_leader(
        PartitionState(leader=1, leader_epoch=5, isr=isr, replicas=(1, 2, 3), zk_version=7),
        log_end_offset=leo,
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
    assert actions == [WriteIsr(LeaderAndIsr(1, 5, (1, 2), 7), "shrink: [3] lagging")]
    assert r.on_tick(now_ms=1600) == []  # one write in flight at a time
    assert r.state_changed(
        PartitionState(leader=1, leader_epoch=5, isr=(1, 2), replicas=(1, 2, 3), zk_version=8)
    ) == [HighWatermarkAdvanced(5)]


def test_a_landed_isr_write_is_taken_only_in_the_epoch_it_was_written_in() -> None:
    held = PartitionState(leader=1, leader_epoch=5, isr=(1, 2, 3), replicas=(1, 2, 3), zk_version=7)
    r = leader(lag_ms=1000)
    r.on_local_append(5)
    r.on_follower_fetch(2, 5, now_ms=1400)
    (write,) = r.on_tick(now_ms=1500)
    assert isinstance(write, WriteIsr)
    state, actions = r.on_isr_written(held, write.state, 8)
    assert state == PartitionState(leader=1, leader_epoch=5, isr=(1, 2), replicas=(1, 2, 3), zk_version=8)
    assert actions == [HighWatermarkAdvanced(5)] and not r.isr_write_in_flight
    lost = leader()
    lost.isr_write_in_flight = True
    assert lost.on_isr_written(held, write.state, None) == (held, []) and not lost.isr_write_in_flight
    moved_on = leader()
    moved_on.leader_epoch = 6  # a new epoch began before the write's outcome arrived
    assert moved_on.on_isr_written(held, write.state, 8) == (held, [])


def test_caught_up_follower_rejoins_the_isr() -> None:
    r = leader(isr=(1, 2))
    r.on_local_append(4)
    r.on_follower_fetch(2, 4, now_ms=1)
    assert r.high_watermark == 4
    assert r.on_follower_fetch(3, 2, now_ms=2) == []
    actions = r.on_follower_fetch(3, 4, now_ms=3)
    assert actions == [WriteIsr(LeaderAndIsr(1, 5, (1, 2, 3), 7), "expand: 3 caught up")]


def test_follower_hw_is_capped_by_its_log_end() -> None:
    r = PartitionReplica(broker_id=2, lag_time_max_ms=1000)
    r.become_follower(PartitionState(leader=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2), zk_version=1))
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
    assert state.check(7, 0, 9) == OUT_OF_ORDER_SEQUENCE_NUMBER
    state.truncate(100)
    assert state.check(7, 0, 9) is None  # forgotten after truncation


def _epochs(tmp_path: Path, entries: list[tuple[int, int]], log_end: int) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", lambda: log_end)
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


@dataclass
class _FollowerLog:
    """The follower's log as its truncation reads it (broker.follower.FollowerLog)."""

    epochs: LeaderEpochCache
    log_end_offset: int
    high_watermark: int = 0

    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch)


def _follow(
    tmp_path: Path, follower: list[tuple[int, int]], f_leo: int, leader: list[tuple[int, int]], l_leo: int
) -> int:
    """Run the follower's OffsetForLeaderEpoch rounds against a leader; return where it ends."""
    (tmp_path / "f").mkdir()
    (tmp_path / "l").mkdir()
    mine = _FollowerLog(_epochs(tmp_path / "f", follower, f_leo), f_leo)
    theirs = _epochs(tmp_path / "l", leader, l_leo)
    for _ in range(10):
        epoch, end = theirs.end_offset_for(mine.latest_epoch())
        decision = leader_epoch_truncation(epoch, end, mine)
        if decision.offset is not None:
            mine.log_end_offset = min(mine.log_end_offset, decision.offset)
            mine.epochs.truncate_from_end(mine.log_end_offset)
        if decision.done:
            return mine.log_end_offset
    raise AssertionError("truncation did not converge")


def test_follower_keeps_what_the_leader_has(tmp_path: Path) -> None:
    assert _follow(tmp_path, [(0, 0)], 80, [(0, 0), (1, 100)], 120) == 80


def test_follower_drops_its_unreplicated_epoch(tmp_path: Path) -> None:
    # the follower led epoch 1 from offset 50; the new leader never saw it (its epoch 2 starts at 60)
    assert _follow(tmp_path, [(0, 0), (1, 50)], 80, [(0, 0), (2, 60)], 100) == 50


def test_unknown_epoch_takes_another_round(tmp_path: Path) -> None:
    # KIP-279: the leader answers epoch 2, which the follower never had; its own epoch 0 ends at 40,
    # and the leader's epoch 0 ends at 30: the records in [30, 40) differ and must go
    assert _follow(tmp_path, [(0, 0), (3, 40)], 70, [(0, 0), (2, 30), (4, 50)], 90) == 30


def test_empty_epoch_at_the_log_end_does_not_loop(tmp_path: Path) -> None:
    assert _follow(tmp_path, [(0, 0), (3, 40)], 40, [(0, 0), (2, 30), (4, 50)], 90) == 30
