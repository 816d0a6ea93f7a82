"""Patterns: named step sequences that put a partition in a shape that loses data when a setting
(or a bug) allows it, aimed from the cluster's state as clients see it (leader, epoch, ISR).

A pattern has two halves, both pure functions:
- `choose(sight)` picks its aim from what the cluster shows now (the partitions' leaders, leader
  epochs and ISRs, the controller): an `Aim` with the partition and the nodes in their roles
  (leader, successor, survivor, ...), or None when no partition is in the shape it needs;
- `steps(aim, timing)` is the sequence itself, with concrete nodes and seconds: fault steps
  (`{"do": fault, "target": node(s), "as": label}`), `{"undo": label}` (heal that part),
  `{"wait": s}`, `{"wait_until": condition, ..., "required": bool}` (a required condition that is
  not met ends the sequence), `{"start": node}` and `{"writeback": [nodes]}` (the page cache is
  flushed, as the kernel's writeback does: a later power loss drops only what came after).

`nemesis.choreography` plays a sequence and journals every fault step as a fault of its own whose
value carries `pattern: {id, name, part}` (the first part also the aim and the plan), so the
history records the pattern as one fault with its parts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

PartitionStates = dict[tuple[str, int], dict[str, Any]]


@dataclass(frozen=True)
class Sight:
    """What the cluster shows when a pattern fires: the partitions as clients see them."""

    states: PartitionStates
    controller: str | None
    first: tuple[str, int] | None  # the partition the schedule drew (tried first)
    names: tuple[str, ...]
    pick: random.Random
    power_loss: bool  # the data dirs can lose unsynced writes (lazyfs)

    def partitions(self) -> list[tuple[str, int]]:
        """The drawn partition first, then the others in order."""
        rest = sorted(k for k in self.states if k != self.first)
        return [self.first, *rest] if self.first in self.states else rest


@dataclass(frozen=True)
class Aim:
    """Whom a pattern hits: a partition (if any) and the nodes in their roles when it fired."""

    topic: str | None
    partition: int | None
    roles: dict[str, Any]
    state: dict[str, Any] = field(default_factory=dict)  # leader, leader_epoch, isr as seen
    controller: str | None = None
    variant: str = ""
    power_loss: bool = False  # its crashes are power losses (the data dirs are on lazyfs)

    def value(self) -> dict[str, Any]:
        out: dict[str, Any] = {"roles": dict(self.roles), "controller": self.controller}
        if self.topic is not None:
            out.update({"topic": self.topic, "partition": self.partition})
        out.update({k: self.state[k] for k in ("leader", "leader_epoch", "isr") if k in self.state})
        if self.variant:
            out["variant"] = self.variant
        if self.power_loss:
            out["power_loss"] = True
        return out


@dataclass(frozen=True)
class Timing:
    """The cluster's clocks a sequence is timed by."""

    session_s: float  # zookeeper.session.timeout.ms: how long a crash goes unnoticed
    lag_s: float  # replica.lag.time.max.ms: how long a silent follower stays in the ISR


@dataclass(frozen=True)
class Pattern:
    name: str
    fault: str  # the fault it is a qualifier of (`kill:failover`, `partition:leader-isolated`)
    summary: str
    # The unsafe settings it makes lose data when the brokers fsync every append ("no fsync (power
    # loss)": it loses unsynced acknowledged writes); `--nemesis all` deals it first when the test
    # runs with one of them (nemesis.schedule.unsafe_settings, docs/faults.md).
    exposes: tuple[str, ...]
    choose: Callable[[Sight], Aim | None]
    steps: Callable[[Aim, Timing], list[dict[str, Any]]]
    needs_partition: bool = True  # aimed at a partition (else at the whole cluster)
    needs_power_loss: bool = False  # only where the data dirs can lose unsynced writes
    min_nodes: int = 3
    crashes: bool = True  # a crash is among its parts (the random schedule holds it, then waits)
    # Its own steps hold its last crash until the cluster noticed it (an election or a session
    # timeout): the random schedule adds no crash hold of its own after it.
    holds_crash: bool = False
    # The random schedule may draw it (else only a schedule that names it runs it).
    drawn: bool = True


def in_sync_followers(state: dict[str, Any]) -> list[str]:
    """The ISR without the leader, in ISR order (the first is whom first-in-ISR election picks)."""
    leader = state.get("leader")
    return [str(r) for r in state.get("isr") or [] if r != leader]


def leader_and_followers(sight: Sight, followers: int) -> tuple[tuple[str, int], str, list[str]] | None:
    """The first partition (drawn one first) with a leader and at least `followers` in-sync followers."""
    for key in sight.partitions():
        state = sight.states.get(key) or {}
        leader = state.get("leader")
        isr = in_sync_followers(state)
        if leader and len(isr) >= followers:
            return key, str(leader), isr
    return None


def aim_at_leader_and(sight: Sight, *follower_roles: str) -> Aim | None:
    """An aim at the first partition with a leader and an in-sync follower for each role named.

    The first role (the follower the pattern freezes, cuts off or restarts) goes to a follower
    that leads no partition when there is one: a fault on the leader of another partition stalls
    that one too, and clients waiting on it stop sending into this one."""
    found = leader_and_followers(sight, len(follower_roles))
    if found is None:
        return None
    key, leader, followers = found
    leading = {str(s.get("leader")) for s in sight.states.values() if s.get("leader")}
    followers = sorted(followers, key=lambda f: f in leading)  # stable: ISR order otherwise
    return aim_at(sight, key, {"leader": leader, **dict(zip(follower_roles, followers, strict=False))})


def aim_at_leader_and_its_followers(sight: Sight) -> Aim | None:
    """An aim at the first partition with a leader and an in-sync follower: roles `leader` and
    `followers` (every in-sync follower), for the patterns that cut the leader off from them."""
    found = leader_and_followers(sight, 1)
    if found is None:
        return None
    key, leader, followers = found
    return aim_at(sight, key, {"leader": leader, "followers": followers})


def aim_at(sight: Sight, key: tuple[str, int], roles: dict[str, Any], variant: str = "") -> Aim:
    state = sight.states.get(key) or {}
    seen: dict[str, Any] = {k: state[k] for k in ("leader", "leader_epoch", "isr") if k in state}
    if "isr" in seen:
        seen["isr"] = [str(r) for r in seen["isr"]]
    return Aim(key[0], key[1], roles, seen, sight.controller, variant, sight.power_loss)


def crash(aim: Aim, nodes: Sequence[str], **extra: Any) -> dict[str, Any]:
    """A crash of `nodes` together: a power loss where the data dirs can lose unsynced writes."""
    fault = "lose-unsynced" if aim.power_loss else "kill"
    return {"do": fault, "target": sorted(nodes), **where(aim), **extra}


def cut(nodes: Sequence[str], others: Sequence[str]) -> dict[str, list[str]]:
    """A grudge cutting `nodes` from `others`, both ways."""
    grudge: dict[str, list[str]] = {}
    for a in nodes:
        for b in others:
            grudge.setdefault(a, []).append(b)
            grudge.setdefault(b, []).append(a)
    return {k: sorted(set(v)) for k, v in sorted(grudge.items())}


def where(aim: Aim) -> dict[str, Any]:
    return {} if aim.topic is None else {"topic": aim.topic, "partition": aim.partition}


def leader_alone(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut the leader off from its followers (it still reaches ZooKeeper and the clients; the cut
    is part `cut`) and wait until it has shrunk the ISR to itself (required, at most L + T)."""
    leader, followers = aim.roles["leader"], list(aim.roles["followers"])
    return [
        {"do": "partition", "grudge": cut([leader], followers), "as": "cut", **where(aim)},
        {
            "wait_until": "isr-shrunk-to-leader",
            "node": leader,
            "timeout": round(timing.lag_s + timing.session_s, 3),
            "required": True,
            **where(aim),
        },
    ]


# Records the shrunk ISR must acknowledge before a pattern crashes it (the loss it can show).
ACKNOWLEDGED_ALONE_RECORDS = 20


def acknowledged_alone(aim: Aim, timing: Timing) -> dict[str, Any]:
    """Wait until the shrunk ISR acknowledges again (its high watermark grew): clients blocked on
    the frozen or cut-off replica take a request timeout to come back, and a crash before they
    do finds nothing to lose. Not required: where the settings refuse the writes (acks=all with
    min.insync.replicas=2 and one replica left) the pattern crashes after `lag_s` anyway."""
    return {
        "wait_until": "hw-advancing",
        "records": ACKNOWLEDGED_ALONE_RECORDS,
        "timeout": round(timing.lag_s, 3),
        **where(aim),
    }
