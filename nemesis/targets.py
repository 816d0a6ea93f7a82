"""Which nodes a fault hits: one, a minority, a majority, all, a partition's leader, the controller,
its followers, or nodes named outright.

`check` is static (node count, what the SUT can tell) and raises BadInput before the test starts;
`resolve` runs when the fault fires, with a `random.Random` seeded from the schedule's decision so
the same seed picks the same nodes whenever the cluster looks the same.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from clusters.sut import HasLeaders, HasRoles, ServesEveryPartition
from foundation.errors import BadInput

SIZES = ("one", "minority", "majority", "all")
ROLES = ("leader", "controller", "followers", "follower", "successor")
TARGETS = SIZES + ROLES
NEEDS_PARTITION = ("leader", "followers", "follower", "successor")
ROLE_PREFIX = "role="  # `kill:role=zookeeper`: every node of one role of a defined system


def role_of_target(target: Any) -> str | None:
    """The role a `role=NAME` target names, else None."""
    if isinstance(target, str) and target.startswith(ROLE_PREFIX):
        return target[len(ROLE_PREFIX) :]
    return None


def check_role(role: str, sut: Any, what: str) -> None:
    if not isinstance(sut, HasRoles):
        raise BadInput(f"{what}: target role={role} needs a system with roles (a --system PATH.toml)")
    if not sut.nodes_of_role(role):
        raise BadInput(f"{what}: the system has no role {role!r} (roles: {', '.join(sut.roles())})")


def check(target: Any, node_names: Sequence[str], sut: Any, what: str) -> None:
    """Raise BadInput when `target` can never be resolved on this cluster."""
    n = len(node_names)
    if isinstance(target, list | tuple):
        unknown = [t for t in target if t not in node_names]
        if unknown or not target:
            raise BadInput(f"{what}: unknown node(s) {unknown or target} (nodes: {', '.join(node_names)})")
        return
    if not isinstance(target, str):
        raise BadInput(f"{what}: target must be a name or a list of nodes, got {target!r}")
    if target in node_names:
        return
    role = role_of_target(target)
    if role is not None:
        check_role(role, sut, what)
        return
    if target not in TARGETS:
        raise BadInput(
            f"{what}: unknown target {target!r} (targets: {', '.join(TARGETS)}, or a node: {', '.join(node_names)})"
        )
    if target == "minority" and n < 3:
        raise BadInput(f"{what}: a minority needs at least 3 nodes, the cluster has {n}")
    if target == "majority" and n < 2:
        raise BadInput(f"{what}: a majority of {n} node is the whole cluster: use 'all'")
    if target in ROLES and isinstance(sut, ServesEveryPartition):
        raise BadInput(
            f"{what}: target {target!r} needs a partition leader or a controller: {sut.leaderless()}"
        )
    if target in ROLES and not isinstance(sut, HasLeaders):
        raise BadInput(
            f"{what}: target {target!r} needs a system that reports leaders (HasLeaders); "
            f"{type(sut).__name__} does not"
        )


def possible(node_names: Sequence[str], has_leaders: bool, candidates: Sequence[str]) -> list[str]:
    """The candidates that can ever resolve on this cluster (a bare fault name draws from these)."""
    out = []
    for target in candidates:
        if target in ROLES:
            if has_leaders:
                out.append(target)
            continue
        try:
            check(target, node_names, None, "target")
        except BadInput:
            continue
        out.append(target)
    return out


def resolve(
    target: Any,
    node_names: Sequence[str],
    sut: Any,
    rng: random.Random,
    topic: str | None = None,
    partition: int | None = None,
) -> list[str]:
    """The nodes the target names right now (possibly empty: e.g. a partition without a leader)."""
    names = sorted(node_names)
    n = len(names)
    if isinstance(target, list | tuple):
        return sorted(str(t) for t in target)
    if target in names:
        return [target]
    role = role_of_target(target)
    if role is not None:
        return sorted(sut.nodes_of_role(role))
    if target == "one":
        return [rng.choice(names)]
    if target == "minority":
        return sorted(rng.sample(names, rng.randint(1, (n - 1) // 2)))
    if target == "majority":
        return sorted(rng.sample(names, n // 2 + 1))
    if target == "all":
        return names
    if target == "controller":
        controller = sut.controller()
        return [controller] if controller else []
    state = _partition_state(sut, topic, partition)
    leader = state.get("leader")
    if target == "leader":
        return [str(leader)] if leader else []
    if target == "successor":  # the first ISR member after the leader: whom first-in-ISR elects next
        successor = next((str(r) for r in state.get("isr") or [] if r != leader), None)
        return [successor] if leader and successor else []
    # Followers are the in-sync ones (the ISR without the leader): a replica that fell out of the
    # ISR is not following. Without an ISR, every other assigned replica.
    replicas = state.get("isr") or state.get("replicas") or names
    followers = sorted(str(r) for r in replicas if r != leader)  # type: ignore[union-attr]
    if target == "follower":
        return [rng.choice(followers)] if followers else []
    if target == "followers":
        return followers
    raise BadInput(f"unknown target {target!r}")


def _partition_state(sut: Any, topic: str | None, partition: int | None) -> dict[str, Any]:
    key = (topic or "t0", int(partition or 0))
    states = sut.partition_state()
    state = states.get(key)
    if state is None:
        leaders = sut.leaders()
        return {"leader": leaders.get(key)}
    return dict(state)
