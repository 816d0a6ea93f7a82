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
