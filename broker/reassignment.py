"""Partition reassignment in ZooKeeper mode (KIP-455's controller side), pure.

A reassignment is asked for by writing `/admin/reassign_partitions` (Kafka's ZooKeeper path, as
`kafka-reassign-partitions.sh --zookeeper` did): `{"version": 1, "partitions": [{"topic",
"partition", "replicas": [target ...]}]}`. The controller carries it out in Kafka's phases, with
the replica sets named as in Kafka's KafkaController.onPartitionReassignment (ORS the original
replicas, TRS the target, RS the current set, AR = TRS - ORS the adding and RR = ORS - TRS the
removing replicas):

- U: the topic znode gets RS = TRS + ORS with `adding_replicas` = AR and `removing_replicas` = RR
  (persisted first, so a new controller resumes it). Every broker watches the topic znode: the
  adding replicas create their logs and follow the leader, the leader counts them as followers.
- A: the adding replicas catch up; the leader adds each to the ISR once it reached the high
  watermark (its ordinary ISR expansion).
- B (TRS is in the ISR): a leader outside TRS (or dead) is replaced by the first live TRS member
  of the ISR, and the ISR shrinks to TRS, in one partition-state write with a new leader epoch
  (Kafka's steps B3 and B4); then the topic znode gets RS = TRS and empty AR and RR (B6), and the
  partition leaves the request (B7). A broker that is no longer in RS stops its replica and
  deletes its log (StopReplica with delete), also when it comes back later with a stray copy.

Kafka bumps the leader epoch in phase A too, because its brokers learn a new replica set only from
a LeaderAndIsr request; the own broker's replicas read it from the topic znode's watch, so
nothing needs a new epoch until phase B changes the leader or the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from broker.partition_state import Key, LeaderAndIsr


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's replica set as the topic znode holds it, with a reassignment in progress."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def original(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)


def begin(current: ReplicaAssignment, target: tuple[int, ...]) -> ReplicaAssignment:
    """Phase U: RS = TRS + (ORS - TRS), AR = TRS - ORS, RR = ORS - TRS. A reassignment that is
    already under way is supplanted: its original replicas stay the original ones (Kafka)."""
    original = current.original
    adding = tuple(r for r in target if r not in original)
    removing = tuple(r for r in original if r not in target)
    if not adding and not removing:
        return ReplicaAssignment(target)  # only the order changes (or nothing): done at once
    return ReplicaAssignment((*target, *removing), adding, removing)


def complete(current: ReplicaAssignment) -> ReplicaAssignment:
    """Phase B6: RS = TRS, AR = RR = []."""
    return ReplicaAssignment(current.target)


@dataclass(frozen=True, slots=True)
class WriteAssignment:
    """Write the topic znode with the partition's new assignment."""

    partition: Key
    assignment: ReplicaAssignment


@dataclass(frozen=True, slots=True)
class StartReassignment(WriteAssignment):
    """Phase U: the assignment with the adding and removing replicas (`begin`)."""


@dataclass(frozen=True, slots=True)
class MoveLeadershipAndShrinkIsr:
    """Phase B3+B4: compare-and-set the partition state with `state`: its leader (the same or a
    TRS member) in a new leader epoch, and the ISR (and ELR) cut to the target replicas."""

    partition: Key
    previous_leader: int
    state: LeaderAndIsr


@dataclass(frozen=True, slots=True)
class CompleteReassignment(WriteAssignment):
    """Phase B6 and B7: the assignment gets RS = TRS (`complete`), and the partition leaves the
    request."""


@dataclass(frozen=True, slots=True)
class DropRequest:
    """An entry of /admin/reassign_partitions that cannot be carried out (or is already done)."""

    partition: Key
    reason: str


ReassignmentAction = StartReassignment | MoveLeadershipAndShrinkIsr | CompleteReassignment | DropRequest


def parse_request(info: Any) -> tuple[dict[Key, tuple[int, ...]], list[str]]:
    """The targets of a /admin/reassign_partitions document, and what was malformed in it."""
    targets: dict[Key, tuple[int, ...]] = {}
    problems: list[str] = []
    entries = info.get("partitions") if isinstance(info, dict) else None
    if not isinstance(entries, list):
        return targets, ["no 'partitions' list"] if info is not None else []
    for entry in entries:
        try:
            key = (str(entry["topic"]), int(entry["partition"]))
            replicas = tuple(int(b) for b in entry["replicas"])
        except (KeyError, TypeError, ValueError):
            problems.append(f"malformed entry {entry!r}")
            continue
        targets[key] = replicas
    return targets, problems


def encode_request(targets: Mapping[Key, tuple[int, ...]]) -> dict[str, Any]:
    return {
        "version": 1,
        "partitions": [
            {"topic": topic, "partition": index, "replicas": list(replicas)}
            for (topic, index), replicas in sorted(targets.items())
        ],
    }


def plan(
    *,
    requested: Mapping[Key, tuple[int, ...]],
    assignments: Mapping[Key, ReplicaAssignment],
    states: Mapping[Key, LeaderAndIsr],
    live: Collection[int],
) -> list[ReassignmentAction]:
    """Level-triggered: the next step of every requested or unfinished reassignment.

    `requested`: the entries of /admin/reassign_partitions; `assignments`: every partition's
    assignment in its topic znode; `states`: the partition states; `live`: registered brokers.
    """
    actions: list[ReassignmentAction] = []
    # A target broker must be one the cluster knows: registered now, or holding replicas (a broker
    # that is down for a while is waited for, as Kafka's controller waits for a dead new replica).
    known = set(live) | {b for a in assignments.values() for b in a.replicas}
    for key, target in sorted(requested.items()):
        current = assignments.get(key)
        if current is None:
            actions.append(DropRequest(key, "no such partition"))
            continue
        why = _invalid_target(target, known)
        if why is not None and current.target != target:
            actions.append(DropRequest(key, why))
            continue
        if current.target != target or (not current.reassigning and current.replicas != target):
            actions.append(StartReassignment(key, begin(current, target)))
    for key, current in sorted(assignments.items()):
        started = requested.get(key) is not None and requested[key] != current.target
        if started:
            continue  # its phase U is written first; the next pass goes on
        if not current.reassigning:
            if key in requested:
                actions.append(DropRequest(key, "done"))
            continue
        step = _next_step(key, current, states.get(key), live)
        if step is not None:
            actions.append(step)
    return actions


def _invalid_target(target: tuple[int, ...], known: Collection[int]) -> str | None:
    if not target:
        return "an empty replica list"
    if len(set(target)) != len(target):
        return f"replicas {list(target)} name a broker twice"
    absent = [b for b in target if b not in known]
    if absent:
        return f"brokers {absent} are unknown (neither registered nor holding replicas)"
    return None


def _next_step(
    key: Key, current: ReplicaAssignment, state: LeaderAndIsr | None, live: Collection[int]
) -> ReassignmentAction | None:
    target = current.target
    if state is None or not set(target) <= set(state.isr):
        return None  # phase A: the adding replicas are still catching up
    leader = state.leader
    if leader not in target or leader not in live:
        leader = next((r for r in target if r in state.isr and r in live), -1)
        if leader < 0:
            return None  # no live target replica in the ISR: wait for one to come back
    isr = tuple(r for r in state.isr if r in target)
    if leader != state.leader or isr != state.isr:
        elr = tuple(r for r in state.elr if r in isr)
        moved = LeaderAndIsr(leader, state.leader_epoch + 1, isr, state.zk_version, elr)
        return MoveLeadershipAndShrinkIsr(key, state.leader, moved)
    return CompleteReassignment(key, complete(current))
