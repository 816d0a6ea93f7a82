"""The controller's decisions, pure: initial partition states and leader elections.

The ZooKeeper adapter (broker.zk) gathers the facts (live brokers, current states, and for the
longest-log policy each candidate's log end offset), calls these functions, and writes the
result with compare-and-set.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Election:
    leader: int  # -1: no leader can be elected (the partition goes offline)
    isr: tuple[int, ...]
    unclean: bool = False


def initial_state(replicas: tuple[int, ...], live: Collection[int]) -> Election:
    """A new partition: the first live replica leads; the live replicas form the ISR."""
    alive = tuple(r for r in replicas if r in live)
    if not alive:
        return Election(-1, replicas)
    return Election(alive[0], alive)


def _pick(candidates: tuple[int, ...], policy: str, log_ends: Mapping[int, int] | None) -> int:
    if policy == "longest-log" and log_ends:
        # the longest log wins; ties go to the earlier candidate
        return max(candidates, key=lambda r: (log_ends.get(r, -1), -candidates.index(r)))
    return candidates[0]


def elect_leader(
    *,
    replicas: tuple[int, ...],
    isr: tuple[int, ...],
    live: Collection[int],
    unclean_allowed: bool,
    policy: str,
    log_ends: Mapping[int, int] | None = None,
) -> Election:
    """Kafka's offline-partition election.

    Clean: a live ISR member leads and the ISR keeps only the live members. Unclean (if allowed
    and no ISR member is alive): any live replica leads, alone in the ISR. Otherwise no leader,
    and the ISR is left as it was so the last ISR member can take over when it returns.
    """
    live_isr = tuple(r for r in isr if r in live)
    if live_isr:
        return Election(_pick(live_isr, policy, log_ends), live_isr)
    if unclean_allowed:
        live_replicas = tuple(r for r in replicas if r in live)
        if live_replicas:
            leader = _pick(live_replicas, policy, log_ends)
            return Election(leader, (leader,), unclean=True)
    return Election(-1, isr)


def needs_election(leader: int, live: Collection[int]) -> bool:
    return leader < 0 or leader not in live
