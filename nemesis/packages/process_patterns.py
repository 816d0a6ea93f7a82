"""The process fault package's patterns: crashes and freezes in the orders that lose data.

- `failover`: the rapid double failover (KIP-101): the leader, then the replica it fails over to;
- `stalled-failover`: the replica the leader fails over to is frozen when the leader dies;
- `lagging-follower`: a follower frozen until it leaves the ISR, then the in-sync replicas crash;
- `restarted-follower`: a follower restarted while cut off from its leader, then elected;
- `rolling`: every broker crashed and restarted, one after another (the impatient operator).

Each is a `Pattern` (nemesis/packages/sequence.py): a choice of aim and a step sequence.
"""

from __future__ import annotations

import random
from typing import Any

from nemesis.packages.sequence import (
    Aim,
    PartitionStates,
    Pattern,
    Sight,
    Timing,
    acknowledged_alone,
    aim_at,
    aim_at_leader_and,
    crash,
    cut,
    in_sync_followers,
    where,
)

FAILOVER = "failover"
STALLED_FAILOVER = "stalled-failover"
LAGGING_FOLLOWER = "lagging-follower"
RESTARTED_FOLLOWER = "restarted-follower"
ROLLING = "rolling"
# How long a rolling kill or restart waits for a broker to serve again before going on anyway.
ROLLING_READY_TIMEOUT = 60.0


def failover_targets(
    states: PartitionStates, controller: str | None, first: tuple[str, int]
) -> tuple[tuple[str, int], str, str] | None:
    """(partition, leader, successor) for a failover, or None.

    The successor is the first in-sync replica after the leader: the one a first-in-ISR election
    (Kafka's) makes leader when the leader is gone. A partition whose successor is the controller
    is passed over when another one will do: a dead controller elects nobody, so the second
    failover would collapse into the first. The drawn partition (`first`) is tried first.
    """
    candidates: list[tuple[tuple[str, int], str, str]] = []
    for key in [first, *sorted(k for k in states if k != first)]:
        state = states.get(key) or {}
        leader = state.get("leader")
        successor = next(iter(in_sync_followers(state)), None)
        if leader and successor:
            candidates.append((key, str(leader), successor))
    for candidate in candidates:
        if candidate[2] != controller:
            return candidate
    return candidates[0] if candidates else None


def _choose_failover(sight: Sight) -> Aim | None:
    chosen = failover_targets(sight.states, sight.controller, sight.first or ("t0", 0))
    if chosen is None:
        return None
    key, leader, successor = chosen
    survivor = next(
        (r for r in in_sync_followers(sight.states.get(key) or {}) if r not in (leader, successor)), None
    )
    roles = {"leader": leader, "successor": successor}
    if survivor is not None:
        roles["survivor"] = survivor
    past_controller = successor == sight.controller and survivor is not None
    return aim_at(sight, key, roles, "past-controller" if past_controller else "")


def _failover_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Make the survivor (the third replica) deaf to the leader, kill the leader T/12 later; half
    a session timeout after the leader (before the cluster has noticed it gone) kill its
    successor; wait (at most 1.5 T) until the survivor is elected, then let it hear again. When the
    leader's session expires the controller elects the successor, still registered but dead; the
    survivor follows it (before KIP-101 it truncates to its high watermark) and cannot fetch; when
    the successor's session expires the survivor is elected with what it kept. Half a session
    apart the two expiries fall on different ZooKeeper ticks, so the controller sees them one at
    a time.

    Why deaf: a follower learns the high watermark from the next fetch response, and under load
    the next batch wakes its parked fetch within milliseconds, so a survivor left alone knows
    almost every acknowledged offset when the leader dies. Deaf (it drops what the leader sends;
    its own fetches still arrive), its last fetch still tells the leader it has the last batch,
    which the leader then acknowledges, but the answer that would tell it so never comes (a
    pre-KIP-101 survivor truncates that batch when it follows the successor), and it misses what
    the leader acknowledged alone meanwhile (acks=1).

    When the successor is the controller (every partition's), killing it half a session later
    would take the first election with it. Then, after the same start: freeze the survivor
    shortly before the leader's session expires, wait until the controller elected itself, kill
    it, thaw the survivor: it follows a dead leader (before KIP-101 it truncates to its high
    watermark; with leader epochs it must ask the leader first and keeps its log) and is elected
    next. The freeze stays below a session timeout, so the survivor stays registered and in the
    ISR.
    """
    at = where(aim)
    leader, successor = aim.roles["leader"], aim.roles["successor"]
    survivor = aim.roles.get("survivor")
    if survivor is None:  # nobody to elect last: the two kills alone
        return [
            {"do": "kill", "target": leader, **at},
            {"wait": round(timing.session_s / 2, 3)},
            {"do": "kill", "target": successor, **at},
        ]
    start = [
        {"do": "partition", "grudge": {survivor: [leader]}, "as": "deaf", **at},
        {"wait": round(timing.session_s / 12, 3)},
        {"do": "kill", "target": leader, **at},
    ]
    # The survivor stays deaf until it is elected: the dead leader's kernel still retransmits the
    # answer it owed the survivor, and healing the cut earlier would deliver it.
    elected = [
        {"wait_until": "leader-is", "node": survivor, "timeout": round(timing.session_s * 1.5, 3), **at},
        {"undo": "deaf"},
    ]
    if aim.variant != "past-controller":
        return [
            *start,
            {"wait": round(timing.session_s / 2, 3)},
            {"do": "kill", "target": successor, **at},
            *elected,
        ]
    return [
        *start,
        {"wait": round(timing.session_s * 0.6, 3)},
        {"do": "pause", "target": survivor, "as": "frozen", **at},
        {"wait_until": "leader-is", "node": successor, "timeout": round(timing.session_s * 0.6, 3), **at},
        {"do": "kill", "target": successor, **at},
        {"undo": "frozen"},
        *elected,
    ]


def _stalled_failover_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Freeze the successor, kill the leader a quarter of a session timeout later, thaw the
    successor at half of it (before its own session can expire: still registered and in the ISR).
    Meanwhile the leader acknowledged what only it and the other follower hold if acks=1 or
    min.insync.replicas=1 let it; the successor is elected without those records.
    """
    at = where(aim)
    quarter = round(timing.session_s / 4, 3)
    return [
        {"do": "pause", "target": aim.roles["successor"], "as": "frozen", **at},
        {"wait": quarter},
        {"do": "kill", "target": aim.roles["leader"], **at},
        {"wait": quarter},
        {"undo": "frozen"},
    ]


def _choose_lagging(sight: Sight) -> Aim | None:
    return aim_at_leader_and(sight, "lagging", "in_sync")


def _lagging_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Flush the page caches; freeze a follower until the leader drops it from the ISR (the
    others go on acknowledging); then crash the leader and the other follower together (a power
    loss where the data dirs can lose unsynced writes) and thaw the lagging one. A clean election
    waits for an in-sync replica; an unclean one elects the lagging follower, which lacks what the
    others acknowledged meanwhile. Crashed together, both in-sync replicas restart from their own
    checkpoints (a pre-KIP-101 broker truncates to a stale high watermark), and without fsync a
    power loss takes what they acknowledged since the flush.
    """
    at = where(aim)
    lagging, leader, in_sync = aim.roles["lagging"], aim.roles["leader"], aim.roles["in_sync"]
    steps: list[dict[str, Any]] = []
    if aim.power_loss:
        steps.append({"writeback": sorted([leader, lagging, in_sync])})
    return [
        *steps,
        {"do": "pause", "target": lagging, "as": "lagging", **at},
        {
            "wait_until": "out-of-isr",
            "node": lagging,
            "timeout": round(timing.lag_s + timing.session_s, 3),
            "required": True,
            **at,
        },
        acknowledged_alone(aim, timing),
        crash(aim, [leader, in_sync]),
        {"undo": "lagging"},
        # Until the cluster has elected the lagging follower (unclean) or, with clean elections,
        # given up (the partition stays offline): the crashed replicas come back only after this.
        {"wait_until": "leader-is", "node": lagging, "timeout": round(timing.session_s * 1.5, 3), **at},
    ]


def _choose_restarted(sight: Sight) -> Aim | None:
    return aim_at_leader_and(sight, "restarted", "other")


def _restarted_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut a follower off from its leader, crash and start it (it recovers from its checkpoints:
    before KIP-101 it truncates to its checkpointed high watermark, which lags the leader's, and
    cannot fetch the rest), then crash the leader and the other follower: the restarted follower,
    still in the ISR, is elected before it caught up (the pattern waits for that, at most 1.5 T,
    and then heals the cut; a restart so slow that the follower left the ISR ends the pattern
    before the crash). With leader epochs it cannot ask the leader where to truncate and
    keeps its log. With acks=1 the leader acknowledged alone all the while it was cut off.
    """
    at = where(aim)
    leader, restarted, other = aim.roles["leader"], aim.roles["restarted"], aim.roles["other"]
    return [
        {"do": "partition", "grudge": cut([restarted], [leader]), "as": "cut", **at},
        {"do": "kill", "target": restarted, "as": "restarted", **at},
        {"undo": "restarted"},
        {"wait_until": "broker-ready", "node": restarted, "timeout": round(timing.lag_s, 3)},
        # A restart slower than a session timeout let the controller drop it from the ISR: a
        # clean election would not pick it, so the pattern ends here (and heals the cut).
        {"wait_until": "in-isr", "node": restarted, "timeout": 1.0, "required": True, **at},
        {"do": "kill", "target": sorted([leader, other]), **at},
        {"wait_until": "leader-is", "node": restarted, "timeout": round(timing.session_s * 1.5, 3), **at},
        {"undo": "cut"},
    ]


def rolling_order(names: list[str], pick: random.Random) -> list[str]:
    """The order a rolling kill or restart visits the nodes: every one, drawn from the step's pick."""
    return pick.sample(sorted(names), len(names))


def _choose_rolling(sight: Sight) -> Aim | None:
    if not sight.names:
        return None
    return Aim(None, None, {"order": rolling_order(list(sight.names), sight.pick)}, {}, sight.controller)


def _rolling_steps(fault: str) -> Any:
    def steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
        """Every broker in turn, each next one as soon as the previous serves again
        (`broker-ready`), leaders included; a killed broker stays down until the cluster has
        noticed (`broker-gone`: its session expired), as a crashed ZooKeeper-mode broker, which
        cannot register again before that."""
        order = list(aim.roles["order"])
        out: list[dict[str, Any]] = []
        for i, name in enumerate(order):
            if i:
                out.append(
                    {"wait_until": "broker-ready", "node": order[i - 1], "timeout": ROLLING_READY_TIMEOUT}
                )
            if fault == "restart":
                out.append({"do": "restart", "target": name})
                continue
            out += [
                {"do": "kill", "target": name, "as": name},
                {"wait_until": "broker-gone", "node": name, "timeout": round(timing.session_s * 2 + 10, 3)},
                {"undo": name},
            ]
        return out

    return steps


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        FAILOVER,
        "kill",
        "the leader, then before the cluster noticed, the replica it fails over to (rapid double failover)",
        ("high-watermark truncation", "acks=1"),
        _choose_failover,
        _failover_steps,
        holds_crash=True,
    ),
    Pattern(
        STALLED_FAILOVER,
        "kill",
        "the leader dies while the replica it fails over to is frozen (a stalled follower)",
        ("acks=1",),
        lambda sight: _choose_failover(sight),
        _stalled_failover_steps,
    ),
    Pattern(
        LAGGING_FOLLOWER,
        "kill",
        "a follower frozen until it leaves the ISR, then the in-sync replicas crash together",
        ("unclean leader election", "no fsync (power loss)"),
        _choose_lagging,
        _lagging_steps,
        holds_crash=True,
    ),
    Pattern(
        RESTARTED_FOLLOWER,
        "kill",
        "a follower restarted while cut off from its leader is elected before it caught up",
        ("high-watermark truncation", "acks=1"),
        _choose_restarted,
        _restarted_steps,
        holds_crash=True,
    ),
    Pattern(
        ROLLING,
        "kill",
        "every broker crashed and restarted, one after another",
        (),
        _choose_rolling,
        _rolling_steps("kill"),
        needs_partition=False,
        min_nodes=1,
    ),
    Pattern(
        ROLLING,
        "restart",
        "every broker restarted gracefully, one after another",
        (),
        _choose_rolling,
        _rolling_steps("restart"),
        needs_partition=False,
        min_nodes=1,
        crashes=False,
    ),
)
