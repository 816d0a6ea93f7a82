"""The queue workload's operation generator: seeded, reproducible, one stream per client slot.

Jepsen's Kafka queue workload mixes sends of unique integers, polls, and (re)assignments of a random
set of partitions. Here each of `concurrency` slots draws its operations from its own
`random.Random` seeded by (test seed, slot), so the sequence a slot issues depends only on the seed
and on the crashes it was told about: the same seed replays the same operations, whatever the
thread interleaving. Values are `slot + concurrency * k`, unique within the test without any
shared counter.

A slot consumes by `assign` (Jepsen's assign mode) or as a member of a consumer group
(`subscribe`): its first operation is then a `subscribe` to every topic, and its mix has a
`commit` of what it polled where an assign slot has an assign. `consume = "mixed"` makes every
second slot a group member. The group members of a test are spread over a few groups.

Pacing follows Jepsen's `stagger`: each slot aims at `rate / concurrency` operations per second,
with gaps drawn uniformly from 0 to twice the mean interval.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

TopicPartition = tuple[str, int]
OpKind = Literal["send", "poll", "assign", "subscribe", "commit", "txn"]
Role = Literal["assign", "subscribe"]

# The mix of a slot's operations once it has an assignment.
SEND_WEIGHT = 0.55
POLL_WEIGHT = 0.40
ASSIGN_WEIGHT = 0.05
# Of the assigns, how many seek to the beginning (the rest resume at remembered positions).
SEEK_BEGINNING = 0.2
# At most this many consumer groups per test (members are dealt out to them in turn).
MAX_GROUPS = 3


def role_of(consume: str, slot: int) -> Role:
    """How a slot consumes under the test's `consume` mode."""
    if consume == "mixed":
        return "subscribe" if slot % 2 else "assign"
    return "subscribe" if consume == "subscribe" else "assign"


def group_of(consume: str, concurrency: int, slot: int) -> str:
    """The consumer group of a subscribing slot: `strandline-g0`, `-g1`, ... (about 2+ members each)."""
    members = [s for s in range(concurrency) if role_of(consume, s) == "subscribe"]
    groups = max(1, min(MAX_GROUPS, len(members) // 2))
    return f"strandline-g{members.index(slot) % groups}"


@dataclass(frozen=True)
class Op:
    """One planned operation. `seek` is `beginning` or `position` (resume where this slot read)."""

    kind: OpKind
    topic: str = ""
    partition: int = 0
    value: int = 0
    partitions: tuple[TopicPartition, ...] = ()
    seek: str = ""
    topics: tuple[str, ...] = ()
    # A transaction (workloads.txn_generator): its micro-operations, and whether it is to abort.
    mops: tuple[dict[str, Any], ...] = ()
    abort: bool = False


def topic_partitions(topics: int, partitions: int) -> list[TopicPartition]:
    """Every topic-partition of the test, in a stable order: t0/0, t0/1, ..., t1/0, ..."""
    return [(f"t{t}", p) for t in range(topics) for p in range(partitions)]


@dataclass
class SlotGenerator:
    """The operation stream of one client slot.

    The first operation, and the first after a crash (a new client has no assignment), is an
    assign; the rest follow the mix.
    """

    seed: int
    slot: int
    concurrency: int
    all_partitions: list[TopicPartition]
    role: Role = "assign"
    seed_prefix: ClassVar[str] = "strandline-queue"
    rng: random.Random = field(init=False)
    _sent: int = field(default=0, init=False)
    _assigned: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        # A string seed is hashed with SHA-512 by `random`, stable across runs and platforms.
        self.rng = random.Random(f"{self.seed_prefix}:{self.seed}:{self.slot}")

    def crashed(self) -> None:
        """The slot's client was replaced: its next poll must be preceded by an assign (or subscribe)."""
        self._assigned = False

    def resume(self, incarnation: int, sends: int) -> None:
        """Go on after a crash killed the slot's worker: new random choices, values not used yet."""
        self.rng = random.Random(f"{self.seed_prefix}:{self.seed}:{self.slot}:{incarnation}")
        self._sent = sends
        self._assigned = False

    @property
    def subscribed(self) -> bool:
        """A group member whose next op is not its subscribe."""
        return self.role == "subscribe" and self._assigned

    def next_value(self) -> int:
        value = self.slot + self.concurrency * self._sent
        self._sent += 1
        return value

    def next_op(self) -> Op:
        if not self._assigned:
            if self.role == "subscribe":
                self._assigned = True
                return Op("subscribe", topics=tuple(sorted({t for t, _ in self.all_partitions})))
            return self._assign(first=True)
        r = self.rng.random()
        if r < SEND_WEIGHT:
            topic, partition = self.rng.choice(self.all_partitions)
            return Op("send", topic=topic, partition=partition, value=self.next_value())
        if r < SEND_WEIGHT + POLL_WEIGHT:
            return Op("poll")
        if self.role == "subscribe":
            return Op("commit")
        return self._assign(first=False)

    def _assign(self, first: bool) -> Op:
        count = self.rng.randint(1, len(self.all_partitions))
        chosen = sorted(self.rng.sample(self.all_partitions, count))
        seek = "beginning" if first or self.rng.random() < SEEK_BEGINNING else "position"
        self._assigned = True
        return Op("assign", partitions=tuple(chosen), seek=seek)

    def next_delay(self, rate: float) -> float:
        """Seconds until this slot's next operation should start (0 .. 2 x the mean interval)."""
        mean = self.concurrency / rate
        return self.rng.uniform(0, 2 * mean)


def slot_generators(
    seed: int, concurrency: int, topics: int, partitions: int, consume: str = "assign"
) -> list[SlotGenerator]:
    tps = topic_partitions(topics, partitions)
    return [
        SlotGenerator(seed, slot, concurrency, tps, role_of(consume, slot)) for slot in range(concurrency)
    ]
