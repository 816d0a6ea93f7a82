"""Shrinking a real failing run: delta debugging over its fault schedule, on real nodes.

The faults a run's nemesis journaled (each fault with its heal, paired by `fault_id`) become a
scripted schedule (docs/faults.md) at the times they happened, with the nodes they actually hit.
`minimize` (ddmin, Zeller's delta debugging) removes groups of faults while the replay stays
`invalid`, then tries shorter waits; every candidate is a real run of its own. The budget bounds
the whole search; what was smallest when it ran out is the answer.
"""

from __future__ import annotations

import html
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.faults import READY
from history.reader import iter_ops

log = logging.getLogger(__name__)

# invoke-value keys that are bookkeeping of the nemesis, not parameters of the fault
BOOKKEEPING = {
    "fault_id",
    "after",
    "failover",
    "rolling",
    "survivor",
    "target",
    "topic",
    "partition",
    "nodes",
}
PARAMETERS = ("offset", "offsets", "period", "duration", "probability", "rate", "delay_ms", "jitter_ms")
HEAL_STEPS = {"start", "resume"}


@dataclass(frozen=True, slots=True)
class TimedStep:
    at_s: float  # invoked, since the test started
    done_s: float  # completed (a restart or a failover takes a while)
    step: dict[str, Any]
    text: str


@dataclass(slots=True)
class FaultGroup:
    """One fault and the step that healed it (if any): removed or kept together."""

    fault_id: str
    steps: list[TimedStep] = field(default_factory=list)

    @property
    def first_s(self) -> float:
        return min(s.at_s for s in self.steps)


def fault_groups(history: Path) -> list[FaultGroup]:
    """The faults of a run as it journaled them: each `ok` fault (and heal) as a scripted step."""
    invokes: dict[tuple[str, str], dict[str, Any]] = {}
    groups: dict[str, FaultGroup] = {}
    for op in iter_ops(history):
        if op.get("process") != "nemesis" or op.get("f") == READY:  # `ready` is no step: it waited
            continue
        raw = op.get("value")
        value: dict[str, Any] = raw if isinstance(raw, dict) else {}
        fault_id = str(value.get("fault_id", ""))
        key = (str(op.get("f")), fault_id)
        if op.get("type") == "invoke":
            invokes[key] = op
            continue
        if op.get("type") != "ok" or not fault_id:
            continue
        invoke = invokes.get(key, op)
        step = _scripted(str(op["f"]), invoke.get("value") or {}, value)
        if step is None:
            continue
        at_s = float(invoke.get("time", op.get("time", 0))) / 1e9
        done_s = max(at_s, float(op.get("time", 0)) / 1e9)
        text = f"{op['f']} {', '.join(value.get('nodes') or []) or ''}".strip()
        groups.setdefault(fault_id, FaultGroup(fault_id)).steps.append(TimedStep(at_s, done_s, step, text))
    return sorted(groups.values(), key=lambda g: g.first_s)


def _scripted(f: str, asked: dict[str, Any], done: dict[str, Any]) -> dict[str, Any] | None:
    nodes = sorted(str(n) for n in done.get("nodes") or [])
    if f in HEAL_STEPS:
        return {"do": f, "target": nodes} if nodes else {"do": f}
    if f == "heal":
        return {"heal": str(done.get("fault") or asked.get("fault") or "all")}
    if f == "partition":
        grudge = done.get("grudge")
        return {"do": "partition", "grudge": grudge} if isinstance(grudge, dict) else None
    step: dict[str, Any] = {"do": f}
    if nodes:
        step["target"] = nodes
    for key in PARAMETERS:
        if key in asked:
            step[key] = asked[key]
        elif key in done:
            step[key] = done[key]
    return step


def schedule_of(groups: Sequence[FaultGroup], scale: float = 1.0) -> list[dict[str, Any]]:
    """The groups' steps in time order; each waits (scaled by `scale`) from the previous one's
    completion to its own invocation, as the nemesis runs scripted steps one after another."""
    steps = sorted((s for g in groups for s in g.steps), key=lambda s: s.at_s)
    out: list[dict[str, Any]] = []
    now = 0.0
    for timed in steps:
        wait = round((timed.at_s - now) * scale, 2)
        if wait > 0:
            out.append({"wait": wait})
        out.append(timed.step)
        now = max(now, timed.done_s)
    return out


def duration_s(schedule: Sequence[dict[str, Any]]) -> float:
    return sum(float(s.get("wait", 0)) for s in schedule)


@dataclass(slots=True)
class Shrinking:
    original: list[FaultGroup]
    minimal: list[FaultGroup]
    scale: float = 1.0
    runs: list[tuple[int, str, Path | None]] = field(default_factory=list)  # (groups, verdict, run dir)
    minimal_run: Path | None = None
    out_of_budget: bool = False


def minimize(
    groups: list[FaultGroup],
    fails: Callable[[list[FaultGroup], float], tuple[bool, Path | None]],
    budget_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> Shrinking:
    """ddmin over the fault groups, then shorter waits; `fails(groups, scale)` runs one candidate.

    The full schedule is replayed first: if it does not fail, nothing can be shrunk (minimal_run
    stays None).
    """
    started = clock()
    result = Shrinking(groups, groups)

    def test(candidate: list[FaultGroup], scale: float = 1.0) -> bool:
        if clock() - started > budget_s:
            result.out_of_budget = True
            return False
        failed, run = fails(candidate, scale)
        result.runs.append((len(candidate), "invalid" if failed else "not invalid", run))
        if failed:
            result.minimal, result.scale, result.minimal_run = candidate, scale, run
        return failed

    if not test(groups):
        return result
    current, n = groups, 2
    while len(current) >= 2 and not result.out_of_budget:
        size = max(1, len(current) // n)
        chunks = [current[i : i + size] for i in range(0, len(current), size)]
        for chunk in chunks:
            complement = [g for g in current if g not in chunk]
            if complement and test(complement):
                current, n = complement, max(n - 1, 2)
                break
        else:
            if n >= len(current):
                break
            n = min(2 * n, len(current))
    for scale in (0.5, 0.25):  # then its timing: the same faults, closer together
        if result.out_of_budget or not test(result.minimal, scale):
            break
    return result


def side_by_side_html(result: Shrinking, source: Path) -> str:
    """A self-contained page: the original schedule beside the minimal one."""

    def column(groups: list[FaultGroup], scale: float) -> str:
        rows = "".join(
            f"<li><code>{html.escape(json.dumps(s))}</code></li>" for s in schedule_of(groups, scale)
        )
        return f"<ol>{rows}</ol>"

    runs = "".join(
        f"<tr><td>{n}</td><td>{html.escape(v)}</td><td>{html.escape(str(r or ''))}</td></tr>"
        for n, v, r in result.runs
    )
    return (
        "<!doctype html><meta charset=utf-8><title>strandline shrink</title>"
        "<style>body{font-family:sans-serif;margin:2em}.cols{display:flex;gap:3em}td{padding:0 1em}</style>"
        f"<h1>Shrinking {html.escape(str(source))}</h1>"
        f"<p>{len(result.original)} faults shrunk to {len(result.minimal)} (waits × {result.scale:g}); "
        f"{len(result.runs)} real runs{' (budget spent)' if result.out_of_budget else ''}.</p>"
        "<div class=cols>"
        f"<div><h2>Original</h2>{column(result.original, 1.0)}</div>"
        f"<div><h2>Minimal (still invalid)</h2>{column(result.minimal, result.scale)}</div>"
        "</div><h2>Runs</h2><table><tr><th>faults</th><th>verdict</th><th>run</th></tr>"
        f"{runs}</table>"
    )


def tell(schedule: Sequence[dict[str, Any]]) -> list[str]:
    """Numbered lines `N. what happens` for a scripted schedule (each wait joins the next step)."""
    lines: list[str] = []
    wait = 0.0
    for step in schedule:
        if "wait" in step:
            wait += float(step["wait"])
            continue
        if "heal" in step:
            what = f"heal {step['heal']}"
        else:
            target = step.get("target", step.get("grudge", ""))
            nodes = (
                ", ".join(target)
                if isinstance(target, list)
                else json.dumps(target)
                if isinstance(target, dict)
                else str(target)
            )
            extra = "".join(f" {k}={step[k]}" for k in PARAMETERS if k in step)
            what = f"{step['do']} {nodes}{extra}".strip()
        lines.append(f"{len(lines) + 1}. {f'after {wait:g} s, ' if wait else ''}{what}")
        wait = 0.0
    return lines
