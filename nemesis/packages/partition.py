"""Network partitions: a grudge (networkx) applied as iptables DROP rules in each node's SL-PART chain.

Shapes: one (isolate a random node), halves, majority (bare majority | the rest), ring (majorities
ring), bridge, leader (isolate a partition's leader), zk-one / zk-leader / zk-all (cut brokers from
ZooKeeper only), and `ROLE|ROLE` (a defined system: cut two roles apart, e.g. `broker|storage`).
Healed by flushing SL-PART everywhere. The history gets the effective grudge.
The patterns `cut-off-failover`, `leader-isolated` and `lonely-leader` (lose-unsynced) are step
sequences around these cuts (nemesis/packages/network_patterns.py).
"""

from __future__ import annotations

import random
from typing import Any

from clusters.node import Node
from clusters.sut import FaultsByCommand, HasZookeeper
from foundation.errors import BadInput
from nemesis import grudge as grudges
from nemesis import net, role_targets, targets
from nemesis.packages.base import Active, Context, NoTarget, Package, PlanEnv, topic_partition_draw
from nemesis.packages.patterns import check_pattern, names_of, usable_patterns

ZK = "zookeeper"
# Shapes that cut one node, found by its role, from every other broker (`partition:controller`).
ROLE_SHAPES = ("controller", role_targets.COORDINATOR, role_targets.TXN_COORDINATOR)


def zookeeper_port(ctx: Context) -> int | None:
    """The ZooKeeper client port, when the SUT says (`zookeeper_connect` = "host:port[/chroot]")."""
    if not isinstance(ctx.sut, HasZookeeper):
        return None
    value = ctx.sut.zookeeper_connect()
    if ":" in value:
        try:
            return int(value.split(",")[0].split("/")[0].rsplit(":", 1)[1])
        except ValueError:
            return None
    return None


def zookeeper_address(ctx: Context) -> str | None:
    if ctx.zookeeper is not None:
        return ctx.zookeeper.address
    return None


def role_sides(shape: str) -> tuple[str, str]:
    """`broker|storage`: the two roles of a defined system a partition cuts apart."""
    a, _, b = shape.partition("|")
    return a.strip(), b.strip()


class Partition(Package):
    name = "partition"
    qualifiers = (*grudges.SHAPES, *ROLE_SHAPES, *names_of("partition"))
    # Drawn at random: every shape but `successor` and `zk-all`, which run only when named.
    default_qualifiers = (
        *(shape for shape in grudges.SHAPES if shape not in ("successor", "zk-all")),
        *names_of("partition"),
    )
    shade = {"color": "#4c78a8", "label": "partition"}
    summary = "network partition (a grudge) applied with iptables DROP rules; healed by flushing"

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        n = len(env.names)
        out = []
        for shape in self.default_qualifiers:
            if shape in names_of(self.name):
                continue
            if shape in ("ring",) and n < 4:
                continue
            if shape == "bridge" and n < 3:
                continue
            if shape in ("halves", "majority", "one", "leader") and n < 2:
                continue
            if shape in ("leader", "zk-leader") and not env.has_leaders:
                continue
            if shape.startswith("zk-") and not env.has_zookeeper:
                continue
            out.append(shape)
        return out + usable_patterns(self.name, env)

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        shape = step.get("grudge", step.get("target", "halves"))
        if isinstance(shape, dict):
            for node, drops in shape.items():
                for name in [node, *drops]:
                    if name not in ctx.names and name != ZK:
                        raise BadInput(f"partition: unknown node {name!r} in grudge")
            return
        if isinstance(shape, str) and "|" in shape:
            for role in role_sides(shape):
                targets.check_role(role, ctx.sut, f"partition {shape}")
            return
        if isinstance(shape, str) and shape in names_of(self.name):
            check_pattern(ctx, self.name, shape)
            return
        if shape == "controller":
            targets.check(shape, ctx.names, ctx.sut, f"partition {shape}")
            return
        if role_targets.is_role_target(shape) and shape != ZK:
            role_targets.check(shape, ctx, f"partition {shape}")
            return
        if shape not in grudges.SHAPES:
            raise BadInput(f"partition: unknown shape {shape!r} (shapes: {', '.join(grudges.SHAPES)})")
        n = len(ctx.names)
        least = {
            "ring": 4,
            "bridge": 3,
            "one": 2,
            "halves": 2,
            "majority": 2,
            "leader": 2,
            "successor": 2,
        }.get(shape, 1)
        if n < least:
            raise BadInput(f"partition: shape {shape!r} needs at least {least} nodes, the cluster has {n}")
        if shape in ("leader", "zk-leader", "successor"):
            targets.check("leader", ctx.names, ctx.sut, f"partition {shape}")
        if shape.startswith("zk-"):
            zk = ctx.zookeeper
            if zk is None:
                raise BadInput(f"partition {shape}: this system has no ZooKeeper node to cut brokers from")
            if zk.address in {node.address for node in ctx.nodes}:
                raise BadInput(
                    f"partition {shape}: ZooKeeper shares an address with a broker ({zk.address}): "
                    "cannot cut one from the other"
                )

    def probe(self, ctx: Context) -> str | None:
        if isinstance(ctx.sut, FaultsByCommand):  # cut by its owner's command, not by iptables here
            return None
        return ctx.first_problem(self.node_probe)

    probes_node = True

    def node_probe(self, node: Node) -> str | None:
        why = net.has_iptables(node)
        return f"iptables does not work on {node.name}: {why}" if why else None

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        shape = qualifier or rng.choice(self.usable_qualifiers(env, None) or ["halves"])
        step: dict[str, Any] = {"do": self.name, "grudge": shape}
        if shape in ("leader", "zk-leader", *names_of(self.name)):
            step.update(topic_partition_draw(rng, env))
        return step

    def grudge(self, ctx: Context, step: dict[str, Any], pick: random.Random) -> tuple[str, grudges.Grudge]:
        shape = step.get("grudge", step.get("target", "halves"))
        names = ctx.names
        if isinstance(shape, dict):
            return "explicit", {str(k): {str(x) for x in v} for k, v in shape.items()}
        if "|" in shape:  # between two roles of a defined system: each side drops the other
            a, b = (ctx.sut.nodes_of_role(role) for role in role_sides(shape))
            return shape, {**{n: set(b) for n in a}, **{n: set(a) for n in b}}
        topic, partition = ctx.topic_partition(step)
        if shape in ROLE_SHAPES:
            found = (
                targets.resolve(shape, names, ctx.sut, pick)
                if shape == "controller"
                else role_targets.resolve(shape, ctx, step)
            )
            if not found:
                raise NoTarget(f"no {shape} now")
            return shape, grudges.isolate(names, found)
        if shape == "one":
            return shape, grudges.isolate(names, [pick.choice(names)])
        if shape == "halves":
            return shape, grudges.halves(names, pick)
        if shape == "majority":
            return shape, grudges.majority_minority(names, pick)
        if shape == "ring":
            return shape, grudges.majorities_ring(names, pick)
        if shape == "bridge":
            return shape, grudges.bridge(names, pick)
        if shape == "successor":
            successors = targets.resolve("successor", names, ctx.sut, pick, topic, partition)
            if not successors:
                raise NoTarget(f"no in-sync follower of a leader of {topic}/{partition} now")
            return shape, grudges.isolate(names, successors)
        if shape in ("leader", "zk-leader"):
            leaders = targets.resolve("leader", names, ctx.sut, pick, topic, partition)
            if not leaders:
                raise NoTarget(f"no leader for {topic}/{partition} now")
            if shape == "leader":
                return shape, grudges.isolate(names, leaders)
            return shape, grudges.cut_from(names, leaders, ZK)
        if shape == "zk-one":
            return shape, grudges.cut_from(names, [pick.choice(names)], ZK)
        if shape == "zk-all":
            return shape, grudges.cut_from(names, names, ZK)
        raise BadInput(f"partition: unknown shape {shape!r}")

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        shape, grudge = self.grudge(ctx, step, pick)
        if isinstance(ctx.sut, FaultsByCommand):
            return self._by_command(ctx, step, shape, grudge, fault_id)
        names = set(ctx.names)
        members = [*ctx.nodes, *(ctx.node(n) for n in sorted(grudge) if n not in names and n != ZK)]
        addresses = {node.name: node.address for node in members}
        zk_addr = zookeeper_address(ctx)
        zk_port = zookeeper_port(ctx)
        plan: dict[str, list[str]] = {}  # node name -> argv
        for node in members:
            drops = grudge.get(node.name, set())
            drop_from = [addresses[d] for d in drops if d in addresses]
            zk_rules = ZK in drops or node.name in grudge.get(ZK, set())
            plan[node.name] = net.drop_script(drop_from, zk_addr if zk_rules else None, zk_port)
        touched = [n for n in members if n.name in plan]
        heal_recipe = [self.step_for(n, net.flush_argv(net.PARTITION_CHAIN)) for n in touched]
        effective = grudges.to_json(grudge)
        self.record(ctx, fault_id, [n.name for n in touched], heal_recipe, grudge=effective)
        ctx.parallel(lambda node: node.exec(plan[node.name], timeout=30), touched)
        value = {"shape": shape, "grudge": effective, "components": grudges.components(grudge)}
        if shape in ("leader", "zk-leader"):
            value.update({"topic": step.get("topic", "t0"), "partition": step.get("partition", 0)})
        cut = sorted(n for n, drops in effective.items() if drops)

        def heal() -> dict[str, Any]:
            ctx.parallel(lambda node: node.exec(net.flush_argv(net.PARTITION_CHAIN), timeout=30), touched)
            return {"fault": "partition", "nodes": cut}

        return Active(fault_id, self.name, self.heal_f, cut, value, heal)

    def _by_command(
        self, ctx: Context, step: dict[str, Any], shape: str, grudge: grudges.Grudge, fault_id: str
    ) -> Active:
        """A cluster strandline did not start: each node that drops someone runs the partition
        command its owner gave (`{drop}`: the addresses it stops hearing from), healed by the heal
        command."""
        sut: FaultsByCommand = ctx.sut
        touched = [ctx.node(n) for n in sorted(grudge) if grudge[n]]
        drops = {node.name: sorted(ctx.node(d).address for d in grudge[node.name]) for node in touched}
        recipe = [self.step_for(n, argv) for n in touched if (argv := sut.heal_argv(self.name, n))]
        effective = grudges.to_json(grudge)
        self.record(ctx, fault_id, [n.name for n in touched], recipe, grudge=effective)
        ctx.parallel(lambda node: sut.cut(node, drops[node.name]), touched)
        value = {"shape": shape, "grudge": effective, "components": grudges.components(grudge)}
        if shape == "leader":
            value.update({"topic": step.get("topic", "t0"), "partition": step.get("partition", 0)})
        cut = [n.name for n in touched]

        def heal() -> dict[str, Any]:
            ctx.parallel(sut.mend, touched)
            return {"fault": "partition", "nodes": cut}

        return Active(fault_id, self.name, self.heal_f, cut, value, heal)


PACKAGES: tuple[Package, ...] = (Partition(),)
