"""Every pattern, by the fault it is a qualifier of: `kill:failover`, `partition:leader-isolated`,
`lose-unsynced:lonely-leader`, `corrupt:lonely-leader`, `kill:fast-leader-change` (see nemesis/packages/sequence.py and
docs/faults.md)."""

from __future__ import annotations

from typing import Any

from foundation.errors import BadInput
from nemesis import targets
from nemesis.packages.base import Context, PlanEnv
from nemesis.packages.disk_patterns import PATTERNS as DISK
from nemesis.packages.epoch_patterns import PATTERNS as EPOCH
from nemesis.packages.network_patterns import PATTERNS as NETWORK
from nemesis.packages.process_patterns import PATTERNS as PROCESS
from nemesis.packages.sequence import Pattern

PATTERNS: dict[tuple[str, str], Pattern] = {(p.fault, p.name): p for p in (*PROCESS, *NETWORK, *DISK, *EPOCH)}


def names_of(fault: str) -> tuple[str, ...]:
    """The patterns that are qualifiers of `fault`."""
    return tuple(name for f, name in PATTERNS if f == fault)


def pattern_of(step: dict[str, Any], fault: str) -> Pattern | None:
    """The pattern a step asks for (its `target`, or for a partition its `grudge`), if any."""
    name = step.get("target", step.get("grudge"))
    return PATTERNS.get((fault, name)) if isinstance(name, str) else None


def usable_patterns(fault: str, env: PlanEnv) -> list[str]:
    """The patterns of `fault` the random schedule may draw on a cluster of this shape."""
    return [
        p.name
        for (f, _), p in PATTERNS.items()
        if f == fault
        and p.drawn
        and len(env.names) >= p.min_nodes
        and (env.has_leaders or not p.needs_partition)
        and (env.power_loss or not p.needs_power_loss)
    ]


def check_pattern(ctx: Context, fault: str, name: str) -> None:
    """BadInput when the pattern can never run on this cluster."""
    pattern = PATTERNS[(fault, name)]
    if len(ctx.names) < pattern.min_nodes:
        raise BadInput(
            f"{fault}: the {name} pattern needs at least {pattern.min_nodes} nodes (a leader and the "
            f"replicas it plays with); the cluster has {len(ctx.names)}"
        )
    if pattern.needs_partition:
        targets.check("leader", ctx.names, ctx.sut, f"{fault}: {name}")
