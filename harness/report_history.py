"""One streaming pass over history.jsonl that gathers what the report draws and cites.

The report needs rates and latencies over time (by outcome), the nemesis ops (fault windows), the
acknowledged offsets of each partition (to mark missing records on replica bars) and the ops that
the checker's examples name. A history can be large, so it is read once, line by line, and only
these summaries are kept.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.format import NEMESIS_PROCESS, ReadProblem
from history.reader import iter_ops

log = logging.getLogger(__name__)

NS = 1_000_000_000
MAX_LATENCY_POINTS = 6000


@dataclass
class Completed:
    """A client op with both ends: what the latency plot draws and an example cites."""

    process: Any
    f: str
    type: str  # ok | fail | info
    invoke_index: int
    invoke_ns: int
    complete_index: int | None
    complete_ns: int | None
    topic: str | None = None
    partition: int | None = None
    value: Any = None
    offset: int | None = None
    error: str | None = None

    @property
    def latency_ms(self) -> float | None:
        if self.complete_ns is None:
            return None
        return (self.complete_ns - self.invoke_ns) / 1e6


@dataclass
class HistoryDigest:
    """What the report keeps of a history."""

    ops: int = 0
    end_ns: int = 0
    problems: list[ReadProblem] = field(default_factory=list)
    # (f, type) -> completions per one-second bucket (by completion time), e.g. ("send", "ok").
    rate: dict[tuple[str, str], dict[int, int]] = field(default_factory=lambda: defaultdict(dict))
    # (completion seconds, latency ms, type) of sends; sampled above MAX_LATENCY_POINTS.
    latency: list[tuple[float, float, str]] = field(default_factory=list)
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    # (topic, partition) -> offset -> the first value acknowledged there.
    acked: dict[tuple[str, int], dict[int, Any]] = field(default_factory=lambda: defaultdict(dict))
    # Ops the examples name, by history index and by sent value.
    by_index: dict[int, dict[str, Any]] = field(default_factory=dict)
    sends_by_value: dict[Any, Completed] = field(default_factory=dict)
    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    open_at_end: int = 0


def digest_history(
    path: Path, want_indices: Iterable[int] = (), want_values: Iterable[Any] = ()
) -> HistoryDigest:
    """Read the history once; never raises on a damaged line (the problems are kept)."""
    d = HistoryDigest()
    want_idx = set(want_indices)
    want_val = {_norm_value(v) for v in want_values}
    if not path.exists():
        return d
    pending: dict[Any, dict[str, Any]] = {}
    ok_points: list[tuple[float, float, str]] = []  # every `stride`-th ok send, thinned as it grows
    bad_points: list[tuple[float, float, str]] = []
    stride, seen_ok = 1, 0
    for op in iter_ops(path, problems=d.problems):
        d.ops += 1
        t = int(op.get("time") or 0)
        d.end_ns = max(d.end_ns, t)
        idx = op.get("index")
        if isinstance(idx, int) and idx in want_idx:
            d.by_index[idx] = op
        process, kind, f = op["process"], op["type"], op["f"]
        if process == NEMESIS_PROCESS:
            d.nemesis.append(op)
            continue
        if kind == "invoke":
            pending[process] = op
            if f == "send" and _norm_value(op.get("value")) in want_val:
                d.sends_by_value[_norm_value(op.get("value"))] = _completed(op, None)
            continue
        invoke = pending.pop(process, None)
        d.counts[(f, kind)] += 1
        bucket = t // NS
        series = d.rate[(f, kind)]
        series[bucket] = series.get(bucket, 0) + 1
        if f == "send":
            if invoke is not None:
                point = (t / NS, (t - int(invoke.get("time") or 0)) / 1e6, kind)
                if kind != "ok":
                    if len(bad_points) < MAX_LATENCY_POINTS // 2:
                        bad_points.append(point)
                else:
                    if seen_ok % stride == 0:
                        ok_points.append(point)
                        if len(ok_points) >= 2 * MAX_LATENCY_POINTS:  # bounded memory on huge histories
                            ok_points = ok_points[::2]
                            stride *= 2
                    seen_ok += 1
            if kind == "ok" and isinstance(op.get("offset"), int) and op.get("topic") is not None:
                key = (str(op["topic"]), int(op.get("partition") or 0))
                # The first value acknowledged at an offset: if a later leader reused the offset for
                # another value, the first one is the record that was lost.
                d.acked[key].setdefault(op["offset"], op.get("value"))
            value = _norm_value(op.get("value"))
            if value in want_val and invoke is not None:
                d.sends_by_value[value] = _completed(invoke, op)
    d.open_at_end = len(pending)
    d.latency = _sample(ok_points + bad_points)
    return d


def _norm_value(v: Any) -> Any:
    """Values are integers in the history but may be strings in an example; compare as text."""
    return str(v) if v is not None else None


def _completed(invoke: dict[str, Any], done: dict[str, Any] | None) -> Completed:
    src = done or invoke
    return Completed(
        process=invoke["process"],
        f=invoke["f"],
        type=done["type"] if done else "open",
        invoke_index=invoke["index"],
        invoke_ns=int(invoke.get("time") or 0),
        complete_index=done["index"] if done else None,
        complete_ns=int(done.get("time") or 0) if done else None,
        topic=src.get("topic"),
        partition=src.get("partition"),
        value=src.get("value"),
        offset=done.get("offset") if done else None,
        error=done.get("error") if done else None,
    )


def _sample(points: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Keep every fail/info point (they matter) and an even sample of the ok ones."""
    if len(points) <= MAX_LATENCY_POINTS:
        return points
    bad = [p for p in points if p[2] != "ok"][: MAX_LATENCY_POINTS // 2]
    ok = [p for p in points if p[2] == "ok"]
    stride = max(1, len(ok) // (MAX_LATENCY_POINTS - len(bad)))
    return ok[::stride] + bad


# What ends each fault's window when the nemesis package table is not importable (it is the
# authority: nemesis.packages.SHADES maps each fault's f to its colour, label and healing f).
_FALLBACK_SHADES: dict[str, dict[str, str]] = {
    "kill": {"color": "#e45756", "healed_by": "start"},
    "lose-unsynced": {"color": "#ff9da6", "healed_by": "start"},
    "pause": {"color": "#b279a2", "healed_by": "resume"},
    "partition": {"color": "#4c78a8", "healed_by": "heal"},
    "clock": {"color": "#54a24b", "healed_by": "heal"},
    "loss": {"color": "#eeca3b", "healed_by": "heal"},
    "bandwidth": {"color": "#9d755d", "healed_by": "heal"},
    "delay": {"color": "#72b7b2", "healed_by": "heal"},
    "restart": {"color": "#f58518", "healed_by": ""},
}
ONE_SHOT = ("restart",)  # faults that are over when their op completes
DEFAULT_COLOUR = "#fa5252"


def fault_shades() -> dict[str, dict[str, str]]:
    try:
        from nemesis.packages import SHADES
    except Exception:  # a stored run can be reported without the nemesis package
        return dict(_FALLBACK_SHADES)
    return {**_FALLBACK_SHADES, **SHADES}


@dataclass(frozen=True)
class FaultWindow:
    """A stretch of time during which a fault was in force, for shading."""

    f: str
    label: str
    start_s: float
    end_s: float | None  # None: never healed within the history
    info: bool = False  # the fault's outcome was uncertain
    colour: str = DEFAULT_COLOUR
    pattern: str = ""  # the pattern it is a part of (docs/faults.md), if any


def fault_windows(nemesis_ops: list[dict[str, Any]]) -> list[FaultWindow]:
    """Pair faults with the ops that heal them: from the fault's invocation to the heal's completion.

    The nemesis gives a fault and its heal the same `fault_id`; histories without ids are paired by
    the healing f (kill → start, pause → resume, others → heal) and the nodes they name.
    """
    shades = fault_shades()
    healers = {s.get("healed_by") for s in shades.values()} - {"", None}
    windows: list[FaultWindow] = []
    open_: list[dict[str, Any]] = []
    invoked: dict[str, float] = {}
    asked: dict[str, dict[str, Any]] = {}

    def close(item: dict[str, Any], t: float) -> None:
        colour = shades.get(item["f"], {}).get("color", DEFAULT_COLOUR)
        windows.append(
            FaultWindow(
                item["f"], item["label"], item["start"], t, item["info"], colour, item.get("pattern", "")
            )
        )

    for op in nemesis_ops:
        f = str(op["f"])
        t = int(op.get("time") or 0) / NS
        value = op.get("value")
        fault_id = value.get("fault_id") if isinstance(value, dict) else None
        key = str(fault_id) if fault_id else f
        if op["type"] == "invoke":
            invoked.setdefault(key, t)
            asked[key] = value if isinstance(value, dict) else {}
            continue
        start = invoked.pop(key, t)
        request = asked.pop(key, {})
        if isinstance(value, dict) and request:
            op = {**op, "value": {**request, **value}}
        if op["type"] == "fail":
            continue
        same = [w for w in open_ if fault_id and w["id"] == fault_id]
        if same:
            for item in same:
                close(item, t)
            open_ = [w for w in open_ if w not in same]
            continue
        info = op["type"] == "info"
        if f in ONE_SHOT or (f in shades and not shades[f].get("healed_by")):
            close(
                {"f": f, "label": describe_fault(op), "start": start, "info": info, "pattern": _pattern(op)},
                t,
            )
        elif f in shades or (f not in healers and not f.startswith("heal")):
            nodes = _nodes_of(value)
            open_.append(
                {
                    "id": fault_id,
                    "f": f,
                    "label": describe_fault(op),
                    "start": start,
                    "info": info,
                    "nodes": nodes,
                    "pattern": _pattern(op),
                }
            )
        else:
            targets = set(_nodes_of(value))
            still = []
            for item in open_:
                heals = shades.get(item["f"], {}).get("healed_by", "heal")
                matches = heals == f or (f.startswith("heal") and heals.startswith("heal"))
                if matches and (not targets or not item["nodes"] or targets & set(item["nodes"])):
                    close(item, t)
                else:
                    still.append(item)
            open_ = still
    for item in open_:
        colour = shades.get(item["f"], {}).get("color", DEFAULT_COLOUR)
        windows.append(
            FaultWindow(item["f"], item["label"], item["start"], None, item["info"], colour, item["pattern"])
        )
    return sorted(windows, key=lambda w: w.start_s)


def _pattern(op: dict[str, Any]) -> str:
    """The name of the pattern a nemesis op is a part of ('' for a fault on its own)."""
    value = op.get("value")
    pattern = value.get("pattern") if isinstance(value, dict) else None
    return str(pattern.get("name") or "") if isinstance(pattern, dict) else ""


def _nodes_of(value: Any) -> list[str]:
    """Node names a nemesis value mentions, whatever its shape (list, dict with nodes, text)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        out: list[str] = []
        for v in value:
            out.extend(_nodes_of(v) if isinstance(v, list | tuple | dict) else [str(v)])
        return out
    if isinstance(value, dict):
        for key in ("nodes", "node", "targets", "target"):
            if key in value:
                return _nodes_of(value[key])
    return []


ROLES = ("leader", "follower", "followers", "controller")


def describe_fault(op: dict[str, Any]) -> str:
    """A short human label for a nemesis op: 'kill leader n2', 'partition n1 | n2 n3'."""
    f = str(op.get("f"))
    value = op.get("value")
    if isinstance(value, dict):
        if isinstance(value.get("components"), list) and value["components"]:
            parts = [" ".join(map(str, c)) if isinstance(c, list) else str(c) for c in value["components"]]
            return f"{f} {' | '.join(parts)}"[:80]
        if "grudge" in value and isinstance(value["grudge"], dict | list):
            return f"{f} {_grudge_text(value['grudge'])}"
        role = value.get("role") or (value.get("target") if value.get("target") in ROLES else None)
        who = " ".join(_nodes_of(value))
        if role:
            who = f"{role} {who}".strip()
        extra = [
            f"{k}={v}"
            for k, v in value.items()
            if k in ("delta", "skew", "offset_s", "loss", "probability", "percent", "ms")
        ]
        return " ".join(x for x in (f, who, *extra) if x)
    nodes = _nodes_of(value)
    return f"{f} {' '.join(nodes)}".strip()


def _grudge_text(grudge: Any) -> str:
    if isinstance(grudge, dict):
        parts = [f"{k}✕{','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in grudge.items() if v]
        return " ".join(parts)[:60]
    return " | ".join(" ".join(map(str, g)) if isinstance(g, list) else str(g) for g in grudge)[:60]
