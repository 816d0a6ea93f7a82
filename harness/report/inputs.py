"""What the report reads from a run directory, checked once at the edge.

A run may have ended anywhere (set-up failed, SIGKILL, a refused fault), and results.json may come
from an older or newer checker, be cut short, or hold a field of another type. Everything read here
comes out in one shape with every field typed as the rest of the report expects, so no later step
assumes a statistic exists; what is missing is said in plain words (`RunInputs.missing`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation import run_files

log = logging.getLogger(__name__)

# The phases of `strandline run` before the load starts, in the words the report uses.
SETUP_PHASES = {
    "preflight": "capability checks",
    "heal_leftovers": "healing leftovers of earlier runs",
    "cluster_up": "cluster up",
    "topics": "topic creation",
    "handshake": "the client's first requests",
}
COUNT_KEYS = ("ok", "fail", "info", "open")


@dataclass
class RunInputs:
    """The run directory's files, each cleaned (None or empty when absent or unreadable)."""

    run: Path
    config: dict[str, Any]
    results: dict[str, Any] | None
    outcome: dict[str, Any] | None
    state: dict[str, Any]
    drain: dict[str, Any] | None
    history_bytes: int  # 0: the history is missing or empty
    missing: list[str] = field(default_factory=list)  # what the page must say is missing, in words

    @property
    def status(self) -> str | None:
        """outcome.json's status (completed, interrupted, failed, refused); None without one."""
        return self.outcome.get("status") if self.outcome else None

    @property
    def failed_in_setup(self) -> bool:
        """The run failed (or was refused) before its load started: nothing was recorded to check."""
        if self.outcome is None or self.status == "completed":
            return False
        return (
            self.outcome.get("phase") in SETUP_PHASES
            or self.status == "refused"
            or (self.status == "failed" and not self.history_bytes)
        )


def _read(path: Path) -> tuple[Any, str]:
    """(content, problem): problem is '' when the file was read, else why it could not be."""
    try:
        return json.loads(path.read_text(encoding="utf-8")), ""
    except FileNotFoundError:
        return None, "missing"
    except (OSError, ValueError) as e:  # a torn or damaged file (JSON and Unicode errors alike)
        log.warning("%s: unreadable: %s", path, e)
        return None, "unreadable"


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v and abs(v) < 2**62:
        return int(v)
    return None


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v:
        return None
    return float(v)


def _strings(v: Any) -> list[str]:
    return [str(x) for x in v] if isinstance(v, list) else []


def _counts(v: Any) -> dict[str, int] | None:
    """{"ok": n, "fail": n, "info": n}: only integer counts kept; None when it is no such table."""
    if not isinstance(v, dict):
        return None
    out = {k: n for k in COUNT_KEYS if (n := _int(v.get(k))) is not None}
    return out if out else None


def clean_anomaly(v: Any) -> dict[str, Any]:
    """{"count": int >= 0, "examples": list, "effect": str} from whatever an entry holds."""
    if not isinstance(v, dict):
        return {"count": 0, "examples": [], "effect": ""}
    count = _int(v.get("count"))
    examples = v.get("examples")
    effect = v.get("effect")
    return {
        "count": max(0, count or 0),
        "examples": list(examples) if isinstance(examples, list) else [],
        "effect": effect if isinstance(effect, str) else "",
    }


def clean_stats(v: Any) -> dict[str, Any]:
    """results.json's `stats` with the fields the report reads typed; others kept when dicts/lists."""
    if not isinstance(v, dict):
        return {}
    out: dict[str, Any] = {}
    for key in ("sends", "polls", "assigns"):
        counts = _counts(v.get(key))
        if counts is not None:
            out[key] = counts
    for key in ("ops_per_s", "duration_s"):
        n = _number(v.get(key))
        if n is not None:
            out[key] = n
    latency = v.get("latency_ms")
    if isinstance(latency, dict):
        out["latency_ms"] = {k: n for k, x in latency.items() if (n := _number(x)) is not None}
    if isinstance(v.get("incomplete"), list):
        out["incomplete"] = _strings(v["incomplete"])
    for key in ("fault_windows", "unavailable"):
        if isinstance(v.get(key), list):
            out[key] = [w for w in v[key] if isinstance(w, dict)]
    if isinstance(v.get("replicas"), dict):
        out["replicas"] = {str(k): p for k, p in v["replicas"].items() if isinstance(p, dict)}
    return out


def clean_results(raw: Any) -> dict[str, Any] | None:
    """The results.json the report reads: `valid` is True, False or "unknown"; the rest typed."""
    if not isinstance(raw, dict):
        return None
    valid = raw.get("valid")
    anomalies = raw.get("anomalies")
    checker: dict[str, Any] = raw["checker"] if isinstance(raw.get("checker"), dict) else {}
    engine = checker.get("engine")
    out: dict[str, Any] = {
        "valid": valid if valid is True or valid is False else "unknown",
        "anomalies": {str(k): clean_anomaly(a) for k, a in anomalies.items()}
        if isinstance(anomalies, dict)
        else {},
        "stats": clean_stats(raw.get("stats")),
        "checker": {
            k: x
            for k, x in (
                ("engine", engine if isinstance(engine, str) else None),
                ("seconds", _number(checker.get("seconds"))),
            )
            if x is not None
        },
        "explanation": _strings(raw.get("explanation")),
        "incomplete": _strings(raw.get("incomplete")),
        "notes": _strings(raw.get("notes")),
    }
    if isinstance(raw.get("fatal"), list):
        out["fatal"] = _strings(raw["fatal"])
    if isinstance(raw.get("replicas_unavailable"), str):  # a defined system's opaque data dirs
        out["replicas_unavailable"] = raw["replicas_unavailable"]
    if isinstance(raw.get("refused"), dict):  # features the system refused (checkers/refusals.py)
        out["refused"] = {str(k): v for k, v in raw["refused"].items() if isinstance(v, dict)}
    if isinstance(raw.get("power"), dict):  # how much the run tested (checkers/power.py)
        out["power"] = raw["power"]
        out["underpowered"] = raw.get("underpowered") is True
    if "valid" not in raw:
        out["incomplete"].insert(0, "results.json holds no verdict (a damaged file or another version)")
    return out


def clean_outcome(raw: Any) -> dict[str, Any] | None:
    """outcome.json as {"status", "reason", "phase", "verdict", ...}: strings, '' when unknown."""
    if not isinstance(raw, dict):
        return None
    out = dict(raw)
    for key in ("status", "reason", "phase", "verdict"):
        out[key] = str(raw[key]) if isinstance(raw.get(key), str | int | float) else ""
    out["status"] = out["status"] or "completed"
    if not isinstance(raw.get("recovery"), dict):
        out.pop("recovery", None)
    return out


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def read_inputs(run: Path) -> RunInputs:
    """Read and clean every file the report uses; never raises on a missing or damaged file."""
    missing: list[str] = []
    test, test_problem = _read(run / run_files.TEST_JSON)
    config = test.get("config", test) if isinstance(test, dict) else None
    if not isinstance(config, dict):
        config = {}
        missing.append(
            f"{run_files.TEST_JSON} is {test_problem or 'not a configuration'}: the settings are unknown"
        )
    raw_results, results_problem = _read(run / run_files.RESULTS)
    results = clean_results(raw_results)
    if results is None and results_problem != "missing":
        missing.append(
            f"{run_files.RESULTS} is {results_problem or 'not a results object'}: no verdict to show"
        )
    raw_outcome, outcome_problem = _read(run / run_files.OUTCOME)
    outcome = clean_outcome(raw_outcome)
    if outcome is None:
        missing.append(
            f"{run_files.OUTCOME} is {outcome_problem or 'not an outcome'}: the controller stopped "
            "without recording how the run ended (killed, or still running)"
        )
    history_bytes = _size(run / run_files.HISTORY)
    if history_bytes is None:
        missing.append(f"{run_files.HISTORY} is missing: no operation was recorded")
    elif history_bytes == 0:
        missing.append(f"{run_files.HISTORY} is empty: no operation was recorded")
    if results is None and results_problem == "missing":
        missing.append(f"{run_files.RESULTS} is missing: the history was not checked")
    elif history_bytes and not (run / run_files.EVIDENCE).is_file():
        missing.append(
            f"{run_files.EVIDENCE} is missing (checked by an older version?): the timeline, the examples' "
            f"operations and the replica pictures are not shown; `strandline check {run}` writes it"
        )
    if not (run / run_files.NODES).is_dir():
        missing.append("no data dirs or node logs were collected (nodes/ is missing)")
    state, _ = _read(run / run_files.CLUSTER_STATE)
    drain, _ = _read(run / run_files.DRAIN)
    return RunInputs(
        run=run,
        config=config,
        results=results,
        outcome=outcome,
        state=state if isinstance(state, dict) else {},
        drain=drain if isinstance(drain, dict) else None,
        history_bytes=history_bytes or 0,
        missing=missing,
    )
