"""Fault schedules of the simulator: drawn from a seeded rng, told as numbered steps, and written
in the nemesis's scripted-schedule format (docs/faults.md) so a real cluster can replay them."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any

from explore.settings import SimSettings

TOPIC = "t0"
PARTITION = 0

# what each fault may aim at (roles are resolved when the step fires, as the nemesis does)
TARGETS = {
    "kill": ("leader", "follower", "followers", "controller", "one"),
    "restart": ("leader", "follower", "followers", "controller", "one"),
    "pause": ("leader", "follower", "one"),
    "partition": ("leader", "zk-leader", "one", "zk-one"),
    "power-loss": ("leader", "follower", "followers", "one"),
    "clock": ("leader", "follower", "one"),
    "start": ("all",),
    "resume": ("all",),
    "heal": ("partition", "clock"),
}
# the faults that a later step may undo, and that undo step
UNDO = {"kill": "start", "power-loss": "start", "pause": "resume", "partition": "heal", "clock": "heal"}
WAITS_S = (0.0, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)
CLOCK_OFFSETS_S = (-30.0, -5.0, 5.0, 30.0, 120.0)


@dataclass(frozen=True, slots=True)
class Step:
    """After `wait_s`, `fault` at `target` (a role, `one`, `all`, a node name or, for heal, a fault)."""

    wait_s: float
    fault: str
    target: str
    pick: int = 0  # seeds the choice of concrete nodes when the step fires
    offset_s: float = 0.0  # clock: how far the clock jumps

    def simpler(self, **changes: Any) -> Step:
        return replace(self, **changes)


Schedule = tuple[Step, ...]


def draw_schedule(rng: random.Random, settings: SimSettings) -> Schedule:
    """A random schedule: 1 to max_fault_steps faults, some of them undone by a later step."""
    steps: list[Step] = []
    faults = settings.faults
    for _ in range(rng.randint(1, settings.max_fault_steps)):
        fault = rng.choice(faults)
        wait = rng.choice(WAITS_S) * rng.uniform(0.5, 1.5)
        target = rng.choice([t for t in TARGETS[fault] if t in settings.targets] or TARGETS[fault])
        offset = rng.choice(CLOCK_OFFSETS_S) if fault == "clock" else 0.0
        steps.append(Step(round(wait, 2), fault, target, rng.randrange(1 << 30), offset))
        undo = UNDO.get(fault)
        if undo is not None and rng.random() < 0.6:
            wait = rng.choice(WAITS_S) * rng.uniform(0.5, 1.5)
            target = fault if undo == "heal" else "all"
            steps.append(Step(round(wait, 2), undo, target, rng.randrange(1 << 30)))
    return tuple(steps)


def fault_steps(schedule: Schedule) -> int:
    return len(schedule)


# --- telling a schedule ------------------------------------------------------------------------
def _who(target: str, nodes: list[str]) -> str:
    names = ", ".join(nodes) if nodes else "nobody"
    if target in ("leader", "follower", "controller"):
        return f"the {target} {names}"
    if target == "followers":
        return f"the followers {names}"
    return names


PHRASES = {
    "kill": "{who} {is_} killed (SIGKILL)",
    "restart": "{who} restart{s} (SIGTERM, then start)",
    "pause": "{who} {is_} paused (SIGSTOP)",
    "partition": "{who} {is_} cut off from {cut}",
    "power-loss": "{who} lose{s} power: what was never fsynced is gone",
    "clock": "the clock of {who} jumps {offset} s",
    "start": "the killed brokers start again ({listed})",
    "resume": "the paused brokers resume ({listed})",
}


def describe(step: Step, nodes: list[str]) -> str:
    """What one step did, as a person reads it, with the nodes it hit in the simulation."""
    if step.fault == "heal":
        return "the network heals" if step.target == "partition" else "the clocks are set right"
    one = len(nodes) == 1
    return PHRASES[step.fault].format(
        who=_who(step.target.removeprefix("zk-"), nodes),
        is_="is" if one else "are",
        s="s" if one else "",
        cut="ZooKeeper" if step.target.startswith("zk-") else "the other brokers",
        offset=f"{step.offset_s:+g}",
        listed=", ".join(nodes) or "none",
    )


def tell(steps: list[tuple[Step, str]]) -> list[str]:
    """Numbered lines `N. what happens`, each saying how long after the previous step it came."""
    lines = []
    for number, (step, what) in enumerate(steps, 1):
        if number == 1:
            when = f"after {step.wait_s:g} s of load, " if step.wait_s else ""
        else:
            when = "at once, " if step.wait_s == 0 else f"{step.wait_s:g} s later, "
        lines.append(f"{number}. {when}{what}")
    return lines


# --- the nemesis's scripted schedule ------------------------------------------------------------
def scripted(schedule: Schedule, calm_s: float) -> list[dict[str, Any]]:
    """The schedule as `schedule = [...]` steps of the test config (docs/faults.md, Schedules)."""
    out: list[dict[str, Any]] = [{"wait_until": "leader-elected", "topic": TOPIC, "partition": PARTITION}]
    out.append({"wait": calm_s})
    where = {"topic": TOPIC, "partition": PARTITION}
    for step in schedule:
        if step.wait_s > 0:
            out.append({"wait": step.wait_s})
        role = {"target": step.target, **where}
        if step.fault in ("kill", "restart", "pause"):
            out.append({"do": step.fault, **role})
        elif step.fault == "power-loss":
            out.append({"do": "lose-unsynced", **role})
        elif step.fault == "partition":
            out.append({"do": "partition", "grudge": step.target, **where})
        elif step.fault == "clock":
            out.append({"do": "clock-bump", "offset": f"{step.offset_s:+g}s", **role})
        elif step.fault in ("start", "resume"):
            out.append({"do": step.fault})
        else:
            out.append({"heal": step.target})
    out.append({"wait": 15})
    out.append({"heal": "all"})
    return out


def to_toml(steps: list[dict[str, Any]]) -> str:
    """`schedule = [...]` as TOML, one inline table per line."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, bool):
            return "true" if v else "false"
        return repr(v)

    lines = ["schedule = ["]
    for step in steps:
        lines.append("  { " + ", ".join(f"{k} = {value(v)}" for k, v in step.items()) + " },")
    lines.append("]")
    return "\n".join(lines) + "\n"
