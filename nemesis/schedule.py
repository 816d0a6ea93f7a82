"""Fault schedules as sequences of steps, drawn from a seeded `random.Random` before any cluster exists.

A step is a dict: `{"wait": s}`, `{"do": fault, ...parameters}`, `{"heal": "all"}` (or a fault name),
`{"wait_until": condition, ...}`. Every `do` step carries a `pick` (an integer drawn from the
schedule's rng) that seeds the choice of concrete nodes when the step fires, so the same seed gives
the same sequence of decisions, whatever the cluster does.

The random schedule: after a calm start, one fault (or a composed group `kill+partition`) every
`nemesis_interval` seconds with jitter, held for part of the interval and healed before the next.
The scripted schedule: `config.schedule`, run once, in order; faults stay until a step heals them
(or the end of the test does).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from foundation.errors import BadInput
from nemesis import targets
from nemesis.packages import ALIASES, PACKAGES, Package, PlanEnv, lookup

CONTROL_DO = ("start", "resume", "heal")
# Seconds past the session timeout a crash is held.
CRASH_MARGIN_S = 1.0
# How long the random schedule waits for healed crashes to serve again before its calm.
READY_TIMEOUT_S = 30.0
PICK_RANGE = 2**32


def available() -> list[str]:
    return sorted(PACKAGES)


def _role_qualifier(package: Package, qualifier: str) -> bool:
    """`kill:role=storage`, `pause:role=coordinator`: the faults that take targets take roles;
    partitions take two roles (`partition:broker|storage`). Checked against the system later."""
    if targets.role_of_target(qualifier):
        return package.name != "partition" and "one" in package.qualifiers
    return package.name == "partition" and "|" in qualifier


def parse_specs(names: Sequence[str]) -> list[list[tuple[str, str | None]]]:
    """`["kill:leader", "partition+clock"]` -> [[("kill", "leader")], [("partition", None), ("clock", None)]]."""
    groups: list[list[tuple[str, str | None]]] = []
    for spec in names:
        group: list[tuple[str, str | None]] = []
        for part in str(spec).split("+"):
            name, _, qualifier = part.strip().partition(":")
            package = lookup(name)
            if package is None:
                raise BadInput(
                    f"unknown fault {name!r} in --nemesis (available: {', '.join(available())}; "
                    f"aliases: {', '.join(f'{a}={b}' for a, b in sorted(ALIASES.items()))})"
                )
            if package.name == "clock-reset":
                raise BadInput("clock-reset is a scripted step, not a fault for the random schedule")
            if qualifier and qualifier not in package.qualifiers and not _role_qualifier(package, qualifier):
                raise BadInput(
                    f"fault {package.name!r}: unknown qualifier {qualifier!r} "
                    f"(accepted: {', '.join(package.qualifiers)})"
                )
            group.append((package.name, qualifier or None))
        groups.append(group)
    return groups


def random_steps(
    specs: list[list[tuple[str, str | None]]], env: PlanEnv, rng: random.Random, interval: float
) -> Iterator[dict[str, Any]]:
    """The endless random schedule. Uses nothing but `rng`, `env` and `interval`."""
    if not specs:
        return
    yield {"wait": round(interval * rng.uniform(0.5, 1.0), 3)}
    while True:
        cycle = interval * rng.uniform(0.8, 1.2)
        hold = cycle * rng.uniform(0.4, 0.7)
        group = rng.choice(specs)
        for name, qualifier in group:
            step = PACKAGES[name].plan(rng, env, qualifier)
            step["pick"] = rng.randrange(PICK_RANGE)
            yield step
        crashed = any(PACKAGES[name].crashes for name, _ in group)
        if crashed and env.crash_noticed_s > 0:
            # A crashed ZooKeeper-mode Kafka broker cannot register again before its session
            # expires: a shorter crash is one Kafka never sees, so hold it until it can be noticed.
            # The calm after it keeps its length (the cluster recovers and load flows again).
            longer = max(hold, env.crash_noticed_s + CRASH_MARGIN_S)
            cycle += longer - hold
            hold = longer
        yield {"wait": round(hold, 3)}
        yield {"heal": "all"}
        if crashed:
            # The calm starts once the restarted brokers serve again (a Python broker takes a few
            # seconds to load its logs and register), so load flows again before the next fault.
            yield {"wait_until": "brokers-ready", "timeout": READY_TIMEOUT_S}
        yield {"wait": round(cycle - hold, 3)}


def scripted_steps(steps: Sequence[dict[str, Any]], rng: random.Random) -> Iterator[dict[str, Any]]:
    """The scripted schedule, each `do` step given its `pick` from the rng in order."""
    for raw in steps:
        step = dict(raw)
        if "do" in step and "pick" not in step:
            step["pick"] = rng.randrange(PICK_RANGE)
        yield step


def step_kind(step: dict[str, Any], index: int) -> str:
    """Which of do / wait / wait_until / heal a scripted step is; BadInput when unclear."""
    kinds = [k for k in ("do", "wait", "wait_until", "heal") if k in step]
    if len(kinds) != 1:
        raise BadInput(
            f"schedule[{index}]: a step has exactly one of do, wait, wait_until, heal; got {sorted(step)}"
        )
    kind = kinds[0]
    if kind == "wait":
        value = step["wait"]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise BadInput(f"schedule[{index}]: wait must be a number of seconds, got {value!r}")
    if kind == "do":
        name = step["do"]
        if name not in CONTROL_DO and lookup(str(name)) is None:
            raise BadInput(
                f"schedule[{index}]: unknown action {name!r} (faults: {', '.join(available())}; "
                f"also {', '.join(CONTROL_DO)})"
            )
    return kind
