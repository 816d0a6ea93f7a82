"""Fault schedules as sequences of steps, drawn from a seeded `random.Random` before any cluster exists.

A step is a dict: `{"wait": s}`, `{"do": fault, ...parameters}`, `{"heal": "all"}` (or a fault name),
`{"wait_until": condition, ...}`. Every `do` step carries a `pick` (an integer drawn from the
schedule's rng) that seeds the choice of concrete nodes when the step fires, so the same seed gives
the same sequence of decisions, whatever the cluster does.

The random schedule: after a calm start, one fault (or a composed group `kill+partition`) every
`nemesis_interval` seconds with jitter, held for part of the interval and healed before the next.
`all` deals every fault kind the cluster supports from a deck (ALL_MIX): each cycle goes
through every group once before any repeats, the patterns that expose the test's own unsafe
settings first (`unsafe_settings`), then the patterns that expose the most unsafe settings (rank
by rank, shuffled within a rank), with short calms between them. The scripted schedule: `config.schedule`, run once, in order; faults stay until a step heals them
(or the end of the test does).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

from foundation.config import TestConfig
from foundation.errors import BadInput
from nemesis import targets
from nemesis.packages import ALIASES, PACKAGES, Package, PlanEnv, lookup
from nemesis.packages.patterns import PATTERNS, pattern_of

CONTROL_DO = ("start", "resume", "heal")
# Seconds past the session timeout a crash is held.
CRASH_MARGIN_S = 1.0
# The calm after each group of `all`, as a share of the interval (the deck has many to deal).
ALL_CALM = (0.2, 0.4)
# How long the random schedule waits for healed crashes to serve again before its calm, and then
# for every partition to have its full ISR again.
READY_TIMEOUT_S = 30.0
WHOLE_TIMEOUT_S = 20.0
PICK_RANGE = 2**32
ALL = "all"
# `--nemesis all`: every fault kind the system supports, dealt from a deck drawn anew per cycle
# from the schedule's rng: higher ranks first (shuffled within a rank), every group once per cycle.
# The first rank is the three that between them expose every unsafe setting of docs/faults.md:
# `lagging-follower` (unclean elections, missing fsync), `failover` (pre-KIP-101 truncation,
# acks=1) and the disk lost by the leader alone in the ISR, `corrupt:lonely-leader`
# (min.insync.replicas=1, acks=1); then `restarted-follower` (pre-KIP-101 truncation, acks=1),
# `lose-unsynced:lonely-leader` (min.insync.replicas=1 and acks=1 without fsync) and
# `lose-unsynced:all` (missing fsync); then the other patterns; then the plain faults. A 60 s run
# has room for two or three patterns, so the groups that expose the test's own unsafe settings are
# dealt before all of them (`AIMED`).
ALL_MIX: tuple[tuple[str, int], ...] = (
    ("kill:lagging-follower", 10),
    ("kill:failover", 10),
    ("corrupt:lonely-leader", 10),
    ("kill:restarted-follower", 3),
    ("lose-unsynced:lonely-leader", 3),
    ("lose-unsynced:all", 3),
    ("kill:stalled-failover", 2),
    ("partition:cut-off-failover", 2),
    ("partition:leader-isolated", 2),
    ("kill", 1),
    ("restart", 1),
    ("pause", 1),
    ("partition", 1),
    ("loss", 1),
    ("bandwidth", 1),
    ("delay", 1),
    ("clock", 1),
    ("storage", 1),
    ("lose-unsynced", 1),
)

Group = list[tuple[str, str | None]]
# Added to the rank of a group of `all` that exposes one of the test's own unsafe settings.
AIMED = 100
# What the plain faults of `all` expose (a pattern says it in its `exposes`).
FAULT_EXPOSES: dict[tuple[str, str | None], tuple[str, ...]] = {
    ("lose-unsynced", "all"): ("no fsync (power loss)",),
}


def unsafe_settings(config: TestConfig) -> set[str]:
    """The unsafe settings a test runs with, named as patterns' `exposes` name them."""
    unsafe = set()
    if config.variant == "high-watermark":
        unsafe.add("high-watermark truncation")
    if config.acks == "1":
        unsafe.add("acks=1")
    if config.min_insync < 2 <= config.replication_factor:
        unsafe.add("min.insync.replicas=1")
    if config.unclean_election:
        unsafe.add("unclean leader election")
    if config.log_flush_interval_messages != 1:
        unsafe.add("no fsync (power loss)")
    return unsafe


def exposes(group: Group) -> set[str]:
    """The unsafe settings a group of faults exposes (its patterns' and faults' own)."""
    found: set[str] = set()
    for name, qualifier in group:
        pattern = PATTERNS.get((name, qualifier or ""))
        found.update(pattern.exposes if pattern is not None else FAULT_EXPOSES.get((name, qualifier), ()))
    return found


def aimed_ranks(mix: Sequence[tuple[Group, int]], unsafe: set[str]) -> list[int]:
    """The ranks `all` deals by: those of the groups that expose one of `unsafe` raised by AIMED."""
    return [rank + AIMED if exposes(group) & unsafe else rank for group, rank in mix]


def available() -> list[str]:
    """Every fault a scripted step may name (`do = ...`)."""
    return sorted(PACKAGES)


# Faults only a scripted step may name: the random schedule never draws them.
SCRIPTED_ONLY = frozenset({"clock-reset"})
NONE = "none"


def nemesis_names() -> list[str]:
    """Every name `--nemesis` accepts, in one list for its help, its errors and docs/faults.md:
    `none`, `all`, then each fault the random schedule can draw."""
    return [NONE, ALL, *sorted(set(PACKAGES) - SCRIPTED_ONLY)]


def alias_text() -> str:
    """'disk=lose-unsynced, power-loss=lose-unsynced, skew=clock': the other spellings accepted."""
    return ", ".join(f"{a}={b}" for a, b in sorted(ALIASES.items()))


def _role_qualifier(package: Package, qualifier: str) -> bool:
    """`kill:role=storage`, `pause:role=coordinator`: the faults that take targets take roles;
    partitions take two roles (`partition:broker|storage`). Checked against the system later."""
    if targets.role_of_target(qualifier):
        return package.name != "partition" and "one" in package.qualifiers
    return package.name == "partition" and "|" in qualifier


def wants_all(names: Sequence[str]) -> bool:
    return any(str(n).strip() == ALL for n in names)


def parse_mix(names: Sequence[str]) -> list[tuple[Group, int]]:
    """The groups a random schedule draws from, with their ranks (`all` expands to ALL_MIX)."""
    mix: list[tuple[Group, int]] = []
    for spec in names:
        if str(spec).strip() == ALL:
            mix += [(group, weight) for spec_, weight in ALL_MIX for group in parse_specs([spec_])]
        else:
            mix += [(group, 1) for group in parse_specs([spec])]
    return mix


def parse_specs(names: Sequence[str]) -> list[Group]:
    """`["kill:leader", "partition+clock"]` -> [[("kill", "leader")], [("partition", None), ("clock", None)]]."""
    groups: list[Group] = []
    for spec in names:
        if str(spec).strip() == ALL:
            groups += [g for spec_, _ in ALL_MIX for g in parse_specs([spec_])]
            continue
        if str(spec).strip() == NONE:
            continue
        group: list[tuple[str, str | None]] = []
        for part in str(spec).split("+"):
            name, _, qualifier = part.strip().partition(":")
            package = lookup(name)
            if package is None:
                raise BadInput(
                    f"unknown fault {name!r} in --nemesis (available: {', '.join(nemesis_names())}; "
                    f"aliases: {alias_text()})"
                )
            if package.name in SCRIPTED_ONLY:
                raise BadInput(
                    f"{package.name} is a scripted step (a config file's schedule, docs/faults.md), "
                    "not a --nemesis fault"
                )
            if qualifier and qualifier not in package.qualifiers and not _role_qualifier(package, qualifier):
                raise BadInput(
                    f"fault {package.name!r}: unknown qualifier {qualifier!r} "
                    f"(accepted: {', '.join(package.qualifiers)})"
                )
            group.append((package.name, qualifier or None))
        groups.append(group)
    return groups


def random_steps(
    specs: list[Group],
    env: PlanEnv,
    rng: random.Random,
    interval: float,
    ranks: Sequence[int] | None = None,
) -> Iterator[dict[str, Any]]:
    """The endless random schedule. Uses nothing but `rng`, `env`, `interval` and the ranks
    (given for `all`: the groups are dealt from a deck, see `deal`)."""
    if not specs:
        return
    # `all`'s patterns wait for the load themselves (`load-flowing`): its calm start is short.
    yield {"wait": round(interval * rng.uniform(*(ALL_CALM if ranks else (0.5, 1.0))), 3)}
    dealt: list[int] = []
    while True:
        cycle = interval * rng.uniform(0.8, 1.2)
        hold = cycle * rng.uniform(0.4, 0.7)
        if ranks:
            if not dealt:
                dealt = deal(rng, ranks)
            group = specs[dealt.pop(0)]
            # The deck has every group to go through: a short calm, whatever the hold.
            cycle = hold + interval * rng.uniform(*ALL_CALM)
        else:
            group = rng.choice(specs)
        crashed = False
        held = True  # every part already held its crash until the cluster noticed it
        for name, qualifier in group:
            step = PACKAGES[name].plan(rng, env, qualifier)
            step["pick"] = rng.randrange(PICK_RANGE)
            pattern = pattern_of(step, name)
            crashed = crashed or PACKAGES[name].crashes or (pattern is not None and pattern.crashes)
            held = held and pattern is not None and pattern.holds_crash
            yield step
        if crashed and held:
            # The pattern waited for the election its crash causes (`lagging-follower`): holding
            # it a session longer only keeps the partition offline and the load stopped.
            cycle -= hold - CRASH_MARGIN_S
            hold = CRASH_MARGIN_S
        elif crashed and env.crash_noticed_s > 0:
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
        if env.has_leaders:
            # ... and every partition has its full ISR again: a pattern needs in-sync followers to
            # aim at, and clients get no acknowledgement while an ISR is below min.insync.replicas.
            yield {"wait_until": "isrs-full", "timeout": WHOLE_TIMEOUT_S}
        yield {"wait": round(cycle - hold, 3)}


def deal(rng: random.Random, ranks: Sequence[int]) -> list[int]:
    """One cycle of the deck: every group's index once, higher ranks first, shuffled within a rank
    (so each seed meets the patterns in its own order, and none repeats before all were dealt)."""
    order = list(range(len(ranks)))
    rng.shuffle(order)
    return sorted(order, key=lambda i: -ranks[i])


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
