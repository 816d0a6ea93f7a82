"""Running library scenarios (harness/scenarios.py): the unsafe run until it reproduces, then the safe run.

Used by `strandline repro` and `strandline demo`. Each attempt is an ordinary run (its own run dir,
report and verdict); this module only chooses seeds, keeps time and compares verdicts.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from harness.run import RunOutcome, run_test
from harness.scenarios import Scenario

log = logging.getLogger(__name__)


@dataclass
class Attempt:
    safe: bool
    seed: int
    outcome: RunOutcome
    seconds: float

    @property
    def verdict(self) -> str:
        return self.outcome.verdict


@dataclass
class Reproduction:
    scenario: Scenario
    unsafe: list[Attempt] = field(default_factory=list)
    safe: Attempt | None = None
    reproduced_after_s: float | None = None  # wall time until the unsafe run was invalid

    @property
    def as_expected(self) -> bool:
        unsafe_ok = any(a.verdict == "invalid" for a in self.unsafe)
        safe_ok = self.safe is None or self.safe.verdict == "valid"
        return unsafe_ok and safe_ok

    def summary(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "reproduced": any(a.verdict == "invalid" for a in self.unsafe),
            "reproduced_after_s": self.reproduced_after_s,
            "attempts": [
                {
                    "seed": a.seed,
                    "verdict": a.verdict,
                    "seconds": round(a.seconds, 1),
                    "run_dir": str(a.outcome.run_dir),
                }
                for a in self.unsafe
            ],
            "safe": None
            if self.safe is None
            else {
                "seed": self.safe.seed,
                "verdict": self.safe.verdict,
                "run_dir": str(self.safe.outcome.run_dir),
            },
            "as_expected": self.as_expected,
        }


def attempt(
    scenario: Scenario,
    safe: bool,
    seed: int,
    store: str | None,
    console: Console,
    checker: str | None = None,
) -> Attempt:
    config = scenario.config(safe, seed=seed, store=store, checker=checker)
    started = time.monotonic()
    outcome = run_test(config, console=console)
    return Attempt(safe, config.seed, outcome, time.monotonic() - started)


def lost_text(outcome: RunOutcome) -> str:
    """'3 acknowledged writes lost' (or the anomalies found) for one-line comparisons."""
    results = outcome.results or {}
    anomalies = {
        k: v.get("count", 0)
        for k, v in (results.get("anomalies") or {}).items()
        if isinstance(v, dict) and v.get("count", 0) and ("fatal" not in results or k in results["fatal"])
    }
    # The larger of the two loss measures: acks no read returned, acks missing on the final leader.
    lost = max(anomalies.get("lost-write", 0), anomalies.get("lost-committed-on-replicas", 0))
    if lost:
        return f"{lost} acknowledged write{'s' if lost != 1 else ''} lost"
    if anomalies:
        return ", ".join(f"{k} ×{n}" for k, n in anomalies.items())
    if outcome.verdict == "valid":
        return "nothing lost"
    return outcome.reason or "verdict unknown"


def reproduce(
    scenario: Scenario,
    *,
    seed: int = 0,
    store: str | None = None,
    console: Console,
    budget: float | None = None,
    with_safe: bool = True,
    checker: str | None = None,
) -> Reproduction:
    """Unsafe attempts (seed, seed+1, …) until one is invalid or the budget is spent; then the safe run."""
    budget = scenario.budget if budget is None else budget
    result = Reproduction(scenario)
    started = time.monotonic()
    next_seed = seed or scenario.config(False).seed
    while True:
        a = attempt(scenario, False, next_seed, store, console, checker)
        result.unsafe.append(a)
        console.print(
            f"[bold]{scenario.name}[/] unsafe attempt {len(result.unsafe)} (seed {a.seed}): "
            f"{a.verdict} — {lost_text(a.outcome)} ({a.seconds:.0f} s)",
            highlight=False,
        )
        if a.verdict == "invalid":
            result.reproduced_after_s = time.monotonic() - started
            break
        if a.outcome.status != "completed" or time.monotonic() - started + a.seconds > budget:
            break
        next_seed += 1
    if with_safe:
        result.safe = attempt(scenario, True, result.unsafe[-1].seed, store, console, checker)
    return result
