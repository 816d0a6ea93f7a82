"""A partition's state as the metadata layer knows it, and the role change it means for a broker.

Pure: `role_change` decides, from the old and new state and the broker's current role, what the
broker must do; broker.replica_manager carries it out (and the simulator in explore/ does the same
with its in-memory logs).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from broker.replication import Action, PartitionReplica, Role


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What ZooKeeper (or the standalone metadata) says about a partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int = 0
    written: int = 0  # when it was last written (ZooKeeper's mzxid); 0: unknown
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966; empty when off)
    removing: tuple[int, ...] = ()  # replicas a reassignment is removing (broker.reassignment)


def leadership_granted(broker_id: int, state: PartitionState, registered: int) -> PartitionState:
    """The state as this broker process may act on it: leadership written before the process
    registered belongs to an earlier incarnation (which may have lost the log tail it led with),
    so it waits, leaderless, for the controller to elect a leader in a new epoch — as a Kafka
    broker acts only on the controller's LeaderAndIsr for its own broker epoch."""
    if state.leader == broker_id and 0 < state.written < registered:
        return replace(state, leader=-1)
    return state


class RoleChange(Enum):
    NOT_A_REPLICA = "not-a-replica"  # ignore the state
    BECOME_LEADER = "become-leader"  # a new epoch with us as leader (or we were not leading)
    LEADER_UPDATE = "leader-update"  # same epoch, still leader: the ISR or replicas changed
    BECOME_FOLLOWER = "become-follower"  # a new leader or epoch (or we were leading): follow it
    FOLLOWER_UPDATE = "follower-update"  # same leader and epoch: only the ISR changed


def role_change(broker_id: int, old: PartitionState | None, new: PartitionState, role: Role) -> RoleChange:
    """Kafka's becomeLeaderOrFollower, for one partition on one broker."""
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


def lead(
    replica: PartitionReplica, state: PartitionState, log_end_offset: int, now_ms: float
) -> list[Action]:
    """BECOME_LEADER: the replica leads `state`'s epoch from its log end, keeping its HW."""
    return replica.become_leader(
        leader_epoch=state.leader_epoch,
        isr=state.isr,
        replicas=state.replicas,
        zk_version=state.zk_version,
        log_end_offset=log_end_offset,
        high_watermark=replica.high_watermark,
        now_ms=now_ms,
        elr=state.elr,
    )


def follow(replica: PartitionReplica, state: PartitionState) -> None:
    """BECOME_FOLLOWER: the replica follows `state`'s leader (none: -1) in its epoch."""
    replica.become_follower(
        leader_id=state.leader,
        leader_epoch=state.leader_epoch,
        isr=state.isr,
        replicas=state.replicas,
        zk_version=state.zk_version,
        elr=state.elr,
    )
