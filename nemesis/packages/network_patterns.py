"""The network fault package's patterns: cuts around a partition's leader that lose data.

- `cut-off-failover`: the replica the leader fails over to is cut off from it, then the leader dies;
- `leader-isolated`: the leader is cut off from its followers (and from ZooKeeper, or not) while
  producers still reach it, then it dies;
- `lonely-leader`: the leader is cut off until the ISR has shrunk to it alone, then loses power.

Each is a `Pattern` (nemesis/packages/sequence.py): a choice of aim and a step sequence.
"""

from __future__ import annotations

from typing import Any

from nemesis.packages.process_patterns import failover_targets
from nemesis.packages.sequence import (
    Aim,
    Pattern,
    Sight,
    Timing,
    acknowledged_alone,
    aim_at,
    aim_at_leader_and_its_followers,
    crash,
    cut,
    leader_alone,
    leader_and_followers,
    where,
)

CUT_OFF_FAILOVER = "cut-off-failover"
LEADER_ISOLATED = "leader-isolated"
LONELY_LEADER = "lonely-leader"
ZOOKEEPER = "zookeeper"  # the grudge's name for the ZooKeeper node


def _choose_cut_off(sight: Sight) -> Aim | None:
    chosen = failover_targets(sight.states, sight.controller, sight.first or ("t0", 0))
    if chosen is None:
        return None
    key, leader, successor = chosen
    return aim_at(sight, key, {"leader": leader, "successor": successor})


def _cut_off_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut the successor off from the leader (both still reach ZooKeeper and the clients), kill
    the leader a quarter of a session timeout later, heal the cut at half of it: the successor,
    still in the ISR, is elected without what the leader acknowledged meanwhile (acks=1)."""
    leader, successor = aim.roles["leader"], aim.roles["successor"]
    quarter = round(timing.session_s / 4, 3)
    return _cut_then_kill(aim, cut([successor], [leader]), quarter, quarter)


def _choose_isolated(sight: Sight) -> Aim | None:
    found = leader_and_followers(sight, 1)
    if found is None:
        return None
    key, leader, followers = found
    zookeeper_too = sight.pick.random() < 0.5
    return aim_at(
        sight, key, {"leader": leader, "followers": followers}, "zookeeper-too" if zookeeper_too else ""
    )


def _isolated_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut the leader off from its followers (and, in the `zookeeper-too` variant, from
    ZooKeeper: its session expires and the controller elects a follower while it still serves)
    while producers still reach it; after most of a session timeout kill it, then heal the cut.
    What it acknowledged alone is gone from the follower elected in its place."""
    leader, followers = aim.roles["leader"], list(aim.roles["followers"])
    others = [*followers, ZOOKEEPER] if aim.variant == "zookeeper-too" else followers
    return _cut_then_kill(
        aim, cut([leader], others), round(timing.session_s * 0.75, 3), round(timing.session_s / 4, 3)
    )


def _cut_then_kill(
    aim: Aim, grudge: dict[str, list[str]], kill_after_s: float, heal_after_s: float
) -> list[dict[str, Any]]:
    """The steps both leader-killing cuts share: make the cut, kill the leader `kill_after_s`
    later, heal the cut `heal_after_s` after the kill."""
    at = where(aim)
    return [
        {"do": "partition", "grudge": grudge, "as": "cut", **at},
        {"wait": kill_after_s},
        {"do": "kill", "target": aim.roles["leader"], **at},
        {"wait": heal_after_s},
        {"undo": "cut"},
    ]


def _lonely_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut the leader off from its followers (it still reaches ZooKeeper and the clients), wait
    until it has shrunk the ISR to itself, flush its page cache (the kernel's writeback, which
    writes dirty pages within seconds: what it appended before, which the shrink just brought
    below the high watermark, is on disk), let it acknowledge alone if its settings let it
    (acks=1, min.insync.replicas=1: until its high watermark grew, at most `lag_s`), then cut its
    power and heal the cut. It is the only in-sync replica, so a clean election waits for it and
    makes it leader again without what it acknowledged alone; the followers truncate to it.

    The flush comes after the shrink: the records appended while the followers were cut off are
    not acknowledged (min.insync.replicas=2 refuses them once the ISR is short), but the shrink
    lifts the high watermark over them and consumers read them. Flushed at the cut instead, a
    power loss took them from under the consumers' feet (`inconsistent-offsets`): a loss of the
    missing fsync, not of min.insync.replicas=1, and not the shape this pattern is for."""
    leader = aim.roles["leader"]
    return [
        *leader_alone(aim, timing),
        {"writeback": [leader]},
        acknowledged_alone(aim, timing),
        crash(aim, [leader]),
        {"undo": "cut"},
    ]


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        CUT_OFF_FAILOVER,
        "partition",
        "the replica the leader fails over to is cut off from it, then the leader dies",
        ("acks=1",),
        _choose_cut_off,
        _cut_off_steps,
    ),
    Pattern(
        LEADER_ISOLATED,
        "partition",
        "the leader is cut off from its followers (and ZooKeeper, or not) while producers reach it, then dies",
        ("acks=1",),
        _choose_isolated,
        _isolated_steps,
        min_nodes=2,
    ),
    Pattern(
        LONELY_LEADER,
        "lose-unsynced",
        "the leader is cut off until the ISR is itself alone, then loses power",
        # only without fsync: min.insync.replicas=1 and acks=1 (what it acknowledged alone was
        # never synced); with fsync on every append nothing (corrupt:lonely-leader loses its disk)
        (),
        aim_at_leader_and_its_followers,
        _lonely_steps,
        needs_power_loss=True,
        min_nodes=2,
    ),
)
