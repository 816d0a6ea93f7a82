"""The partition replication state machine, sans-IO (in the manner of h11's _state.py).

It knows nothing of sockets, ZooKeeper or files. The adapter (broker.replica_manager) feeds it
events — a new partition state (`role_change`: lead it, follow it, or only take its ISR), a local
append, a follower's fetch, the leader's high watermark, a timer tick, the outcome of an ISR write
— and carries out the actions it returns:

- `HighWatermarkAdvanced(hw)`: wake producers waiting for acks=all and consumers long-polling.
- `WriteIsr(state, reason)`: compare-and-set the partition state in ZooKeeper with `state` (this
  leader's epoch with a new ISR, on the version it replaces).

Rules, as in Kafka:
- Leader: HW = min log end offset over the ISR (its own LEO included); it never goes back.
- A follower's log end offset is the offset it asks for in its Fetch.
- A follower is caught up at a fetch when it asked for the leader's LEO (or for what the leader's
  LEO was at its previous fetch); it leaves the ISR once it has not been caught up for
  replica.lag.time.max.ms, and joins it when its LEO reaches the HW (and the current epoch's
  start offset).
- One ISR write in flight at a time; the ISR used for the HW is the committed one.
- Follower: HW = min(leader's HW, own LEO).
- Produce (min.insync.replicas): acks=all is refused while the ISR is smaller than
  min.insync.replicas, and answered NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank below it
  before the HW passed the records. acks=1 and acks=0 never wait and never look at the ISR.
The follower's own protocol (truncation, fetching) is in broker.follower; the clock is the
caller's (`now_ms` arguments).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from broker.eligible import next_elr
from broker.kafka_errors import (
    INVALID_REQUIRED_ACKS,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
)
from broker.partition_state import LeaderAndIsr, PartitionState

UNDEFINED_EPOCH = -1


class Role(Enum):
    NONE = "none"  # not a replica, or the partition has no leader we can follow
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True, slots=True)
class HighWatermarkAdvanced:
    high_watermark: int


@dataclass(frozen=True, slots=True)
class WriteIsr:
    state: LeaderAndIsr  # with the eligible leader replicas that go with the new ISR (KIP-966)
    reason: str


Action = HighWatermarkAdvanced | WriteIsr


class RoleChange(Enum):
    NOT_A_REPLICA = "not-a-replica"  # ignore the state
    BECOME_LEADER = "become-leader"  # a new epoch with us as leader (or we were not leading)
    LEADER_UPDATE = "leader-update"  # same epoch, still leader: the ISR or replicas changed
    BECOME_FOLLOWER = "become-follower"  # a new leader or epoch (or we were leading): follow it
    FOLLOWER_UPDATE = "follower-update"  # same leader and epoch: only the ISR changed


def role_change(broker_id: int, old: PartitionState | None, new: PartitionState, role: Role) -> RoleChange:
    """Kafka's becomeLeaderOrFollower, for one partition on one broker: what a new partition state
    means for this broker's replica (broker.replica_manager and the simulator carry it out)."""
    if broker_id not in new.replicas:
        return RoleChange.NOT_A_REPLICA
    new_epoch = old is None or new.leader_epoch != old.leader_epoch or new.leader != old.leader
    if new.leader == broker_id:
        if new_epoch or role is not Role.LEADER:
            return RoleChange.BECOME_LEADER
        return RoleChange.LEADER_UPDATE
    if new_epoch or role is Role.LEADER:
        return RoleChange.BECOME_FOLLOWER
    return RoleChange.FOLLOWER_UPDATE


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = -1  # unknown until the follower fetches in this epoch
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    leader_leo_at_last_fetch: int = -1


@dataclass(slots=True)
class PartitionReplica:
    """Replication state of one partition on one broker."""

    broker_id: int
    lag_time_max_ms: int
    role: Role = Role.NONE
    leader_id: int = -1
    leader_epoch: int = -1
    epoch_start_offset: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    zk_version: int = -1
    log_end_offset: int = 0
    high_watermark: int = 0
    followers: dict[int, FollowerProgress] = field(default_factory=dict)
    isr_write_in_flight: bool = False
    # KIP-966 (eligible.leader.replicas.enable): min.insync.replicas, the ISR size below which the
    # HW stands still and replicas leaving the ISR become eligible leader replicas; 0: off
    elr_min_insync: int = 0
    elr: tuple[int, ...] = ()
    # Replicas a reassignment is removing: the leader does not add them back into the ISR (Kafka's
    # controller sends the leader the target replica set for that, phase B3 of a reassignment).
    removing: tuple[int, ...] = ()

    # --- role changes -------------------------------------------------------------------------
    def become_leader(self, state: PartitionState, log_end_offset: int, now_ms: float) -> list[Action]:
        """Lead `state`'s epoch from the log end, keeping the high watermark (up to the log end)."""
        self._take_state(Role.LEADER, self.broker_id, state)
        self.epoch_start_offset = log_end_offset
        self.log_end_offset = log_end_offset
        self.high_watermark = min(self.high_watermark, log_end_offset)
        # Followers get the full lag time to show up under the new leader (Kafka does the same).
        self.followers = {
            r: FollowerProgress(last_caught_up_ms=now_ms, last_fetch_ms=now_ms)
            for r in state.replicas
            if r != self.broker_id
        }
        return self._maybe_advance_hw()

    def become_follower(self, state: PartitionState) -> None:
        """Follow `state`'s leader (none: -1) in its epoch."""
        self._take_state(Role.FOLLOWER if state.leader >= 0 else Role.NONE, state.leader, state)

    def _take_state(self, role: Role, leader_id: int, state: PartitionState) -> None:
        """Take the controller's partition state (LeaderAndIsr); what the previous epoch's leader
        tracked (its followers, its ISR write in flight) is dropped."""
        self.role = role
        self.leader_id = leader_id
        self.leader_epoch = state.leader_epoch
        self.isr = state.isr
        self.replicas = state.replicas
        self.zk_version = state.zk_version
        self.elr = state.elr
        self.followers = {}
        self.isr_write_in_flight = False

    def state_changed(self, state: PartitionState) -> list[Action]:
        """The partition znode changed without a new leader epoch (an ISR write landed): take its
        ISR, ELR, replicas and version."""
        self.isr = state.isr
        self.elr = state.elr
        self.replicas = state.replicas
        self.zk_version = state.zk_version
        self.isr_write_in_flight = False
        if self.role is Role.LEADER:
            for r in state.replicas:
                if r != self.broker_id and r not in self.followers:
                    self.followers[r] = FollowerProgress()
            return self._maybe_advance_hw()
        return []

    # --- leader events ------------------------------------------------------------------------
    def on_local_append(self, log_end_offset: int) -> list[Action]:
        self.log_end_offset = log_end_offset
        if self.role is Role.LEADER:
            return self._maybe_advance_hw()
        return []

    def on_follower_fetch(self, replica_id: int, fetch_offset: int, now_ms: float) -> list[Action]:
        """A follower asked for `fetch_offset`: that is its log end offset."""
        if self.role is not Role.LEADER:
            return []
        progress = self.followers.get(replica_id)
        if progress is None:
            progress = self.followers[replica_id] = FollowerProgress()
        if fetch_offset >= self.log_end_offset:
            progress.last_caught_up_ms = now_ms
        elif progress.leader_leo_at_last_fetch >= 0 and fetch_offset >= progress.leader_leo_at_last_fetch:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_ms = now_ms
        progress.leader_leo_at_last_fetch = self.log_end_offset
        actions = self._maybe_expand_isr(replica_id, progress)
        actions.extend(self._maybe_advance_hw())
        return actions

    def on_tick(self, now_ms: float) -> list[Action]:
        """Periodic check: drop followers that have lagged for longer than replica.lag.time.max.ms."""
        if self.role is not Role.LEADER or self.isr_write_in_flight:
            return []
        lagging = [
            r
            for r in self.isr
            if r != self.broker_id
            and now_ms
            - self.followers.setdefault(r, FollowerProgress(last_caught_up_ms=now_ms)).last_caught_up_ms
            > self.lag_time_max_ms
        ]
        if not lagging:
            return []
        return self._write_isr(tuple(r for r in self.isr if r not in lagging), f"shrink: {lagging} lagging")

    def on_isr_write_failed(self) -> None:
        """The compare-and-set lost (the znode changed); the watch will bring the new state."""
        self.isr_write_in_flight = False

    def on_isr_written(
        self, held: PartitionState | None, written: LeaderAndIsr, zk_version: int | None
    ) -> tuple[PartitionState | None, list[Action]]:
        """The outcome of this leader's ISR write of `written`: the version it made (None: it lost)
        and `held`, the partition state the broker holds. Returns the state it holds now, and what
        to do. A write that lost, or that landed after this replica left the epoch it was written
        in, changes nothing: the watch brings the state."""
        if (
            zk_version is None
            or held is None  # never so for a leader: it leads the state it was given
            or self.role is not Role.LEADER
            or self.leader_epoch != written.leader_epoch
        ):
            self.on_isr_write_failed()
            return held, []
        state = held.after_write(written, zk_version)
        return state, self.state_changed(state)

    # --- follower events ----------------------------------------------------------------------
    def on_leader_high_watermark(self, leader_hw: int) -> list[Action]:
        if self.role is Role.LEADER:
            return []
        hw = min(leader_hw, self.log_end_offset)
        if hw > self.high_watermark:
            self.high_watermark = hw
            return [HighWatermarkAdvanced(hw)]
        return []

    def on_truncated(self, log_end_offset: int) -> None:
        self.log_end_offset = log_end_offset
        if self.high_watermark > log_end_offset:
            self.high_watermark = log_end_offset

    # --- produce (min.insync.replicas) --------------------------------------------------------
    def admit_produce(self, acks: int, min_insync_replicas: int) -> int:
        """NONE if a produce with these acks may append here, else the error to answer."""
        if self.role is not Role.LEADER:
            return NOT_LEADER_OR_FOLLOWER
        if acks not in (0, 1, -1):
            return INVALID_REQUIRED_ACKS
        if acks == -1 and len(self.isr) < min_insync_replicas:
            return NOT_ENOUGH_REPLICAS
        return NONE

    def produce_answer(self, acks: int, min_insync_replicas: int) -> int:
        """The answer to an appended produce once it no longer waits (acks=all: the HW passed it)."""
        if acks == -1 and len(self.isr) < min_insync_replicas:
            return NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return NONE

    def acks_all_done(self, last_offset: int) -> bool:
        return self.high_watermark > last_offset

    # --- internals ----------------------------------------------------------------------------
    def _follower_leo(self, replica_id: int) -> int:
        if replica_id == self.broker_id:
            return self.log_end_offset
        progress = self.followers.get(replica_id)
        return progress.log_end_offset if progress is not None else -1

    def _elr(self, new_isr: tuple[int, ...]) -> tuple[int, ...]:
        if not self.elr_min_insync:
            return ()
        return next_elr(isr_before=self.isr, isr_after=new_isr, elr=self.elr, min_insync=self.elr_min_insync)

    def _maybe_advance_hw(self) -> list[Action]:
        members = self.isr if self.broker_id in self.isr else (*self.isr, self.broker_id)
        if len(members) < self.elr_min_insync:
            return []  # KIP-966's strict min ISR: the HW waits for min.insync.replicas members
        candidate = min(self._follower_leo(r) for r in members)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return [HighWatermarkAdvanced(candidate)]
        return []

    def _maybe_expand_isr(self, replica_id: int, progress: FollowerProgress) -> list[Action]:
        if replica_id in self.isr or replica_id not in self.replicas or self.isr_write_in_flight:
            return []
        if replica_id in self.removing:
            return []
        if progress.log_end_offset < max(self.high_watermark, self.epoch_start_offset):
            return []
        return self._write_isr((*self.isr, replica_id), f"expand: {replica_id} caught up")

    def _write_isr(self, isr: tuple[int, ...], reason: str) -> list[Action]:
        """One ISR write at a time: this epoch's state with `isr`, on the version we know."""
        self.isr_write_in_flight = True
        written = LeaderAndIsr(self.broker_id, self.leader_epoch, isr, self.zk_version, self._elr(isr))
        return [WriteIsr(written, reason)]
