"""The replica-log checker: what the brokers' data dirs hold after the run, read from disk.

The run's `nodes/<node>/data/` directories are copies of each broker's data dir in Kafka's format
(`<topic>-<partition>/<base offset>.log` segments of v2 batches, `replication-offset-checkpoint`),
so this reads the own broker's and real Kafka's alike (through `checkers.data_dirs.iter_batches`, kafka.record's
batch reader, which never modifies anything). Record values are the ASCII decimal values the workload sent.

Rules (docs/checkers.md):
* A replica's log is its batches in offset order up to the first batch that fails its CRC or is
  torn (recovery would truncate there); control batches hold no values. `log_start` is the first
  offset on disk, `log_end` the offset after the last good batch.
* log-divergence (per (topic, partition, offset)): among the replicas of a partition whose
  [log_start, log_end) covers the offset, two hold different records there (a value, or none at
  all). Example: the offset and every covering replica's value, log end and checkpointed HW, and
  `below_high_watermarks` (the offset is below every covering replica's checkpointed HW: committed
  data diverged; false: an uncommitted tail that was not truncated yet; null: an HW is unknown).
  A replica outside its partition's final ISR (per the collected cluster state) has not caught up
  yet, so its records at or above its own checkpointed HW are an unacknowledged tail it has still to
  truncate: an offset where only such a tail differs is not divergence "after the final reads"; it
  is said in `notes` instead. Divergence among the other replicas, and anything below an HW, counts.
* lost-committed-on-replicas (per ack: an ok send operation with an offset >= 0, paired as the
  history engines pair it, `iter_acks`): the acked value is nowhere in the final log of the
  partition's leader, although the leader's log starts at or below the acked offset.
  The leader is the one named by the collected cluster state; when unknown, the replica with the
  longest log (ties: the smallest node name), and the example says `leader_known: false`.
* What cannot be read (no `nodes/`, a node without `data/`, a partition with fewer replicas than
  its replication factor) is said in `incomplete`, so the verdict can never be a false valid.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from checkers.catalogue import REPLICA_ANOMALIES, AnomalyResult
from checkers.classify import Examples, classify
from checkers.data_dirs import (
    LEADER_EPOCH_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    iter_batches,
    iter_partition_dirs,
    read_epoch_checkpoint,
    read_offset_checkpoint,
)
from checkers.rules.rows import LeaderAck, ReplicaPosition
from history.format import NEMESIS_PROCESS
from history.logs import absent_at, differ
from history.pairing import Pairing, outcome_of
from history.reader import iter_ops

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
OnNode = TypeVar("OnNode", "ReplicaLog", "ReplicaDir")  # a replica as read, or as listed
Value = int | str | None  # an ASCII decimal value as int; anything else as a short repr; None: null


@dataclass
class ReplicaLog:
    """One replica of one partition, as found on disk."""

    node: str
    topic: str
    partition: int
    path: Path
    records: dict[int, Value] = field(default_factory=dict)  # offset -> value
    log_start: int = 0
    log_end: int = 0
    high_watermark: int | None = None  # from replication-offset-checkpoint
    problems: list[str] = field(default_factory=list)
    # offset -> the partition leader epoch of its batch; only when read with `epochs` (the report).
    record_epochs: dict[int, int] | None = None
    # the leader-epoch-checkpoint's (epoch, start offset) entries; only when read with `epochs`.
    epoch_checkpoint: list[tuple[int, int]] | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "log_start": self.log_start,
            "log_end": self.log_end,
            "high_watermark": self.high_watermark,
            "records": len(self.records),
            "problems": self.problems,
        }


@dataclass
class ReplicaFindings:
    """The replica-log anomalies, what each partition's replicas look like, and what is missing."""

    anomalies: dict[str, AnomalyResult]
    partitions: dict[str, dict[str, Any]]  # "t0-1" -> {"leader", "leader_known", "replicas": [...]}
    incomplete: list[str]
    notes: list[str]
    # lost-committed-on-replicas acks by the second of their ack (str(floor(time_ns / 1e9))).
    lost_by_second: dict[str, int] = field(default_factory=dict)
    # The logs as read, with their epochs (the reference's; evidence.json draws them).
    logs: dict[TopicPartition, list[ReplicaLog]] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class ReplicaInputs:
    """What the replica-log checks read besides the history: the collected data dirs and the
    cluster's final state, and what the test's settings say should be there."""

    nodes_dir: Path
    final_state: Any = None
    expected: tuple[TopicPartition, ...] = ()
    replication_factor: int = 1
    brokers: tuple[str, ...] | None = None


def decode_value(raw: bytes | None) -> Value:
    """The workload's ASCII decimal value as an int; anything else as a short repr."""
    if raw is None:
        return None
    text = bytes(raw)
    if text.isdigit() or (text[:1] == b"-" and text[1:].isdigit()):
        return int(text)
    return repr(text[:40])


@dataclass
class ReplicaScan:
    """What reading one replica's log found besides its records (`iter_replica_records` fills it)."""

    log_start: int = 0
    log_end: int = 0
    problems: list[str] = field(default_factory=list)


def iter_replica_records(path: Path, scan: ReplicaScan) -> Iterator[tuple[int, bytes | None, int]]:
    """(offset, raw value, batch leader epoch) of every record of a replica's good batches, in file
    order, stopping at the first batch that fails its CRC; `scan` receives the log's bounds and
    problems. The one reading rule of both engines (the reference's `read_replica`, Spark's reader)."""
    first = True
    for batch in iter_batches(path, problems=scan.problems):
        if not batch.crc_ok:
            scan.problems.append(
                f"{batch.segment.name}: batch at offset {batch.base_offset} fails its CRC; log read up to it"
            )
            return
        if first:
            scan.log_start = batch.base_offset
            first = False
        scan.log_end = batch.last_offset + 1
        if batch.is_control:
            continue
        for offset, value in batch.records:
            yield offset, value, batch.partition_leader_epoch


def read_replica(
    node: str, topic: str, partition: int, path: Path, hw: int | None, *, epochs: bool = False
) -> ReplicaLog:
    """Read one partition directory: good batches in offset order, stopping at the first bad one.

    With `epochs`, each record's batch leader epoch is kept too (`record_epochs`), and the
    partition's leader-epoch-checkpoint (`epoch_checkpoint`)."""
    replica = ReplicaLog(node, topic, partition, path, high_watermark=hw)
    if epochs:
        replica.record_epochs = {}
        try:
            replica.epoch_checkpoint = read_epoch_checkpoint(path / LEADER_EPOCH_CHECKPOINT)
        except CheckpointError as e:
            log.warning("%s", e)
            replica.epoch_checkpoint = []
    scan = ReplicaScan()
    for offset, value, epoch in iter_replica_records(path, scan):
        replica.records[offset] = decode_value(value)
        if replica.record_epochs is not None:
            replica.record_epochs[offset] = epoch
    replica.log_start, replica.log_end, replica.problems = scan.log_start, scan.log_end, scan.problems
    return replica


def _data_roots(data_dir: Path) -> list[Path]:
    """The data dir itself, or its subdirectories when the copy kept Kafka's log.dirs one level down."""
    if any(True for _ in iter_partition_dirs(data_dir)):
        return [data_dir]
    return sorted(p for p in data_dir.iterdir() if p.is_dir() and any(True for _ in iter_partition_dirs(p)))


@dataclass(frozen=True)
class ReplicaDir:
    """One replica's partition directory as collected, with its checkpointed HW."""

    node: str
    topic: str
    partition: int
    path: Path
    high_watermark: int | None


def list_replicas(
    nodes_dir: Path, brokers: Iterable[str] | None = None
) -> tuple[list[ReplicaDir], list[str]]:
    """Every replica directory under `nodes/<node>/data/` (names and checkpoints only, no log is
    read), and what could not be read. Both engines judge exactly these replicas.

    `brokers`: the nodes that run brokers, when known; others (the ZooKeeper node) hold no data.
    """
    incomplete: list[str] = []
    found: list[ReplicaDir] = []
    if not nodes_dir.is_dir():
        return [], [f"replicas: no replica data collected ({nodes_dir} is missing)"]
    broker_names = set(brokers) if brokers is not None else None
    for node_dir in sorted(p for p in nodes_dir.iterdir() if p.is_dir()):
        if broker_names is not None and node_dir.name not in broker_names:
            continue
        data_dir = node_dir / "data"
        if not data_dir.is_dir():
            incomplete.append(f"replicas: node {node_dir.name} has no data dir ({data_dir} is missing)")
            continue
        for root in _data_roots(data_dir):
            hws: dict[TopicPartition, int] = {}
            try:
                hws = read_offset_checkpoint(root / REPLICATION_OFFSET_CHECKPOINT)
            except CheckpointError as e:
                log.warning("%s", e)
            for topic, partition, path in iter_partition_dirs(root):
                if topic.startswith("__"):
                    continue  # Kafka's internal topics (__consumer_offsets) are not the workload's
                found.append(ReplicaDir(node_dir.name, topic, partition, path, hws.get((topic, partition))))
    return found, incomplete


def read_replicas(
    nodes_dir: Path, brokers: Iterable[str] | None = None, *, epochs: bool = False
) -> tuple[dict[TopicPartition, list[ReplicaLog]], list[str]]:
    """Every replica under `nodes/<node>/data/`, by partition, and what could not be read.

    `brokers`: the nodes that run brokers, when known; others (the ZooKeeper node) hold no data.
    `epochs`: keep each record's batch leader epoch (`read_replica`).
    """
    listed, incomplete = list_replicas(nodes_dir, brokers)
    replicas: dict[TopicPartition, list[ReplicaLog]] = {}
    for d in listed:
        replica = read_replica(d.node, d.topic, d.partition, d.path, d.high_watermark, epochs=epochs)
        replicas.setdefault((d.topic, d.partition), []).append(replica)
    return replicas, incomplete


def expected_partitions(topics: int, partitions: int) -> list[TopicPartition]:
    """The workload's partitions: topics t0, t1, ... each with `partitions` partitions."""
    return [(f"t{t}", p) for t in range(topics) for p in range(partitions)]


def missing_replicas(
    replicas: Mapping[TopicPartition, Sequence[ReplicaLog | ReplicaDir]],
    expected: Iterable[TopicPartition],
    replication_factor: int,
) -> list[str]:
    """Partitions with fewer replicas on disk than the replication factor."""
    reasons = []
    for topic, partition in expected:
        found = replicas.get((topic, partition), [])
        if len(found) < replication_factor:
            nodes = ", ".join(r.node for r in found) or "none"
            reasons.append(
                f"replicas: {topic}-{partition}: {len(found)} of {replication_factor} replicas collected ({nodes})"
            )
    return reasons


def _pending_tail(r: ReplicaLog, offset: int, isr: set[str] | None) -> bool:
    """A record of a replica outside the known final ISR, at or above its own checkpointed HW."""
    return (
        isr is not None and r.node not in isr and r.high_watermark is not None and offset >= r.high_watermark
    )


def pending_note(
    tp: TopicPartition, node: str, isr: set[str] | None, hw: int | None, offsets: tuple[int, int, int]
) -> str:
    """The note for a lagging replica's pending tail: (how many offsets, first, last)."""
    n, first, last = offsets
    return (
        f"{tp[0]}-{tp[1]}: {node} is outside the final ISR [{', '.join(sorted(isr or ()))}]"
        f" and still held an untruncated tail above its HW {hw} that differs at"
        f" {n} offset(s) {first}..{last}; not counted as log-divergence"
    )


def divergence_example(
    tp: TopicPartition, offset: int, covering: list[tuple[str, Value, int, int | None]]
) -> dict[str, Any]:
    """A log-divergence example: every covering replica's (node, value, log end, HW), by node."""
    hws = [hw for _, _, _, hw in covering]
    return {
        "topic": tp[0],
        "partition": tp[1],
        "offset": offset,
        # Below every covering replica's checkpointed HW: a committed record diverged (None: some
        # HW unknown). False: an uncommitted tail not truncated yet.
        "below_high_watermarks": None if None in hws else all(offset < hw for hw in hws),  # type: ignore[operator]
        "replicas": [
            {"node": node, "value": value, "log_end": log_end, "high_watermark": hw}
            for node, value, log_end, hw in sorted(covering, key=lambda c: c[0])
        ],
    }


def partition_summary(
    tp: TopicPartition,
    leader: str,
    known: bool,
    divergent: list[list[int]],
    replicas: list[dict[str, Any]],
    notes: list[str],
) -> dict[str, Any]:
    """One partition of `stats.replicas` (`replicas`: each replica's summary with `absent_acked`,
    in listing order); the notes it calls for (leader unknown, problems) are appended to `notes`."""
    if not known:
        notes.append(f"{tp[0]}-{tp[1]}: leader unknown; acks judged against {leader}, the longest log")
    for r in replicas:
        notes += [f"{r['node']} {tp[0]}-{tp[1]}: {p}" for p in r["problems"]]
    return {
        "leader": leader,
        "leader_known": known,
        "divergent": divergent,
        "replicas": sorted(replicas, key=lambda r: r["node"]),
    }


def find_divergence(
    replicas: Mapping[TopicPartition, list[ReplicaLog]],
    isrs: Mapping[TopicPartition, set[str]] | None = None,
    notes: list[str] | None = None,
    divergent_offsets: dict[TopicPartition, list[int]] | None = None,
) -> AnomalyResult:
    """log-divergence: offsets where replicas covering them hold different records.

    `isrs`: each partition's final ISR when known; where only a lagging replica's pending tail
    differs, the offsets go to `notes`, not to the anomaly (see the module docstring).
    `divergent_offsets`, when given, receives every divergent offset of each partition (examples are capped).
    """
    found: dict[str, Examples] = {}
    isrs = isrs or {}
    for (topic, partition), logs in sorted(replicas.items()):
        if len(logs) < 2:
            continue
        isr = isrs.get((topic, partition))
        pending: dict[str, list[int]] = {}
        low = min(r.log_start for r in logs)
        high = max(r.log_end for r in logs)
        for offset in range(low, high):
            covering = [r for r in logs if r.log_start <= offset < r.log_end]
            if len(covering) < 2 or not differ(r.records.get(offset) for r in covering):
                continue  # no rule of a position holds where the covering replicas agree
            settled = [r for r in covering if not _pending_tail(r, offset, isr)]
            example = divergence_example(
                (topic, partition),
                offset,
                [(r.node, r.records.get(offset), r.log_end, r.high_watermark) for r in covering],
            )
            row = ReplicaPosition(
                topic, partition, offset, len(covering), True,
                differ(r.records.get(offset) for r in settled),
                example["replicas"], example["below_high_watermarks"],
            )  # fmt: skip
            if classify(found, ReplicaPosition, row):
                if divergent_offsets is not None:
                    divergent_offsets.setdefault((topic, partition), []).append(offset)
            else:  # only a lagging replica's pending tail differs: a note
                for r in covering:
                    if r not in settled:
                        pending.setdefault(r.node, []).append(offset)
        if notes is not None:
            for node, offsets in sorted(pending.items()):
                hw = next(r.high_watermark for r in logs if r.node == node)
                notes.append(
                    pending_note((topic, partition), node, isr, hw, (len(offsets), offsets[0], offsets[-1]))
                )
    return found.get("log-divergence", Examples("log-divergence")).result()


def offset_ranges(offsets: Iterable[int]) -> list[list[int]]:
    """[5, 6, 7, 9] -> [[5, 7], [9, 9]]: offsets as inclusive ranges (compact in results.json)."""
    ranges: list[list[int]] = []
    for o in sorted(set(offsets)):
        if ranges and o == ranges[-1][1] + 1:
            ranges[-1][1] = o
        else:
            ranges.append([o, o])
    return ranges


def choose_leader(logs: list[ReplicaLog], named: str | None) -> tuple[ReplicaLog, bool]:
    """The named leader's replica if it is on disk, else the longest log (ties: smallest node)."""
    if named is not None:
        for r in logs:
            if r.node == named:
                return r, True
    return min(logs, key=lambda r: (-r.log_end, r.node)), False


Ack = tuple[int, Any, str, int, int, int, int]  # index, process, topic, partition, offset, value, time_ns


def iter_acks(history_path: str | os.PathLike[str]) -> Iterator[Ack]:
    """(index, process, topic, partition, offset, value, time) of every ack, as the history engines
    define one (docs/checkers.md, "Terms"): an `ok` send operation (`history.pairing`) with an integer
    offset >= 0; its topic, partition and value from its invocation, the rest from its completion."""
    pairing = Pairing()
    for op in iter_ops(history_path, problems=[]):
        if op["process"] == NEMESIS_PROCESS:
            continue
        if op["type"] == "invoke":
            pairing.invoke(op)
            continue
        invocation = pairing.complete(op)
        if invocation is None or invocation["f"] != "send" or outcome_of(op) != "ok":
            continue
        topic, partition, value = (invocation.get(k) for k in ("topic", "partition", "value"))
        offset = op.get("offset")
        if isinstance(topic, str) and all(type(x) is int for x in (partition, offset, value)):
            if offset >= 0:  # type: ignore[operator]
                yield op["index"], op["process"], topic, partition, offset, value, int(op["time"])  # type: ignore[misc]


def find_lost_committed(
    replicas: Mapping[TopicPartition, list[ReplicaLog]],
    acks: Iterable[Ack],
    leaders: Mapping[TopicPartition, str],
    lost_by_second: dict[str, int] | None = None,
    absent: dict[tuple[str, int, str], list[int]] | None = None,
) -> tuple[AnomalyResult, dict[TopicPartition, tuple[ReplicaLog, bool]]]:
    """lost-committed-on-replicas: acked values absent from their partition leader's final log.

    `absent`, when given, receives per (topic, partition, node) the acked offsets at or past that
    replica's log start where it holds no record or another value (what the report draws in red
    on each replica's bar); the anomaly itself is judged on the leader's whole log, by value.
    """
    found: dict[str, Examples] = {}
    chosen = {tp: choose_leader(logs, leaders.get(tp)) for tp, logs in replicas.items() if logs}
    values_on_leader: dict[TopicPartition, set[Value]] = {}
    for index, process, topic, partition, offset, value, time_ns in acks:
        tp = (topic, partition)
        if tp not in chosen:
            continue  # no replica on disk: said in `incomplete`
        leader, known = chosen[tp]
        if absent is not None:
            for r in replicas[tp]:
                if absent_at(r.records, offset, value, r.log_start):
                    absent.setdefault((topic, partition, r.node), []).append(offset)
        if offset < leader.log_start:
            continue  # deleted by retention, not lost (absent_at says so)
        held = values_on_leader.get(tp)
        if held is None:
            held = values_on_leader[tp] = set(leader.records.values())
        row = LeaderAck(
            index, process, topic, partition, offset, value, leader.node, leader.log_end, known,
            absent_at(leader.records, offset, value, leader.log_start), value in held,
        )  # fmt: skip
        if classify(found, LeaderAck, row) and lost_by_second is not None:
            second = str(time_ns // 1_000_000_000)
            lost_by_second[second] = lost_by_second.get(second, 0) + 1
    return found.get("lost-committed-on-replicas", Examples("lost-committed-on-replicas")).result(), chosen


def _node_of(leader: Any, names: set[str]) -> str | None:
    """A node name from a broker id N (node nN), a name, or {"node"|"name"|"id": ...}; None: none."""
    if leader is None or isinstance(leader, bool):
        return None
    if isinstance(leader, int):
        return None if leader < 0 else (f"n{leader}" if not names or f"n{leader}" in names else str(leader))
    if isinstance(leader, dict):
        return _node_of(leader.get("node", leader.get("name", leader.get("id"))), names)
    text = str(leader)
    return f"n{text}" if text.isdigit() and f"n{text}" in names else text


def isrs_from_state(state: Any, node_names: Iterable[str] = ()) -> dict[TopicPartition, set[str]]:
    """(topic, partition) -> the final ISR's node names, for the partitions whose state names one.

    Same shapes as `leaders_from_state`; the plain {(topic, partition): leader} mapping has no ISR.
    """
    return _node_sets_from_state(state, node_names, "isr")


def assignments_from_state(state: Any, node_names: Iterable[str] = ()) -> dict[TopicPartition, set[str]]:
    """(topic, partition) -> the nodes of its final replica set, where the state names one (after
    partition reassignments the replicas may sit elsewhere than where the run began)."""
    return _node_sets_from_state(state, node_names, "replicas")


def assigned_nodes(state: Any) -> set[str]:
    """Every node a final replica set names (brokers added during the run included)."""
    return {n for nodes in assignments_from_state(state).values() for n in nodes}


def _node_sets_from_state(
    state: Any, node_names: Iterable[str], field: str
) -> dict[TopicPartition, set[str]]:
    names = set(node_names)
    partitions = state.get("partitions") if isinstance(state, Mapping) else None
    entries: list[tuple[str, int, Any]] = []
    if isinstance(partitions, list):
        for p in partitions:
            if isinstance(p, Mapping) and "topic" in p and "partition" in p:
                entries.append((str(p["topic"]), int(p["partition"]), p.get(field)))
    elif isinstance(partitions, Mapping):
        for name, p in partitions.items():
            if isinstance(p, Mapping):
                topic, _, number = str(name).rpartition("-")
                if "topic" in p and "partition" in p:
                    topic, number = str(p["topic"]), str(p["partition"])
                if topic and number.isdigit():
                    entries.append((topic, int(number), p.get(field)))
    result: dict[TopicPartition, set[str]] = {}
    for topic, partition, isr in entries:
        if isinstance(isr, list):
            result[(topic, partition)] = {n for n in (_node_of(b, names) for b in isr) if n is not None}
    return result


def leaders_from_state(state: Any, node_names: Iterable[str] = ()) -> dict[TopicPartition, str]:
    """(topic, partition) -> leader node name from a collected cluster state, in the shapes we know.

    Accepts {"partitions": [{"topic", "partition", "leader"}, ...]}, {"partitions": {"t0-1":
    {"leader": ...}}}, or a plain mapping {(topic, partition): leader}. A leader given as a broker
    id N is the node `nN` (node n1 runs broker 1); -1 or None means no leader.
    """
    names = set(node_names)

    def node_of(leader: Any) -> str | None:
        return _node_of(leader, names)

    result: dict[TopicPartition, str] = {}
    if isinstance(state, Mapping) and state and all(isinstance(k, tuple) for k in state):
        for (topic, partition), leader in state.items():
            node = node_of(leader)
            if node is not None:
                result[(str(topic), int(partition))] = node
        return result
    partitions = state.get("partitions") if isinstance(state, Mapping) else None
    if isinstance(partitions, list):
        for p in partitions:
            if isinstance(p, Mapping) and "topic" in p and "partition" in p:
                node = node_of(p.get("leader"))
                if node is not None:
                    result[(str(p["topic"]), int(p["partition"]))] = node
    elif isinstance(partitions, Mapping):
        for name, p in partitions.items():
            if not isinstance(p, Mapping):
                continue
            topic, _, number = str(name).rpartition("-")
            if "topic" in p and "partition" in p:
                topic, number = str(p["topic"]), str(p["partition"])
            if topic and number.isdigit():
                node = node_of(p.get("leader"))
                if node is not None:
                    result[(topic, int(number))] = node
    return result


def follow_assignment(
    replicas: Mapping[TopicPartition, list[OnNode]],
    assignments: Mapping[TopicPartition, set[str]],
    notes: list[str],
) -> dict[TopicPartition, list[OnNode]]:
    """Each partition judged on the replicas of its final assignment: a copy left on a node the
    partition was moved away from (a stray log its broker had not deleted) is set aside, noted.
    A partition none of whose assigned replicas is on disk is left out (`missing_replicas` says so)."""
    kept: dict[TopicPartition, list[OnNode]] = {}
    for (topic, partition), logs in replicas.items():
        assigned = assignments.get((topic, partition))
        if not assigned:
            kept[(topic, partition)] = list(logs)
            continue
        for r in logs:
            if r.node not in assigned:
                notes.append(
                    f"{topic}-{partition}: the copy on {r.node} is not judged: the partition ended on "
                    f"{', '.join(sorted(assigned))}"
                )
        if any(r.node in assigned for r in logs):
            kept[(topic, partition)] = [r for r in logs if r.node in assigned]
    return kept


def check_replica_logs(
    nodes_dir: Path,
    history_path: str | os.PathLike[str] | None,
    final_state: Any = None,
    expected: Iterable[TopicPartition] = (),
    replication_factor: int = 1,
    brokers: Iterable[str] | None = None,
) -> ReplicaFindings:
    """Read every replica, find divergence and acked records missing on the leader."""
    replicas, incomplete = read_replicas(nodes_dir, brokers, epochs=True)
    node_names = [p.name for p in nodes_dir.iterdir()] if nodes_dir.is_dir() else []
    notes: list[str] = []
    if final_state is not None:
        replicas = follow_assignment(replicas, assignments_from_state(final_state, node_names), notes)
    if nodes_dir.is_dir():
        incomplete += missing_replicas(replicas, expected, replication_factor)
    leaders = leaders_from_state(final_state, node_names) if final_state is not None else {}
    isrs = isrs_from_state(final_state, node_names) if final_state is not None else {}
    divergent: dict[TopicPartition, list[int]] = {}
    divergence = find_divergence(replicas, isrs, notes, divergent)
    acks = iter_acks(history_path) if history_path is not None else iter(())
    lost_by_second: dict[str, int] = {}
    absent: dict[tuple[str, int, str], list[int]] = {}
    lost, chosen = find_lost_committed(replicas, acks, leaders, lost_by_second, absent)
    partitions: dict[str, dict[str, Any]] = {}
    for (topic, partition), logs in sorted(replicas.items()):
        leader, known = chosen[(topic, partition)]
        partitions[f"{topic}-{partition}"] = partition_summary(
            (topic, partition),
            leader.node,
            known,
            offset_ranges(divergent.get((topic, partition), [])),
            [
                {**r.summary(), "absent_acked": offset_ranges(absent.get((topic, partition, r.node), []))}
                for r in logs
            ],
            notes,
        )
    anomalies = {"log-divergence": divergence, "lost-committed-on-replicas": lost}
    assert set(anomalies) == set(REPLICA_ANOMALIES)
    return ReplicaFindings(anomalies, partitions, incomplete, notes, lost_by_second, dict(replicas))
