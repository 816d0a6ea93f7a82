"""Process faults: kill (SIGKILL, restarted at heal), graceful restart, pause/resume.

Targets: one, minority, majority, all, a partition's leader or followers, the controller, or
named nodes; kill and restart also `rolling` (every broker, one after another, each next one as
soon as the previous has re-registered: the Nemesis runs it, see `rolling_order`); kill also
`failover` (a partition's leader, then, before the cluster has noticed, the replica it fails over
to: a rapid double failover, see `failover_targets`) and `stalled-failover` (the leader dies while
that replica is frozen, which is thawed before its session expires). Pause uses the SUT's own pause when it has
one, else the node's cgroup freeze (`pause_daemon`), else SIGSTOP to the broker daemon.
"""

from __future__ import annotations

import logging
import random
import signal
from typing import Any

from clusters.handles import LOCAL
from clusters.node import HasDaemonCgroups, Node, PausesDaemons
from clusters.sut import HasBrokerDaemon, Killable, Pausable
from foundation.errors import BadInput
from nemesis import targets
from nemesis.packages.base import Active, Context, NoTarget, Package, PlanEnv, topic_partition_draw

log = logging.getLogger(__name__)

BROKER_DAEMON = "broker"


def _daemon(ctx: Context) -> str:
    return ctx.sut.broker_daemon if isinstance(ctx.sut, HasBrokerDaemon) else BROKER_DAEMON


def _resolve(ctx: Context, step: dict[str, Any], pick: random.Random, default: Any = "one") -> list[str]:
    topic, partition = ctx.topic_partition(step)
    target = step.get("target", default)
    nodes = targets.resolve(target, ctx.names, ctx.sut, pick, topic, partition)
    if not nodes:
        raise NoTarget(f"target {target!r} names no node now (topic {topic}, partition {partition})")
    return nodes


ROLLING = "rolling"
FAILOVER = "failover"
STALLED_FAILOVER = "stalled-failover"
# Targets the Nemesis runs as sequences of its own (a partition's leader and its successor).
FAILOVERS = (FAILOVER, STALLED_FAILOVER)

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
    "leader": 2,
    ROLLING: 1,
}


class _Targeted(Package):
    qualifiers: tuple[str, ...] = targets.TARGETS
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
        if target == ROLLING and ROLLING in self.qualifiers:
            if not ctx.names:
                raise BadInput(f"{self.name}: a rolling {self.name} needs at least one node")
            return
        if target in FAILOVERS and target in self.qualifiers:
            if len(ctx.names) < 3:
                raise BadInput(
                    f"{self.name}: a {target} {self.name} needs at least 3 nodes (a leader, the "
                    f"replica it fails over to, and a survivor); the cluster has {len(ctx.names)}"
                )
            targets.check("leader", ctx.names, ctx.sut, f"{self.name}: {target}")
            return
        targets.check(target, ctx.names, ctx.sut, f"{self.name}")

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        wanted = [q for q in self.default_qualifiers if q != ROLLING and q not in FAILOVERS]
        usable = targets.possible(env.names, env.has_leaders, wanted)
        if env.has_leaders and len(env.names) >= 3:
            usable += [q for q in FAILOVERS if q in self.default_qualifiers]
        if ROLLING in self.default_qualifiers and env.names:
            usable.append(ROLLING)
        return usable

    def draw(self, rng: random.Random, env: PlanEnv) -> str:
        """A target for the random schedule, weighted towards those that find bugs (reproducible)."""
        usable = self.usable_qualifiers(env, None) or ["one"]
        return rng.choices(usable, weights=[self.weights.get(q, 1) for q in usable])[0]

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        target = qualifier or self.draw(rng, env)
        step: dict[str, Any] = {"do": self.name, "target": target}
        if target in targets.NEEDS_PARTITION or target in FAILOVERS:
            step.update(topic_partition_draw(rng, env))
        return step


def rolling_order(names: list[str], pick: random.Random) -> list[str]:
    """The order a rolling kill or restart visits the nodes: every one, drawn from the step's pick."""
    return pick.sample(sorted(names), len(names))


def failover_targets(
    states: dict[tuple[str, int], dict[str, Any]], controller: str | None, first: tuple[str, int]
) -> tuple[tuple[str, int], str, str] | None:
    """(partition, leader, successor) for a rapid double failover, or None.

    The successor is the first in-sync replica after the leader: the one a first-in-ISR election
    (Kafka's) makes leader when the leader is gone. A partition whose successor is the controller
    is passed over when another one will do: a dead controller elects nobody, so the second
    failover would collapse into the first. The drawn partition (`first`) is tried first.
    """
    candidates: list[tuple[tuple[str, int], str, str]] = []
    for key in [first, *sorted(k for k in states if k != first)]:
        state = states.get(key) or {}
        leader = state.get("leader")
        successor = next((str(r) for r in state.get("isr") or [] if r != leader), None)
        if leader and successor:
            candidates.append((key, str(leader), successor))
    for candidate in candidates:
        if candidate[2] != controller:
            return candidate
    return candidates[0] if candidates else None


def start_node(ctx: Context, node: Node) -> None:
    """Start a broker we killed; one that already runs again (a scripted start) is fine."""
    try:
        ctx.sut.start(node)
    except Exception:
        if node.daemon_pid(_daemon(ctx)) is None:
            raise
        log.info("%s: broker already running, not started again", node.name)


def _need_killable(ctx: Context, what: str) -> None:
    if not isinstance(ctx.sut, Killable):
        raise BadInput(f"{what} needs a system that can kill and start its brokers (Killable)")


class Kill(_Targeted):
    name = "kill"
    crashes = True
    qualifiers = (*targets.TARGETS, ROLLING, *FAILOVERS)
    default_qualifiers = (*_Targeted.default_qualifiers, ROLLING, *FAILOVERS)
    weights = BUG_FINDING_WEIGHTS
    f = "kill"
    heal_f = "start"
    shade = {"color": "#e45756", "label": "kill"}
    summary = "SIGKILL the broker process; restarted when healed"

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        _need_killable(ctx, "kill")
        super().check(ctx, step)

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        self.record(ctx, fault_id, names, [])  # a killed broker of a dead run stays down
        ctx.parallel(ctx.sut.kill, [ctx.node(n) for n in names])

        def heal() -> dict[str, Any]:
            ctx.parallel(lambda node: start_node(ctx, node), [ctx.node(n) for n in names])
            return {"nodes": names}

        return Active(fault_id, self.name, self.heal_f, names, {"nodes": names}, heal)


class Restart(_Targeted):
    name = "restart"
    qualifiers = (*targets.TARGETS, ROLLING)
    default_qualifiers = (*_Targeted.default_qualifiers, ROLLING)
    weights = BUG_FINDING_WEIGHTS
    f = "restart"
    shade = {"color": "#f58518", "label": "restart"}
    summary = "graceful stop (SIGTERM, wait) and start of the broker"

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        _need_killable(ctx, "restart")
        super().check(ctx, step)

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        ctx.parallel(ctx.sut.restart, [ctx.node(n) for n in names])
        return Active(fault_id, self.name, "", names, {"nodes": names}, None)


def pause_node(ctx: Context, node: Node) -> None:
    if isinstance(ctx.sut, Pausable):
        ctx.sut.pause(node)
    elif isinstance(node, PausesDaemons):
        node.pause_daemon(_daemon(ctx))
    else:
        node.signal_daemon(_daemon(ctx), signal.SIGSTOP)


def resume_node(ctx: Context, node: Node) -> None:
    if isinstance(ctx.sut, Pausable):
        ctx.sut.resume(node)
    elif isinstance(node, PausesDaemons):
        node.resume_daemon(_daemon(ctx))
    else:
        node.signal_daemon(_daemon(ctx), signal.SIGCONT)


def _resume_recipe(ctx: Context, node: Node) -> list[dict[str, Any]]:
    """How to resume this node's broker without the cluster object (after a controller crash)."""
    daemon = _daemon(ctx)
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
    f = "pause"
    heal_f = "resume"
    shade = {"color": "#b279a2", "label": "pause"}
    summary = "freeze the broker (SUT pause, cgroup freeze, or SIGSTOP); resumed when healed"

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        nodes = [ctx.node(n) for n in names]
        recipe = [s for node in nodes for s in _resume_recipe(ctx, node)]
        self.record(ctx, fault_id, names, recipe)
        ctx.parallel(lambda node: pause_node(ctx, node), nodes)

        def heal() -> dict[str, Any]:
            ctx.parallel(lambda node: resume_node(ctx, node), nodes)
            return {"nodes": names}

        return Active(fault_id, self.name, self.heal_f, names, {"nodes": names}, heal)


PACKAGES: tuple[Package, ...] = (Kill(), Restart(), Pause())
