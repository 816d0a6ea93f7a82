"""Faults of an object store, not of its process: what users of object-storage Kafka meet between
their brokers and the bucket, injected by strandline's S3 proxy (clusters/s3_proxy.py) in front of
every role of `kind = "s3"`.

`storage:slowdown` answers requests with 503 SlowDown (throttling), `storage:latency` holds each
for `latency_ms` before relaying it, `storage:drop-reply` relays a request, lets the store apply
it and drops the reply (a PUT that succeeded whose client never heard), `storage:reset` resets the
connection instead of relaying. Each request meets the fault with its `probability` (and only
requests of the HTTP `methods` given, every method by default), for as long as the fault is in
place (its window): the fault writes the proxy's rules file, the heal writes "no fault" and journals
how many requests the proxy struck.
"""

from __future__ import annotations

import json
import random
from typing import Any

from clusters.node import Node
from clusters.sut import FrontsObjectStores, StoreProxy
from foundation.errors import BadInput
from nemesis.packages.base import Active, Context, Package, PlanEnv

FAULTS = ("slowdown", "latency", "drop-reply", "reset")
METHODS = ("GET", "PUT", "POST", "HEAD", "DELETE")
NO_FAULT = "{}"
# Write the rules file whole (a new file moved over the old): the proxy never reads half of one.
WRITE = 'printf %s "$1" > "$2.tmp" && mv -f "$2.tmp" "$2"'


def proxies(ctx: Context, step: dict[str, Any] | None = None) -> list[StoreProxy]:
    """The proxies a step aims at (`role`: one object-store role; default every one)."""
    found = ctx.sut.store_proxies() if isinstance(ctx.sut, FrontsObjectStores) else []
    role = (step or {}).get("role")
    return [p for p in found if role is None or p.role == role]


def _system_name(sut: Any) -> str:
    definition = getattr(sut, "definition", None)
    return str(getattr(definition, "name", None) or type(sut).__name__)


def write_argv(text: str, path: str) -> list[str]:
    return ["sh", "-c", WRITE, "sh", text, path]


def struck(node: Node, proxy: StoreProxy, fault_id: str) -> dict[str, int]:
    """What the proxy counted under this fault: requests seen (up to its last strike), injected."""
    read = node.exec(["cat", proxy.stats], timeout=30, check=False)
    try:
        stats = json.loads(read.stdout) if read.ok else {}
    except ValueError:
        stats = {}
    if stats.get("id") != fault_id:
        return {"requests": 0, "injected": 0}
    return {"requests": int(stats.get("requests", 0)), "injected": int(stats.get("injected", 0))}


class Storage(Package):
    name = "storage"
    qualifiers = FAULTS
    default_qualifiers = FAULTS
    shade = {"color": "#ff9da6", "label": "object-store faults"}
    summary = (
        'object-store faults through strandline\'s S3 proxy in front of a role of kind = "s3": '
        "503 SlowDown, latency, replies dropped after the store applied the request, resets"
    )

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        if not proxies(ctx):
            raise BadInput(
                f'{self.name} needs a role of kind = "s3" (an S3-compatible store strandline fronts with '
                f"its S3 proxy, docs/systems.md); {_system_name(ctx.sut)} has none"
            )
        fault = step.get("fault", "slowdown")
        if fault not in FAULTS:
            raise BadInput(f"{self.name}: fault must be one of {', '.join(FAULTS)}, got {fault!r}")
        if "role" in step and not proxies(ctx, step):
            roles = sorted({p.role for p in proxies(ctx)})
            raise BadInput(
                f'{self.name}: role {step["role"]!r} is not of kind = "s3" (those are: {", ".join(roles)})'
            )
        p = step.get("probability", 1.0)
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            raise BadInput(f"{self.name}: probability must be in (0, 1], got {p!r}")
        latency = step.get("latency_ms", 1000)
        if isinstance(latency, bool) or not isinstance(latency, int) or latency < 0:
            raise BadInput(f"{self.name}: latency_ms must be a whole number of milliseconds, got {latency!r}")
        methods = step.get("methods", [])
        if not isinstance(methods, list) or any(str(m).upper() not in METHODS for m in methods):
            raise BadInput(f"{self.name}: methods must be a list of {', '.join(METHODS)}, got {methods!r}")

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return list(FAULTS)

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        fault = qualifier or rng.choice(FAULTS)
        step: dict[str, Any] = {"do": self.name, "fault": fault}
        if fault == "latency":
            step["latency_ms"] = rng.choice([200, 1000, 3000])
        else:  # a request that always fails is retried forever: strike some
            step["probability"] = rng.choice([0.1, 0.3, 0.5])
        return step

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        aimed = proxies(ctx, step)
        fault = str(step.get("fault", "slowdown"))
        rule = {
            "id": fault_id,
            "fault": fault,
            "probability": float(step.get("probability", 1.0)),
            "latency_ms": int(step.get("latency_ms", 1000)),
            "methods": [str(m).upper() for m in step.get("methods", [])],
            "seed": pick.randrange(2**31),
        }
        names = [p.node for p in aimed]
        heal_steps = [self.step_for(ctx.node(p.node), write_argv(NO_FAULT, p.rules)) for p in aimed]
        self.record(ctx, fault_id, names, heal_steps)
        ctx.parallel(
            lambda p: ctx.node(p.node).exec(write_argv(json.dumps(rule), p.rules), timeout=30), aimed
        )

        def heal() -> dict[str, Any]:
            def undo(p: StoreProxy) -> dict[str, int]:
                node = ctx.node(p.node)
                node.exec(write_argv(NO_FAULT, p.rules), timeout=30)
                return struck(node, p, fault_id)

            counts = dict(zip(names, ctx.parallel(undo, aimed), strict=True))
            return {"fault": self.name, "nodes": names, "struck": counts}

        value = {"nodes": names, **{k: v for k, v in rule.items() if k not in ("id", "seed")}}
        return Active(fault_id, self.name, self.heal_f, names, value, heal)


PACKAGES: tuple[Package, ...] = (Storage(),)
