"""Statistics of a run: what happened, how fast, how available, and what each fault cost.

One streaming pass over the history (latencies are kept as compact arrays, one float per
completed client op). Time is the history's `time` (nanoseconds since the test started).

* ops by f and outcome (`open`: never completed), sends/polls/assigns as in the contract;
* throughput: completions per time bucket by outcome (1 s buckets, wider for long runs);
* latency percentiles (p50/p95/p99, nearest-rank) of completed client ops, overall and by f;
* fault windows, as `history.faults` defines them (the report shades the same windows), each
  from the fault's completion (`start_s`) to its heal's (`end_s`); windows still open end at the
  history's last op. Per window: client outcomes
  completed inside it, the longest stretch without an ok send, and the acks completed inside it
  (by the second) later found lost: `lost_write` (the engine's `lost_by_second`),
  `missing_on_leader` (lost-committed-on-replicas), `acked_lost` the larger of the two;
* unavailability: stretches of at least `UNAVAILABLE_S` without an ok send completion between the
  first send invocation and the last send completion, each with the faults in force.
"""

from __future__ import annotations

import math
import os
from array import array
from bisect import bisect_left, bisect_right
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from checkers.catalogue import EngineStats
from checkers.timeline import RATE_SERIES, LatencySample, Point
from history.faults import fault_windows as history_fault_windows
from history.format import NEMESIS_PROCESS, ReadProblem
from history.reader import iter_ops

NS = 1_000_000_000
UNAVAILABLE_S = 1.0
PROBLEMS_KEPT = 10  # the unreadable lines the report names
MAX_BUCKETS = 1800
OUTCOMES = ("ok", "fail", "info")
CODES = {outcome: code for code, outcome in enumerate(OUTCOMES)}


def percentile(sorted_values: array[float] | list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ascending sequence (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return round(sorted_values[rank - 1], 3)


def _percentiles(values: array[float]) -> dict[str, float | None]:
    ordered = sorted(values)
    return {"p50": percentile(ordered, 50), "p95": percentile(ordered, 95), "p99": percentile(ordered, 99)}


@dataclass
class Facts:
    """What the statistics are made of, counted by an engine (this module's pass, or Spark).

    Both engines fill the same facts; `assemble` turns them into results.json's `stats`, so the
    two agree by construction wherever the facts agree.
    """

    outcomes: dict[str, dict[str, int]]  # client f -> outcome -> operations (`open`: never completed)
    latency_ms: dict[str, float | None]  # p50/p95/p99 of completed client operations
    latency_ms_by_f: dict[str, dict[str, float | None]]
    per_second: dict[int, list[int]]  # int(completion time in s) -> completions [ok, fail, info]
    completed: int  # client operations completed
    duration: float  # the history's last time, in s
    nemesis_ops: int
    first_send: float | None  # the first send invocation's time, in s
    # int(t) -> (first, last) ok send completion in that second: enough for gaps of >= 1 s.
    ok_send_seconds: dict[int, tuple[float, float]]
    # Fault windows (`fault_windows`), each with `ops` (completions inside, by outcome) and
    # `longest_gap_s` filled in.
    windows: list[dict[str, Any]]
    # What the report's timeline draws (`checkers.timeline`): completions per second of each of
    # RATE_SERIES, and the latency sample; and the first unreadable lines (line number, reason).
    rates: dict[tuple[str, str], dict[int, int]] = field(default_factory=dict)
    latency_sample: list[Point] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)


def compute_stats(
    history_path: str | os.PathLike[str],
    engine_stats: EngineStats,
    anomaly_counts: dict[str, int],
    missing_by_second: dict[str, int] | None = None,
) -> dict[str, Any]:
    """The results.json `stats` of one history, by one Python pass over it (the reference)."""
    return assemble(history_facts(history_path), engine_stats, anomaly_counts, missing_by_second)


def history_facts(history_path: str | os.PathLike[str]) -> Facts:
    """The facts of one history, by one streaming pass in this process."""
    open_ops: dict[Any, dict[str, Any]] = {}
    outcomes: dict[str, dict[str, int]] = defaultdict(lambda: {"ok": 0, "fail": 0, "info": 0, "open": 0})
    latencies: dict[str, array[float]] = defaultdict(lambda: array("d"))
    # Client completions: time (s) and outcome code, in history order (time grows with the index).
    completion_times: array[float] = array("d")
    completion_codes: array[int] = array("b")
    per_second: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    ok_sends: array[float] = array("d")
    first_send: float | None = None
    last_time = 0.0
    nemesis: list[dict[str, Any]] = []
    nemesis_ops = 0
    rates: dict[tuple[str, str], dict[int, int]] = {series: {} for series in RATE_SERIES}
    sample = LatencySample()
    problems: list[ReadProblem] = []
    for op in iter_ops(history_path, problems=problems):
        t = int(op.get("time") or 0) / NS
        last_time = max(last_time, t)
        process = op["process"]
        if process == NEMESIS_PROCESS:
            nemesis_ops += 1
            nemesis.append(op)
            continue
        if op["type"] == "invoke":
            open_ops[process] = op
            if op["f"] == "send" and first_send is None:
                first_send = t
            continue
        invocation = open_ops.pop(process, None)
        if invocation is None:
            continue
        f = str(invocation["f"])
        outcome = "info" if op["f"] == "crash" else str(op["type"])
        outcomes[f][outcome] += 1
        latencies[f].append((int(op.get("time") or 0) - int(invocation.get("time") or 0)) / 1e6)
        code = CODES[outcome]
        completion_times.append(t)
        completion_codes.append(code)
        per_second[int(t)][code] += 1
        series = rates.get((f, outcome))
        if series is not None:
            series[int(t)] = series.get(int(t), 0) + 1
        if f == "send":
            sample.add(int(op.get("time") or 0), int(invocation.get("time") or 0), outcome)
        if f == "send" and outcome == "ok":
            ok_sends.append(t)
    for op in open_ops.values():
        outcomes[str(op["f"])]["open"] += 1

    if any(completion_times[i] > completion_times[i + 1] for i in range(len(completion_times) - 1)):
        order = sorted(range(len(completion_times)), key=completion_times.__getitem__)
        completion_times = array("d", (completion_times[i] for i in order))
        completion_codes = array("b", (completion_codes[i] for i in order))
    if any(ok_sends[i] > ok_sends[i + 1] for i in range(len(ok_sends) - 1)):
        ok_sends = array("d", sorted(ok_sends))

    all_latencies: array[float] = array("d")
    for values in latencies.values():
        all_latencies.extend(values)

    windows = fault_windows(nemesis, last_time)
    for w in windows:
        start, end = w["start_s"], w["end_s"]
        lo, hi = bisect_left(completion_times, start), bisect_right(completion_times, end)
        inside = [0, 0, 0]
        for code in completion_codes[lo:hi]:
            inside[code] += 1
        w["ops"] = dict(zip(OUTCOMES, inside, strict=True))
        w["longest_gap_s"] = _longest_gap(ok_sends, start, end)
    seconds: dict[int, tuple[float, float]] = {}
    for t in ok_sends:
        first, _ = seconds.get(int(t), (t, t))
        seconds[int(t)] = (first, t)
    return Facts(
        outcomes={f: dict(v) for f, v in outcomes.items()},
        latency_ms=_percentiles(all_latencies),
        latency_ms_by_f={f: _percentiles(v) for f, v in latencies.items()},
        per_second=dict(per_second),
        completed=len(completion_times),
        duration=last_time,
        nemesis_ops=nemesis_ops,
        first_send=first_send,
        ok_send_seconds=seconds,
        windows=windows,
        rates={series: counts for series, counts in rates.items() if counts},
        latency_sample=sample.points(),
        problems=[(p.line_no, p.reason) for p in problems[:PROBLEMS_KEPT]],
    )


def assemble(
    facts: Facts,
    engine_stats: EngineStats,
    anomaly_counts: dict[str, int],
    missing_by_second: dict[str, int] | None = None,
) -> dict[str, Any]:
    """results.json's `stats` from an engine's facts, its counts and the anomalies found."""
    duration = facts.duration
    bucket = max(1, math.ceil(duration / MAX_BUCKETS))
    series: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for second, counts in facts.per_second.items():
        row = series[second // bucket]
        for code in range(3):
            row[code] += counts[code]
    throughput = [{"t_s": k * bucket, **dict(zip(OUTCOMES, series[k], strict=True))} for k in sorted(series)]

    fault_windows = [dict(w) for w in facts.windows]
    gaps = _unavailable(facts.ok_send_seconds, facts.first_send, duration)
    lost_by_second = {int(k): v for k, v in engine_stats["lost_by_second"].items()}
    missing = {int(k): v for k, v in (missing_by_second or {}).items()}
    for w in fault_windows:
        start, end = w["start_s"], w["end_s"]
        w["lost_write"] = sum(v for s, v in lost_by_second.items() if math.floor(start) <= s <= end)
        w["missing_on_leader"] = sum(v for s, v in missing.items() if math.floor(start) <= s <= end)
        w["acked_lost"] = max(w["lost_write"], w["missing_on_leader"])
    patterns = _pattern_windows(fault_windows, lost_by_second, missing)
    lost_seconds = [s for s, v in {**lost_by_second, **missing}.items() if v]
    for g in gaps:
        g["faults"] = [
            str(w["fault"]) for w in fault_windows if w["start_s"] < g["end_s"] and w["end_s"] > g["start_s"]
        ]

    completed = facts.completed
    sends = {k: engine_stats["sends"][k] for k in ("ok", "fail", "info", "open")}  # type: ignore[literal-required]
    return {
        "sends": sends,
        "polls": dict(engine_stats["polls"]),
        "assigns": dict(engine_stats["assigns"]),
        "txns": dict(engine_stats["txns"]),
        "committed_txns_per_s": round(engine_stats["txns"]["ok"] / duration, 1) if duration > 0 else 0.0,
        "ops": {f: dict(v) for f, v in sorted(facts.outcomes.items())},
        "nemesis_ops": facts.nemesis_ops,
        "records_read": engine_stats["records_read"],
        "acked": engine_stats["acked"],
        # Acks lost by either evidence: the larger of the two counts (a lost-write after a complete
        # drain is also missing on the leader, so the replica count is usually the union).
        "acked_lost": max(
            anomaly_counts.get("lost-write", 0), anomaly_counts.get("lost-committed-on-replicas", 0)
        ),
        "acked_unseen": anomaly_counts.get("unseen", 0),
        "acked_missing_on_leader": anomaly_counts.get("lost-committed-on-replicas", 0),
        "duration_s": round(duration, 3),
        "ops_per_s": round(completed / duration, 1) if duration > 0 else 0.0,
        "throughput": {"bucket_s": bucket, "series": throughput},
        "latency_ms": dict(facts.latency_ms),
        "latency_ms_by_f": {f: dict(v) for f, v in sorted(facts.latency_ms_by_f.items())},
        "fault_windows": fault_windows,
        "patterns": patterns,
        # When the first fault struck and when the first write later lost was acknowledged (s).
        "first_fault_s": round(fault_windows[0]["start_s"], 3) if fault_windows else None,
        "first_lost_ack_s": min(lost_seconds) if lost_seconds else None,
        "unavailable": gaps,
    }


def fault_windows(nemesis: list[dict[str, Any]], end_s: float) -> list[dict[str, Any]]:
    """The history's fault windows (from its nemesis ops) from each fault's completion; still
    open: to the end."""
    windows = [
        {
            "fault": w.f,
            "value": w.value,
            "outcome": w.outcome,
            "start_s": w.applied_ns / NS,
            "end_s": w.healed_ns / NS if w.healed_ns is not None else end_s,
            "healed_by": w.healed_by,
            **_pattern_of(w.value),
        }
        for w in history_fault_windows(nemesis)
    ]
    return sorted(windows, key=lambda w: (w["start_s"], str(w["fault"])))


def _pattern_of(value: Any) -> dict[str, str]:
    """`pattern` and `pattern_id` of a fault that is a part of a pattern (docs/faults.md)."""
    pattern = value.get("pattern") if isinstance(value, dict) else None
    if not isinstance(pattern, dict) or not pattern.get("name"):
        return {}
    return {"pattern": str(pattern["name"]), "pattern_id": str(pattern.get("id", ""))}


def _pattern_windows(
    windows: list[dict[str, Any]], lost_by_second: dict[int, int], missing: dict[int, int]
) -> list[dict[str, Any]]:
    """One window per pattern: from its first part's start to its last part's end, with the acks
    completed inside it that were later lost (the same attribution as a fault window's)."""
    spans: dict[str, dict[str, Any]] = {}
    for w in windows:
        if "pattern_id" not in w:
            continue
        span = spans.setdefault(
            w["pattern_id"],
            {
                "pattern": w["pattern"],
                "id": w["pattern_id"],
                "start_s": w["start_s"],
                "end_s": w["end_s"],
                "parts": 0,
            },
        )
        span["start_s"] = min(span["start_s"], w["start_s"])
        span["end_s"] = max(span["end_s"], w["end_s"])
        span["parts"] += 1
    for span in spans.values():
        start, end = span["start_s"], span["end_s"]
        span["lost_write"] = sum(v for s, v in lost_by_second.items() if math.floor(start) <= s <= end)
        span["missing_on_leader"] = sum(v for s, v in missing.items() if math.floor(start) <= s <= end)
        span["acked_lost"] = max(span["lost_write"], span["missing_on_leader"])
    return sorted(spans.values(), key=lambda p: p["start_s"])


def _unavailable(
    ok_send_seconds: dict[int, tuple[float, float]], first_send: float | None, end: float
) -> list[dict[str, Any]]:
    """Stretches of at least UNAVAILABLE_S with no ok send completion.

    From the first send invocation to the last ok send (or the history's end when none was ok).
    A stretch of a second or more has its ends in different seconds, so each second's first and
    last ok send are enough.
    """
    if first_send is None:
        return []
    gaps = []
    previous = first_send

    def gap_to(t: float) -> None:
        if t - previous >= UNAVAILABLE_S:
            gaps.append(
                {"start_s": round(previous, 3), "end_s": round(t, 3), "seconds": round(t - previous, 3)}
            )

    for second in sorted(ok_send_seconds):
        first, last = ok_send_seconds[second]
        gap_to(first)
        previous = max(previous, last)
    if not ok_send_seconds:
        gap_to(end)
    return gaps


def _longest_gap(ok_sends: array[float], start: float, end: float) -> float:
    """The longest stretch within [start, end] without an ok send completion."""
    longest = 0.0
    previous = start
    for t in ok_sends[bisect_left(ok_sends, start) : bisect_right(ok_sends, end)]:
        longest = max(longest, t - previous)
        previous = t
    return round(max(longest, end - previous), 3)
