"""Process faults: kill (SIGKILL, restarted at heal), graceful restart, pause/resume.

Targets: one, minority, majority, all, a partition's leader or followers, the controller, or
named nodes; kill and restart also `rolling`, and kill the patterns `failover`,
`stalled-failover`, `lagging-follower` and `restarted-follower` (step sequences played by
nemesis.choreography, see nemesis/packages/process_patterns.py). Pause uses the SUT's own pause
when it has one, else the node's cgroup freeze (`pause_daemon`), else SIGSTOP to the broker daemon.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from clusters import daemon_control
from clusters.handles import LOCAL
from clusters.node import HasDaemonCgroups, Node
from clusters.sut import FaultsByCommand, HasBrokerDaemon, Killable, Pausable
from foundation.errors import BadInput
from nemesis import role_targets, targets
from nemesis.packages import process_patterns
from nemesis.packages.base import (
    Active,
    Context,
    NoTarget,
    Package,
    PlanEnv,
    node_by_node,
    topic_partition_draw,
)
from nemesis.packages.patterns import PATTERNS, check_pattern, names_of, usable_patterns

log = logging.getLogger(__name__)

BROKER_DAEMON = "broker"


def _daemon(ctx: Context) -> str:
    return ctx.sut.broker_daemon if isinstance(ctx.sut, HasBrokerDaemon) else BROKER_DAEMON


def _resolve(ctx: Context, step: dict[str, Any], pick: random.Random, default: Any = "one") -> list[str]:
    topic, partition = ctx.topic_partition(step)
    target = step.get("target", default)
    if role_targets.is_role_target(target):
        nodes = role_targets.resolve(target, ctx, step)
    else:
        nodes = targets.resolve(target, ctx.names, ctx.sut, pick, topic, partition)
    if not nodes:
        raise NoTarget(f"target {target!r} names no node now (topic {topic}, partition {partition})")
    return nodes


ROLLING = process_patterns.ROLLING
FAILOVER = process_patterns.FAILOVER
STALLED_FAILOVER = process_patterns.STALLED_FAILOVER
LAGGING_FOLLOWER = process_patterns.LAGGING_FOLLOWER
RESTARTED_FOLLOWER = process_patterns.RESTARTED_FOLLOWER

# How often a bare `kill` / `restart` draws each target. Data is lost when a partition fails over
# twice in quick succession (the replicas that follow the first new leader truncate — before
# KIP-101 to their high watermark, which lags the leader's — and the second failover elects one of
# them: `failover`, the target most runs should meet), when several replicas crash together (each
# restarts from its own checkpoints, and the cluster fails over to one of them), and, with acks=1
# (or min.insync.replicas=1), when the leader dies while the replica it fails over to lags
# (`stalled-failover`). One random node, a minority, or brokers restarted one after another (a
# restarted follower re-fetches at once from the live leader) rarely lose anything with three
# replicas, so those are drawn less often (but still drawn); a rolling kill also takes three
# session timeouts, a third of a minute-long test.
BUG_FINDING_WEIGHTS: dict[str, int] = {
    FAILOVER: 40,
    "all": 4,
    "majority": 3,
    STALLED_FAILOVER: 3,
    LAGGING_FOLLOWER: 3,
    RESTARTED_FOLLOWER: 2,
    "leader": 2,
    ROLLING: 1,
}


class _Targeted(Package):
    qualifiers: tuple[str, ...] = (*targets.TARGETS, *role_targets.ROLE_TARGETS)
    default_qualifiers: tuple[str, ...] = (
        "one",
        "minority",
        "majority",
        "all",
        "leader",
        "controller",
        "followers",
    )
    # Relative draw weights of the default qualifiers (missing: 1).
    weights: dict[str, int] = {}

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        target = step.get("target", "one")
        if isinstance(target, str) and target in names_of(self.name):
            check_pattern(ctx, self.name, target)
            return
        if role_targets.is_role_target(target):
            role_targets.check(target, ctx, self.name)
            return
        targets.check(target, ctx.names, ctx.sut, f"{self.name}")

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        patterns = names_of(self.name)
        wanted = [q for q in self.default_qualifiers if q not in patterns]
        usable = targets.possible(env.names, env.has_leaders, wanted)
        return usable + [q for q in usable_patterns(self.name, env) if q in self.default_qualifiers]

    def draw(self, rng: random.Random, env: PlanEnv) -> str:
        """A target for the random schedule, weighted towards those that find bugs (reproducible)."""
        usable = self.usable_qualifiers(env, None) or ["one"]
        return rng.choices(usable, weights=[self.weights.get(q, 1) for q in usable])[0]

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        target = qualifier or self.draw(rng, env)
        step: dict[str, Any] = {"do": self.name, "target": target}
        pattern = PATTERNS.get((self.name, target))
        if target in targets.NEEDS_PARTITION or (pattern is not None and pattern.needs_partition):
            step.update(topic_partition_draw(rng, env))
        return step


def start_node(ctx: Context, node: Node) -> None:
    """Start a broker we killed; one that already runs again (a scripted start) is fine."""
    try:
        ctx.sut.start(node)
    except Exception:
        if node.daemon_pid(_daemon(ctx)) is None:
            raise
        log.info("%s: broker already running, not started again", node.name)


class _StopsBrokers(_Targeted):
    """A fault that stops broker processes and starts them again: the system must be Killable."""

    weights = BUG_FINDING_WEIGHTS

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        if not isinstance(ctx.sut, Killable):
            raise BadInput(f"{self.name} needs a system that can kill and start its brokers (Killable)")
        super().check(ctx, step)


class Kill(_StopsBrokers):
    name = "kill"
    crashes = True
    qualifiers = (*targets.TARGETS, *role_targets.ROLE_TARGETS, *names_of("kill"))
    default_qualifiers = (*_Targeted.default_qualifiers, *names_of("kill"))
    heal_f = "start"
    shade = {"color": "#e45756", "label": "kill"}
    summary = "SIGKILL the broker process; restarted when healed"

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        # A killed broker of a dead run stays down, but for one strandline did not start: its
        # owner's start command is the heal recipe.
        self.record(ctx, fault_id, names, _command_recipe(ctx, self.name, names))
        ctx.parallel(ctx.sut.kill, [ctx.node(n) for n in names])
        start = node_by_node(ctx, lambda node: start_node(ctx, node))
        return Active(
            fault_id, self.name, self.heal_f, names, {"nodes": names}, lambda: start(names), heal_nodes=start
        )


class Restart(_StopsBrokers):
    name = "restart"
    qualifiers = (*targets.TARGETS, *role_targets.ROLE_TARGETS, *names_of("restart"))
    default_qualifiers = (*_Targeted.default_qualifiers, *names_of("restart"))
    shade = {"color": "#f58518", "label": "restart"}
    summary = "graceful stop (SIGTERM, wait) and start of the broker"

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        ctx.parallel(ctx.sut.restart, [ctx.node(n) for n in names])
        return Active(fault_id, self.name, "", names, {"nodes": names}, None)


def pause_node(ctx: Context, node: Node) -> None:
    """The system's own pause where it has one; else the node freezes the broker daemon."""
    if isinstance(ctx.sut, Pausable):
        ctx.sut.pause(node)
    else:
        daemon_control.freeze(node, _daemon(ctx))


def resume_node(ctx: Context, node: Node) -> None:
    if isinstance(ctx.sut, Pausable):
        ctx.sut.resume(node)
    else:
        daemon_control.thaw(node, _daemon(ctx))


def _command_recipe(ctx: Context, fault: str, names: list[str]) -> list[dict[str, Any]]:
    """The owner's commands that undo `fault` on these nodes (a cluster strandline did not start)."""
    if not isinstance(ctx.sut, FaultsByCommand):
        return []
    nodes = [ctx.node(n) for n in names]
    return [Package.step_for(n, argv) for n in nodes if (argv := ctx.sut.heal_argv(fault, n))]


def _resume_recipe(ctx: Context, node: Node) -> list[dict[str, Any]]:
    """How to resume this node's broker (or ZooKeeper) without the cluster object (after a
    controller crash)."""
    if isinstance(ctx.sut, FaultsByCommand):
        return _command_recipe(ctx, "pause", [node.name])
    daemon = role_targets.ZOOKEEPER if node.name in role_targets.zookeeper_nodes(ctx) else _daemon(ctx)
    steps: list[dict[str, Any]] = []
    cgroup = node.daemon_cgroup(daemon) if isinstance(node, HasDaemonCgroups) else None
    if cgroup is not None:
        # The freeze file lives on this machine (netns nodes share its filesystem): thaw it here.
        steps.append(
            {
                "node": None,
                "argv": [
                    "sh",
                    "-c",
                    '[ -e "$1" ] && echo 0 > "$1" || true',
                    "sh",
                    f"{cgroup}/cgroup.freeze",
                ],
                "access": LOCAL,
            }
        )
    pid = node.daemon_pid(daemon)
    if pid:
        steps.append(
            Package.step_for(
                node,
                [
                    "sh",
                    "-c",
                    f"kill -CONT -- -{int(pid)} {int(pid)} 2>/dev/null; pkill -CONT -P {int(pid)}; true",
                ],
            )
        )
    return steps


class Pause(_Targeted):
    name = "pause"
    heal_f = "resume"
    shade = {"color": "#b279a2", "label": "pause"}
    summary = "freeze the broker (SUT pause, cgroup freeze, or SIGSTOP); resumed when healed"

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        nodes = [ctx.node(n) for n in names]
        recipe = [s for node in nodes for s in _resume_recipe(ctx, node)]
        self.record(ctx, fault_id, names, recipe)
        ctx.parallel(lambda node: pause_node(ctx, node), nodes)
        resume = node_by_node(ctx, lambda node: resume_node(ctx, node))
        return Active(
            fault_id,
            self.name,
            self.heal_f,
            names,
            {"nodes": names},
            lambda: resume(names),
            heal_nodes=resume,
        )


PACKAGES: tuple[Package, ...] = (Kill(), Restart(), Pause())
