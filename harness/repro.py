"""Running library scenarios (harness/scenarios.py): the unsafe run until it reproduces, then the safe run.

Used by `strandline repro` and `strandline demo`. Each attempt is an ordinary run (its own run dir,
report and verdict); this module only chooses seeds, keeps time and compares verdicts. An attempt
whose schedule did not reach the state it was written for (a step that did nothing, a required
condition not met: the run's `unreached`) proves nothing either way: it is not judged, and the
next attempt (the next seed) runs within the scenario's budget; so does one `unknown` for too
little load. The safe run is retried the same way.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from clusters.kafka_release import DEFAULT_VERSION
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

    @property
    def judged(self) -> bool:
        """Whether the attempt says something: it reached its state, and tested enough (an
        invalid verdict always says something: data was lost)."""
        if self.verdict == "invalid":
            return True
        underpowered = bool((self.outcome.results or {}).get("underpowered"))
        return not self.outcome.unreached and not underpowered

    @property
    def why_not_judged(self) -> str:
        if self.outcome.unreached:
            return "the schedule did not reach its state: " + "; ".join(self.outcome.unreached)
        power = (self.outcome.results or {}).get("power") or {}
        return "; ".join(power.get("reasons") or []) or ""


@dataclass
class Reproduction:
    scenario: Scenario
    system: str = "own"  # the own broker, or real Kafka (the scenario's releases)
    unsafe: list[Attempt] = field(default_factory=list)
    safe_attempts: list[Attempt] = field(default_factory=list)
    reproduced_after_s: float | None = None  # wall time until the unsafe run was invalid
    safe_after_s: float | None = None  # wall time of the safe twin's attempts

    @property
    def safe(self) -> Attempt | None:
        """The safe run that counts: the last one (earlier ones were not judged)."""
        return self.safe_attempts[-1] if self.safe_attempts else None

    @property
    def as_expected(self) -> bool:
        unsafe_ok = any(a.verdict == "invalid" for a in self.unsafe)
        safe_ok = self.safe is None or (self.safe.verdict == "valid" and self.safe.judged)
        return unsafe_ok and safe_ok

    def summary(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "system": self.system,
            **self.releases(),
            "reproduced": any(a.verdict == "invalid" for a in self.unsafe),
            "reproduced_after_s": self.reproduced_after_s,
            "safe_after_s": self.safe_after_s,
            "attempts": [_attempt_json(a) for a in self.unsafe],
            "safe": None if self.safe is None else _attempt_json(self.safe),
            "safe_attempts": [_attempt_json(a) for a in self.safe_attempts],
            "as_expected": self.as_expected,
        }

    def releases(self) -> dict[str, str]:
        """The Kafka releases of the two twins (nothing on the own broker)."""
        if self.system != "kafka" or self.scenario.kafka is None:
            return {}
        kafka = self.scenario.kafka
        return {
            "affected_release": kafka.release(False) or DEFAULT_VERSION,
            "fixed_release": kafka.release(True) or DEFAULT_VERSION,
        }


def _attempt_json(a: Attempt) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seed": a.seed,
        "verdict": a.verdict,
        "judged": a.judged,
        "seconds": round(a.seconds, 1),
        "run_dir": str(a.outcome.run_dir),
    }
    if not a.judged:
        out["not_judged"] = a.why_not_judged
    return out


def attempt(
    scenario: Scenario,
    safe: bool,
    seed: int,
    store: str | None,
    console: Console,
    checker: str | None = None,
    system: str = "own",
) -> Attempt:
    config = scenario.config(safe, seed=seed, store=store, checker=checker, system=system)
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
    system: str = "own",
) -> Reproduction:
    """Unsafe attempts (seed, seed+1, …) until one is invalid or the budget is spent; then safe
    attempts (from the last unsafe seed on) until one is judged or the budget is spent again.
    `system = "kafka"` runs the scenario's real-Kafka twin (BadInput when it has none)."""
    budget = scenario.budget_on(system) if budget is None else budget
    result = Reproduction(scenario, system)
    started = time.monotonic()
    next_seed = seed or scenario.config(False, system=system).seed
    while True:
        a = attempt(scenario, False, next_seed, store, console, checker, system)
        result.unsafe.append(a)
        _say(console, scenario, a, len(result.unsafe))
        if a.verdict == "invalid":
            result.reproduced_after_s = time.monotonic() - started
            break
        if a.outcome.status != "completed" or time.monotonic() - started + a.seconds > budget:
            break
        next_seed += 1
    if with_safe:
        started = time.monotonic()
        next_seed = result.unsafe[-1].seed
        while True:
            a = attempt(scenario, True, next_seed, store, console, checker, system)
            result.safe_attempts.append(a)
            result.safe_after_s = time.monotonic() - started
            if not a.judged:
                _say(console, scenario, a, len(result.safe_attempts))
            if a.judged or a.outcome.status != "completed" or time.monotonic() - started + a.seconds > budget:
                break
            next_seed += 1
    return result


def _say(console: Console, scenario: Scenario, a: Attempt, n: int) -> None:
    kind = "safe" if a.safe else "unsafe"
    said = f" — not judged: {a.why_not_judged}" if not a.judged else ""
    console.print(
        f"[bold]{scenario.name}[/] {kind} attempt {n} (seed {a.seed}): "
        f"{a.verdict} — {lost_text(a.outcome)} ({a.seconds:.0f} s){said}",
        highlight=False,
        soft_wrap=True,
    )
