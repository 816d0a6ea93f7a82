"""The library of reported data-loss scenarios: settings, a scripted fault schedule, expected verdicts.

Each scenario is a bug report turned into a test: an *unsafe* configuration that must lose
acknowledged data (expected `invalid`), and the same faults under the *safe* settings that must
not (expected `valid`). `strandline repro NAME` runs the unsafe one until it reproduces (or its
budget runs out), then the safe one; `strandline demo` runs the seed scenario (kip-101-truncation)
once each way. The scenarios themselves are data, in scenarios.toml beside this module: their
schedules are written as a test's TOML config writes a scripted schedule.

A scenario also says how it runs on real Apache Kafka (`[scenario.kafka]`, `repro NAME --system
kafka`): the definition file, the release (or Kafka setting) of the unsafe run and of the safe run,
and the trigger fields a real release needs (its own settings, schedule, time limit, budget); or
why it cannot run there (`unavailable`).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.config import TestConfig, validate
from foundation.errors import BadInput

LIBRARY = Path(__file__).with_name("scenarios.toml")
PROJECT = Path(__file__).resolve().parents[1]  # definition files are named relative to it
SYSTEMS = ("own", "kafka")  # what `repro --system` runs a scenario on


@dataclass(frozen=True)
class OnKafka:
    """How a scenario runs on real Apache Kafka: the affected release (or unsafe Kafka setting)
    against the fixed one (or the safe setting), under the scenario's schedule or a trigger of its
    own. Settings here replace the own broker's `extra`, `unsafe` and `safe` (which name the own
    broker's code) whole."""

    system: str = "kafka"  # a definition file (relative to the project) or a shipped name
    unsafe: dict[str, Any] = field(default_factory=dict)  # e.g. {kafka_version = "0.10.2.2"}
    safe: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # settings of both runs on Kafka
    schedule: tuple[dict[str, Any], ...] = ()  # empty: the scenario's own
    time_limit: float = 0.0  # 0: the scenario's own
    budget: float = 0.0  # 0: the scenario's own
    unavailable: str = ""  # why the scenario cannot run on real Kafka here ("": it can)
    notes: str = ""  # what else tells the two runs apart, or what the trigger changes

    def release(self, safe: bool) -> str:
        """The release the unsafe or safe run fetches ("": the default release)."""
        return str(
            (self.safe if safe else self.unsafe).get("kafka_version", self.extra.get("kafka_version", ""))
        )


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str  # the bug, in one line
    story: str  # how the schedule provokes it
    unsafe: dict[str, Any]  # settings that must lose data
    safe: dict[str, Any]  # the same test with the safe settings
    schedule: tuple[dict[str, Any], ...]
    time_limit: float
    # Seconds of attempts for the unsafe run (and again for the safe run), in repro: an attempt that
    # did not reach its state is tried again (its load ends when its schedule stops); at a load
    # average of 6-10 an attempt takes 60-100 s, at 25-35 up to 230 s.
    budget: float = 420.0
    extra: dict[str, Any] = field(default_factory=dict)
    kafka: OnKafka | None = None  # how it runs on real Apache Kafka (None: it was never tried)

    def config(
        self,
        safe: bool,
        seed: int = 0,
        store: str | None = None,
        checker: str | None = None,
        system: str = "own",
    ) -> TestConfig:
        """The TestConfig of the unsafe (safe=False) or safe run on the own broker or on real Kafka
        (`system = "kafka"`: BadInput when the scenario cannot run there); seed 0 draws one."""
        if system == "kafka":
            kafka = self.on_kafka()
            raw = {
                **BASE,
                **kafka.extra,
                **(kafka.safe if safe else kafka.unsafe),
                "system": _definition(kafka.system),
                "name": f"{self.name}-kafka-{'safe' if safe else 'unsafe'}",
                "schedule": [dict(s) for s in kafka.schedule or self.schedule],
                "time_limit": kafka.time_limit or self.time_limit,
            }
        else:
            raw = {
                **BASE,
                **self.extra,
                **(self.safe if safe else self.unsafe),
                "name": f"{self.name}-{'safe' if safe else 'unsafe'}",
                "schedule": [dict(s) for s in self.schedule],
                "time_limit": self.time_limit,
            }
        raw["seed"] = seed
        if store is not None:
            raw["store"] = store
        if checker is not None:
            raw["checker"] = checker
        return validate(raw)

    def expected(self, safe: bool) -> str:
        return "valid" if safe else "invalid"

    def on_kafka(self) -> OnKafka:
        """How it runs on real Kafka; BadInput (exit 2) with the reason when it cannot."""
        if self.kafka is None:
            raise BadInput(f"scenario {self.name!r} has no real-Kafka twin (it runs on the own broker only)")
        if self.kafka.unavailable:
            raise BadInput(f"scenario {self.name!r} cannot run on real Kafka here: {self.kafka.unavailable}")
        return self.kafka

    def budget_on(self, system: str) -> float:
        """Seconds of attempts, per twin, on the own broker or on real Kafka."""
        if system == "kafka" and self.kafka is not None and self.kafka.budget:
            return self.kafka.budget
        return self.budget


def _definition(system: str) -> str:
    """A definition file named relative to the project, as an absolute path (a shipped name
    such as `kafka` stays as it is), so a repro runs from any working directory."""
    return str(PROJECT / system) if system.endswith(".toml") else system


def _expand(
    steps: list[dict[str, Any]], shared: dict[str, list[dict[str, Any]]]
) -> tuple[dict[str, Any], ...]:
    """The steps, each `{include = NAME, times = N}` replaced by N copies of the shared steps NAME."""
    expanded: list[dict[str, Any]] = []
    for step in steps:
        if "include" in step:
            expanded.extend(_expand(shared[step["include"]], shared) * step.get("times", 1))
        else:
            expanded.append(step)
    return tuple(expanded)


def _load(path: Path) -> tuple[dict[str, Any], dict[str, Scenario]]:
    """The settings every scenario shares, and the scenarios by name, in the file's order."""
    library = tomllib.loads(path.read_text(encoding="utf-8"))
    scenarios: dict[str, Scenario] = {}
    for raw in library["scenario"]:
        kafka = None
        if "kafka" in raw:
            on = dict(raw["kafka"])
            on["schedule"] = _expand(on.get("schedule", []), library["schedules"])
            kafka = OnKafka(**on)
        s = Scenario(**{**raw, "schedule": _expand(raw["schedule"], library["schedules"]), "kafka": kafka})
        scenarios[s.name] = s
    return library["base"], scenarios


# Read once, at import: a scenario is settings and steps, never code.
BASE, SCENARIOS = _load(LIBRARY)
SEED_SCENARIO = "kip-101-truncation"
# `strandline demo`'s seed unless --seed says otherwise: the same story every time.
DEMO_SEED = 101
# `strandline explore`'s without --seed: the same search every time (docs/explore.md shows its schedules).
EXPLORE_SEED = 1


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise BadInput(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})") from None
