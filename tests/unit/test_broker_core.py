"""The sans-IO core's decisions: the follower protocol, role changes, produce admission, the controller."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.controller import (
    CreateState,
    ElectLeader,
    RemoveFromIsr,
    offline_partitions,
    reconcile,
)
from broker.eligible import next_elr
from broker.follower import (
    Append,
    Backoff,
    FollowerReplica,
    ListLeaderOffsets,
    RestartAt,
    Truncate,
    leader_epoch_truncation,
    v0_truncation,
)
from broker.kafka_errors import (
    FENCED_LEADER_EPOCH,
    INVALID_REQUIRED_ACKS,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
)
from broker.partition_state import LeaderAndIsr, PartitionState, leadership_granted
from broker.replication import PartitionReplica, Role, RoleChange, WriteIsr, role_change
from broker.storage import LeaderEpochCache


class Log:
    """A follower's log as the decisions read it."""

    def __init__(self, leo: int, hw: int, epochs: list[tuple[int, int]], tmp: Path | None = None) -> None:
        self.log_end_offset = leo
        self.high_watermark = hw
        self.epochs = LeaderEpochCache(tmp, lambda: self.log_end_offset)
        for epoch, start in epochs:
            self.epochs.assign(epoch, start)

    def latest_epoch(self) -> int:
        return self.epochs.latest_epoch()

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return self.epochs.end_offset_for(epoch)


def test_high_watermark_follower_truncates_to_its_hw_at_once_and_fetches() -> None:
    f = FollowerReplica("high-watermark", leader_id=1, leader_epoch=3)
    log = Log(leo=10, hw=7, epochs=[(0, 0), (2, 5)])
    assert f.start(log) == [Truncate(7, "high-watermark truncation on becoming follower")]
    assert not f.asks_epoch
    assert f.on_fetch_answer(NONE, 9) == [Append(9)]


def test_leader_epoch_follower_asks_first_and_keeps_what_the_leader_has() -> None:
    f = FollowerReplica("leader-epoch", leader_id=1, leader_epoch=3)
    log = Log(leo=10, hw=7, epochs=[(0, 0), (2, 5)])
    assert f.start(log) == []
    assert f.asks_epoch and f.epoch_request(log) == 2
    assert f.on_fetch_answer(NONE, 9) == []  # not fetching before the truncation
    assert f.on_epoch_answer(FENCED_LEADER_EPOCH, -1, -1, log) == [] and f.asks_epoch
    actions = f.on_epoch_answer(NONE, 2, 12, log)
    assert actions == [Truncate(10, "leader's epoch 2 ends at 12")] and not f.asks_epoch


def test_leader_epoch_follower_cuts_back_an_epoch_the_leader_never_had_and_asks_again() -> None:
    f = FollowerReplica("leader-epoch", leader_id=1, leader_epoch=4)
    log = Log(leo=10, hw=4, epochs=[(0, 0), (2, 5)])
    f.start(log)
    # the leader knows epoch 1 (ending at 8) but never had our epoch 2
    actions = f.on_epoch_answer(NONE, 1, 8, log)
    assert actions == [Truncate(5, "no epoch 1 here; own epoch 0 ends at 5", forget_epochs_from=True)]
    assert f.asks_epoch


def test_out_of_range_past_the_leaders_end() -> None:
    for truncation, expected in (
        ("leader-epoch", []),
        ("high-watermark", [Truncate(6, "fetch offset past the leader's log end")]),
    ):
        f = FollowerReplica(truncation, leader_id=1, leader_epoch=3)
        log = Log(leo=10, hw=5, epochs=[(0, 0)])
        f.start(log)
        f.phase = f.phase.FETCH
        assert f.on_fetch_answer(OFFSET_OUT_OF_RANGE, 5) == [ListLeaderOffsets()]
        assert f.on_leader_offsets(0, 6, log) == expected
        assert f.asks_epoch == (truncation == "leader-epoch")
    f = FollowerReplica("leader-epoch", 1, 3)
    assert f.on_leader_offsets(20, 30, Log(leo=10, hw=5, epochs=[])) == [RestartAt(20)]
    assert f.on_fetch_answer(FENCED_LEADER_EPOCH, 5) == [Backoff()]


def test_a_batch_straddling_the_log_end_is_taken_from_the_leader() -> None:
    f = FollowerReplica("leader-epoch", 1, 3)
    log = Log(leo=10, hw=5, epochs=[])
    assert f.on_append_out_of_order(8, 9, log) == [Truncate(8, "leader batch straddles log end"), Append(9)]
    assert f.on_append_out_of_order(12, 9, log) == []


def test_role_changes() -> None:
    s = PartitionState(leader=1, leader_epoch=2, isr=(1, 2), replicas=(1, 2), zk_version=5)
    assert role_change(3, None, s, Role.NONE) is RoleChange.NOT_A_REPLICA
    assert role_change(1, None, s, Role.NONE) is RoleChange.BECOME_LEADER
    assert role_change(1, s, s, Role.LEADER) is RoleChange.LEADER_UPDATE
    assert role_change(1, s, s, Role.FOLLOWER) is RoleChange.BECOME_LEADER
    assert role_change(2, None, s, Role.NONE) is RoleChange.BECOME_FOLLOWER
    assert role_change(2, s, s, Role.FOLLOWER) is RoleChange.FOLLOWER_UPDATE
    newer = PartitionState(leader=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2), zk_version=6)
    assert role_change(2, s, newer, Role.FOLLOWER) is RoleChange.BECOME_FOLLOWER
    assert role_change(2, s, s, Role.LEADER) is RoleChange.BECOME_FOLLOWER


def test_produce_admission_follows_min_insync_replicas() -> None:
    r = PartitionReplica(1, 1000)
    assert r.admit_produce(-1, 2) == NOT_LEADER_OR_FOLLOWER
    r.become_leader(
        PartitionState(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2), zk_version=0),
        log_end_offset=0,
        now_ms=0,
    )
    assert r.admit_produce(-1, 2) == NOT_ENOUGH_REPLICAS
    assert r.admit_produce(1, 2) == NONE  # acks=1 never looks at the ISR
    assert r.admit_produce(2, 1) == INVALID_REQUIRED_ACKS
    assert r.admit_produce(-1, 1) == NONE
    assert r.produce_answer(-1, 2) == NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert r.produce_answer(-1, 1) == NONE and r.produce_answer(1, 2) == NONE


@dataclass(frozen=True)
class Elections:
    """The controller's election settings (broker.controller.ElectionSettings), Kafka's defaults."""

    unclean_leader_election: bool = False
    election_policy: str = "first-in-isr"
    elr_min_insync: int = 0
    isr_broker_epoch_check: bool = False


def test_controller_reconcile_creates_elects_and_leaves_offline_partitions_alone() -> None:
    assignments = {"t": {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}}
    states = {
        ("t", 1): LeaderAndIsr(leader=2, leader_epoch=4, isr=(2, 3), zk_version=7),
        ("t", 2): LeaderAndIsr(leader=-1, leader_epoch=1, isr=(3,), zk_version=2),
    }
    live = {1, 3}
    actions = reconcile(assignments=assignments, states=states, live=live, settings=Elections())
    assert [type(a) for a in actions] == [CreateState, ElectLeader, ElectLeader]
    create, elect, back = actions
    assert (
        isinstance(back, ElectLeader) and back.state.leader == 3
    )  # an offline partition's ISR member is back
    assert isinstance(create, CreateState) and create.state.leader == 1 and create.state.isr == (1, 3)
    assert isinstance(elect, ElectLeader)
    assert (elect.state.leader_epoch, elect.state.zk_version, elect.state.leader, elect.state.isr) == (
        5,
        7,
        3,
        (3,),
    )
    states[("t", 2)] = LeaderAndIsr(leader=-1, leader_epoch=1, isr=(2,), zk_version=2)
    offline = offline_partitions(assignments, states, live)
    assert offline == {("t", 1): [3, 1], ("t", 2): [3, 1]}
    actions = reconcile(assignments=assignments, states=states, live=live, settings=Elections())
    assert all(
        not (isinstance(a, ElectLeader) and a.partition == ("t", 2)) for a in actions
    )  # offline stays offline
    unclean = reconcile(
        assignments=assignments,
        states=states,
        live=live,
        settings=Elections(unclean_leader_election=True, election_policy="longest-log"),
        log_ends={("t", 2): {3: 5, 1: 9}},
    )
    elected = [a for a in unclean if isinstance(a, ElectLeader) and a.partition == ("t", 2)]
    assert elected and elected[0].state.leader == 1 and elected[0].unclean


def test_controller_elects_a_new_leader_in_a_new_epoch_when_the_leader_restarted() -> None:
    """ZooKeeper-mode Kafka: a broker that registered again (a new broker epoch) is handled as
    failed and started; it never resumes leading the epoch it led before."""
    assignments = {"t": {0: (1, 2, 3)}}
    states = {("t", 0): LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), zk_version=7, written=100)}
    same = reconcile(
        assignments=assignments,
        states=states,
        live={1, 2, 3},
        settings=Elections(),
        registered={1: 50, 2: 51, 3: 52},
    )
    assert same == []
    restarted = reconcile(
        assignments=assignments,
        states=states,
        live={1, 2, 3},
        settings=Elections(),
        registered={1: 120, 2: 51, 3: 52},
    )
    (elect,) = restarted
    assert isinstance(elect, ElectLeader)
    assert (elect.state.leader_epoch, elect.state.leader, elect.state.isr) == (5, 2, (2, 3))
    # the last replica standing: elected again, but in a new epoch
    alone = {("t", 0): LeaderAndIsr(leader=1, leader_epoch=4, isr=(1,), zk_version=7, written=100)}
    (again,) = reconcile(
        assignments=assignments,
        states=alone,
        live={1, 2, 3},
        settings=Elections(),
        registered={1: 120, 2: 51, 3: 52},
    )
    assert isinstance(again, ElectLeader) and (again.state.leader_epoch, again.state.leader) == (5, 1)


def test_controller_removes_dead_brokers_from_the_isr_but_never_empties_it() -> None:
    assignments = {"t": {0: (1, 2, 3), 1: (2, 1, 3)}}
    states = {
        ("t", 0): LeaderAndIsr(leader=1, leader_epoch=4, isr=(1, 2, 3), zk_version=7),
        ("t", 1): LeaderAndIsr(leader=2, leader_epoch=1, isr=(2,), zk_version=3),
    }
    actions = reconcile(assignments=assignments, states=states, live={1, 2}, settings=Elections())
    (removal,) = actions
    assert isinstance(removal, RemoveFromIsr)
    assert (removal.state, removal.removed) == (LeaderAndIsr(1, 4, (1, 2), 7), (3,))


def test_a_restarted_broker_does_not_lead_an_epoch_granted_before_it_registered() -> None:
    state = PartitionState(leader=1, leader_epoch=3, isr=(1, 2), replicas=(1, 2), zk_version=4, written=90)
    assert leadership_granted(1, state, registered=100).leader == -1
    assert leadership_granted(1, state, registered=80) is state
    assert leadership_granted(2, state, registered=100) is state  # a follower follows as before
    unknown = PartitionState(leader=1, leader_epoch=3, isr=(1,), replicas=(1,), zk_version=4)
    assert leadership_granted(1, unknown, registered=100) is unknown  # standalone: no zxids


def test_eligible_leader_replicas_join_below_min_insync_and_clear_at_it() -> None:
    assert next_elr(isr_before=(1, 2, 3), isr_after=(1, 2), elr=(), min_insync=2) == ()
    assert next_elr(isr_before=(1, 2), isr_after=(1,), elr=(), min_insync=2) == (2,)
    assert next_elr(isr_before=(1,), isr_after=(1, 3), elr=(2,), min_insync=3) == (2,)
    assert next_elr(isr_before=(1,), isr_after=(1, 2), elr=(2, 3), min_insync=2) == ()


def test_with_elr_the_leader_holds_the_hw_below_min_insync_and_writes_the_elr() -> None:
    r = PartitionReplica(1, 1000, elr_min_insync=2)
    r.become_leader(
        PartitionState(leader=1, leader_epoch=0, isr=(1, 2), replicas=(1, 2), zk_version=0),
        log_end_offset=5,
        now_ms=0,
    )
    r.on_follower_fetch(2, 5, now_ms=10)
    assert r.high_watermark == 5
    (shrink,) = r.on_tick(now_ms=5000)
    assert isinstance(shrink, WriteIsr) and shrink.state.isr == (1,) and shrink.state.elr == (2,)
    r.state_changed(
        PartitionState(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2), zk_version=1, elr=(2,))
    )
    r.on_local_append(9)
    assert r.high_watermark == 5  # strict min ISR: alone, the leader acknowledges nothing more
    off = PartitionReplica(1, 1000)
    off.become_leader(
        PartitionState(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2), zk_version=0),
        log_end_offset=5,
        now_ms=0,
    )
    assert off.high_watermark == 5


def test_with_elr_the_controller_elects_an_eligible_replica_before_the_last_one_standing() -> None:
    assignments = {"t": {0: (1, 2, 3)}}
    alone = LeaderAndIsr(leader=1, leader_epoch=4, isr=(1,), zk_version=7, written=100, elr=(2, 3))
    restarted = {1: 120, 2: 51, 3: 52}
    (elect,) = reconcile(
        states={("t", 0): alone},
        live={1, 2, 3},
        registered=restarted,
        settings=Elections(elr_min_insync=2),
        assignments=assignments,
    )
    assert isinstance(elect, ElectLeader)
    assert (elect.state.leader, elect.state.isr, elect.state.elr) == (2, (2,), (3,))
    (without,) = reconcile(
        states={("t", 0): alone},
        live={1, 2, 3},
        registered=restarted,
        settings=Elections(),
        assignments=assignments,
    )
    assert isinstance(without, ElectLeader) and without.state.leader == 1  # KIP-966's problem
    # an eligible replica that restarted since (an unclean shutdown) leaves the ELR
    led = LeaderAndIsr(leader=2, leader_epoch=5, isr=(2,), zk_version=8, written=130, elr=(3,))
    (cleanup,) = reconcile(
        states={("t", 0): led},
        live={1, 2, 3},
        registered={1: 120, 2: 51, 3: 140},
        settings=Elections(elr_min_insync=2),
        assignments=assignments,
    )
    assert isinstance(cleanup, RemoveFromIsr) and cleanup.state.isr == (2,) and cleanup.state.elr == ()


def test_with_the_broker_epoch_check_a_re_registered_follower_leaves_the_isr() -> None:
    """KIP-903: ISR membership belongs to a broker epoch; a follower that registered again (maybe
    with an empty disk) must catch up again, and is never elected from its old membership."""
    assignments = {"t": {0: (1, 2, 3)}}
    state = LeaderAndIsr(leader=1, leader_epoch=2, isr=(1, 2, 3), zk_version=5, written=100)
    registered = {1: 10, 2: 150, 3: 11}
    kept = reconcile(
        states={("t", 0): state},
        live={1, 2, 3},
        registered=registered,
        settings=Elections(),
        assignments=assignments,
    )
    assert kept == []
    (fence,) = reconcile(
        states={("t", 0): state},
        live={1, 2, 3},
        registered=registered,
        settings=Elections(isr_broker_epoch_check=True),
        assignments=assignments,
    )
    assert isinstance(fence, RemoveFromIsr) and fence.state.isr == (1, 3) and fence.removed == (2,)
    # the leader is dead too: the re-registered follower is not elected, the other one is
    (elect,) = reconcile(
        states={("t", 0): state},
        live={2, 3},
        registered=registered,
        settings=Elections(isr_broker_epoch_check=True),
        assignments=assignments,
    )
    assert isinstance(elect, ElectLeader) and elect.state.leader == 3 and elect.state.isr == (3,)
    (unsafe,) = reconcile(
        states={("t", 0): state},
        live={2, 3},
        registered=registered,
        settings=Elections(),
        assignments=assignments,
    )
    assert isinstance(unsafe, ElectLeader) and unsafe.state.leader == 2


def test_v0_truncation_keeps_records_of_an_epoch_the_leader_never_had() -> None:
    """KIP-279's case: we hold epoch 0 to offset 10 and epoch 1 (ours alone) from 10 to 15; the
    leader has epoch 0 to 12 and then epoch 2. It answers for epoch 1: (epoch 0, 12)."""
    log = Log(leo=15, hw=8, epochs=[(0, 0), (1, 10)])
    v0 = v0_truncation(0, 12, log)
    assert (v0.offset, v0.done) == (12, True)  # keeps epoch-1 records at 10 and 11: divergence
    fixed = leader_epoch_truncation(0, 12, log)
    assert (fixed.offset, fixed.done) == (10, True)  # the end of epoch 0, which both share
