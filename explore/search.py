"""The search: draw fault schedules from a seed, simulate each, and shrink the first that fails.

A seeded search with hypothesis-style shrinking rather than hypothesis itself: the draw of the
i-th schedule depends only on (seed, i), so the same seed gives the same search, and a wall-clock
budget only decides how far along that sequence it gets; hypothesis has no wall-clock budget and
its own per-example overhead. Shrinking is greedy delta debugging, as hypothesis shrinks: drop
steps (chunks, then single ones), then make each remaining step simpler (no wait, shorter waits,
a plain role as target), keeping every change after which the simulation still fails. Then
`robustify` picks, step by step, the waits and targets under which the minimal schedule fails in
the most of TIMINGS other runs (other timings, other random picks of `follower` or `one`), since
a real cluster's run is none of the simulated ones. Each
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
    robustness: int  # in how many of TIMINGS other simulated timings the minimal schedule fails


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
    """Simulate schedules until one fails (then shrink it), the budget is spent, or max_schedules.

    A minimal schedule that fails in fewer than ROBUST_ENOUGH of the other simulated timings makes
    the search go on to up to MORE_FAILURES more failing schedules; the most robust one is kept."""
    started = clock()
    result = SearchResult(seed, 0, 0.0, 0.0, None, 0)
    index = failures = 0
    while (max_schedules is None or index < max_schedules) and clock() - started < budget_s:
        schedule, sim_seed = draw(seed, index, settings)
        outcome = simulate(settings, schedule, sim_seed)
        result.schedules += 1
        result.sim_ms += outcome.sim_ms
        result.unknown += outcome.unknown
        if outcome.failed:
            log.info("schedule %d of seed %d fails (%d steps); shrinking", index, seed, len(schedule))
            minimal, final, runs = shrink(settings, schedule, sim_seed)
            minimal, robustness = robustify(settings, minimal, sim_seed)
            if minimal != final_schedule(final):
                final = simulate(settings, minimal, sim_seed, trace=True)
            found = Found(index, sim_seed, schedule, minimal, final, runs, robustness)
            best = result.found
            if best is None or (robustness, -len(minimal)) > (best.robustness, -len(best.minimal)):
                best = result.found = found
            failures += 1
            # a schedule that fails in few other timings may not fail on a real cluster either:
            # look a little further for one that fails in most
            if best.robustness >= ROBUST_ENOUGH or failures > MORE_FAILURES:
                break
        index += 1
    result.wall_s = clock() - started
    return result


TIMINGS = 8
ROBUST_ENOUGH = 6  # of TIMINGS: good enough to stop looking
MORE_FAILURES = 2  # failing schedules to look at beyond the first for a more robust one
ROBUST_WAITS_S = (0.0, 0.5, 1.0, 2.0, 3.0)


def final_schedule(outcome: Outcome) -> Schedule:
    return tuple(fired.step for fired in outcome.fired)


def timings(sim_seed: int, schedule: Schedule) -> list[tuple[int, Schedule]]:
    """Other runs of one schedule as a real cluster could run it: other network delays, startup
    times and session expiries (the simulation seed), and other random picks of `follower` or
    `one` (each step's pick)."""
    rng = random.Random(sim_seed)
    out = []
    for _ in range(TIMINGS):
        seed = rng.randrange(1 << 31)
        out.append((seed, tuple(step.simpler(pick=rng.randrange(1 << 30)) for step in schedule)))
    return out


def robustness(settings: SimSettings, schedule: Schedule, sim_seed: int) -> int:
    """In how many of TIMINGS other runs (`timings`) the schedule still loses data."""
    return sum(simulate(settings, variant, seed).failed for seed, variant in timings(sim_seed, schedule))


def robustify(settings: SimSettings, schedule: Schedule, sim_seed: int) -> tuple[Schedule, int]:
    """The same faults with the waits and targets that fail in the most other runs (a real
    cluster's run is none of the simulated ones): greedy, step by step; each choice must still
    fail with the schedule's own seed. A target a replay draws at random (`follower`, `one`,
    `zk-one`) may become a role (`followers`, `leader`, `zk-leader`) that names the same nodes in
    every replay."""
    best, score = schedule, robustness(settings, schedule, sim_seed)
    for i in range(len(schedule)):
        step = best[i]
        options = [step.simpler(wait_s=wait) for wait in ROBUST_WAITS_S if wait != step.wait_s]
        options += [
            step.simpler(target=target)
            for target in ROBUST_TARGETS.get(step.target, ())
            if target in TARGETS[step.fault]
        ]
        for option in options:
            if score == TIMINGS:
                break
            candidate = (*best[:i], option, *best[i + 1 :])
            if not simulate(settings, candidate, sim_seed).failed:
                continue
            points = robustness(settings, candidate, sim_seed)
            if points > score:
                best, score = candidate, points
    return best, score


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
    return current, simulate(settings, current, sim_seed, trace=True), runs
