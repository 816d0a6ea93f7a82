"""Power loss: SIGKILL the broker, then drop every write its data dir never fsynced.

The data dir must be mounted on `clusters.lazyfs` (the system under test does it when the test asks
for this fault: `sut.lazyfs_sockets(node) -> list[str]` names the control sockets). The broker is
killed first, so nothing it writes after the drop survives; the heal restarts it.
"""

from __future__ import annotations

import json
import random
from typing import Any

from clusters import lazyfs
from clusters.node import Node
from clusters.sut import HasDataDirs, HasLazyfs, Killable
from foundation.errors import BadInput, InfrastructureError
from nemesis import targets
from nemesis.packages.base import Active, Context, Package, PlanEnv, node_by_node, topic_partition_draw
from nemesis.packages.patterns import check_pattern, names_of, usable_patterns
from nemesis.packages.process import _resolve, start_node

PATTERN_NAMES = names_of("lose-unsynced")


def sockets(ctx: Context, name: str) -> list[str]:
    return list(ctx.sut.lazyfs_sockets(ctx.node(name))) if isinstance(ctx.sut, HasLazyfs) else []


def writeback(ctx: Context, names: list[str]) -> None:
    """Flush the nodes' page caches (lazyfs `sync`), as the kernel's writeback does every few
    seconds: a power loss after this drops only what was written since. Nodes without lazyfs have
    nothing to flush."""

    def one(node: Node) -> None:
        for sock in sockets(ctx, node.name):
            result = node.exec(lazyfs.ctl_argv(ctx.python, sock, "sync"), timeout=30, check=False)
            if not result.ok:
                raise InfrastructureError(f"{node.name}: lazyfs sync failed: {result.stderr.strip()}")

    ctx.parallel(one, [ctx.node(n) for n in names])


class LoseUnsynced(Package):
    crashes = True
    name = "lose-unsynced"
    heal_f = "start"
    qualifiers = (*targets.TARGETS, *PATTERN_NAMES)
    default_qualifiers = ("one", "minority", "majority", "all", "leader", *PATTERN_NAMES)
    shade = {"color": "#ff9da6", "label": "power loss"}
    summary = "power loss: SIGKILL the broker and drop its un-fsynced writes (lazyfs); restarted when healed"
    probes_node = True

    def node_probe(self, node: Node) -> str | None:
        """The data dir is mounted on a FUSE filesystem: /dev/fuse and fusermount must be there."""
        script = (
            "test -c /dev/fuse && test -w /dev/fuse && { command -v fusermount || command -v fusermount3; }"
        )
        if not node.exec(["sh", "-c", script], timeout=15, check=False).ok:
            return f"FUSE is not available on {node.name} (no writable /dev/fuse or no fusermount)"
        return None

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        if not isinstance(ctx.sut, Killable):
            raise BadInput("lose-unsynced needs a system that can kill and start its brokers (Killable)")
        if not isinstance(ctx.sut, HasDataDirs):
            raise BadInput(
                f"lose-unsynced needs a system with data dirs; {type(ctx.sut).__name__} names none"
            )
        if not isinstance(ctx.sut, HasLazyfs):
            raise BadInput(
                "lose-unsynced needs data dirs mounted on clusters.lazyfs (sut.lazyfs_sockets(node)); "
                f"{type(ctx.sut).__name__} does not offer it"
            )
        target = step.get("target", "one")
        if target in PATTERN_NAMES:
            check_pattern(ctx, self.name, str(target))
            return
        targets.check(target, ctx.names, ctx.sut, self.name)

    def probe(self, ctx: Context) -> str | None:
        def one(node: Node) -> str | None:
            found = sockets(ctx, node.name)
            if not found:
                return f"node {node.name} has no lazyfs-mounted data dir (start the cluster with this fault requested)"
            for sock in found:
                if not node.exec(["test", "-S", sock], timeout=15, check=False).ok:
                    return f"node {node.name}: no lazyfs control socket at {sock}"
            return None

        return ctx.first_problem(one)

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        plain = [q for q in self.default_qualifiers if q not in PATTERN_NAMES]
        usable = targets.possible(env.names, env.has_leaders, plain)
        return usable + usable_patterns(self.name, env)

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        target = qualifier or rng.choice(self.usable_qualifiers(env, None) or ["one"])
        step: dict[str, Any] = {"do": self.name, "target": target}
        if target in targets.NEEDS_PARTITION or target in PATTERN_NAMES:
            step.update(topic_partition_draw(rng, env))
        return step

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        self.record(ctx, fault_id, names, [])
        nodes = [ctx.node(n) for n in names]
        ctx.parallel(ctx.sut.kill, nodes)
        dropped: dict[str, Any] = {}
        for node in nodes:
            for sock in sockets(ctx, node.name):
                result = node.exec(lazyfs.ctl_argv(ctx.python, sock, "drop"), timeout=30, check=False)
                if not result.ok:
                    raise InfrastructureError(f"{node.name}: lazyfs drop failed: {result.stderr.strip()}")
                reply = json.loads(result.stdout.strip().splitlines()[-1])
                dropped.setdefault(node.name, []).append(
                    {"socket": sock, "files": reply.get("files", 0), "bytes": reply.get("bytes", 0)}
                )

        start = node_by_node(ctx, lambda node: start_node(ctx, node))
        value = {"nodes": names, "dropped": dropped}
        return Active(fault_id, self.name, self.heal_f, names, value, lambda: start(names), heal_nodes=start)

    def did_nothing(self, value: dict[str, Any]) -> str | None:
        dropped = value.get("dropped") or {}
        total = sum(int(d.get("bytes", 0)) for drops in dropped.values() for d in drops)
        if dropped and total == 0:
            return f"dropped 0 bytes on {', '.join(sorted(dropped))}: nothing was unsynced"
        return None


PACKAGES: tuple[Package, ...] = (LoseUnsynced(),)
