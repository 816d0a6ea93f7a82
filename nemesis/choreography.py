"""Plays a pattern (nemesis/packages/sequence.py): aims it at the cluster as it is now, then runs
its step sequence, journaling each fault step as a part of the one pattern.

Every part is a fault of its own in the history (its own `fault_id`, healed by its own heal op),
its invoke and ok values carrying `pattern: {id, name, part}`; the first part's also carries
`aim` (the partition, leader, leader epoch, ISR and the roles it picked), `plan` (the whole
sequence, as it was decided) and `after` (how the load flowed when it struck: a pattern aimed at a
partition first waits until acknowledgements flow steadily into it, condition `load-flowing`, for
as long as it takes before the time limit: a warning says so after LOAD_TIMEOUT_S; a pattern
never strikes into a partition that takes no writes). A pattern with nothing to aim at is
journaled as one `fail` of its fault. The stage (the Nemesis) applies faults, heals them and
waits for conditions.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Protocol

from clusters.sut import HasLazyfs
from nemesis.packages import Active, Context, lookup
from nemesis.packages.disk import writeback
from nemesis.packages.sequence import Pattern, Sight, Timing

log = logging.getLogger(__name__)

# After this long without load flowing steadily into its partition (condition `load-flowing`), a
# pattern says that it waits (and goes on waiting, until the time limit).
LOAD_TIMEOUT_S = 15.0
# How long a pattern (and the schedule's start) waits for the load at most (None: until the time
# limit) before it strikes anyway: only tests that drive the nemesis without clients bound it.
LOAD_BOUND_S: float | None = None


class Stage(Protocol):
    """What a sequence needs from the nemesis that plays it."""

    ctx: Context

    @property
    def closing(self) -> bool: ...

    def apply(self, step: dict[str, Any]) -> Active | None: ...

    def heal_active(self, active: Active) -> None: ...

    def wait_until(self, step: dict[str, Any], stop: threading.Event) -> dict[str, Any]: ...

    def journal(self, type_: str, f: str, value: dict[str, Any], error: str | None = None) -> None: ...

    def next_id(self, prefix: str) -> str: ...

    def timing(self) -> Timing: ...

    def note_unreached(self, why: str) -> None: ...


def sight(ctx: Context, step: dict[str, Any], pattern: Pattern) -> Sight:
    """What the cluster shows now (a cluster in flux shows nothing: the pattern then fails)."""
    states: dict[tuple[str, int], dict[str, Any]] = {}
    controller = None
    if pattern.needs_partition:
        try:
            states = dict(ctx.sut.partition_state())
            controller = ctx.sut.controller()
        except Exception as e:  # noqa: BLE001 - no target now
            log.info("nemesis: %s cannot read the partition states: %s", pattern.name, e)
    first = ctx.topic_partition(step) if pattern.needs_partition else None
    return Sight(
        states=states,
        controller=controller,
        first=first,
        names=tuple(ctx.names),
        pick=random.Random(int(step.get("pick", 0))),
        power_loss=power_loss_possible(ctx),
    )


def power_loss_possible(ctx: Context) -> bool:
    """Whether every broker's data dirs can lose unsynced writes (they sit on lazyfs)."""
    if not isinstance(ctx.sut, HasLazyfs):
        return False
    try:
        return bool(ctx.nodes) and all(ctx.sut.lazyfs_sockets(node) for node in ctx.nodes)
    except Exception:  # noqa: BLE001 - a system that cannot tell has none
        return False


def play(stage: Stage, pattern: Pattern, step: dict[str, Any], stop: threading.Event) -> None:
    """Aim the pattern and run its sequence until it ends, `stop` is set or the stage closes."""
    ctx = stage.ctx
    pattern_id = stage.next_id(pattern.name)
    extra = {k: v for k, v in step.items() if k not in ("do", "target", "grudge", "pick")}
    if pattern.needs_partition:
        # A pattern loses only what is in flight: strike once acknowledgements flow steadily (the
        # wait's detail is the first part's `after`).
        topic, partition = ctx.topic_partition(step)
        load = {"topic": topic, "partition": partition, "timeout": LOAD_BOUND_S, "say_after": LOAD_TIMEOUT_S}
        stage.wait_until({"wait_until": "load-flowing", **load}, stop)
        if stop.is_set() or stage.closing:
            log.warning("nemesis: %s did not strike: the load never flowed before the time limit", pattern_id)
            return
    aim = pattern.choose(sight(ctx, step, pattern))
    tag: dict[str, Any] = {"id": pattern_id, "name": pattern.name}
    if aim is None:
        f = lookup(pattern.fault).f  # type: ignore[union-attr]
        fault_id = stage.next_id(pattern.fault)
        request = {**extra, "target": pattern.name, "pattern": tag, "fault_id": fault_id}
        stage.journal("invoke", f, request)
        stage.journal("fail", f, request, error=f"no partition is in the shape {pattern.name} needs now")
        stage.note_unreached(f"pattern {pattern_id}: no partition in the shape it needs")
        return
    plan = pattern.steps(aim, stage.timing())
    log.info("nemesis: pattern %s aimed at %s: %s", pattern_id, aim.value(), plan)
    parts: dict[str, Active] = {}
    part = 0
    for s in plan:
        if stop.is_set() or stage.closing:
            return
        if "wait" in s:
            if stop.wait(float(s["wait"])):
                return
        elif "wait_until" in s:
            condition = {**s, "since": time.monotonic()}
            condition.pop("required", None)
            seen = stage.wait_until(condition, stop)
            if s.get("required") and seen.get("timed_out"):
                log.info("nemesis: pattern %s ends: %s not met (%s)", pattern_id, s["wait_until"], seen)
                if not stop.is_set():
                    stage.note_unreached(f"pattern {pattern_id}: {s['wait_until']} not met")
                for held in list(parts):
                    stage.heal_active(parts.pop(held))
                return
        elif "undo" in s:
            undone = parts.pop(str(s["undo"]), None)
            if undone is not None:
                stage.heal_active(undone)
        elif "writeback" in s:
            writeback(ctx, [str(n) for n in s["writeback"]])
        elif "do" in s:
            label: str | None = s.get("as")
            fault = {k: v for k, v in s.items() if k != "as"}
            marker = {**tag, "part": part}
            if part == 0:
                marker.update({"aim": aim.value(), "plan": plan})
            part += 1
            active = stage.apply({**extra, **fault, "pick": step.get("pick", 0), "pattern": marker})
            if active is not None and label is not None and active.heal is not None:
                parts[str(label)] = active
