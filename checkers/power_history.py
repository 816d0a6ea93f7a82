"""The reference's tally of verdict power (`checkers.power`): one streaming pass over history.jsonl.

Operations are paired as everywhere (`history.pairing`): a client invocation and the next line of
its process that is not an invocation; an invocation superseded by the next one, or never
completed, is no event, and neither is a completion without an invocation.
"""

from __future__ import annotations

import os
from typing import Any

from checkers.power import NS, Asked, Tally, exact_seconds, intervals, tally_from_times
from history.faults import FaultWindow, fault_windows
from history.format import NEMESIS_PROCESS
from history.reader import iter_ops
from history.txn import TXN, read_records, writes


def whole(record: Any) -> bool:
    """A polled record that names its topic, partition, offset and value (what reads are made of)."""
    return (
        isinstance(record, dict)
        and isinstance(record.get("topic"), str)
        and all(type(record.get(k)) is int for k in ("partition", "offset", "value"))
    )


def events(invocation: dict[str, Any], completion: dict[str, Any]) -> list[str]:
    """The kinds of event one completed operation is (`checkers.power`), one entry per event."""
    f, ok = invocation.get("f"), completion.get("type") == "ok" and completion.get("f") != "crash"
    out: list[str] = []
    if f in ("send", TXN):
        out.append("write")
    if not ok:
        return out
    if f == "send" and type(completion.get("offset")) is int and completion["offset"] >= 0:
        out.append("acked")
    elif f == "poll" and isinstance(completion.get("records"), list):
        if any(whole(r) for r in completion["records"]):
            out.append("read")
    elif f == TXN:
        out += ["acked"] * sum(1 for w in writes(invocation, completion) if w.offset is not None)
        if any(whole(r) for r in read_records(completion)):
            out.append("read")
    elif f in ("commit", "rebalance"):
        out.append(str(f))
    return out


def tally_history(history: str | os.PathLike[str], asked: Asked) -> tuple[Tally, list[FaultWindow]]:
    """The run's tally and fault windows, from one pass over its history."""
    times: dict[str, list[float]] = {}
    open_ops: dict[Any, dict[str, Any]] = {}
    nemesis: list[dict[str, Any]] = []
    load_start: float | None = None
    issued_until: float | None = None
    for op in iter_ops(history, problems=[]):
        process = op.get("process")
        if process == NEMESIS_PROCESS:
            nemesis.append(op)
            continue
        t = int(op.get("time") or 0) / NS
        if op.get("type") == "invoke":
            open_ops[process] = op
            load_start = t if load_start is None else load_start
            if op.get("f") in ("send", TXN):
                issued_until = t if issued_until is None else max(issued_until, t)
            if op.get("f") == "crash":
                times.setdefault("crash", []).append(t)
            continue
        invocation = open_ops.pop(process, None)
        if invocation is None:
            continue
        for kind in events(invocation, op):
            times.setdefault(kind, []).append(t)
    writes_done = times.get("write") or []
    load_end = max(writes_done) if writes_done else None
    windows = fault_windows(nemesis)
    seconds = exact_seconds(intervals(windows, asked, load_start, load_end))
    return tally_from_times(times, load_start, load_end, seconds, issued_until), windows
