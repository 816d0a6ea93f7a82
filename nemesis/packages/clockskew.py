"""Clock faults through libfaketime offset files: bump (jump to an offset), strobe (flip between two
offsets for a while), reset ("+0"). The system under test says where each node's file lives with
`sut.clock_file(node)` (`clusters.sut.HasClockFile`) and starts its brokers under libfaketime
(`clusters.faketime.faketime_env(file)`).
"""

from __future__ import annotations

import random
import threading
from typing import Any

from clusters.faketime import preload_library
from clusters.node import Node
from clusters.sut import HasClockFile
from foundation.errors import BadInput
from nemesis import clock, targets
from nemesis.packages.base import Active, Context, Package, PlanEnv
from nemesis.packages.process import _resolve

BUMPS = (-120, -30, -5, 5, 30, 120)


def parse_offset(value: Any) -> str:
    """Seconds (a number) or libfaketime text ("+30s", "-5s", "+0") -> libfaketime text."""
    if isinstance(value, bool):
        raise BadInput(f"clock: offset must be seconds or text like '+30s', got {value!r}")
    if isinstance(value, int | float):
        return clock.offset_text(float(value))
    text = str(value).strip()
    if text in ("0", "+0", "-0"):
        return clock.RESET
    body = text[:-1] if text.endswith("s") else text
    try:
        float(body)
    except ValueError:
        raise BadInput(f"clock: offset must be seconds or text like '+30s', got {value!r}") from None
    return clock.offset_text(float(body))


def clock_files(ctx: Context, names: list[str]) -> dict[str, str]:
    files = {}
    for name in names:
        path = ctx.sut.clock_file(ctx.node(name))
        if not path:
            raise BadInput(f"clock: node {name} was not started under libfaketime (no clock file)")
        files[name] = str(path)
    return files


class Clock(Package):
    """`clock` draws bump or strobe; `clock-bump`, `clock-strobe` and `clock-reset` are explicit."""

    name = "clock"
    f = "clock"  # clock-bump, clock-strobe and clock-reset journal as `clock` too
    qualifiers = targets.TARGETS
    default_qualifiers = ("one", "minority", "majority", "all", "leader", "controller")
    shade = {"color": "#54a24b", "label": "clock skew"}
    summary = "skew the brokers' wall clocks (libfaketime offset file); reset to +0 when healed"
    mode: str | None = None
    probes_node = True

    def node_probe(self, node: Node) -> str | None:
        """The brokers run with libfaketime preloaded: the library must be readable on the node."""
        library = preload_library(node)
        if library is None:
            return None  # installed with the system later (ssh hosts): the probe after set-up asks
        if not node.exec(["test", "-r", library], timeout=15, check=False).ok:
            return f"the clock preload {library} (libfaketime) is not readable on {node.name}"
        return None

    def check(self, ctx: Context, step: dict[str, Any]) -> None:
        if not isinstance(ctx.sut, HasClockFile):
            raise BadInput(
                f"{self.name} needs a system whose brokers run under libfaketime "
                f"(sut.clock_file(node)); {type(ctx.sut).__name__} has none"
            )
        targets.check(step.get("target", "one"), ctx.names, ctx.sut, self.name)
        if "offset" in step:
            parse_offset(step["offset"])
        for value in step.get("offsets", []):
            parse_offset(value)

    def probe(self, ctx: Context) -> str | None:
        def one(node: Node) -> str | None:
            path = ctx.sut.clock_file(node)
            if not path:
                return f"node {node.name} was not started under libfaketime (no clock file)"
            if not node.exec(["test", "-f", str(path)], timeout=15, check=False).ok:
                return (
                    f"node {node.name} has no clock file at {path} (brokers not started under libfaketime?)"
                )
            return None

        return ctx.first_problem(one)

    def usable_qualifiers(self, env: PlanEnv, ctx: Context | None) -> list[str]:
        return targets.possible(env.names, env.has_leaders, self.default_qualifiers)

    def plan(self, rng: random.Random, env: PlanEnv, qualifier: str | None) -> dict[str, Any]:
        target = qualifier or rng.choice(self.usable_qualifiers(env, None) or ["one"])
        mode = self.mode or rng.choice(["bump", "strobe"])
        step: dict[str, Any] = {"do": f"clock-{mode}", "target": target}
        if target in targets.NEEDS_PARTITION:
            step.update(
                {"topic": f"t{rng.randrange(env.topics)}", "partition": rng.randrange(env.partitions)}
            )
        if mode == "bump":
            step["offset"] = clock.offset_text(rng.choice(BUMPS))
        else:
            delta = rng.choice([5, 30, -30, 300])
            step.update(
                {"offsets": [clock.RESET, clock.offset_text(delta)], "period": rng.choice([0.2, 0.5, 1.0])}
            )
        return step

    def apply(self, ctx: Context, step: dict[str, Any], pick: random.Random, fault_id: str) -> Active:
        mode = self.mode or ("strobe" if "offsets" in step else "bump")
        names = _resolve(ctx, step, pick)
        files = clock_files(ctx, names)
        reset = [
            self.step_for(ctx.node(n), clock.write_offset_argv(f, clock.RESET)) for n, f in files.items()
        ]
        if mode == "reset":
            for name, path in files.items():
                clock.write_offset(ctx.node(name), path, clock.RESET)
            return Active(fault_id, "clock-reset", "", names, {"nodes": names, "offset": clock.RESET}, None)
        self.record(ctx, fault_id, names, reset)
        stop = threading.Event()
        if mode == "bump":
            offset = parse_offset(step.get("offset", "+30s"))
            ctx.parallel(
                lambda node: clock.write_offset(node, files[node.name], offset), [ctx.node(n) for n in names]
            )
            value: dict[str, Any] = {"mode": "bump", "nodes": names, "offsets": {n: offset for n in names}}
            strobe_thread = None
        else:
            offsets = [parse_offset(v) for v in step.get("offsets", [clock.RESET, "+30s"])]
            period = float(step.get("period", 0.5))
            duration = step.get("duration")
            value = {"mode": "strobe", "nodes": names, "offsets": offsets, "period": period}
            if duration is not None:
                value["duration"] = float(duration)

            def strobe() -> None:
                i = 0
                deadline = None if duration is None else float(duration)
                waited = 0.0
                while not stop.is_set() and (deadline is None or waited < deadline):
                    for name, path in files.items():
                        clock.write_offset(ctx.node(name), path, offsets[i % len(offsets)])
                    i += 1
                    stop.wait(period)
                    waited += period
                for name, path in files.items():
                    clock.write_offset(ctx.node(name), path, clock.RESET)

            strobe_thread = threading.Thread(target=strobe, name=f"nemesis-{fault_id}", daemon=True)
            strobe_thread.start()

        def heal() -> dict[str, Any]:
            stop.set()
            if strobe_thread is not None:
                strobe_thread.join(timeout=10)
            for name, path in files.items():
                clock.write_offset(ctx.node(name), path, clock.RESET)
            return {"fault": "clock", "nodes": names, "offset": clock.RESET}

        return Active(fault_id, self.name, self.heal_f, names, value, heal)


class ClockBump(Clock):
    name = "clock-bump"
    mode = "bump"
    summary = "jump the wall clock by an offset (e.g. +30s, -5s)"


class ClockStrobe(Clock):
    name = "clock-strobe"
    mode = "strobe"
    summary = "flip the wall clock between two offsets every `period` seconds"


class ClockReset(Clock):
    name = "clock-reset"
    mode = "reset"
    summary = "set the wall clock back to real time (+0)"


PACKAGES: tuple[Package, ...] = (Clock(), ClockBump(), ClockStrobe(), ClockReset())
