"""Eligible Leader Replicas (KIP-966, `eligible.leader.replicas.enable`), pure.

With ELR the high watermark advances only while the ISR holds at least min.insync.replicas
members ("strict min ISR"). So a replica that leaves the ISR while the ISR is below that size has
every record below the high watermark: it is an *eligible leader replica*. The partition state
keeps them beside the ISR; when no ISR member can lead, the controller elects one of them (one
that has not restarted since, as KIP-966 drops a replica with an unclean shutdown from the ELR)
instead of waiting for the last ISR member — the "last replica standing", which may come back
with a shorter log after a power loss.

The ELR is written together with the ISR, by the leader's ISR changes and by the controller's.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping


def next_elr(
    *, isr_before: tuple[int, ...], isr_after: tuple[int, ...], elr: tuple[int, ...], min_insync: int
) -> tuple[int, ...]:
    """The ELR after an ISR change: empty while the ISR is at least min.insync.replicas; below it,
    the replicas that just left the ISR join the ELR and members back in the ISR leave it."""
    if len(isr_after) >= min_insync:
        return ()
    removed = [r for r in isr_before if r not in isr_after]
    kept = [r for r in elr if r not in isr_after]
    return tuple(dict.fromkeys([*kept, *removed]))


def elr_leader(elr: tuple[int, ...], live: Collection[int], restarted: Collection[int]) -> int:
    """The first live ELR member that has not registered again since the state was written; -1: none."""
    for replica in elr:
        if replica in live and replica not in restarted:
            return replica
    return -1


def restarted_since(written: int, registered: Mapping[int, int]) -> set[int]:
    """The brokers that registered after the state was written (restarted, or a renewed session)."""
    if written <= 0:
        return set()
    return {broker for broker, since in registered.items() if since > written}
