"""The verdict: which anomalies make a test invalid for its settings, as data, and `unknown` rules.

Every anomaly found is invalid unless a rule below says otherwise for the test's settings. Loss
symptoms are never allowed, whatever the settings: an unsafe setting (acks=1, the pre-KIP-101
truncation, unclean elections) must be *caught*, so its losses make the run invalid.

Trust (what an incomplete history can still prove):
* a *damaged* history (malformed or unpaired lines in the middle) proves nothing from the history:
  its history anomalies are `unknown`;
* a *truncated* history (torn tail, operations that never completed, a final drain that did not
  finish) still proves what it shows (`presence` anomalies stay invalid) but not what it lacks
  (`absence` anomalies -- lost-write, unseen, phantom -- become `unknown`);
* replica-log anomalies stand on their own (they are read from disk).

`valid` is false when any anomaly's effect is `invalid`; otherwise `"unknown"` when any effect is
`unknown` or anything is incomplete (history, drain, replica data); otherwise `"unknown"` when the
run tested too little (`checkers.power`: too little load, before the first fault or in a fault
window, or a workload option that never happened; `underpowered` then says so); otherwise true.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, cast

from checkers.catalogue import (
    ANOMALIES,
    BY_NAME,
    NAMES,
    AnomalyResult,
    EngineResult,
    incomplete_kind,
    is_damaged,
)
from checkers.replica_logs import ReplicaFindings
from foundation.config import TestConfig

Effect = Literal["invalid", "allowed", "unknown", "none"]


@dataclass(frozen=True)
class Facts:
    """What the rules may look at besides the anomalies."""

    config: TestConfig
    drain_complete: bool | None  # None: no drain.json (the drain's outcome is not known)


# Conditions a rule can name, on the test's facts and the anomaly's result.
CONDITIONS: dict[str, Callable[[Facts, AnomalyResult], bool]] = {
    "without-idempotence": lambda facts, _: not facts.config.idempotence,
    # Every occurrence is a read of a consumer-group member (`members`, counted by the engines):
    # under `consume = "mixed"` the assigning processes' reads are still held to the strict rule.
    "only-group-members": lambda _, result: 0 < result["count"] == result.get("members", 0),
    "drain-not-known-complete": lambda facts, _: facts.drain_complete is not True,
    "always": lambda _facts, _result: True,
    # Every G1c component found needs a ww edge: none holds a cycle of wr edges alone.
    "no-wr-only-cycle": lambda _, result: result.get("wr_only", 0) == 0,
}


@dataclass(frozen=True)
class Rule:
    """When `condition` holds, a present `anomaly` has `effect` instead of invalid."""

    anomaly: str
    effect: Literal["allowed", "unknown"]
    condition: str
    because: str


# Each anomaly's own (`checkers/rules/`: `Anomaly.verdict`).
RULES: tuple[Rule, ...] = tuple(
    Rule(a.name, v.effect, v.condition, v.because) for a in ANOMALIES for v in a.verdict
)

assert all(r.anomaly in BY_NAME and r.condition in CONDITIONS for r in RULES)


def effect_of(
    name: str, result: AnomalyResult, facts: Facts, history_damaged: bool, history_truncated: bool
) -> tuple[Effect, str]:
    """The effect of one anomaly on the verdict, and why."""
    if result["count"] == 0:
        return "none", ""
    anomaly = BY_NAME[name]
    effect: Effect = "invalid"
    why = "the test's settings must not show it"
    for rule in RULES:
        if rule.anomaly == name and CONDITIONS[rule.condition](facts, result):
            effect, why = rule.effect, rule.because
            break
    if effect == "invalid" and anomaly.source == "history":
        if history_damaged:
            return "unknown", "the history is damaged, so it cannot prove this"
        if history_truncated and anomaly.evidence == "absence":
            return "unknown", "the history is incomplete, so a missing line could refute this"
    return effect, why


def decide(
    engine: EngineResult,
    replicas: ReplicaFindings | None,
    config: TestConfig,
    drain: dict[str, Any] | None,
    *,
    replicas_unavailable: str | None = None,
    power: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The results.json dict (without stats and checker): valid, anomalies, fatal, incomplete, why.

    `replicas_unavailable`: why the system's data dirs cannot be read as replica logs; then the
    history checks decide alone and the reason is a note (not an incompleteness). `power`: how
    much the run tested (`checkers.power.evaluate`); not enough turns a `valid` into `unknown`."""
    incomplete = list(engine["incomplete"])
    stats = engine["stats"]
    if (
        sum(cast(dict[str, int], stats["sends"]).values())
        + sum(cast(dict[str, int], stats["polls"]).values())
        == 0
    ):
        incomplete.append("empty: the history holds no send or poll, so it shows nothing")
    drain_complete: bool | None = None
    if isinstance(drain, dict) and isinstance(drain.get("complete"), bool):
        drain_complete = drain["complete"]
        if not drain_complete:
            reason = drain.get("reason") or "no reason given"
            incomplete.append(f"drain: the final drain did not read every partition to its end ({reason})")
    elif drain is not None:
        incomplete.append("drain: drain.json is unreadable or has no 'complete' field")
    facts = Facts(config, drain_complete)
    history_reasons = [r for r in incomplete if incomplete_kind(r) != "replicas"]
    damaged = is_damaged(history_reasons)
    truncated = bool(history_reasons)

    found: dict[str, AnomalyResult] = dict(engine["anomalies"])
    notes: list[str] = []
    if replicas is not None:
        found.update(replicas.anomalies)
        incomplete += replicas.incomplete
        notes += replicas.notes
    elif replicas_unavailable is not None:
        notes.append(f"replicas: {replicas_unavailable}")
    else:
        incomplete.append("replicas: the replica logs were not checked")

    anomalies: dict[str, dict[str, Any]] = {}
    fatal: list[str] = []
    unknown_because: list[str] = []
    explanation: list[str] = []
    for name in NAMES:
        result = found.get(name, {"count": 0, "examples": []})
        effect, why = effect_of(name, result, facts, damaged, truncated)
        anomalies[name] = {"count": result["count"], "examples": result["examples"], "effect": effect}
        for extra in ("members", "wr_only"):
            if extra in result:
                anomalies[name][extra] = result[extra]  # type: ignore[literal-required]
        if effect == "invalid":
            fatal.append(name)
        elif effect == "unknown":
            unknown_because.append(name)
        if effect != "none":
            explanation.append(f"{name} x{result['count']}: {effect} ({why})")

    valid: bool | str
    if fatal:
        valid = False
    elif unknown_because or incomplete:
        valid = "unknown"
    else:
        valid = True
    underpowered = power is not None and not power.get("enough", False)
    if underpowered:
        assert power is not None
        explanation += [f"power: {reason}" for reason in power.get("reasons") or []]
    out: dict[str, Any] = {
        "valid": valid,
        "anomalies": anomalies,
        "fatal": fatal,
        "incomplete": incomplete,
        "explanation": explanation,
        "notes": notes,
    }
    if valid is True and underpowered:
        out["valid"] = "unknown"
        out["underpowered"] = True  # unknown for no other reason than too little tested
    if replicas_unavailable is not None:
        out["replicas_unavailable"] = replicas_unavailable
    return out
