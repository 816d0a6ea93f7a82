"""What the report draws and cites of the history, as the checker wrote it into evidence.json.

The report reads no history: rates and latencies over time, the nemesis ops (fault windows), the
acknowledged values at the offsets the replica tables show and the ops the examples name were
found by the checker that judged the run (`checkers.evidence`), from either engine. A run directory
without evidence.json (never checked, or checked by an older version) gives an empty digest, and
the page says so.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from history.format import ReadProblem

log = logging.getLogger(__name__)

NS = 1_000_000_000


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
    # (completion seconds, latency ms, type) of sends: the checker's sample (`checkers.timeline`).
    latency: list[tuple[float, float, str]] = field(default_factory=list)
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    # (topic, partition) -> offset -> the first value acknowledged there.
    acked: dict[tuple[str, int], dict[int, Any]] = field(default_factory=lambda: defaultdict(dict))
    # Ops the examples name, by history index and by sent value.
    by_index: dict[int, dict[str, Any]] = field(default_factory=dict)
    sends_by_value: dict[Any, Completed] = field(default_factory=dict)
    counts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))


def read_evidence(path: Path) -> dict[str, Any] | None:
    """evidence.json, or None when it is missing or unreadable."""
    try:
        evidence = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return evidence if isinstance(evidence, dict) else None


def digest_of(evidence: dict[str, Any] | None) -> HistoryDigest:
    """The digest the report draws from evidence.json (`checkers.evidence.assemble`'s layout);
    whatever is malformed is left out."""
    d = HistoryDigest()
    if evidence is None:
        return d
    d.ops = _int(evidence.get("ops"))
    d.end_ns = _int(evidence.get("end_ns"))
    d.problems = [ReadProblem(_int(p[0]), str(p[1])) for p in _list(evidence.get("problems")) if _pair(p)]
    for series in _list(evidence.get("rates")):
        if isinstance(series, list) and len(series) == 3 and isinstance(series[2], list):
            d.rate[(str(series[0]), str(series[1]))] = {
                _int(s): _int(n) for s, n in (x for x in series[2] if _pair(x))
            }
    d.latency = [
        (float(p[0]), float(p[1]), str(p[2]))
        for p in _list(evidence.get("latency"))
        if isinstance(p, list) and len(p) == 3 and all(isinstance(x, int | float) for x in p[:2])
    ]
    d.nemesis = [op for op in _list(evidence.get("nemesis")) if isinstance(op, dict)]
    for topic, partition, offset, value in (
        a for a in _list(evidence.get("acked")) if isinstance(a, list) and len(a) == 4
    ):
        d.acked[(str(topic), _int(partition))].setdefault(_int(offset), value)
    d.by_index = {op["index"]: op for op in _list(evidence.get("ops_named")) if _indexed(op)}
    for s in _list(evidence.get("sends")):
        if (
            isinstance(s, dict)
            and isinstance(s.get("key"), str)
            and _indexed({"index": s.get("invoke_index")})
        ):
            fields: dict[str, Any] = {k: s.get(k) for k in _SEND_FIELDS}
            d.sends_by_value[s["key"]] = Completed(**fields)
    return d


_SEND_FIELDS = (
    "process", "f", "type", "invoke_index", "invoke_ns", "complete_index", "complete_ns",
    "topic", "partition", "value", "offset", "error",
)  # fmt: skip


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _pair(v: Any) -> bool:
    return isinstance(v, list) and len(v) == 2 and isinstance(v[0], int)


def _indexed(op: Any) -> bool:
    return isinstance(op, dict) and isinstance(op.get("index"), int) and not isinstance(op.get("index"), bool)


def _norm_value(v: Any) -> Any:
    """Values are integers in the history but may be strings in an example; compare as text."""
    return str(v) if v is not None else None
