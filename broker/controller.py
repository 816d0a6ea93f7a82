"""The controller's decisions, pure: initial partition states, leader elections, reconciliation.

The ZooKeeper driver (broker.zookeeper.controller) gathers the facts (live brokers, the topics'
assignments, current states, and for the longest-log policy each candidate's log end offset),
calls `reconcile`, and writes each action it returns with compare-and-set. The simulator in
explore/ calls the same function with its own facts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from broker.eligible import elr_leader, next_elr, restarted_since
from broker.partition_state import Key, LeaderAndIsr


@dataclass(frozen=True, slots=True)
class Election:
    leader: int  # -1: no leader can be elected (the partition goes offline)
    isr: tuple[int, ...]
    unclean: bool = False
    elr: tuple[int, ...] = ()  # the eligible leader replicas after it (KIP-966; empty when off)


def initial_state(replicas: tuple[int, ...], live: Collection[int]) -> LeaderAndIsr:
    """A new partition (no znode yet: version -1): the first live replica leads epoch 0; the live
    replicas form the ISR."""
    alive = tuple(r for r in replicas if r in live)
    if not alive:
        return LeaderAndIsr(-1, 0, replicas, -1)
    return LeaderAndIsr(alive[0], 0, alive, -1)


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


@dataclass(frozen=True, slots=True)
class CreateState:
    """Create the state of a partition that has none (`initial_state`)."""

    partition: Key
    state: LeaderAndIsr


@dataclass(frozen=True, slots=True)
class ElectLeader:
    """Replace the state (compare-and-set) with `state`: the elected leader in a new epoch."""

    partition: Key
    previous_leader: int
    state: LeaderAndIsr
    unclean: bool


@dataclass(frozen=True, slots=True)
class RemoveFromIsr:
    """Replace the state (compare-and-set) with `state`: the same leader and epoch and an ISR
    without the replicas whose brokers are gone (`removed`)."""

    partition: Key
    state: LeaderAndIsr
    removed: tuple[int, ...]


ControllerAction = CreateState | ElectLeader | RemoveFromIsr


def offline_partitions(
    assignments: Mapping[str, Mapping[int, tuple[int, ...]]],
    states: Mapping[Key, LeaderAndIsr],
    live: Collection[int],
) -> dict[Key, list[int]]:
    """Partitions that need an election, with their live replicas (whose log ends the longest-log
    policy asks before calling `reconcile`)."""
    found: dict[Key, list[int]] = {}
    for topic, assignment in assignments.items():
        for index, replicas in assignment.items():
            state = states.get((topic, index))
            if state is not None and needs_election(state.leader, live):
                found[(topic, index)] = [r for r in replicas if r in live]
    return found


class ElectionSettings(Protocol):
    """The settings the controller elects by, as a broker's config (broker.config) names them; the
    simulator's settings (explore.settings) name them the same."""

    @property
    def unclean_leader_election(self) -> bool: ...

    @property
    def election_policy(self) -> str: ...

    @property
    def elr_min_insync(self) -> int: ...

    @property
    def isr_broker_epoch_check(self) -> bool: ...


def reconcile(
    *,
    assignments: Mapping[str, Mapping[int, tuple[int, ...]]],
    states: Mapping[Key, LeaderAndIsr],
    live: Collection[int],
    settings: ElectionSettings,
    log_ends: Mapping[Key, Mapping[int, int]] | None = None,
    registered: Mapping[int, int] | None = None,
) -> list[ControllerAction]:
    """Level-triggered: what brings every partition to a sane state (a state; a live leader that
    has not restarted since it was elected; no dead broker in an ISR it can leave).

    `registered` maps each live broker to when it registered (its registration's czxid, Kafka's
    broker epoch); without it, restarts go unnoticed. `settings.elr_min_insync` > 0 turns on
    Eligible Leader Replicas (KIP-966) with that min.insync.replicas (broker.eligible).
    `settings.isr_broker_epoch_check` (KIP-903): an ISR member that registered again since the
    state was written (a new broker epoch, maybe an empty disk) leaves the ISR and is not elected
    from it.
    """
    actions: list[ControllerAction] = []
    for topic, assignment in assignments.items():
        for index, replicas in assignment.items():
            key = (topic, index)
            state = states.get(key)
            if state is None:
                actions.append(CreateState(key, initial_state(replicas, live)))
                continue
            restarted = leader_restarted(state, registered or {})
            listed = state.isr
            if settings.isr_broker_epoch_check:
                state = replace(state, isr=fence_restarted_followers(state, registered or {}))
            if not restarted and not needs_election(state.leader, live):
                cleanup = isr_cleanup(key, state, live, registered or {}, settings.elr_min_insync, listed)
                if cleanup is not None:
                    actions.append(cleanup)
                continue
            choice = choose_leader(
                replicas=replicas,
                state=state,
                live=live,
                restarted=restarted,
                unclean_allowed=settings.unclean_leader_election,
                policy=settings.election_policy,
                log_ends=(log_ends or {}).get(key),
                registered=registered or {},
                elr_min_insync=settings.elr_min_insync,
            )
            if choice.leader < 0 and state.leader < 0:
                continue  # still offline; a returning ISR member will trigger another pass
            elected = LeaderAndIsr(
                choice.leader, state.leader_epoch + 1, choice.isr, state.zk_version, choice.elr
            )
            actions.append(ElectLeader(key, state.leader, elected, choice.unclean))
    return actions


def leader_restarted(state: LeaderAndIsr, registered: Mapping[int, int]) -> bool:
    """The leader registered again after the state was written: it restarted (or its session was
    renewed) since it was elected. ZooKeeper-mode Kafka's controller sees the new broker epoch,
    handles the broker as failed and started again, and elects a leader in a new epoch; a restarted
    broker never resumes leading its old epoch (it may have lost the tail it led with)."""
    since = registered.get(state.leader)
    return since is not None and state.written > 0 and since > state.written


def choose_leader(
    *,
    replicas: tuple[int, ...],
    state: LeaderAndIsr,
    live: Collection[int],
    restarted: bool,
    unclean_allowed: bool,
    policy: str,
    log_ends: Mapping[int, int] | None,
    registered: Mapping[int, int],
    elr_min_insync: int,
) -> Election:
    """Kafka's order: a live ISR member; with ELR, a live eligible leader replica that has not
    restarted since (KIP-966); unclean, if allowed; last, a restarted leader again (the last
    replica standing, in a new epoch — Kafka: offline while it counts as failed, elected again
    at its startup)."""
    others = [b for b in live if b != state.leader] if restarted else live

    def elect(candidates: Collection[int], unclean: bool) -> Election:
        return elect_leader(
            replicas=replicas,
            isr=state.isr,
            live=candidates,
            unclean_allowed=unclean,
            policy=policy,
            log_ends=log_ends,
        )

    choice = elect(others, False)
    if choice.leader >= 0:
        if elr_min_insync:
            elr = next_elr(
                isr_before=state.isr, isr_after=choice.isr, elr=state.elr, min_insync=elr_min_insync
            )
            return replace(choice, elr=elr)
        return choice
    if elr_min_insync:
        leader = elr_leader(state.elr, others, restarted_since(state.written, registered))
        if leader >= 0:
            return Election(leader, (leader,), elr=tuple(r for r in state.elr if r != leader))
    if unclean_allowed:
        choice = elect(others, True)
        if choice.leader >= 0:
            return choice
    if restarted:
        return elect(live, False)
    return Election(-1, state.isr, elr=state.elr)


def isr_cleanup(
    key: Key,
    state: LeaderAndIsr,
    live: Collection[int],
    registered: Mapping[int, int],
    elr_min_insync: int,
    listed: tuple[int, ...] | None = None,
) -> RemoveFromIsr | None:
    """ZooKeeper-mode Kafka's controller on a broker failure: the dead broker leaves every ISR it
    was in (onBrokerFailure, OfflineReplica), rather than staying until each leader's
    replica.lag.time.max.ms passes. The leader stays; the ISR never becomes empty. With ELR, the
    removed replicas join the ELR while the ISR is below min.insync.replicas, and a broker that
    registered again since the state was written leaves the ELR (KIP-966: an unclean shutdown)."""
    if state.leader < 0:
        return None
    listed = state.isr if listed is None else listed  # the ISR in the znode (before any fencing)
    dead = tuple(r for r in listed if (r not in live or r not in state.isr) and r != state.leader)
    isr = tuple(r for r in listed if r not in dead)
    elr = state.elr
    if elr_min_insync:
        restarted = restarted_since(state.written, registered)
        elr = tuple(
            r
            for r in next_elr(isr_before=listed, isr_after=isr, elr=state.elr, min_insync=elr_min_insync)
            if r not in restarted
        )
    if not dead and elr == state.elr:
        return None
    return RemoveFromIsr(
        key, LeaderAndIsr(state.leader, state.leader_epoch, isr, state.zk_version, elr), dead
    )


def fence_restarted_followers(state: LeaderAndIsr, registered: Mapping[int, int]) -> tuple[int, ...]:
    """KIP-903: ISR membership belongs to a broker epoch. A follower that registered again since
    the state was written may have come back with less (an empty or damaged disk): it leaves the
    ISR and must catch up again to rejoin. The leader stays (its restart is an election), and the
    ISR never becomes empty (the last member stays, as in Kafka)."""
    restarted = restarted_since(state.written, registered)
    kept = tuple(r for r in state.isr if r == state.leader or r not in restarted)
    return kept or state.isr
