"""The small interface every client driver implements, and the outcome of one operation.

A driver turns a library's behaviour into the history's three outcomes. The rule is the
history contract's: `ok` when the operation happened, `fail` only when it certainly did not
happen, `info` for everything else. A driver never lets a library exception escape `send`; it
returns a `SendOutcome`. Consumers raise `ClientError`, whose `definite` flag says whether the
operation certainly had no effect.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from kio.schema.errors import ErrorCode

from foundation.config import TestConfig, delivery_timeout_ms

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
OutcomeType = Literal["ok", "fail", "info"]


@dataclass(frozen=True)
class SendOutcome:
    """What became of one send: `offset` on ok, `error` (text) on fail and info."""

    type: OutcomeType
    offset: int | None = None
    error: str | None = None


class Record(NamedTuple):
    """One record a consumer returned; `value` is the decoded integer (or the raw text if not one)."""

    topic: str
    partition: int
    offset: int
    value: int | str | None


def records_json(records: list[Record]) -> list[dict[str, Any]]:
    """Records as an operation's history entry holds them."""
    return [
        {"topic": r.topic, "partition": r.partition, "offset": r.offset, "value": r.value} for r in records
    ]


class ClientError(Exception):
    """A consumer-side operation failed; `definite` is True when it certainly had no effect."""

    def __init__(self, error: str, definite: bool = False):
        super().__init__(error)
        self.error = error
        self.definite = definite


def decode_value(raw: bytes | None) -> int | str | None:
    """Values travel as ASCII decimal; anything else is kept as text so the checker can name it."""
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


# The errors a broker answers a produce with before it appends anything (Kafka's produce path
# checks these first), as Kafka's error codes: both libraries report broker errors by these numbers
# (librdkafka's KafkaError.code(), kafka-python's error classes' `errno`).
DEFINITE_PRODUCE_ERRORS = frozenset(
    int(code)
    for code in (
        ErrorCode.not_enough_replicas,
        ErrorCode.invalid_required_acks,
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.corrupt_message,
        ErrorCode.invalid_record,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_timestamp,
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.unsupported_for_message_format,
        ErrorCode.unsupported_version,
    )
)


def describe(e: BaseException) -> str:
    """One line naming the error class and its message, for the history's `error` field."""
    text = str(e)
    name = type(e).__name__
    return f"{name}: {text}" if text and text != name else name


def op_timeout_error(seconds: float) -> str:
    """The `error` of a send that outlived the test's operation timeout (`op_timeout`)."""
    return f"no acknowledgement within the operation timeout ({seconds:g} s)"


def send_wait_s(delivery_bound_ms: float, op_timeout: float) -> float:
    """How long a sender waits for one acknowledgement: the library's own bound on a send plus
    5 s, or the test's `op_timeout` when it is set and shorter (then a send that outlives the wait
    is `info` with `op_timeout_error`)."""
    library_s = delivery_bound_ms / 1000 + 5
    return op_timeout if 0 < op_timeout < library_s else library_s


def end_bound_s(config: TestConfig) -> float:
    """How long a transaction's commit or abort may take: as long as a send may (every attempt a
    request timeout), plus 5 s."""
    return delivery_timeout_ms(config) / 1000 + 4


# One attempt at ending a transaction, given the seconds left: its outcome, or None to try again.
EndAttempt = Callable[[float], "tuple[OutcomeType, str | None] | None"]


def end_within(end_s: float, commit: bool, attempt: EndAttempt) -> tuple[OutcomeType, str | None]:
    """A transaction's commit or abort, attempted until it has an outcome or `end_s` passes (then
    `info`): both drivers' producers may be asked the same call again after a retriable error."""
    deadline = time.monotonic() + end_s
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "info", f"no answer to {'commit' if commit else 'abort'} within {end_s:g} s"
        outcome = attempt(left)
        if outcome is not None:
            return outcome


def isolation_level(read_committed: bool) -> str:
    """A consumer's isolation level, in the words the libraries take. The workload says which
    (`workloads.workload.Workload.reads_committed`: the txn workload's consumers and its drain)."""
    return "read_committed" if read_committed else "read_uncommitted"


class Producer(Protocol):
    def send(self, topic: str, partition: int, value: int) -> SendOutcome:
        """Send one value and wait for its acknowledgement; never raises."""
        ...

    def close(self) -> None: ...


class TxnProducer(Protocol):
    """A transactional producer (`--workload txn`), one transaction at a time.

    `send` inside a transaction waits for the record's acknowledgement; `commit` answers `ok`
    (committed), `fail` (aborted instead, certainly) or `info` (unknown); `abort` answers `fail`
    (aborted) or `info`; both with the error as text. After `info` the producer is unusable and
    is replaced (a new instance with the same transactional.id fences it)."""

    def begin(self) -> None: ...

    def send(self, topic: str, partition: int, value: int) -> SendOutcome: ...

    def commit(self) -> tuple[OutcomeType, str | None]: ...

    def abort(self) -> tuple[OutcomeType, str | None]: ...

    def close(self) -> None: ...


class Consumer(Protocol):
    def assign(self, partitions: list[TopicPartition], positions: dict[TopicPartition, int] | None) -> None:
        """Assign exactly these partitions; seek each to `positions[tp]`, or to the beginning."""
        ...

    def poll(self, timeout_s: float, max_records: int) -> list[Record]: ...

    def positions(self) -> dict[TopicPartition, int]:
        """The next offset each assigned partition will read (local knowledge, no I/O when known)."""
        ...

    def end_offsets(self, partitions: list[TopicPartition], timeout_s: float) -> dict[TopicPartition, int]:
        """Each partition's end as the cluster reports it now for this consumer: the high watermark,
        or for a read_committed consumer (`--workload txn`) the last stable offset."""
        ...

    def high_watermarks(
        self, partitions: list[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, int]:
        """Each partition's high watermark, whatever the consumer's isolation level."""
        ...

    def close(self) -> None: ...


# A library's end-offsets request: (its consumer, partitions, timeout in s) -> each partition's end.
EndsOf = Callable[[Any, list[TopicPartition], float], dict[TopicPartition, int]]


class ConsumerEnds:
    """Both drivers' partition ends: `end_offsets` at the consumer's isolation level, and
    `high_watermarks`, which for a read_committed consumer come from a read_uncommitted probe made
    on first use (the consumer's own ends are then last stable offsets). `close` closes both."""

    def __init__(self, read_committed: bool, consumer: Any, ends_of: EndsOf, make_probe: Callable[[], Any]):
        self._read_committed = read_committed
        self._consumer = consumer
        self._ends_of = ends_of
        self._make_probe = make_probe
        self._probe: Any = None

    def end_offsets(self, partitions: list[TopicPartition], timeout_s: float) -> dict[TopicPartition, int]:
        return self._ends_of(self._consumer, partitions, timeout_s)

    def high_watermarks(
        self, partitions: list[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, int]:
        if not self._read_committed:
            return self.end_offsets(partitions, timeout_s)
        if self._probe is None:
            self._probe = self._make_probe()
        return self._ends_of(self._probe, partitions, timeout_s)

    def close(self) -> None:
        close_consumers(self._consumer, self._probe)


@dataclass(frozen=True)
class RebalanceEvent:
    """What one rebalance callback told a group member: partitions `revoked` or `assigned`."""

    kind: Literal["revoked", "assigned"]
    partitions: tuple[TopicPartition, ...]


class RebalanceRecorder:
    """What a group member's rebalance callbacks said, kept until `rebalances()` takes it (the
    callbacks run inside the library's poll; the workload journals them after it)."""

    def __init__(self) -> None:
        self._events: list[RebalanceEvent] = []

    def rebalances(self) -> list[RebalanceEvent]:
        events, self._events[:] = list(self._events), []
        return events


class GroupConsumer(Protocol):
    """A member of a consumer group: subscribes, polls, commits; the library assigns partitions.

    The library's own automatic commits are off: every commit is one the workload makes (and
    journals) itself. Rebalance callbacks run inside `poll`; the member keeps what they said until
    `rebalances()` takes it.
    """

    def subscribe(self, topics: list[str]) -> None: ...

    def poll(self, timeout_s: float, max_records: int) -> list[Record]: ...

    def rebalances(self) -> list[RebalanceEvent]:
        """The rebalance callbacks seen since the last call, in order."""
        ...

    def consumed_positions(self) -> dict[TopicPartition, int]:
        """The next offset of each assigned partition after what polls returned (what the
        library's auto-commit would commit), without I/O; partitions without one are left out."""
        ...

    def commit(self, offsets: dict[TopicPartition, int]) -> None:
        """Commit synchronously; `ClientError(definite=True)` when the group refused it."""
        ...

    def close(self) -> None: ...


class Driver(Protocol):
    """A Kafka client library: makes producers and consumers configured from the test."""

    name: str

    def producer(self) -> Producer: ...

    def consumer(self, bulk: bool = False) -> Consumer:
        """An assigning consumer; `bulk`: one that reads whole partitions (the final drain), so it
        fetches far ahead, where a workload's consumer fetches little ahead of what it polls."""
        ...

    def group_consumer(self, group: str) -> GroupConsumer: ...

    def txn_producer(self, transactional_id: str) -> TxnProducer:
        """A transactional producer, its transactions initialised (`ClientError` if they cannot be)."""
        ...


@dataclass(frozen=True)
class Library:
    """One client library's client classes, which a `LibraryDriver` builds from the test's config."""

    name: str
    producer: type[Producer]
    consumer: type[Consumer]
    group_consumer: type[GroupConsumer]
    txn_producer: type[TxnProducer]


class LibraryDriver:
    """A `Driver` made of one library's client classes, each built from the test's config;
    `read_committed`: its assigning consumers read committed records only (the workload's)."""

    def __init__(
        self, library: Library, config: TestConfig, bootstrap: list[str], read_committed: bool = False
    ):
        self.library = library
        self.read_committed = read_committed
        self.name = library.name
        self.config = config
        self.bootstrap = bootstrap

    def producer(self) -> Producer:
        return self.library.producer(self.config, self.bootstrap)  # type: ignore[call-arg]  # a class, not the Protocol

    def consumer(self, bulk: bool = False) -> Consumer:
        return self.library.consumer(  # type: ignore[call-arg]  # a class, not the Protocol
            self.config, self.bootstrap, bulk=bulk, read_committed=self.read_committed
        )

    def group_consumer(self, group: str) -> GroupConsumer:
        return self.library.group_consumer(self.config, self.bootstrap, group)  # type: ignore[call-arg]

    def txn_producer(self, transactional_id: str) -> TxnProducer:
        return self.library.txn_producer(self.config, self.bootstrap, transactional_id)  # type: ignore[call-arg]


def close_consumers(*consumers: Any) -> None:
    """Close each library consumer that was made (None: never made); a failing close is logged,
    not raised: the process is done with it either way."""
    for consumer in consumers:
        try:
            if consumer is not None:
                consumer.close()
        except Exception as e:
            log.debug("closing consumer: %s", e)


# Group membership, in Kafka's consumer config names (librdkafka takes them as they are,
# kafka-python with underscores): a member that dies without leaving is noticed after the session
# timeout; a member busy in a long send (up to the delivery timeout) must not be thrown out meanwhile.
MEMBERSHIP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, "max.poll.interval.ms": 60000}
