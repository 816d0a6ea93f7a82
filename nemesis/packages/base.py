"""What every fault package shares: the context it runs in, its active faults, its interface.

A package (after Jepsen's nemesis/combined) bundles one kind of fault: how to check it can run
(`check`, `probe`), how the random schedule draws it (`plan`), how it is applied (`apply`, which
returns the history value and the `Active` fault whose `heal` undoes it), and how a report shades
it (`shade`).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from clusters.node import Node
from clusters.sut import HasMembership, HasRoles
from foundation.config import TestConfig
from foundation.errors import BadInput
from nemesis.state import FaultLedger, recipe_step

T = TypeVar("T")
Item = TypeVar("Item")


class NoTarget(Exception):
    """The target named no node right now (e.g. a partition without a leader): journaled as info."""


@dataclass
class Context:
    """Everything a fault needs, taken from the cluster once."""

    config: TestConfig
    nodes: list[Node]
    sut: Any
    zookeeper: Node | None
    bootstrap: Callable[[], list[str]]
    ledger: FaultLedger
    python: str
    cache: dict[str, Any] = field(default_factory=dict)  # e.g. a Kafka client kept across polls
    # The nodes active faults hold now (the nemesis sets it; a decommission leaves them alone).
    busy: Callable[[], set[str]] = field(default=lambda: set())

    @property
    def names(self) -> list[str]:
        return sorted(n.name for n in self.nodes)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        if self.zookeeper is not None and self.zookeeper.name == name:
            return self.zookeeper
        other = self.sut.node_named(name) if isinstance(self.sut, HasRoles) else None
        if other is not None:  # a node of another role of a defined system
            return other
        if isinstance(self.sut, HasMembership):  # a spare or a decommissioned broker node
            for n in self.sut.broker_nodes():
                if n.name == name:
                    return n
        raise BadInput(f"unknown node {name!r} (nodes: {', '.join(self.names)})")

    def topic_partition(self, step: dict[str, Any]) -> tuple[str, int]:
        return str(step.get("topic", "t0")), int(step.get("partition", 0))

    def parallel(self, fn: Callable[[Item], T], nodes: list[Item]) -> list[T]:
        """Run `fn` on every node (or what stands for one) at once: a partition should start
        everywhere at the same time."""
        if len(nodes) <= 1:
            return [fn(n) for n in nodes]
        with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
            return list(pool.map(fn, nodes))

    def first_problem(
        self, check: Callable[[Node], str | None], nodes: list[Node] | None = None
    ) -> str | None:
        """Run a per-node probe on every node at once; the first problem found, or None."""
        problems = self.parallel(check, list(self.nodes if nodes is None else nodes))
        return next((p for p in problems if p), None)


@dataclass
class Active:
    """A fault in effect. `heal()` undoes it and returns what to journal (the heal op's value)."""

    id: str
    kind: str
    heal_f: str
    nodes: list[str]
    value: dict[str, Any]
    heal: Callable[[], dict[str, Any]] | None  # None: a one-shot fault (e.g. a graceful restart)
    started: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    # Heals the fault on some of its nodes (a killed or paused broker is started or resumed on its
    # own), so that a scripted step can start one broker of several; None: it heals only whole.
    heal_nodes: Callable[[list[str]], dict[str, Any]] | None = None

    def describe(self) -> dict[str, Any]:
        return {"id": self.id, "fault": self.kind, "nodes": self.nodes, "value": self.value}

    def heal_part(self, part: list[str]) -> dict[str, Any]:
        """Heal the fault on `part` of its nodes; it stays in force on the rest, which its heal
        now undoes alone."""
        assert self.heal_nodes is not None
        value = self.heal_nodes(part)
        rest = [n for n in self.nodes if n not in part]
        self.nodes = rest
        self.heal = functools.partial(self.heal_nodes, rest)
        return value


def node_by_node(ctx: Context, undo: Callable[[Node], Any]) -> Callable[[list[str]], dict[str, Any]]:
    """A heal that undoes a fault on each named node alone (`Active.heal_nodes`): start or resume."""

    def heal(names: list[str]) -> dict[str, Any]:
        ctx.parallel(undo, [ctx.node(n) for n in names])
        return {"nodes": list(names)}

    return heal


@dataclass(frozen=True)
class PlanEnv:
    """What the random schedule may know when it draws: the shape of the cluster, never its state."""

    names: tuple[str, ...]
    topics: int
    partitions: int
    has_leaders: bool
    has_zookeeper: bool
    # How long the cluster takes to notice a crashed broker (its ZooKeeper session timeout).
    crash_noticed_s: float = 0.0
    # The brokers' data dirs can lose unsynced writes (lazyfs): power-loss patterns can run.
    power_loss: bool = False


class Package:
    """One kind of fault. Subclasses set the class attributes and override what they need."""

    name: str = ""
    heal_f: str = "heal"
    # Qualifiers accepted after a colon (`kill:leader`) and those a bare name draws from.
    qualifiers: tuple[str, ...] = ()
    default_qualifiers: tuple[str, ...] = ()
    shade: dict[str, str] = {}
    summary: str = ""
    # A crash: the random schedule holds it at least until the cluster can have noticed it.
    crashes: bool = False

    @property
    def f(self) -> str:
        """The `f` of the fault's ops in the history: its name, unless a family of packages
        journals as one fault (the clock variants are all `clock`)."""
        return self.name

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        """Static checks for one step (target, parameters, SUT protocols): BadInput when impossible."""

    def probe(self, ctx: Context) -> str | None:
        """Ask the nodes whether the fault can work here (iptables, tc, files); None when it can."""
        return None

    # Does `node_probe` ask anything? (A node is created for it before the cluster starts.)
    probes_node: bool = False

    def node_probe(self, node: Node) -> str | None:
        """What the fault needs of a bare node, with no system on it (tc netem, FUSE, the clock
        preload), asked of one node before any cluster starts; None when the node has it."""
        return None

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return list(self.default_qualifiers)

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        """Draw one step for the random schedule (uses only `rng` and `env`: reproducible)."""
        raise NotImplementedError

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        """Apply the fault; return its Active (whose `heal` is None for one-shot faults)."""
        raise NotImplementedError

    def did_nothing(self, value: dict[str, Any]) -> str | None:
        """Why a fault that was applied changed nothing, from what it did (its ok value): a power
        loss that dropped no byte; None when it did something (or the package cannot tell)."""
        return None

    # helpers -------------------------------------------------------------------------------------

    def record(
        self, ctx: Context, fault_id: str, nodes: list[str], heal: list[dict[str, Any]], **more: Any
    ) -> None:
        ctx.ledger.record({"id": fault_id, "kind": self.name, "nodes": nodes, "heal": heal, **more})

    @staticmethod
    def step_for(node: Node, argv: list[str]) -> dict[str, Any]:
        return recipe_step(node, argv)


def topic_partition_draw(rng: random.Random, env: PlanEnv) -> dict[str, Any]:
    return {"topic": f"t{rng.randrange(env.topics)}", "partition": rng.randrange(env.partitions)}
