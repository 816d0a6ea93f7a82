"""The damaged-disk package's pattern: the loss of one disk that min.insync.replicas=1 allows.

- `lonely-leader` (`corrupt:lonely-leader`): the leader is cut off until it is the ISR alone; once
  it acknowledges alone, its disk is lost (wiped, as a replaced disk) and it starts again, empty.

With min.insync.replicas=2 every acknowledged write is on two disks, so the loss of one loses
nothing acknowledged; with min.insync.replicas=1 (or acks=1) a leader alone in the ISR
acknowledges writes that only its disk holds. The pattern needs no power loss of unsynced data:
it exposes the setting when the brokers fsync every append. A `Pattern`
(nemesis/packages/sequence.py): a choice of aim and a step sequence.
"""

from __future__ import annotations

from typing import Any

from nemesis.packages.sequence import (
    Aim,
    Pattern,
    Timing,
    aim_at_leader_and_its_followers,
    leader_alone,
    where,
)

LONELY_LEADER = "lonely-leader"


def _steps(aim: Aim, timing: Timing) -> list[dict[str, Any]]:
    """Cut the leader off from its followers (it still reaches ZooKeeper and the clients) until it
    shrank the ISR to itself (`isr-shrunk-to-leader`, required, at most L + T); wait until it
    acknowledges alone (`acknowledged-alone`: the ISR is still the leader alone and its high
    watermark grows steadily, required, at most L + T/2: the clients its cut stalled come back
    with their next request or retry): settings that refuse those writes
    (min.insync.replicas=2 with acks=all) end the pattern here and heal the cut, with nothing
    lost. Then its disk is lost: the broker is killed and its data dir wiped (`corrupt`, kind
    `wipe`); the cut is healed and the broker started again with an empty disk. It is the only
    in-sync replica, so a clean election makes it leader again (wait for it, at most 1.5·T), and
    the followers truncate to its empty log: what it acknowledged alone is gone, with the rest."""
    at = where(aim)
    leader = aim.roles["leader"]
    return [
        *leader_alone(aim, timing),
        {
            "wait_until": "acknowledged-alone",
            "node": leader,
            "timeout": round(timing.lag_s + timing.session_s / 2, 3),
            "required": True,
            **at,
        },
        {"do": "corrupt", "kind": "wipe", "target": leader, "as": "wiped", **at},
        {"undo": "cut"},
        {"undo": "wiped"},
        {"wait_until": "leader-is", "node": leader, "timeout": round(timing.session_s * 1.5, 3), **at},
    ]


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        LONELY_LEADER,
        "corrupt",
        "the leader is cut off until the ISR is itself alone, acknowledges alone, then loses its disk",
        ("min.insync.replicas=1", "acks=1"),
        aim_at_leader_and_its_followers,
        _steps,
        min_nodes=2,
        holds_crash=True,
    ),
)
