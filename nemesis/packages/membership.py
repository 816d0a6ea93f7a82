"""Membership changes: a broker joins, a broker is decommissioned, partitions move between brokers.

Jepsen's Redpanda analysis lost writes only once membership changes joined the process faults; on
ZooKeeper-mode Kafka a membership change is a partition reassignment (KIP-455), so that is what
this fault drives, through the system's `HasMembership`:

- `member:add` starts a broker on a spare node (`spare_nodes`) and waits until it has registered;
  from then on it is a node like the others for every fault (and a target of the next moves).
- `member:move` moves one replica of a partition (drawn, or the step's `topic`/`partition`, and
  `from`/`to` nodes; `from` may be a target such as `leader`) to a broker that holds none: the reassignment runs while the fault is active,
  and its heal waits until it finished (the new replica caught up and joined the ISR, the
  controller moved leadership if needed and dropped the old replica).
- `member:decommission` moves every replica of one broker (drawn among those no other fault holds,
  or `target`) to the other brokers, then, at its heal, once every move finished, stops that
  broker for good: its node becomes a spare, no fault aims at it any more.

A bare `member` draws, when it fires, among the changes the cluster can make then: add while a
spare node is left, decommission while more brokers than the replication factor remain, move while
some broker holds no replica of a partition. Refused before the run (exit 2): a system that cannot
reassign, a decommission that would leave fewer brokers than the replication factor, a move with no
broker to move to, an add without a spare node.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from clusters.node import Node
from clusters.sut import HasMembership
from foundation.errors import BadInput
from nemesis import targets
from nemesis.packages.base import Active, Context, NoTarget, Package, PlanEnv

log = logging.getLogger(__name__)

ACTIONS = ("add", "decommission", "move")
# How long a heal waits for the reassignment to finish before it is journaled `info`.
SETTLE_TIMEOUT_S = 90.0
POLL_S = 0.5


def _counts(ctx: Context) -> tuple[int, int, int]:
    """(brokers at the start, spare nodes, replication factor) of the configuration."""
    c = ctx.config
    return c.nodes, max(0, c.spare_nodes), c.replication_factor


def refusal(ctx: Context, action: str) -> str | None:
    """Why this membership change can never happen in this test (None: it can)."""
    nodes, spares, rf = _counts(ctx)
    total = nodes + spares
    if action == "add" and spares == 0:
        return "member:add needs a spare node to start a broker on (spare_nodes = 0)"
    if action == "decommission" and total - 1 < rf:
        return (
            f"member:decommission would leave {total - 1} brokers, fewer than the replication "
            f"factor {rf} (nodes {nodes} + spare_nodes {spares})"
        )
    if action == "move" and total <= rf:
        return (
            f"member:move needs more brokers than the replication factor {rf} "
            f"(nodes {nodes} + spare_nodes {spares})"
        )
    return None


class Membership(Package):
    name = "member"
    heal_f = "member-settled"
    qualifiers = ACTIONS
    default_qualifiers = ACTIONS
    shade = {"color": "#17becf", "label": "membership change"}
    summary = "add a broker, decommission one (its partitions moved away first), move a partition"

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        if not isinstance(ctx.sut, HasMembership):
            raise BadInput(
                "member needs a system that can add and remove brokers and reassign partitions "
                '(the own system, or a definition with membership = "reassign" such as Kafka\'s); '
                f"{type(ctx.sut).__name__} cannot"
            )
        action = step.get("action")
        if action is None:
            if all(refusal(ctx, a) for a in ACTIONS):
                raise BadInput(
                    f"member: no membership change can happen here: {refusal(ctx, 'decommission')}"
                )
            return
        if action not in ACTIONS:
            raise BadInput(f"member: unknown action {action!r} (actions: {', '.join(ACTIONS)})")
        why = refusal(ctx, str(action))
        if why:
            raise BadInput(why)

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return list(ACTIONS)  # what the counts allow is said by `check`, in its own words

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        step: dict[str, Any] = {"do": self.name}
        if qualifier:
            step["action"] = qualifier
        return step

    # --- applying -------------------------------------------------------------------------------

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        sut = ctx.sut
        assert isinstance(sut, HasMembership)
        action = step.get("action") or self._draw(ctx, pick)
        if action == "add":
            return self._add(ctx, sut, step, pick, fault_id)
        if action == "decommission":
            return self._decommission(ctx, sut, step, pick, fault_id)
        return self._move(ctx, sut, step, pick, fault_id)

    def _spares(self, ctx: Context, sut: HasMembership) -> list[Node]:
        """Broker nodes that are not members now, nor members on their way out."""
        taken = set(ctx.names) | _leaving(ctx)
        return [n for n in sut.broker_nodes() if n.name not in taken]

    def _draw(self, ctx: Context, pick: random.Random) -> str:
        sut = ctx.sut
        _, _, rf = _counts(ctx)
        possible = []
        if self._spares(ctx, sut):
            possible.append("add")
        if len(ctx.nodes) - 1 >= rf:
            possible += ["decommission", "move"]
        if not possible:
            raise NoTarget("no membership change is possible now")
        return pick.choice(possible)

    def _add(
        self, ctx: Context, sut: HasMembership, step: dict[str, Any], pick: random.Random, fault_id: str
    ) -> Active:
        spares = self._spares(ctx, sut)
        if "target" in step:
            spares = [n for n in spares if n.name == step["target"]]
        if not spares:
            raise NoTarget("no spare node to start a broker on")
        node = spares[0] if "target" in step else pick.choice(spares)
        self.record(ctx, fault_id, [node.name], [])
        started = time.monotonic()
        sut.add_broker(node)
        ctx.nodes.append(node)
        value = {"action": "add", "nodes": [node.name], "seconds": round(time.monotonic() - started, 2)}
        return Active(fault_id, self.name, self.heal_f, [node.name], value, None)

    def _move(
        self, ctx: Context, sut: HasMembership, step: dict[str, Any], pick: random.Random, fault_id: str
    ) -> Active:
        assignment = sut.assignment()
        members = list(ctx.names)
        ours = {key: nodes for key, nodes in assignment.items() if not key[0].startswith("__")}
        if "topic" in step:
            key = ctx.topic_partition(step)
            ours = {key: ours[key]} if key in ours else {}
        movable = {k: v for k, v in ours.items() if any(m not in v for m in members)}
        if not movable:
            raise NoTarget("no partition has a broker to move to")
        key = sorted(movable)[pick.randrange(len(movable))]
        replicas = movable[key]
        source = _node_named_by(ctx, step["from"], key, pick) if "from" in step else pick.choice(replicas)
        free = [m for m in members if m not in replicas]
        dest = str(step["to"]) if "to" in step else pick.choice(free)
        if source not in replicas or dest in replicas or dest not in members:
            raise NoTarget(f"cannot move {key[0]}-{key[1]} from {source} to {dest} (replicas {replicas})")
        target = [dest if r == source else r for r in replicas]
        self.record(ctx, fault_id, [source, dest], [])
        sut.reassign({key: target})
        moves = {f"{key[0]}-{key[1]}": {"from": replicas, "to": target}}
        value = {"action": "move", "nodes": [source, dest], "moves": moves}
        return Active(
            fault_id,
            self.name,
            self.heal_f,
            [source, dest],
            value,
            lambda: _settle(sut, {key: target}, moves),
        )

    def _decommission(
        self, ctx: Context, sut: HasMembership, step: dict[str, Any], pick: random.Random, fault_id: str
    ) -> Active:
        _, _, rf = _counts(ctx)
        if len(ctx.nodes) - 1 < rf:
            raise NoTarget(f"decommissioning would leave {len(ctx.nodes) - 1} brokers, fewer than {rf}")
        busy = ctx.busy()
        candidates = [n for n in ctx.names if n not in busy]
        if "target" in step:
            candidates = [n for n in candidates if n == step["target"]]
        if not candidates:
            raise NoTarget("no broker free of other faults to decommission")
        leaving = candidates[0] if "target" in step else pick.choice(candidates)
        stay = [n for n in ctx.names if n != leaving]
        targets: dict[tuple[str, int], list[str]] = {}
        moves: dict[str, dict[str, list[str]]] = {}
        for key, replicas in sorted(sut.assignment().items()):
            if leaving not in replicas:
                continue
            free = [n for n in stay if n not in replicas]
            if not free:
                raise NoTarget(f"{key[0]}-{key[1]} has no broker to move to from {leaving}")
            target = [pick.choice(free) if r == leaving else r for r in replicas]
            targets[key] = target
            moves[f"{key[0]}-{key[1]}"] = {"from": replicas, "to": target}
        node = ctx.node(leaving)
        self.record(ctx, fault_id, [leaving], [])
        ctx.nodes.remove(node)  # no later fault aims at a broker on its way out
        _leaving(ctx).add(leaving)
        if targets:
            sut.reassign(targets)

        def heal() -> dict[str, Any]:
            try:
                value = _settle(sut, targets, moves)
            except Exception:
                # its replicas did not all move: it stays a member (stopping it would leave a
                # partition short of a replica)
                _leaving(ctx).discard(leaving)
                ctx.nodes.append(node)
                raise
            sut.remove_broker(node)
            _leaving(ctx).discard(leaving)
            return {**value, "removed": leaving}

        value = {"action": "decommission", "nodes": [leaving], "moves": moves}
        return Active(fault_id, self.name, self.heal_f, [leaving], value, heal)


def _node_named_by(ctx: Context, named: Any, key: tuple[str, int], pick: random.Random) -> str:
    """A node name, or a target such as `leader` resolved for the partition now."""
    name = str(named)
    if name in ctx.names:
        return name
    nodes = targets.resolve(name, ctx.names, ctx.sut, pick, key[0], key[1])
    if not nodes:
        raise NoTarget(f"{name!r} names no node of {key[0]}-{key[1]} now")
    return str(nodes[0])


def _leaving(ctx: Context) -> set[str]:
    """Members being decommissioned: not members any more, not spares yet."""
    leaving: set[str] = ctx.cache.setdefault("member-leaving", set())
    return leaving


def _settle(
    sut: HasMembership, targets: dict[tuple[str, int], list[str]], moves: dict[str, Any]
) -> dict[str, Any]:
    """Wait until none of these partitions is being reassigned, and check they ended on their
    targets (a cluster may drop a request); raises when they did not."""
    started = time.monotonic()
    deadline = started + SETTLE_TIMEOUT_S
    pending = set(targets)
    while True:
        pending &= set(sut.reassigning())
        if not pending:
            ended = sut.assignment()
            wrong = {k: ended.get(k) for k, t in targets.items() if ended.get(k) != t}
            if wrong:
                said = "; ".join(
                    f"{t}-{p} ended on {nodes}, not {targets[(t, p)]}"
                    for (t, p), nodes in sorted(wrong.items())
                )
                raise RuntimeError(f"reassignment not carried out: {said}")
            return {"moves": moves, "seconds": round(time.monotonic() - started, 2)}
        if time.monotonic() > deadline:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
            raise TimeoutError(f"reassignment of {names} not finished after {SETTLE_TIMEOUT_S:g}s")
        time.sleep(POLL_S)


PACKAGES: tuple[Package, ...] = (Membership(),)
