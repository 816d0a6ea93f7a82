"""Running library scenarios (harness/scenarios.py): the unsafe run until it reproduces, then the safe run.

Used by `strandline repro` and `strandline demo`. Each attempt is an ordinary run (its own run dir,
report and verdict); this module only chooses seeds, keeps time and compares verdicts. An attempt
whose schedule did not reach the state it was written for (a step that did nothing, a required
condition not met: the run's `unreached`) proves nothing either way: it is not judged, and the
next attempt (the next seed) runs within the scenario's budget; so does one `unknown` for too
little load, and a run that failed (a cluster that did not come up on a loaded machine; not twice
in a row). The safe run is retried the same way. Each retry, and why the attempts stop short of a
verdict that counts, is said on the console.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from clusters.kafka_release import DEFAULT_VERSION
from harness.compose import compose
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
        """Whether the attempt says something: its run completed, reached its state, and tested
        enough (an invalid verdict always says something: data was lost)."""
        if self.verdict == "invalid":
            return True
        if self.outcome.status != "completed":
            return False
        underpowered = bool((self.outcome.results or {}).get("underpowered"))
        return not self.outcome.unreached and not underpowered

    @property
    def why_not_judged(self) -> str:
        if self.outcome.status != "completed":
            return f"the run {self.outcome.status}: {self.outcome.reason}"
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
    outcome = run_test(compose(config), console=console)
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
    twin = _Twin(scenario, store, console, checker, system, budget)
    started = time.monotonic()
    first = seed or scenario.config(False, system=system).seed
    twin.attempts(False, first, result.unsafe, lambda a: a.verdict == "invalid")
    if result.unsafe[-1].verdict == "invalid":
        result.reproduced_after_s = time.monotonic() - started
    if with_safe and result.unsafe[-1].outcome.status == "interrupted":
        twin.tell("interrupted: the safe twin is not run")
    elif with_safe:
        started = time.monotonic()
        twin.attempts(True, result.unsafe[-1].seed, result.safe_attempts, lambda a: a.judged)
        result.safe_after_s = time.monotonic() - started
    return result


# An attempt whose run failed (the infrastructure: a cluster that did not come up on a loaded
# machine) is tried again, but not after this many failures in a row: the next would fail too.
FAILURES_IN_A_ROW = 2


@dataclass
class _Twin:
    """Runs the attempts of one twin of a scenario within the budget, and says why it retries."""

    scenario: Scenario
    store: str | None
    console: Console
    checker: str | None
    system: str
    budget: float

    def attempts(self, safe: bool, seed: int, out: list[Attempt], counts: Callable[[Attempt], bool]) -> None:
        """Attempts from `seed` on, appended to `out`, until one `counts`, the run ended otherwise
        than completed or failed (interrupted, refused), runs failed FAILURES_IN_A_ROW times, or
        another attempt as long as the last would not fit the budget."""
        kind = "safe" if safe else "unsafe"
        started = time.monotonic()
        failures = 0
        while True:
            a = attempt(self.scenario, safe, seed, self.store, self.console, self.checker, self.system)
            out.append(a)
            if not safe or not a.judged:
                _say(self.console, self.scenario, a, len(out))
            if counts(a) or a.outcome.status not in ("completed", "failed"):
                return
            failures = failures + 1 if a.outcome.status == "failed" else 0
            if failures >= FAILURES_IN_A_ROW:
                self.tell(f"{kind} twin: not tried again after {failures} failed runs in a row")
                return
            spent = time.monotonic() - started
            if spent + a.seconds > self.budget:
                self.tell(
                    f"{kind} twin: not tried again: another attempt (the last took {a.seconds:.0f} s) "
                    f"would not fit its budget ({spent:.0f} of {self.budget:.0f} s spent)"
                )
                return
            why = "the run failed" if failures else "not judged" if not a.judged else a.verdict
            seed += 1
            self.tell(
                f"{kind} twin: {why}, trying again with seed {seed} "
                f"({self.budget - spent:.0f} s of its {self.budget:.0f} s budget left)"
            )

    def tell(self, text: str) -> None:
        self.console.print(f"[bold]{self.scenario.name}[/] {text}", highlight=False, soft_wrap=True)


def _say(console: Console, scenario: Scenario, a: Attempt, n: int) -> None:
    kind = "safe" if a.safe else "unsafe"
    said = f" — not judged: {a.why_not_judged}" if not a.judged else ""
    console.print(
        f"[bold]{scenario.name}[/] {kind} attempt {n} (seed {a.seed}): "
        f"{a.verdict} — {lost_text(a.outcome)} ({a.seconds:.0f} s){said}",
        highlight=False,
        soft_wrap=True,
    )
