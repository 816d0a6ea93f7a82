"""The library of reported data-loss scenarios: settings, a scripted fault schedule, expected verdicts.

Each scenario is a bug report turned into a test: an *unsafe* configuration that must lose
acknowledged data (expected `invalid`), and the same faults under the *safe* settings that must
not (expected `valid`). `strandline repro NAME` runs the unsafe one until it reproduces (or its
budget runs out), then the safe one; `strandline demo` runs the seed scenario (kip-101-truncation)
once each way. The scenarios themselves are data, in scenarios.toml beside this module: their
schedules are written as a test's TOML config writes a scripted schedule.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.config import TestConfig, validate
from foundation.errors import BadInput

LIBRARY = Path(__file__).with_name("scenarios.toml")


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

    def config(
        self, safe: bool, seed: int = 0, store: str | None = None, checker: str | None = None
    ) -> TestConfig:
        """The TestConfig of the unsafe (safe=False) or safe run; seed 0 draws one."""
        raw = {
            **BASE,
            **self.extra,
            **(self.safe if safe else self.unsafe),
            "name": f"{self.name}-{'safe' if safe else 'unsafe'}",
            "schedule": [dict(s) for s in self.schedule],
            "time_limit": self.time_limit,
            "seed": seed,
        }
        if store is not None:
            raw["store"] = store
        if checker is not None:
            raw["checker"] = checker
        return validate(raw)

    def expected(self, safe: bool) -> str:
        return "valid" if safe else "invalid"


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
        s = Scenario(**{**raw, "schedule": _expand(raw["schedule"], library["schedules"])})
        scenarios[s.name] = s
    return library["base"], scenarios


# Read once, at import: a scenario is settings and steps, never code.
BASE, SCENARIOS = _load(LIBRARY)
SEED_SCENARIO = "kip-101-truncation"


def scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise BadInput(f"unknown scenario {name!r} (known: {', '.join(SCENARIOS)})") from None
