"""The reference checker's part of evidence.json (`checkers.evidence`): the wanted history lines,
sends and acks found by one more pass over the history, the replicas' views from the logs the
replica-log checker read."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from checkers.evidence import (
    Found,
    ReplicaView,
    TopicPartition,
    Wanted,
    epochs_of,
    example_positions,
    marked_offsets,
    quoted,
    send_of,
    value_key,
    wanted,
)
from checkers.replica_logs import ReplicaFindings, ReplicaLog
from history.format import NEMESIS_PROCESS
from history.pairing import Pairing, outcome_of
from history.reader import iter_ops


def find_in_history(
    path: str | os.PathLike[str], want: Wanted, acked_at: Mapping[TopicPartition, list[int]]
) -> Found:
    """The wanted lines (by index; the first line of each), the last send (by invocation) of each
    wanted value with its completion, and the first value acknowledged (by completion) at each of
    `acked_at`'s offsets, by one pass over the history."""
    found = Found()
    at = {tp: set(offsets) for tp, offsets in acked_at.items()}
    pairing = Pairing()
    for op in iter_ops(path, problems=[]):
        if op["index"] in want.indices:
            found.ops.setdefault(op["index"], quoted(op))
        if op["process"] == NEMESIS_PROCESS:
            continue
        if op["type"] == "invoke":
            pairing.invoke(op)
            if op["f"] == "send" and (key := value_key(op.get("value"))) in want.values:
                found.sends[key] = send_of(op, None)  # the value's last send (by invocation) so far
            continue
        invocation = pairing.complete(op)
        if invocation is None or invocation["f"] != "send":
            continue
        key = value_key(invocation.get("value"))
        if key in want.values and found.sends[key]["invoke_index"] == invocation["index"]:
            found.sends[key] = send_of(invocation, op)
        topic, partition, offset = invocation.get("topic"), invocation.get("partition"), op.get("offset")
        if (
            outcome_of(op) == "ok"
            and isinstance(topic, str)
            and type(partition) is int
            and type(offset) is int
            and type(invocation.get("value")) is int
            and offset in at.get((topic, partition), ())
        ):
            found.acked.setdefault((topic, partition), {}).setdefault(offset, invocation["value"])
    return found


def replica_view(log: ReplicaLog, offsets: set[int]) -> ReplicaView:
    """A replica read with its epochs (`read_replica(epochs=True)`), its records at `offsets`."""
    epochs = log.record_epochs or {}
    first: dict[int, int] = {}
    for offset in sorted(epochs):
        first.setdefault(epochs[offset], offset)
    return ReplicaView(
        node=log.node,
        log_start=log.log_start,
        log_end=log.log_end,
        high_watermark=log.high_watermark,
        epochs=epochs_of(log.epoch_checkpoint, first),
        problem="; ".join(log.problems[:3]) or None,
        records={o: (log.records[o], epochs.get(o, -1)) for o in sorted(offsets) if o in log.records},
    )


def gather(
    history: str | os.PathLike[str], anomalies: Mapping[str, Any], replicas: ReplicaFindings | None
) -> Found:
    """Everything the reference finds for evidence.json, given what the check found."""
    marked = marked_offsets(replicas.partitions) if replicas is not None else {}
    found = find_in_history(history, wanted(anomalies), marked)
    if replicas is not None:
        positions = example_positions(anomalies, found.sends)
        for tp, logs in replicas.logs.items():
            offsets = set(marked.get(tp, ())) | positions.get(tp, set())
            found.replicas[tp] = [replica_view(log, offsets) for log in logs]
    return found
