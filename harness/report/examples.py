"""The evidence under each anomaly: an example's fields, the history ops it names, its replicas.

A checker's example names history indices and sent values under whatever keys it uses (`index`,
`ok_index`, `value`, nested `positions` …); `checkers.evidence.refs` finds them all, and the checker
quoted those ops and the replicas' records at that offset in evidence.json, so the report shows
them beside the example.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from checkers.evidence import partition_of, refs
from harness.report.cycles import cycle_svg
from harness.report.history import NS, Completed, HistoryDigest
from harness.report.replicas import PartitionLogs
from harness.report.text import example_title


@dataclass
class ExampleView:
    title: str
    fields: list[tuple[str, str]]
    ops: list[dict[str, Any]]
    replicas: list[tuple[str, str]] = field(default_factory=list)
    svg: Markup | None = None  # a picture of the example (a dependency cycle)


def mops_summary(mops: Any) -> str:
    """A transaction's micro-operations in a few words: 'send 17 → t0-1 @4, poll 2 records'."""
    if not isinstance(mops, list):
        return ""
    words = []
    for m in mops:
        if not isinstance(m, dict):
            continue
        if m.get("f") == "send":
            at = f" @{m['offset']}" if m.get("offset") is not None else ""
            words.append(f"send {m.get('value')} → {m.get('topic')}-{m.get('partition')}{at}")
        elif m.get("f") == "poll":
            records = m.get("records")
            words.append(f"poll {len(records)} records" if isinstance(records, list) else "poll")
    return ", ".join(words)


def op_row(op: dict[str, Any]) -> dict[str, Any]:
    if op.get("f") == "txn":
        return {**_op_row(op), "value": mops_summary(op.get("mops"))}
    return _op_row(op)


def _op_row(op: dict[str, Any]) -> dict[str, Any]:
    return {
        "index": op.get("index"),
        "time": f"{int(op.get('time') or 0) / NS:.3f}",
        "process": op.get("process"),
        "type": op.get("type"),
        "f": op.get("f"),
        "where": f"{op['topic']}-{op.get('partition')}" if op.get("topic") is not None else "",
        "offset": op.get("offset", ""),
        "value": op.get("value", "") if op.get("f") == "send" or op.get("process") == "nemesis" else "",
        "error": op.get("error", ""),
        # evidence.json quotes a poll's records as their count
        "records": len(op["records"]) if isinstance(op.get("records"), list) else op.get("records", ""),
    }


def send_row(c: Completed) -> dict[str, Any]:
    return {
        "index": f"{c.invoke_index}→{c.complete_index if c.complete_index is not None else '…'}",
        "time": f"{c.invoke_ns / NS:.3f}→{c.complete_ns / NS:.3f}"
        if c.complete_ns is not None
        else f"{c.invoke_ns / NS:.3f}→never",
        "process": c.process,
        "type": c.type,
        "f": c.f,
        "where": f"{c.topic}-{c.partition}" if c.topic is not None else "",
        "offset": c.offset if c.offset is not None else "",
        "value": c.value,
        "error": c.error or "",
        "records": "",
    }


def scalar(v: Any) -> str:
    if isinstance(v, list | tuple) and len(v) > 12:
        return ", ".join(map(str, v[:12])) + f", … ({len(v)} in all)"
    if isinstance(v, list | tuple):
        return ", ".join(map(scalar, v))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {scalar(x)}" for k, x in v.items()) + "}"
    return str(v)


def example_view(
    name: str, example: Any, digest: HistoryDigest, logs: dict[tuple[str, int], PartitionLogs]
) -> ExampleView:
    if not isinstance(example, dict):
        return ExampleView(title=scalar(example), fields=[("example", scalar(example))], ops=[])
    fields = [(str(k), scalar(v)) for k, v in example.items()]
    indices, values = refs(example)
    rows: list[dict[str, Any]] = []
    covered: set[int] = set()
    for v in sorted(values, key=str):
        c = digest.sends_by_value.get(str(v))
        if c is not None:
            rows.append(send_row(c))
            covered.add(c.invoke_index)
            if c.complete_index is not None:
                covered.add(c.complete_index)
    for i in sorted(indices - covered):
        op = digest.by_index.get(i)
        if op is not None:
            rows.append(op_row(op))
    replicas: list[tuple[str, str]] = []
    tp = partition_of(example)
    offset = example.get("offset")
    if tp is None and values:
        c = digest.sends_by_value.get(str(next(iter(values))))
        if c is not None and c.topic is not None and isinstance(c.partition, int):
            tp = (str(c.topic), c.partition)
            offset = offset if offset is not None else c.offset
    if tp is not None and isinstance(offset, int) and tp in logs:
        for node, r in logs[tp].replicas.items():
            rec = r.records.get(offset)
            if rec is not None:
                text = f"value {rec[0]} (epoch {rec[1]})"
            elif offset >= r.log_end:
                text = f"absent: log ends at {r.log_end}"
            else:
                text = "absent"
            replicas.append((node, f"offset {offset}: {text}"))
    svg = cycle_svg(example) if name in ("G0", "G1c") else None
    return ExampleView(
        title=example_title(name, example), fields=fields, ops=rows[:12], replicas=replicas, svg=svg
    )


def example_partitions(examples: list[Any], digest: HistoryDigest) -> set[tuple[str, int]]:
    out: set[tuple[str, int]] = set()
    for ex in examples:
        tp = partition_of(ex)
        if tp is None:
            _i, values = refs(ex)
            for v in values:
                c = digest.sends_by_value.get(str(v))
                if c is not None and c.topic is not None and isinstance(c.partition, int):
                    tp = (str(c.topic), c.partition)
                    break
        if tp is not None:
            out.add(tp)
    return out
