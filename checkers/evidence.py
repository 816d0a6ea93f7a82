"""What the report shows besides the verdict, computed by the checker that judged the run: evidence.json.

The report reads no history and no data dir: whatever it draws or quotes comes from results.json
and this file, which `checkers.api.check_run` writes beside it, from either engine:

* the timeline: completions per second of the series the rate chart draws, the latency sample
  (`checkers.timeline`, both in the statistics' facts), the nemesis ops (the fault windows), the
  history's span, how many lines it held and the first it could not read;
* the history lines the examples name (by index: `refs`), with a poll's records as their count, and
  the send operation of each value they name (its invocation and completion);
* for the replica pictures: each replica's log bounds, checkpointed HW, leader epochs (its
  leader-epoch-checkpoint's entries, else each batch leader epoch with the first offset that holds
  it), first problem, and its records at the offsets the report shows: the first `TABLE_OFFSETS`
  of each partition where replicas are marked wrong (results.json `stats.replicas`) and those the
  examples name; and the value first acknowledged at each of those marked offsets.

Which lines, values and offsets those are is decided here (`wanted`, `marked_offsets`,
`example_positions`), the same for both engines; each engine only finds them (the reference by a
pass over the history, Spark from the history's Parquet form).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkers.catalogue import MAX_EXAMPLES, AnomalyResult
from checkers.stats import Facts
from checkers.timeline import NS

VERSION = 1
TABLE_OFFSETS = 12  # offsets of a partition the report's table of wrong replicas shows

TopicPartition = tuple[str, int]


def refs(example: Any) -> tuple[set[int], set[Any]]:
    """History indices and sent values an example names, whatever the checker called them."""
    indices: set[int] = set()
    values: set[Any] = set()
    if not isinstance(example, dict):
        return indices, values

    def ints(v: Any) -> list[int]:
        if isinstance(v, bool):
            return []
        if isinstance(v, int):
            return [v]
        if isinstance(v, list | tuple):
            return [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
        return []

    for key, v in example.items():
        k = key.lower()
        if k in ("index", "indices", "cycle") or k.endswith(("_index", "_indices", "-index", "-indices")):
            indices.update(ints(v))
        elif k in ("value", "values", "prev_value"):
            for x in v if isinstance(v, list | tuple) else [v]:
                if isinstance(x, int | str) and not isinstance(x, bool):
                    values.add(x)
                elif isinstance(x, dict):
                    i, vals = refs(x)
                    indices |= i
                    values |= vals
        elif isinstance(v, dict):
            i, vals = refs(v)
            indices |= i
            values |= vals
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for x in v:
                i, vals = refs(x)
                indices |= i
                values |= vals
    return indices, values


def partition_of(example: Any) -> TopicPartition | None:
    """The (topic, partition) an example names, under whichever keys it uses."""
    if not isinstance(example, dict):
        return None
    topic, partition = example.get("topic"), example.get("partition")
    if topic is not None and isinstance(partition, int):
        return (str(topic), partition)
    tp = example.get("topic_partition") or example.get("tp")
    if isinstance(tp, list | tuple) and len(tp) == 2 and isinstance(tp[1], int):
        return (str(tp[0]), tp[1])
    if isinstance(tp, str) and "-" in tp and tp.rsplit("-", 1)[1].isdigit():
        t, p = tp.rsplit("-", 1)
        return (t, int(p))
    return None


def value_key(value: Any) -> str | None:
    """Values are integers in the history but may be text in an example: compared as text."""
    return str(value) if value is not None else None


@dataclass(frozen=True)
class Wanted:
    """The history lines (by index) and the values whose send operations the report quotes."""

    indices: frozenset[int]
    values: frozenset[str]

    @property
    def int_values(self) -> list[int]:
        """The values that can be a sent value (integers)."""
        out = []
        for v in self.values:
            try:
                out.append(int(v))
            except ValueError:
                continue
        return sorted(out)


def wanted(anomalies: Mapping[str, AnomalyResult]) -> Wanted:
    """What the examples (the first MAX_EXAMPLES of each anomaly) name."""
    indices: set[int] = set()
    values: set[str] = set()
    for result in anomalies.values():
        for example in result["examples"][:MAX_EXAMPLES]:
            i, v = refs(example)
            indices |= i
            values |= {key for x in v if (key := value_key(x)) is not None}
    return Wanted(frozenset(indices), frozenset(values))


def _ranges(ranges: Any) -> set[int]:
    """[[5, 7], [9, 9]] -> {5, 6, 7, 9}."""
    out: set[int] = set()
    for r in ranges if isinstance(ranges, list) else []:
        if (
            isinstance(r, list)
            and len(r) == 2
            and all(type(x) is int for x in r)
            and 0 <= r[1] - r[0] < 10**6
        ):
            out.update(range(r[0], r[1] + 1))
    return out


def marked_offsets(partitions: Mapping[str, Any]) -> dict[TopicPartition, list[int]]:
    """Per partition, the first TABLE_OFFSETS offsets where some replica is marked wrong (divergent,
    or acknowledged and absent), from the replica summaries (results.json `stats.replicas`)."""
    out: dict[TopicPartition, list[int]] = {}
    for name, summary in partitions.items():
        if not isinstance(summary, dict):
            continue
        topic, _, number = str(name).rpartition("-")
        if not number.isdigit():
            continue
        offsets = _ranges(summary.get("divergent"))
        for replica in summary.get("replicas") or []:
            if isinstance(replica, dict):
                offsets |= _ranges(replica.get("absent_acked"))
        if offsets:
            out[(topic, int(number))] = sorted(offsets)[:TABLE_OFFSETS]
    return out


def example_positions(
    anomalies: Mapping[str, AnomalyResult], sends: Mapping[str, dict[str, Any]]
) -> dict[TopicPartition, set[int]]:
    """The (partition, offset) at which each example shows the replicas' records: its own, else
    that of the send of the first value it names."""
    out: dict[TopicPartition, set[int]] = {}
    for result in anomalies.values():
        for example in result["examples"][:MAX_EXAMPLES]:
            if not isinstance(example, dict):
                continue
            tp, offset = partition_of(example), example.get("offset")
            _, values = refs(example)
            if tp is None and values:
                send = sends.get(value_key(next(iter(values))) or "")
                if send is not None and send.get("topic") is not None and type(send.get("partition")) is int:
                    tp = (str(send["topic"]), send["partition"])
                    offset = offset if offset is not None else send.get("offset")
            if tp is not None and type(offset) is int:
                out.setdefault(tp, set()).add(offset)
    return out


def quoted(op: dict[str, Any]) -> dict[str, Any]:
    """A history line as the report quotes it: a poll's records as their count."""
    records = op.get("records")
    return {**op, "records": len(records)} if isinstance(records, list) else op


def send_of(invocation: dict[str, Any], completion: dict[str, Any] | None) -> dict[str, Any]:
    """A send operation as the report shows it (`harness.report.history.Completed`'s fields)."""
    src = completion or invocation
    return {
        "process": invocation["process"],
        "f": invocation["f"],
        "type": ("info" if completion["f"] == "crash" else completion["type"]) if completion else "open",
        "invoke_index": invocation["index"],
        "invoke_ns": int(invocation.get("time") or 0),
        "complete_index": completion["index"] if completion else None,
        "complete_ns": int(completion.get("time") or 0) if completion else None,
        "topic": src.get("topic"),
        "partition": src.get("partition"),
        "value": src.get("value"),
        "offset": completion.get("offset") if completion else None,
        "error": completion.get("error") if completion else None,
    }


@dataclass
class ReplicaView:
    """One replica of a partition as the report draws it."""

    node: str
    log_start: int
    log_end: int
    high_watermark: int | None
    epochs: list[tuple[int, int]]  # (leader epoch, first offset)
    problem: str | None
    records: dict[int, tuple[Any, int]] = field(default_factory=dict)  # offset -> (value, batch epoch)


def epochs_of(
    checkpoint: list[tuple[int, int]] | None, first_offsets: Mapping[int, int]
) -> list[tuple[int, int]]:
    """A replica's leader epochs: its checkpoint's entries, else each batch leader epoch with the
    first offset that holds it (`first_offsets`: epoch -> offset), in offset order."""
    if checkpoint:
        return sorted(checkpoint, key=lambda e: (e[1], e[0]))
    return sorted(((epoch, offset) for epoch, offset in first_offsets.items()), key=lambda e: (e[1], e[0]))


@dataclass
class Found:
    """What an engine found of the wanted lines and offsets."""

    ops: dict[int, dict[str, Any]] = field(default_factory=dict)  # index -> the line, quoted
    sends: dict[str, dict[str, Any]] = field(default_factory=dict)  # value (text) -> its send (`send_of`)
    acked: dict[TopicPartition, dict[int, Any]] = field(default_factory=dict)  # first value acked there
    replicas: dict[TopicPartition, list[ReplicaView]] = field(default_factory=dict)


def assemble(facts: Facts, ops: int, nemesis: Iterable[dict[str, Any]], found: Found) -> dict[str, Any]:
    """evidence.json's content: the timeline from the statistics' facts, `ops` history lines read,
    the nemesis ops, and what the engine found of the wanted lines and offsets."""
    return {
        "version": VERSION,
        "ops": ops,
        "end_ns": round(facts.duration * NS),
        "problems": [[n, reason] for n, reason in facts.problems],
        "rates": [[f, outcome, sorted(counts.items())] for (f, outcome), counts in facts.rates.items()],
        "latency": [[round(t, 6), round(ms, 3), kind] for t, ms, kind in facts.latency_sample],
        "nemesis": list(nemesis),
        "ops_named": [found.ops[i] for i in sorted(found.ops)],
        "sends": [{"key": v, **found.sends[v]} for v in sorted(found.sends)],
        "acked": [
            [topic, partition, offset, value]
            for (topic, partition), at in sorted(found.acked.items())
            for offset, value in sorted(at.items())
        ],
        "replicas": replica_entries(found.replicas),
    }


def replica_entries(replicas: Mapping[TopicPartition, list[ReplicaView]]) -> list[dict[str, Any]]:
    """evidence.json's `replicas`: one entry per replica, by partition and node."""
    return [
        {
            "topic": topic,
            "partition": partition,
            "node": r.node,
            "log_start": r.log_start,
            "log_end": r.log_end,
            "high_watermark": r.high_watermark,
            "epochs": [list(e) for e in r.epochs],
            "problem": r.problem,
            "records": [[o, v, e] for o, (v, e) in sorted(r.records.items())],
        }
        for (topic, partition), views in sorted(replicas.items())
        for r in sorted(views, key=lambda r: r.node)
    ]


def write(path: Path, evidence: dict[str, Any]) -> None:
    """Atomically (temp file + rename), as results.json."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(evidence, separators=(",", ":"), default=str) + "\n")
    os.replace(tmp, path)
