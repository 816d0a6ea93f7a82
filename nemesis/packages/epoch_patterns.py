"""Crash patterns that make leader epochs diverge: shapes that lose data only where replicas
disagree about where an epoch ended.

- `fast-leader-change` (a `kill` qualifier): two leader changes in quick succession, the second
  before the replica that missed the first new leader's epoch could ask it where to truncate
  (KAFKA-6361, fixed by KIP-279).

Each is a `Pattern` (nemesis/packages/sequence.py), not drawn by the random schedule: it needs a
ZooKeeper-mode cluster's timing and a controller it can count on, so only a scenario names it.
"""

from __future__ import annotations

from typing import Any

from nemesis.packages.sequence import Aim, Pattern, Sight, Timing, aim_at, cut, in_sync_followers, where

FAST_LEADER_CHANGE = "fast-leader-change"
# How long the successor stays cut off from the leader before the leader dies: the survivor
# fetches what the leader appended meanwhile (the in-flight writes acks=all holds), the successor
# does not.
BEHIND_S = 2.0
# How long the successor leads its epoch before it dies: producers that lost the old leader find it
# and it appends what nobody fetches (the survivor is frozen).
LEADS_S = 4.0
# When the survivor freezes, as a part of the session timeout after the leader's kill: late enough
# that the frozen time (until the successor's kill) stays below a session, early enough to come
# before the leader's session expires and the successor is elected.
FREEZE_AT = 0.75
# How long the successor's election may take after the freeze (a part of the session) at most,
# besides a controller failover's few seconds; the freeze must end within one session timeout.
ELECTED_WITHIN = 0.25
CONTROLLER_FAILOVER_S = 4.0


def _choose(sight: Sight) -> Aim | None:
    """The leader, the successor (the first in-sync follower in assignment order: whom Kafka's
    controller elects when the leader is gone) and the survivor (the other in-sync follower)."""
    for key in sight.partitions():
        state = sight.states.get(key) or {}
        leader = state.get("leader")
        in_sync = set(in_sync_followers(state))
        order = [str(r) for r in state.get("replicas") or [] if str(r) in in_sync]
        if not order:
            order = in_sync_followers(state)
        if leader and len(order) >= 2:
            roles = {"leader": str(leader), "successor": order[0], "survivor": order[1]}
            moved = "controller-moved" if sight.controller == order[1] else ""
            return aim_at(sight, key, roles, moved)
    return None


def _fast_leader_change_steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut the successor off from the leader (the survivor goes on fetching: it gets ahead) and
    kill the leader; freeze the survivor shortly before the leader's session expires, so that the
    successor is elected (epoch 2) and appends what nobody fetches; kill the successor and thaw
    the survivor: the survivor never asked the successor where epoch 1 ended, kept its longer log
    and is elected next (epoch 3) when the successor's session expires. The old leader comes back
    first; once the survivor takes writes in epoch 3, the successor comes back and asks for the
    end of epoch 2, which the survivor never had: before KIP-279 the answer is where epoch 3
    starts, beyond the successor's log, so it keeps its epoch-2 records at offsets where the
    others hold different ones (log divergence); with KIP-279 the answer names epoch 1 and the
    successor truncates to where its own epoch 2 began.

    The survivor must not be the controller (frozen, it would elect nobody): when it is, it is
    killed first and started again once its session expired and the controller took it out of
    the ISR (the controller moves to another broker), and the sequence goes on once it is back in
    the ISR. The freeze stays below a session timeout, so the survivor stays registered and in
    the ISR.
    """
    at = where(aim)
    leader, successor, survivor = aim.roles["leader"], aim.roles["successor"], aim.roles["survivor"]
    session = timing.session_s
    moved: list[dict[str, Any]] = []
    if aim.variant == "controller-moved":
        moved = [
            {"do": "kill", "target": survivor, "as": "moved", **at},
            {
                "wait_until": "broker-gone",
                "node": survivor,
                "timeout": round(session * 2 + 10, 3),
                "required": True,
            },
            # the metadata may still list it in the ISR when its registration is gone: wait
            # until the controller took it out, or "back in the ISR" would be met at once
            {"wait_until": "out-of-isr", "node": survivor, "timeout": 30.0, "required": True, **at},
            {"undo": "moved"},
            {"wait_until": "in-isr", "node": survivor, "timeout": 90.0, "required": True, **at},
            {"wait": 3.0},
        ]
    return [
        *moved,
        {"do": "partition", "grudge": cut([successor], [leader]), "as": "behind", **at},
        {"wait": BEHIND_S},
        {"do": "kill", "target": leader, "as": "first", **at},
        {"wait": round(session * FREEZE_AT, 3)},
        {"do": "pause", "target": survivor, "as": "frozen", **at},
        {
            "wait_until": "leader-is",
            "node": successor,
            "timeout": round(session * ELECTED_WITHIN + CONTROLLER_FAILOVER_S, 3),
            "required": True,
            **at,
        },
        {"wait": LEADS_S},
        {"do": "kill", "target": successor, "as": "second", **at},
        {"undo": "frozen"},
        {
            "wait_until": "leader-is",
            "node": survivor,
            "timeout": round(session * 1.5 + 10, 3),
            "required": True,
            **at,
        },
        # The survivor's epoch starts with its first append (before 2.0.1 a new leader's epoch is
        # recorded then, not at its election), which waits until the old leader is back in the ISR
        # (min.insync.replicas): the successor asked before it would hear "undefined" and truncate
        # to its high watermark.
        {"undo": "first"},
        {"wait_until": "hw-advancing", "records": 20, "timeout": 90.0, "required": True, **at},
        {"undo": "behind"},
        {"undo": "second"},
    ]


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        FAST_LEADER_CHANGE,
        "kill",
        "two leader changes in quick succession: the replica that missed the first new leader's epoch is elected next",
        (),
        _choose,
        _fast_leader_change_steps,
        holds_crash=True,
        drawn=False,
    ),
)
