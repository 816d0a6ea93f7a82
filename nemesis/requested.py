"""What a test asks of the nemesis, and whether this cluster can run it: the schedule's decisions
(random or scripted, `--nemesis all` narrowed to what the cluster supports), the fault packages in
use, and the validation that refuses, before the test starts, what cannot run."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from typing import Any

from clusters.sut import FaultsByCommand, HasLeaders
from foundation.config import TestConfig
from foundation.errors import BadInput
from nemesis import choreography, conditions, schedule
from nemesis.packages import PACKAGES, Context, Package, PlanEnv, lookup

log = logging.getLogger(__name__)


class Requested:
    """The half of the Nemesis that reads the request (mixed into nemesis.core.Nemesis)."""

    config: TestConfig
    ctx: Context
    rng: random.Random
    _unprobed: set[str]  # packages `all` leaves out: their probe failed

    def _session_s(self) -> float:
        return self.config.zookeeper_session_timeout_ms / 1000

    # --- what was asked -----------------------------------------------------------------------

    @property
    def scripted(self) -> bool:
        return bool(self.config.schedule)

    def plan_env(self) -> PlanEnv:
        return PlanEnv(
            names=tuple(self.ctx.names),
            topics=self.config.topics,
            partitions=self.config.partitions,
            has_leaders=isinstance(self.ctx.sut, HasLeaders),
            has_zookeeper=_zookeeper_apart(self.ctx),
            crash_noticed_s=self._session_s(),
            power_loss=choreography.power_loss_possible(self.ctx),
        )

    def steps(self) -> Iterator[dict[str, Any]]:
        """The schedule's decisions (pure function of the config, the cluster's shape and the rng)."""
        if self.scripted:
            return schedule.scripted_steps(list(self.config.schedule), self.rng)
        mix = self.mix()
        aimed = schedule.wants_all(self.config.nemesis)
        return schedule.random_steps(
            [g for g, _ in mix],
            self.plan_env(),
            self.rng,
            float(self.config.nemesis_interval),
            schedule.aimed_ranks(mix, schedule.unsafe_settings(self.config)) if aimed else None,
        )

    def mix(self) -> list[tuple[schedule.Group, int]]:
        """The groups the random schedule draws from; for `all`, those this cluster supports."""
        mix = schedule.parse_mix(tuple(self.config.nemesis))
        if not schedule.wants_all(self.config.nemesis):
            return mix
        return [(g, w) for g, w in mix if self._supports(g)]

    def _supports(self, group: schedule.Group) -> bool:
        env = self.plan_env()
        for name, qualifier in group:
            package = PACKAGES[name]
            if name in self._unprobed:
                return False
            if qualifier is None and not package.usable_qualifiers(env, self.ctx):
                return False
            if qualifier is not None and qualifier not in package.usable_qualifiers(env, self.ctx):
                return False
            try:
                checked(package, self.ctx, package.plan(random.Random(0), env, qualifier), name)
            except BadInput:
                return False
        return True

    def packages_in_use(self) -> list[Package]:
        names: list[str] = []
        if self.scripted:
            for step in self.config.schedule:
                package = lookup(str(step.get("do", "")))
                if package is not None:
                    names.append(package.name)
        else:
            names = [n for group, _ in self.mix() for n, _ in group]
        return [PACKAGES[n] for n in dict.fromkeys(names)]

    # --- validation ---------------------------------------------------------------------------

    def validate(self, probe: bool = True) -> None:
        """BadInput, before the test starts, for anything that cannot run on this cluster."""
        env = self.plan_env()
        if self.scripted:
            for i, step in enumerate(self.config.schedule):
                kind = schedule.step_kind(step, i)
                if kind == "wait_until":
                    conditions.check(self.ctx, step)
                elif kind == "do" and step["do"] not in schedule.CONTROL_DO:
                    package = lookup(str(step["do"]))
                    assert package is not None
                    checked(package, self.ctx, step, f"schedule[{i}]")
        elif schedule.wants_all(self.config.nemesis):
            self._validate_all(probe)
            return
        else:
            for group in schedule.parse_specs(tuple(self.config.nemesis)):
                for name, qualifier in group:
                    package = PACKAGES[name]
                    if qualifier is None:
                        if not package.usable_qualifiers(env, self.ctx):
                            raise BadInput(
                                f"fault {name!r} has no target that works on {len(env.names)} node(s)"
                            )
                        step = package.plan(random.Random(0), env, None)
                    else:
                        step = package.plan(random.Random(0), env, qualifier)
                    checked(package, self.ctx, step, f"fault {name!r}")
        if probe:
            for package in self.packages_in_use():
                why = package.probe(self.ctx)
                if why:
                    raise BadInput(f"fault {package.name!r} cannot run on this cluster: {why}")

    def _validate_all(self, probe: bool) -> None:
        """`all` takes what this cluster supports: a fault whose probe fails is left out."""
        if probe:
            for package in {PACKAGES[n] for g, _ in schedule.parse_mix(self.config.nemesis) for n, _ in g}:
                if isinstance(self.ctx.sut, FaultsByCommand) and self.ctx.sut.fault_refusal(package.name):
                    continue  # never asked of an owner's hosts: the mix leaves it out anyway
                why = package.probe(self.ctx)
                if why:
                    log.info("nemesis all: leaving %s out: %s", package.name, why)
                    self._unprobed.add(package.name)
        mix = self.mix()
        if not mix:
            raise BadInput("--nemesis all: no fault can run on this cluster")
        log.info("nemesis all draws from: %s", ", ".join(_spec(g) for g, _ in mix))


def _spec(group: schedule.Group) -> str:
    return "+".join(f"{n}:{q}" if q else n for n, q in group)


def checked(package: Package, ctx: Context, step: dict[str, Any], where: str) -> None:
    if isinstance(ctx.sut, FaultsByCommand):  # a cluster strandline did not start: granted faults only
        why = ctx.sut.fault_refusal(package.name)
        if why:
            raise BadInput(why)
    try:
        package.check(ctx, step)
    except BadInput as e:
        message = str(e)
        if message.startswith(f"{package.name}: "):
            message = message[len(package.name) + 2 :]
        raise BadInput(message if message.startswith(where) else f"{where}: {message}") from None


def _zookeeper_apart(ctx: Context) -> bool:
    zk = ctx.zookeeper
    return zk is not None and zk.address not in {n.address for n in ctx.nodes}
