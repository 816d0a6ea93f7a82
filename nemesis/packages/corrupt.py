"""Damaged disks: stop the broker, damage its data dir (bit flip, torn tail, wiped disk), restart it.

`corrupt:bitflip` flips one bit in a segment's record bytes (scripted `where = "index"`: in an
offset index, where the system keeps one), `corrupt:truncate` cuts the last segment inside a
batch, `corrupt:wipe` empties the whole data dir (a replaced disk). The qualifier may name the
target too: `corrupt:bitflip-minority`, `corrupt:wipe-one`, `corrupt:truncate-leader`. The broker is
SIGKILLed first (the damage happens while it is down, as on a machine that crashed), the damage is
done on the node by `damage_script` (seeded by the step's pick, fsynced), and the heal starts the
broker again: its recovery must notice the damage (CRC, torn batch) and truncate or refuse, never
serve it. The history's ok value names, per node, the partition, file and first damaged offset,
which the checkers report as the replica that held damaged data.
"""

from __future__ import annotations

import inspect
import json
import random
import re
from typing import Any

from clusters.node import Node
from clusters.sut import HasDataDirs, Killable, MayLackReplicaLogs
from foundation.errors import BadInput, InfrastructureError
from nemesis import targets
from nemesis.packages import damage_script
from nemesis.packages.base import Active, Context, Package, PlanEnv, node_by_node, topic_partition_draw
from nemesis.packages.patterns import check_pattern, names_of, usable_patterns
from nemesis.packages.process import _resolve, start_node

PATTERN_NAMES = names_of("corrupt")  # corrupt:lonely-leader (nemesis/packages/disk_patterns.py)

KINDS = ("bitflip", "truncate", "wipe")
WHERE = ("records", "index")
# Targets a qualifier may name after the kind (`bitflip-minority`).
AIMS = ("one", "minority", "majority", "all", "leader", "followers", "follower", "controller")
# What a bare kind draws. Damage of every replica loses what only they held on any settings, so
# the random schedule damages at most a majority, and wipes at most a minority (a wiped majority
# that comes back while still in the ISR is KIP-903's empty-disk case, a fault of its own).
DRAWN: dict[str, tuple[str, ...]] = {
    "bitflip": ("one", "minority", "majority"),
    "truncate": ("one", "minority", "majority"),
    "wipe": ("one", "minority"),
}
SCRIPT = inspect.getsource(damage_script)


def split_qualifier(qualifier: str) -> tuple[str, str | None]:
    """`bitflip-minority` -> ("bitflip", "minority"); `wipe` -> ("wipe", None)."""
    kind, _, aim = qualifier.partition("-")
    return kind, aim or None


def data_dirs_refusal(sut: Any) -> str | None:
    """Why this system's data dirs cannot be damaged (None: they can)."""
    if not isinstance(sut, HasDataDirs):
        return f"corrupt needs a system with data dirs; {type(sut).__name__} names none"
    if isinstance(sut, MayLackReplicaLogs):
        why = sut.replica_logs_unavailable()
        if why:
            said = re.search(r"\(([^()]*)\)", why)  # e.g. (data_format = 'other' in my.toml)
            return "corrupt needs data dirs in Kafka's segment format" + (
                f" ({said.group(1)})" if said else ""
            )
    return None


def damage_node(ctx: Context, node: Node, request: dict[str, Any]) -> dict[str, Any]:
    """Run the damage on the node; its report (raises InfrastructureError when it cannot run)."""
    dirs = list(ctx.sut.data_dirs(node))
    argv = [ctx.python, "-c", SCRIPT, json.dumps({**request, "data_dirs": dirs})]
    result = node.exec(argv, timeout=60, check=False)
    if not result.ok:
        raise InfrastructureError(
            f"{node.name}: damaging the data dir failed: {result.stderr.strip()[-300:]}"
        )
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return report


class Corrupt(Package):
    crashes = True
    name = "corrupt"
    heal_f = "start"
    qualifiers = (*KINDS, *(f"{k}-{a}" for k in KINDS for a in AIMS), *PATTERN_NAMES)
    default_qualifiers = KINDS
    shade = {"color": "#9d755d", "label": "damaged disk"}
    summary = "stop the broker, damage its data dir (bitflip, truncate, wipe), restart it when healed"

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        if not isinstance(ctx.sut, Killable):
            raise BadInput("corrupt needs a system that can kill and start its brokers (Killable)")
        why = data_dirs_refusal(ctx.sut)
        if why:
            raise BadInput(why)
        if step.get("target") in PATTERN_NAMES:
            check_pattern(ctx, self.name, str(step["target"]))
            return
        kind = step.get("kind", "bitflip")
        if kind not in KINDS:
            raise BadInput(f"corrupt: unknown kind {kind!r} (kinds: {', '.join(KINDS)})")
        where = step.get("where", "records")
        if where not in WHERE or (where == "index" and kind != "bitflip"):
            raise BadInput(f"corrupt: where must be one of {', '.join(WHERE)} (index: bitflip only)")
        targets.check(step.get("target", "one"), ctx.names, ctx.sut, self.name)

    def probe(self, ctx: Context) -> str | None:
        """The damage runs with the nodes' Python (`python -c`): every broker node must have it."""

        def one(node: Node) -> str | None:
            if node.exec([ctx.python, "-c", "pass"], timeout=30, check=False).ok:
                return None
            return f"node {node.name} cannot run {ctx.python}, which damages its data dir"

        return ctx.first_problem(one)

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return list(KINDS) + usable_patterns(self.name, env)

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        if qualifier in PATTERN_NAMES:
            return {"do": self.name, "target": qualifier, **topic_partition_draw(rng, env)}
        kind, aim = split_qualifier(qualifier or rng.choice(KINDS))
        if aim is None:
            aim = rng.choice(targets.possible(env.names, env.has_leaders, DRAWN[kind]) or ["one"])
        step: dict[str, Any] = {"do": self.name, "kind": kind, "target": aim}
        if aim in targets.NEEDS_PARTITION:
            step.update(topic_partition_draw(rng, env))
        return step

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        names = _resolve(ctx, step, pick)
        kind = str(step.get("kind", "bitflip"))
        self.record(ctx, fault_id, names, [])  # a stopped broker of a dead run stays down
        nodes = [ctx.node(n) for n in names]
        ctx.parallel(ctx.sut.kill, nodes)
        request: dict[str, Any] = {"kind": kind, "where": step.get("where", "records")}
        if "topic" in step and kind != "wipe":  # aim at the named partition (else: a drawn one)
            request.update(topic=str(step["topic"]), partition=int(step.get("partition", 0)))
        seeds = {n: pick.randrange(2**31) for n in names}
        reports = ctx.parallel(
            lambda node: damage_node(ctx, node, {**request, "seed": seeds[node.name]}), nodes
        )
        damage = dict(zip(names, reports, strict=True))

        start = node_by_node(ctx, lambda node: start_node(ctx, node))
        value = {"nodes": names, "kind": kind, "damage": damage}
        return Active(fault_id, self.name, self.heal_f, names, value, lambda: start(names), heal_nodes=start)

    def did_nothing(self, value: dict[str, Any]) -> str | None:
        damage = value.get("damage") or {}
        if damage and not any(isinstance(d, dict) and d.get("damaged") for d in damage.values()):
            return f"damaged nothing on {', '.join(sorted(damage))}: no segment data to damage"
        return None


PACKAGES: tuple[Package, ...] = (Corrupt(),)
