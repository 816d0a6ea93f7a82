"""The simulated cluster's small records: a broker process's state, a request in flight, an
acknowledgement, a fired fault step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from broker.follower import FollowerReplica, ReplicaView
from broker.partition_state import PartitionState
from broker.replication import PartitionReplica
from explore.log import SimLog
from explore.schedule import Step


@dataclass(slots=True)
class Acked:
    value: int
    offset: int
    at_ms: float


@dataclass(slots=True)
class FiredStep:
    """A schedule step as it happened: when, on which nodes, in words."""

    step: Step
    at_ms: float
    nodes: list[str]
    text: str


@dataclass(eq=False)
class Waiter:
    last_offset: int
    reply: Callable[[int, int], None]
    base_offset: int


@dataclass(eq=False)
class Parked:
    replica_id: int
    fetch_offset: int
    respond: Callable[[], None]
    done: bool = False


class Pending:
    """One request in flight: the first of its answer and its timeout wins."""

    __slots__ = ("done", "on_answer", "on_timeout")

    def __init__(self) -> None:
        self.done = False
        self.on_answer: Callable[..., None] = lambda *a: None
        self.on_timeout: Callable[[], None] = lambda: None

    def answer(self, *answer: Any) -> None:
        if not self.done:
            self.done = True
            self.on_answer(*answer)

    def timeout(self) -> None:
        if not self.done:
            self.done = True
            self.on_timeout()


@dataclass(eq=False)
class SimBroker:
    """One broker of the simulation: its process state, log, replication state and requests."""

    id: int
    name: str
    log: SimLog
    replica: PartitionReplica
    up: bool = True
    paused: bool = False
    incarnation: int = 0
    clock_offset_ms: float = 0.0
    state: PartitionState | None = None
    follower: FollowerReplica | None = None
    fetch_gen: int = 0
    hw_checkpoint: int = 0
    waiters: list[Waiter] = field(default_factory=list)
    parked: list[Parked] = field(default_factory=list)
    held: list[tuple[Callable[..., None], tuple[Any, ...]]] = field(default_factory=list)
    tick_gen: int = 0
    view: ReplicaView = field(init=False)
    pending: Pending | None = None
    pending_deadline: float = 0.0
    watchdog_armed: bool = False
    watching_from: float = 0.0  # a started broker's watches deliver states from then on
    registered_zxid: int = 0  # when its current registration was made (Kafka's broker epoch)

    def __post_init__(self) -> None:
        self.view = ReplicaView(self)
