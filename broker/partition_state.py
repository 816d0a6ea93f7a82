"""A partition's state as the metadata layer knows it, and the role change it means for a broker.

Pure: `role_change` decides, from the old and new state and the broker's current role, what the
broker must do; broker.replica_manager carries it out (and the simulator in explore/ does the same
with its in-memory logs).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from broker.replication import Role


@dataclass(frozen=True, slots=True)
class PartitionState:
    """What ZooKeeper (or the standalone metadata) says about a partition."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int = 0


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
