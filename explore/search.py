"""The search: draw fault schedules from a seed, simulate each, and shrink the first that fails.

A seeded search with hypothesis-style shrinking rather than hypothesis itself: the draw of the
i-th schedule depends only on (seed, i), so the same seed gives the same search, and a wall-clock
budget only decides how far along that sequence it gets; hypothesis has no wall-clock budget and
its own per-example overhead. Shrinking is greedy delta debugging, as hypothesis shrinks: drop
steps (chunks, then single ones), then make each remaining step simpler (no wait, shorter waits,
a plain role as target), keeping every change after which the simulation still fails; last, a
target a replay on real nodes draws at random (`follower`, `one`, `zk-one`) becomes a role
(`followers`, `leader`, `zk-leader`) when that still fails, so the replay hits the node that
mattered. Each
candidate runs with the failing run's simulation seed, so every verdict is reproducible.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from explore.schedule import TARGETS, Schedule, Step, draw_schedule
from explore.settings import SimSettings
from explore.simulation import Outcome, simulate

log = logging.getLogger(__name__)

SIMPLER_TARGETS = ("leader", "follower", "followers")
# targets that name the same nodes in every replay, for targets a replay draws at random
ROBUST_TARGETS = {"follower": ("followers",), "one": ("followers", "leader"), "zk-one": ("zk-leader",)}


@dataclass(frozen=True, slots=True)
class Found:
    """A failing schedule, before and after shrinking."""

    index: int  # which draw of the search
    sim_seed: int
    original: Schedule
    minimal: Schedule
    outcome: Outcome  # of the minimal schedule
    shrink_runs: int


@dataclass(slots=True)
class SearchResult:
    seed: int
    schedules: int  # simulated (search only, without shrinking)
    sim_ms: float
    wall_s: float
    found: Found | None
    unknown: int  # runs that ended without a leader to read from


def draw(seed: int, index: int, settings: SimSettings) -> tuple[Schedule, int]:
    """The index-th schedule of the search with this seed, and its simulation seed."""
    rng = random.Random(seed * 1_000_003 + index)
    schedule = draw_schedule(rng, settings)
    return schedule, rng.randrange(1 << 31)


def search(
    settings: SimSettings,
    seed: int,
    budget_s: float,
    max_schedules: int | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchResult:
    """Simulate schedules until one fails (then shrink it), the budget is spent, or max_schedules."""
    started = clock()
    result = SearchResult(seed, 0, 0.0, 0.0, None, 0)
    index = 0
    while (max_schedules is None or index < max_schedules) and clock() - started < budget_s:
        schedule, sim_seed = draw(seed, index, settings)
        outcome = simulate(settings, schedule, sim_seed)
        result.schedules += 1
        result.sim_ms += outcome.sim_ms
        result.unknown += outcome.unknown
        if outcome.failed:
            log.info("schedule %d of seed %d fails (%d steps); shrinking", index, seed, len(schedule))
            minimal, final, runs = shrink(settings, schedule, sim_seed)
            result.found = Found(index, sim_seed, schedule, minimal, final, runs)
            break
        index += 1
    result.wall_s = clock() - started
    return result


def _candidates(schedule: Schedule) -> list[Schedule]:
    """Smaller or simpler variants, the most reducing first."""
    n = len(schedule)
    out: list[Schedule] = []
    size = n // 2
    while size >= 1:  # chunks, largest first
        for start in range(0, n, size):
            if size < n:
                out.append(schedule[:start] + schedule[start + size :])
        size //= 2
    for i, step in enumerate(schedule):
        for simpler in _simpler_steps(step):
            out.append((*schedule[:i], simpler, *schedule[i + 1 :]))
    return out


def _simpler_steps(step: Step) -> list[Step]:
    out = []
    if step.wait_s > 0:
        out.append(step.simpler(wait_s=0.0))
        for wait in (0.5, 1.0, 2.0, 3.0, 5.0):
            if wait < step.wait_s:
                out.append(step.simpler(wait_s=wait))
        rounded = float(round(step.wait_s))
        if rounded != step.wait_s:
            out.append(step.simpler(wait_s=rounded))
    if step.target not in SIMPLER_TARGETS and step.fault not in ("start", "resume", "heal"):
        for target in SIMPLER_TARGETS:
            if target in TARGETS[step.fault]:  # a target the nemesis accepts for this fault
                out.append(step.simpler(target=target))
    if step.pick:
        out.append(step.simpler(pick=0))
    return out


def shrink(
    settings: SimSettings, schedule: Schedule, sim_seed: int, max_runs: int = 400
) -> tuple[Schedule, Outcome, int]:
    """The smallest (then simplest) schedule found that still fails, its outcome, and the runs spent."""
    current = schedule
    runs = 0
    improved = True
    while improved and runs < max_runs:
        improved = False
        for candidate in _candidates(current):
            if runs >= max_runs:
                break
            result = simulate(settings, candidate, sim_seed)
            runs += 1
            if result.failed:
                current, improved = candidate, True
                break
    # Last, a replay on real nodes picks `follower` or `one` at random, where the simulation picked
    # the node that mattered: aim at a role instead, if the simulation still fails that way.
    for i, step in enumerate(current):
        for target in ROBUST_TARGETS.get(step.target, ()):
            if runs >= max_runs or target not in TARGETS[step.fault]:
                continue
            candidate = (*current[:i], step.simpler(target=target), *current[i + 1 :])
            runs += 1
            if simulate(settings, candidate, sim_seed).failed:
                current = candidate
                break
    return current, simulate(settings, current, sim_seed, trace=True), runs
