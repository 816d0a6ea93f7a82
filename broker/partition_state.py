"""A partition's state as the metadata layer knows it: the state znode (Kafka's LeaderAndIsr) and
the replica set the topic znode adds to it.

Pure values: the controller's decisions (broker.controller, broker.reassignment) read and write
`LeaderAndIsr`; a broker's replicas (broker.replication, through broker.replica_manager) and the
simulator in explore/ act on `PartitionState`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

Key = tuple[str, int]  # a partition: (topic, index)


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's state znode (Kafka's LeaderAndIsr): who leads in which epoch, the ISR, the
    eligible leader replicas, and the znode's version and when it was written. A state to write
    carries the version it replaces: the write is a compare-and-set on it (Kafka's partition
    epoch)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    elr: tuple[int, ...] = ()  # eligible leader replicas (KIP-966; empty when off)
    written: int = 0  # when it was last written (ZooKeeper's mzxid); 0: unknown


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionState(LeaderAndIsr):
    """What ZooKeeper (or the standalone metadata) says about a partition: its state znode with the
    controller epoch it was written in, and the replicas its topic znode lists."""

    replicas: tuple[int, ...]
    controller_epoch: int = 0
    removing: tuple[int, ...] = ()  # replicas a reassignment is removing (broker.reassignment)

    def after_write(self, written: LeaderAndIsr, zk_version: int) -> PartitionState:
        """This state once a leader's ISR write of `written` replaced it as version `zk_version`:
        the replica set and the controller epoch stay (when it was written is not known here)."""
        return replace(
            self,
            leader=written.leader,
            leader_epoch=written.leader_epoch,
            isr=written.isr,
            zk_version=zk_version,
            elr=written.elr,
            written=0,
        )


def leadership_granted(broker_id: int, state: PartitionState, registered: int) -> PartitionState:
    """The state as this broker process may act on it: leadership written before the process
    registered belongs to an earlier incarnation (which may have lost the log tail it led with),
    so it waits, leaderless, for the controller to elect a leader in a new epoch — as a Kafka
    broker acts only on the controller's LeaderAndIsr for its own broker epoch."""
    if state.leader == broker_id and 0 < state.written < registered:
        return replace(state, leader=-1)
    return state
