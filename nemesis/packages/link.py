"""Link faults on a node's network: random packet loss (iptables statistic), bandwidth limits (tc
tbf) and delay (tc netem, where the kernel has it: many do not, and `validate` says so).
"""

from __future__ import annotations

import random
from typing import Any

from clusters.node import Node
from foundation.errors import BadInput
from nemesis import net, role_targets, targets
from nemesis.packages.base import Active, Context, Package, PlanEnv
from nemesis.packages.process import _resolve

SIZE_TARGETS = ("one", "minority", "majority", "all")


class _LinkFault(Package):
    qualifiers = (*targets.TARGETS, *role_targets.ROLE_TARGETS)
    default_qualifiers: tuple[str, ...] = SIZE_TARGETS

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        target = step.get("target", "one")
        if role_targets.is_role_target(target):
            role_targets.check(target, ctx, self.name)
            return
        targets.check(target, ctx.names, ctx.sut, self.name)

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return targets.possible(env.names, env.has_leaders, self.default_qualifiers)

    def draw(self, rng: random.Random) -> dict[str, Any]:
        return {}

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        target = qualifier or rng.choice(self.usable_qualifiers(env, None) or ["one"])
        step: dict[str, Any] = {"do": self.name, "target": target, **self.draw(rng)}
        if target in targets.NEEDS_PARTITION:
            step.update(
                {"topic": f"t{rng.randrange(env.topics)}", "partition": rng.randrange(env.partitions)}
            )
        return step


class Loss(_LinkFault):
    name = "loss"
    shade = {"color": "#eeca3b", "label": "packet loss"}
    summary = "drop incoming packets at random (iptables statistic) with a probability"

    def draw(self, rng: random.Random) -> dict[str, Any]:
        return {"probability": rng.choice([0.05, 0.1, 0.2, 0.3, 0.5])}

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        super().check(ctx, step)
        p = step.get("probability", 0.2)
        if not isinstance(p, int | float) or not 0 < p <= 1:
            raise BadInput(f"loss: probability must be in (0, 1], got {p!r}")

    def probe(self, ctx: Context) -> str | None:
        why = ctx.first_problem(net.has_statistic)
        return f"packet loss needs the iptables statistic match: {why}" if why else None

    probes_node = True

    def node_probe(self, node: Node) -> str | None:
        why = net.has_statistic(node)
        return f"packet loss needs the iptables statistic match: {why}" if why else None

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        p = float(step.get("probability", 0.2))
        nodes = [ctx.node(n) for n in names]
        self.record(ctx, fault_id, names, [self.step_for(n, net.flush_argv(net.LOSS_CHAIN)) for n in nodes])
        ctx.parallel(lambda node: node.exec(net.loss_script(p), timeout=30), nodes)

        def heal() -> dict[str, Any]:
            ctx.parallel(lambda node: node.exec(net.flush_argv(net.LOSS_CHAIN), timeout=30), nodes)
            return {"fault": self.name, "nodes": names}

        return Active(fault_id, self.name, self.heal_f, names, {"nodes": names, "probability": p}, heal)


class _Qdisc(_LinkFault):
    """A root qdisc on the device that carries the node's address; healed by deleting it."""

    def probe(self, ctx: Context) -> str | None:
        """One node answers for all: the qdiscs a kernel has are the same on every node."""
        return self.node_probe(ctx.nodes[0]) or None if ctx.nodes else None

    probes_node = True

    def argv(self, device: str, step: dict[str, Any]) -> list[str]:
        raise NotImplementedError

    def describe(self, step: dict[str, Any]) -> dict[str, Any]:
        return {}

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        nodes = [ctx.node(n) for n in names]
        devices = dict(zip(names, ctx.parallel(net.interface_of, nodes), strict=True))
        recipe = [self.step_for(n, net.qdisc_heal_argv(devices[n.name])) for n in nodes]
        self.record(ctx, fault_id, names, recipe)
        ctx.parallel(lambda node: node.exec(self.argv(devices[node.name], step), timeout=30), nodes)

        def heal() -> dict[str, Any]:
            ctx.parallel(lambda node: node.exec(net.qdisc_heal_argv(devices[node.name]), timeout=30), nodes)
            return {"fault": self.name, "nodes": names}

        value = {"nodes": names, "devices": devices, **self.describe(step)}
        return Active(fault_id, self.name, self.heal_f, names, value, heal)


class Bandwidth(_Qdisc):
    name = "bandwidth"
    shade = {"color": "#9d755d", "label": "bandwidth limit"}
    summary = "limit the node's egress bandwidth with tc tbf"

    def draw(self, rng: random.Random) -> dict[str, Any]:
        return {"rate": rng.choice(["100kbit", "1mbit", "10mbit"])}

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        super().check(ctx, step)
        rate = str(step.get("rate", "1mbit"))
        if not rate[:1].isdigit():
            raise BadInput(f"bandwidth: rate must be a tc rate such as 1mbit, got {rate!r}")

    def node_probe(self, node: Node) -> str | None:
        return net.has_tbf(node)

    def argv(self, device: str, step: dict[str, Any]) -> list[str]:
        return net.tbf_argv(device, str(step.get("rate", "1mbit")))

    def describe(self, step: dict[str, Any]) -> dict[str, Any]:
        return {"rate": str(step.get("rate", "1mbit"))}


class Delay(_Qdisc):
    name = "delay"
    shade = {"color": "#72b7b2", "label": "delay"}
    summary = "add latency to the node's egress with tc netem (only where the kernel has netem)"

    def draw(self, rng: random.Random) -> dict[str, Any]:
        return {"delay_ms": rng.choice([20, 100, 500]), "jitter_ms": rng.choice([0, 10, 50])}

    def node_probe(self, node: Node) -> str | None:
        why = net.has_netem(node)
        return why + "; loss, bandwidth and partition can run here" if why else None

    def argv(self, device: str, step: dict[str, Any]) -> list[str]:
        return net.netem_argv(device, float(step.get("delay_ms", 100)), float(step.get("jitter_ms", 10)))

    def describe(self, step: dict[str, Any]) -> dict[str, Any]:
        return {"delay_ms": step.get("delay_ms", 100), "jitter_ms": step.get("jitter_ms", 10)}


class Hold(_LinkFault):
    """A paused link: the clients' connections to a node are held (their packets dropped) while new
    connections pass. A client whose request times out retries on a new connection and goes on;
    at the heal, the held request is retransmitted and arrives late, after its retry (the delayed
    EndTxn of KAFKA-17754, where `tc netem` delay is not available)."""

    name = "hold"
    shade = {"color": "#b279a2", "label": "held connections"}
    summary = "hold the clients' established connections to a node (new ones pass); the heal lets the held packets through, late"
    default_qualifiers = ("txn-coordinator", "one")

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return ["txn-coordinator", *targets.possible(env.names, env.has_leaders, ("one",))]

    def probe(self, ctx: Context) -> str | None:
        return ctx.first_problem(net.has_ss) or ctx.first_problem(net.has_iptables)

    probes_node = True

    def node_probe(self, node: Node) -> str | None:
        return net.has_ss(node) or net.has_iptables(node)

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        nodes = [ctx.node(n) for n in names]
        spare = {n.address for n in ctx.nodes} | ({ctx.zookeeper.address} if ctx.zookeeper else set())
        ports = _broker_ports(ctx)
        self.record(ctx, fault_id, names, [self.step_for(n, net.flush_argv(net.HOLD_CHAIN)) for n in nodes])
        results = ctx.parallel(
            lambda node: node.exec(net.hold_script(ports.get(node.address, 9092), spare), timeout=30), nodes
        )
        held = {node.name: r.stdout.split() for node, r in zip(nodes, results, strict=True)}

        def heal() -> dict[str, Any]:
            ctx.parallel(lambda node: node.exec(net.flush_argv(net.HOLD_CHAIN), timeout=30), nodes)
            return {"fault": self.name, "nodes": names}

        return Active(fault_id, self.name, self.heal_f, names, {"nodes": names, "held": held}, heal)


def _broker_ports(ctx: Context) -> dict[str, int]:
    """Each broker address's port, from the cluster's bootstrap list."""
    ports = {}
    for server in ctx.bootstrap():
        host, _, port = server.rpartition(":")
        if port.isdigit():
            ports[host] = int(port)
    return ports


PACKAGES: tuple[Package, ...] = (Loss(), Bandwidth(), Delay(), Hold())
