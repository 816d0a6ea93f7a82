"""Who coordinates the groups: a lease in ZooKeeper that fences every coordinator write.

Kafka's coordinator of a group is the leader of the group's `__consumer_offsets` partition, and
each write it makes is fenced by that partition's leader epoch: a deposed coordinator's write
fails. The own broker keeps the same guarantee with one znode (`/group_coordinator`, never
deleted, so its version only grows):

    {"version": 1, "brokerid": N, "broker_epoch": <czxid of N's registration>, "coordinator_epoch": E}

A broker coordinates while the lease names it with its current registration (a restarted broker
registers anew, so a lease of its previous life is not its own). The lease changes hands only by
compare-and-set on the znode's version; every write of group metadata and committed offsets is
a ZooKeeper multi-op that checks the version its coordinator holds (broker.zk_offsets), so once
another broker took the lease, nothing the old one writes lands, and it answers NOT_COORDINATOR.

The lease stays where it is while its holder is registered (moving it would rebalance every
group for nothing); when the holder's registration is gone (its session expired, or it registered
again after a restart), the live broker with the lowest id takes it, with the next epoch.
This module decides; broker.groups.zk_lease reads, watches and writes ZooKeeper.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

PATH = "/group_coordinator"


@dataclass(frozen=True, slots=True)
class Lease:
    broker_id: int
    broker_epoch: int  # czxid of the holder's registration (Kafka's broker epoch)
    coordinator_epoch: int
    version: int = -1  # the znode's version: what every coordinator write checks (-1: not written)


def holder_alive(lease: Lease | None, registrations: Mapping[int, int]) -> bool:
    """The holder is registered, in the same life in which it took the lease."""
    return lease is not None and registrations.get(lease.broker_id) == lease.broker_epoch


def claim(lease: Lease | None, registrations: Mapping[int, int], me: int) -> Lease | None:
    """The lease this broker should write now, or None (it is held, or another broker's turn).

    `registrations`: the registered brokers and the czxid of each registration.
    """
    if holder_alive(lease, registrations) or me not in registrations or me != min(registrations):
        return None
    epoch = lease.coordinator_epoch + 1 if lease is not None else 1
    return Lease(me, registrations[me], epoch)


def encode(lease: Lease) -> bytes:
    return json.dumps(
        {
            "version": 1,
            "brokerid": lease.broker_id,
            "broker_epoch": lease.broker_epoch,
            "coordinator_epoch": lease.coordinator_epoch,
        },
        separators=(",", ":"),
    ).encode()


def decode(data: bytes | None, version: int) -> Lease | None:
    """The lease in the znode (None when absent or unreadable: then it is up for claiming)."""
    try:
        info = json.loads(data or b"")
        return Lease(
            int(info["brokerid"]), int(info["broker_epoch"]), int(info["coordinator_epoch"]), version
        )
    except (ValueError, KeyError, TypeError):
        return None
