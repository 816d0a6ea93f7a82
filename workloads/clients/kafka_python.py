"""The kafka-python driver (the default).

Error mapping for `send` (the history's rule: `fail` only when the write certainly did not happen):

| what happened | outcome |
|---|---|
| the acknowledgement arrived (`RecordMetadata`) | `ok` with its offset |
| `send()` raised before the record entered the producer's buffer (metadata not available within `max_block_ms`, closed producer, serialisation) | `fail` |
| the broker answered every attempt of the record's batch with a definite error, i.e. one it returns before appending (`base.DEFINITE_PRODUCE_ERRORS`): NOT_ENOUGH_REPLICAS, INVALID_REQUIRED_ACKS, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TOPIC, INVALID_TIMESTAMP, topic/cluster authorisation, unsupported version/format | `fail` |
| any attempt of the batch ended ambiguously (connection lost, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER — Kafka also returns it for a record already appended when leadership moved while waiting for acks=all —, KAFKA_STORAGE_ERROR, UNKNOWN_SERVER_ERROR, sequence errors, the batch expiring in flight or in the buffer), then whatever the final error | `info` |
| our own wait for the future timed out (the test's `op_timeout`, or the delivery timeout + 5 s), or anything unexpected | `info` |

kafka-python retries retriable errors (NOT_ENOUGH_REPLICAS among them) itself, and its future
only reports the last attempt's error. So that a retried batch whose first attempt timed out is
never called `fail`, the driver records the error of every attempt of every batch by wrapping the
producer's sender (`Sender._dispatch_error`, the single place where kafka-python decides a
failed attempt's fate). If that hook is missing (another kafka-python version), a final definite
error counts as `fail` only when the producer does not retry (`retries = 0`).

Group consumers (`--consume subscribe`): `commit` raising CommitFailedError (the group rebalanced:
the coordinator refused the commit) or any error the coordinator returned for the request itself
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS) is `fail`; a timeout, a lost
connection or anything else is `info`. Rebalance callbacks are recorded for the workload to journal,
and a revocation drops the revoked partitions' positions (`RevokingListener`: kafka-python keeps
them, Kafka's Java consumer does not).
Before each poll a rejoin kafka-python began but no longer drives is requested again
(`finish_dropped_rejoin`: otherwise a group leader whose metadata moved never joins again).

Consumers: `assign` is local to the client (no I/O) and `poll` raising means the consumer's
position is no longer known, so both map any exception to `ClientError(definite=False)`; the
workload journals it as `info` and replaces the process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka import errors as kafka_errors
from kafka.structs import OffsetAndMetadata
from kafka.structs import TopicPartition as KTopicPartition

from foundation.config import TestConfig
from workloads.clients import base
from workloads.clients.kafka_python_settings import producer_settings
from workloads.clients.kafka_python_txn import KafkaPythonTxnProducer

log = logging.getLogger(__name__)

# kafka-python's error classes for base.DEFINITE_PRODUCE_ERRORS.
_DEFINITE_CLASSES: tuple[type[BaseException], ...] = tuple(
    kafka_errors.for_code(code) for code in sorted(base.DEFINITE_PRODUCE_ERRORS)
)

# How much a consumer fetches ahead per partition (polls take at most a few hundred records).
PREFETCH_BYTES = 64 * 1024


def is_definite(error_cls: type[BaseException]) -> bool:
    """Whether one attempt that ended with this error certainly appended nothing."""
    return issubclass(error_cls, _DEFINITE_CLASSES)


def classify_send_error(
    attempt_errors: list[type[BaseException]] | None, final: BaseException, retries: int
) -> base.OutcomeType:
    """`fail` or `info` for a send whose future failed with `final`.

    `attempt_errors` is the error of every attempt of the batch as the sender saw it, or None when
    the attempts could not be observed.
    """
    if not is_definite(type(final)):
        return "info"
    if attempt_errors is None:
        return "fail" if retries == 0 else "info"
    # No attempt at all: the future failed before the record was sent (e.g. the topic's metadata
    # answered with a definite error inside send()), so nothing can have been appended.
    return "fail" if all(is_definite(e) for e in attempt_errors) else "info"


class AttemptLog:
    """The error of every failed attempt, per batch (keyed by the batch's produce future).

    Several client slots share one producer: a batch's errors stay until two prunes have seen its
    future done (prunes run every 1,000 sends), so a prune
    triggered by another slot cannot forget a batch whose sender has not read it yet (which made a
    retried send whose first attempt had timed out look as if every attempt was refused)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._errors: dict[int, tuple[Any, list[type[BaseException]]]] = {}
        self._seen_done: set[int] = set()  # done at the last prune, unread

    def record(self, produce_future: Any, error_cls: type[BaseException]) -> None:
        with self._lock:
            entry = self._errors.get(id(produce_future))
            if entry is None or entry[0] is not produce_future:
                entry = (produce_future, [])
                self._errors[id(produce_future)] = entry
                self._seen_done.discard(id(produce_future))
            entry[1].append(error_cls)

    def errors(self, produce_future: Any) -> list[type[BaseException]]:
        """The batch's attempt errors (kept until pruned: every record of a batch shares its
        future, and the sender of each reads them)."""
        with self._lock:
            entry = self._errors.get(id(produce_future))
            if entry is None or entry[0] is not produce_future:
                return []
            return list(entry[1])

    def prune(self) -> None:
        """Forget batches whose futures were already done at the previous prune."""
        with self._lock:
            done = {k for k, (f, _) in self._errors.items() if getattr(f, "is_done", False)}
            for key in done & self._seen_done:
                del self._errors[key]
            self._seen_done = done - self._seen_done


def _hook_sender(producer: KafkaProducer, attempts: AttemptLog) -> bool:
    sender = getattr(producer, "_sender", None)
    original: Callable[..., Any] | None = getattr(sender, "_dispatch_error", None)
    if sender is None or original is None:
        log.warning("kafka-python sender hook unavailable; definite send errors count only with retries=0")
        return False

    def dispatch_error(batch: Any, exception: BaseException, partition_response: Any) -> Any:
        try:
            attempts.record(batch.produce_future, type(exception))
        except Exception:  # never break the sender thread
            log.exception("recording a produce attempt failed")
        return original(batch, exception, partition_response)

    sender._dispatch_error = dispatch_error
    return True


class KafkaPythonProducer:
    def __init__(self, config: TestConfig, bootstrap: list[str]):
        settings = producer_settings(config, bootstrap)
        self._retries = config.retries
        self._wait_s = base.send_wait_s(settings["delivery_timeout_ms"], config.op_timeout)
        self._op_timeout = config.op_timeout
        self._producer = KafkaProducer(**settings)
        self._attempts = AttemptLog()
        self._observed = _hook_sender(self._producer, self._attempts)
        self._sends = 0

    def send(self, topic: str, partition: int, value: int) -> base.SendOutcome:
        try:
            future = self._producer.send(topic, value=str(value).encode("ascii"), partition=partition)
        except Exception as e:  # raised before the record entered the buffer: nothing was sent
            return base.SendOutcome("fail", error=base.describe(e))
        try:
            metadata = future.get(timeout=self._wait_s)
            return base.SendOutcome("ok", offset=metadata.offset)
        except kafka_errors.KafkaError as e:
            if not future.is_done:  # our own wait timed out
                if self._wait_s == self._op_timeout:
                    return base.SendOutcome("info", error=base.op_timeout_error(self._op_timeout))
                return base.SendOutcome("info", error=base.describe(e))
            attempt_errors = self._attempts.errors(future._produce_future) if self._observed else None
            return base.SendOutcome(
                classify_send_error(attempt_errors, e, self._retries), error=base.describe(e)
            )
        except Exception as e:
            return base.SendOutcome("info", error=base.describe(e))
        finally:
            self._sends += 1
            if self._sends % 1000 == 0:
                self._attempts.prune()

    def close(self) -> None:
        try:
            self._producer.close(timeout=2)
        except Exception as e:
            log.debug("closing producer: %s", e)


def _consumer(
    config: TestConfig, bootstrap: list[str], *, read_committed: bool = False, **settings: Any
) -> KafkaConsumer:
    """A KafkaConsumer with the settings both kinds of consumer share, plus `settings`."""
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        request_timeout_ms=max(config.request_timeout_ms, 1000),
        bootstrap_timeout_ms=max(config.request_timeout_ms, 1000),
        fetch_max_wait_ms=100,
        # Fetch ahead little: an assign discards what was fetched ahead (1 MiB by default).
        max_partition_fetch_bytes=PREFETCH_BYTES,
        retry_backoff_ms=100,
        reconnect_backoff_max_ms=1000,
        metadata_max_age_ms=10000,
        metrics_enabled=False,
        isolation_level=base.isolation_level(read_committed),
        **settings,
    )


def _poll(consumer: KafkaConsumer, timeout_s: float, max_records: int) -> list[base.Record]:
    """One poll of either kind of consumer, its records decoded; an error is a ClientError."""
    try:
        batches = consumer.poll(timeout_ms=int(timeout_s * 1000), max_records=max_records)
    except Exception as e:
        raise base.ClientError(base.describe(e)) from e
    return [
        base.Record(tp.topic, tp.partition, m.offset, base.decode_value(m.value))
        for tp, messages in batches.items()
        for m in messages
    ]


class KafkaPythonConsumer(base.ConsumerEnds):
    def __init__(
        self, config: TestConfig, bootstrap: list[str], bulk: bool = False, read_committed: bool = False
    ):
        # `bulk` changes nothing here: kafka-python fetches inside poll(), never far ahead of it.
        super().__init__(
            read_committed,
            _consumer(config, bootstrap, read_committed=read_committed, group_id=None),
            _ends,
            lambda: _uncommitted_consumer(config, bootstrap),
        )
        self._assigned: list[KTopicPartition] = []

    def assign(
        self, partitions: list[base.TopicPartition], positions: dict[base.TopicPartition, int] | None
    ) -> None:
        try:
            tps = [KTopicPartition(t, p) for t, p in partitions]
            self._consumer.assign(tps)
            self._assigned = tps
            for tp in tps:
                offset = (positions or {}).get((tp.topic, tp.partition))
                if offset is None:
                    self._consumer.seek_to_beginning(tp)
                else:
                    self._consumer.seek(tp, offset)
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e

    def poll(self, timeout_s: float, max_records: int) -> list[base.Record]:
        return _poll(self._consumer, timeout_s, max_records)

    def positions(self) -> dict[base.TopicPartition, int]:
        result: dict[base.TopicPartition, int] = {}
        for tp in self._assigned:
            try:
                position = self._consumer.position(tp, timeout_ms=1000)
            except Exception as e:
                log.debug("position of %s unknown: %s", tp, e)
                continue
            if position is not None:  # None: not known within the timeout (an offset reset pending)
                result[(tp.topic, tp.partition)] = position
        return result


def _uncommitted_consumer(config: TestConfig, bootstrap: list[str]) -> KafkaConsumer:
    """A read_uncommitted consumer, for high watermarks."""
    try:
        return _consumer(config, bootstrap, group_id=None)
    except Exception as e:
        raise base.ClientError(base.describe(e)) from e


def _ends(
    consumer: KafkaConsumer, partitions: list[base.TopicPartition], timeout_s: float
) -> dict[base.TopicPartition, int]:
    """The end offsets (ListOffsets latest, at the consumer's isolation level) of the partitions."""
    try:
        ends = consumer.end_offsets(
            [KTopicPartition(t, p) for t, p in partitions], timeout_ms=int(timeout_s * 1000)
        )
    except Exception as e:
        raise base.ClientError(base.describe(e)) from e
    return {(tp.topic, tp.partition): int(off) for tp, off in ends.items()}


# Errors with which the coordinator refuses a commit as a whole: nothing was stored.
REFUSED_COMMIT_ERRORS: tuple[type[BaseException], ...] = (
    kafka_errors.CommitFailedError,
    kafka_errors.IllegalGenerationError,
    kafka_errors.UnknownMemberIdError,
    kafka_errors.RebalanceInProgressError,
)


class RevokingListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """Records each rebalance callback, and drops the fetch positions of revoked partitions.

    kafka-python 3.0.12 only notifies an eager revocation (`ConsumerCoordinator._on_join_prepare`):
    the partitions keep their state until the next assignment replaces the set, and a partition the
    member gets back keeps its old position (`SubscriptionState.assign_from_subscribed`), so no
    OffsetFetch is sent for it. A member whose rejoin spans generations in which other members
    consumed and committed that partition then resumes from its own stale position, not from the
    group's committed offset, and its next commit moves the group's committed offset back
    (`nonmonotonic-commit`; docs/workloads.md). Kafka's Java consumer empties the assignment when
    it revokes (`ConsumerCoordinator.onJoinPrepare`, EAGER), so every new assignment starts from
    the committed offsets: this listener does the same. Under the cooperative protocol kafka-python
    calls it after the revoked partitions are already gone, and it changes nothing.
    """

    def __init__(self, events: list[base.RebalanceEvent], subscription: Any):
        self.events = events
        self._subscription = subscription

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.events.append(base.RebalanceEvent("revoked", _tps(revoked)))
        forget_positions(self._subscription, revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.events.append(base.RebalanceEvent("assigned", _tps(assigned)))


def forget_positions(subscription: Any, revoked: Any) -> None:
    """Take the revoked partitions out of kafka-python's assignment, positions and all."""
    try:
        gone = set(revoked)
        assigned = list(subscription.assigned_partitions())
        if any(tp in gone for tp in assigned):
            subscription.assign_from_subscribed([tp for tp in assigned if tp not in gone])
    except Exception as e:  # kafka-python internals moved: members may then resume from stale positions
        log.warning("could not drop the positions of revoked partitions %s: %s", sorted(revoked), e)


def finish_dropped_rejoin(coordinator: Any) -> bool:
    """Ask kafka-python again for a rejoin it began but stopped driving; True if it had.

    kafka-python 3.0.12 drives a JoinGroup/SyncGroup only while `need_rejoin()` says so, and leaves
    it in flight when a poll's timeout ends first (`BaseCoordinator.join_group_async`). A leader
    rejoins because its metadata snapshot moved (e.g. it joined before it knew the topic's
    partitions and assigned nothing), and its own assignment inside that rejoin updates the
    snapshot it compares, so `need_rejoin()` turns False while the rejoin is unfinished: later
    polls never apply its assignment nor re-enable heartbeats, the coordinator expires the member,
    and it never joins again. `rejoining` (set when the join began, cleared when it completed)
    still says it is unfinished; requesting the rejoin makes the next poll finish it (the same
    JoinGroup if it is still in flight, a new one otherwise)."""
    try:
        dropped = bool(coordinator.rejoining) and not coordinator.need_rejoin()
        if dropped:
            log.warning(
                "kafka-python stopped driving its rejoin of group %s; asking again", coordinator.group_id
            )
            coordinator.request_rejoin()
        return dropped
    except Exception as e:  # kafka-python internals moved: the member may then hang in a rebalance
        log.warning("could not check kafka-python's rejoin: %s", e)
        return False


def _tps(partitions: Any) -> tuple[base.TopicPartition, ...]:
    return tuple(sorted((tp.topic, tp.partition) for tp in partitions))


class KafkaPythonGroupConsumer(base.RebalanceRecorder):
    def __init__(self, config: TestConfig, bootstrap: list[str], group: str):
        super().__init__()
        membership: dict[str, Any] = {name.replace(".", "_"): v for name, v in base.MEMBERSHIP.items()}
        self._consumer = _consumer(config, bootstrap, group_id=group, **membership)
        self._commit_timeout_ms = 2 * max(config.request_timeout_ms, 1000)

    def subscribe(self, topics: list[str]) -> None:
        try:
            self._consumer.subscribe(
                topics=topics, listener=RevokingListener(self._events, self._consumer._subscription)
            )
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e

    def poll(self, timeout_s: float, max_records: int) -> list[base.Record]:
        finish_dropped_rejoin(self._consumer._coordinator)
        return _poll(self._consumer, timeout_s, max_records)

    def consumed_positions(self) -> dict[base.TopicPartition, int]:
        try:
            consumed = self._consumer._subscription.all_consumed_offsets()
        except Exception as e:  # kafka-python internals moved: no automatic commit then
            log.debug("consumed positions unknown: %s", e)
            return {}
        return {(tp.topic, tp.partition): int(getattr(om, "offset", om)) for tp, om in consumed.items()}

    def commit(self, offsets: dict[base.TopicPartition, int]) -> None:
        try:
            self._consumer.commit(
                {KTopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()},
                timeout_ms=self._commit_timeout_ms,
            )
        except REFUSED_COMMIT_ERRORS as e:
            raise base.ClientError(base.describe(e), definite=True) from e
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e

    def close(self) -> None:
        base.close_consumers(self._consumer)  # auto-commit is off: closing commits nothing


LIBRARY = base.Library(
    "kafka-python", KafkaPythonProducer, KafkaPythonConsumer, KafkaPythonGroupConsumer, KafkaPythonTxnProducer
)
