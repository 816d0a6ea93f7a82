"""The confluent-kafka driver (librdkafka).

Error mapping for `send` (the history's rule: `fail` only when the write certainly did not happen):

| what happened | outcome |
|---|---|
| the delivery report has no error | `ok` with its offset |
| `produce()` raised (local queue full, unknown partition, bad config): the message was never queued | `fail` |
| delivery report `_PURGE_QUEUE` (purged before it was ever sent) | `fail` |
| delivery report with a definite broker error (`base.DEFINITE_PRODUCE_ERRORS`: NOT_ENOUGH_REPLICAS, INVALID_REQUIRED_ACKS, MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TOPIC_EXCEPTION, INVALID_TIMESTAMP, topic/cluster authorisation, unsupported version/format) when the producer does not retry (`retries = 0`) | `fail` |
| the same definite broker error when the producer retries | `info` |
| anything else: `_MSG_TIMED_OUT`, `_TRANSPORT`, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_FOR_PARTITION, `_PURGE_INFLIGHT`, fatal idempotence errors, no report within the wait (the test's `op_timeout`, or the message timeout + 5 s) | `info` |

Why the retries rule differs from kafka-python's driver: librdkafka retries a message after a
request timeout or a lost connection (the message is then "possibly persisted") and its delivery
report only carries the last attempt's error. librdkafka tracks the persistence status
(`rd_kafka_message_status`) but the Python binding does not expose it, so with retries a
definite last error cannot prove that no earlier attempt was appended.

Group consumers (`--consume subscribe`): a commit the coordinator refused as a whole
(ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS, librdkafka's _ASSIGNMENT_LOST) or a
per-partition error of that kind is `fail`; a timeout, a lost connection or anything else is
`info`. Rebalance callbacks (`on_assign`, `on_revoke`, `on_lost`) are recorded for the workload to
journal; librdkafka applies the assignment itself after `on_assign` returns.

Consumers: errors inside `consume()` results that are not fatal (a broker went away, partition
EOF) are logged and skipped, since librdkafka recovers from them itself; a fatal error or an
exception maps to `ClientError(definite=False)`.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from foundation.config import TestConfig, delivery_timeout_ms
from workloads.clients import base

log = logging.getLogger(__name__)
# librdkafka's own log lines (`%3|...|FAIL|rdkafka#producer-1| ... Connect to ... failed`) go to
# this logger, so to harness.log, instead of the process's stderr: hundreds of them during kills.
# (A client serves them from its poll/flush calls, in the thread that polls.)
LIBRDKAFKA_LOG = logging.getLogger("confluent_kafka.librdkafka")

# A workload's consumers fetch ahead this much per partition: a poll takes at most
# workloads.queue.MAX_POLL_RECORDS, and whatever librdkafka fetches ahead the brokers serve and the
# controller decodes (fetching 1,000 messages ahead cost a third of the run's acknowledged sends).
PREFETCH_MESSAGES = 50
PREFETCH_BYTES = 8 * 1024
# The final drain's consumers read whole partitions as fast as they can.
BULK_PREFETCH_MESSAGES = 1000
BULK_PREFETCH_BYTES = 64 * 1024
# Once a partition's queue holds queued.min.messages, librdkafka fetches it again only after this
# (its default: 1 s). The drain empties its queue in milliseconds and then waited out the rest of the
# second with an empty poll: half of a 30 s run's drain.
BULK_FETCH_QUEUE_BACKOFF_MS = 10
# Local errors reported for messages that never left the client.
NEVER_SENT_ERRORS = frozenset({KafkaError._PURGE_QUEUE})


def classify_delivery_error(code: int, retries: int) -> base.OutcomeType:
    """`fail` or `info` for a delivery report carrying this error code."""
    if code in NEVER_SENT_ERRORS:
        return "fail"
    if code in base.DEFINITE_PRODUCE_ERRORS and retries == 0:
        return "fail"
    return "info"


def _error_text(err: Any) -> str:
    if isinstance(err, KafkaError):
        return f"{err.name()}: {err.str()}"
    return str(err)


def producer_settings(config: TestConfig, bootstrap: list[str]) -> dict[str, Any]:
    """librdkafka producer settings from the test: acks, retries, idempotence, timeouts."""
    request_ms = config.request_timeout_ms
    return {
        "bootstrap.servers": ",".join(bootstrap),
        "acks": config.acks,
        "enable.idempotence": config.idempotence,
        "retries": config.retries,
        "request.timeout.ms": request_ms,
        "message.timeout.ms": delivery_timeout_ms(config),
        "socket.timeout.ms": max(request_ms, 10),
        "linger.ms": 2,
        "retry.backoff.ms": 100,
        "reconnect.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 10000,
        "max.in.flight.requests.per.connection": 5,
        "error_cb": _log_error,
        "logger": LIBRDKAFKA_LOG,
    }


def _log_error(err: KafkaError) -> None:
    log.debug("librdkafka: %s", _error_text(err))


class _Delivery:
    """The delivery report of one message, handed from the callback to the waiting thread."""

    __slots__ = ("done", "error", "offset")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: KafkaError | None = None
        self.offset: int | None = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        self.error = err
        if err is None:
            self.offset = msg.offset()
        self.done.set()


class ConfluentProducer:
    def __init__(self, config: TestConfig, bootstrap: list[str], extra: dict[str, Any] | None = None):
        settings = {**producer_settings(config, bootstrap), **(extra or {})}
        self._retries = config.retries
        self._wait_s = base.send_wait_s(settings["message.timeout.ms"], config.op_timeout)
        self._op_timeout = config.op_timeout
        # librdkafka's fatal error (e.g. "Idempotent producer not supported by any of the 3
        # connected broker(s)"): later sends only say _FATAL, so their error names it
        self._fatal: str | None = None
        settings["error_cb"] = self._on_error
        try:
            self._producer = confluent_kafka.Producer(settings)
        except (KafkaException, ValueError) as e:
            raise base.ClientError(base.describe(e), definite=True) from e
        # One thread serves delivery callbacks, so every sender (the producer may be shared) just
        # waits on its own report.
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._serve_callbacks, name="confluent-poll", daemon=True)
        self._poller.start()

    def _serve_callbacks(self) -> None:
        while not self._closing.is_set():
            try:
                self._producer.poll(0.1)
            except KafkaException as e:  # a fatal error surfaces here too
                self._on_error(e.args[0] if e.args else e)
            except Exception as e:
                log.debug("producer poll: %s", e)

    def _on_error(self, err: Any) -> None:
        _log_error(err)
        if isinstance(err, KafkaError) and err.fatal():
            self._fatal = self._fatal or _error_text(err)

    def _with_fatal(self, text: str, code: int | None) -> str:
        """The error, with the fatal error behind it when librdkafka only says _FATAL."""
        return f"{text} ({self._fatal})" if code == KafkaError._FATAL and self._fatal else text

    def send(self, topic: str, partition: int, value: int) -> base.SendOutcome:
        delivery = _Delivery()
        try:
            self._producer.produce(
                topic, value=str(value).encode("ascii"), partition=partition, on_delivery=delivery
            )
        except (BufferError, KafkaException, ValueError, TypeError) as e:
            err = e.args[0] if isinstance(e, KafkaException) and e.args else None
            code = err.code() if isinstance(err, KafkaError) else None
            return base.SendOutcome("fail", error=self._with_fatal(base.describe(e), code))
        if not delivery.done.wait(self._wait_s):
            if self._wait_s == self._op_timeout:
                return base.SendOutcome("info", error=base.op_timeout_error(self._op_timeout))
            return base.SendOutcome("info", error="no delivery report within the wait")
        if delivery.error is None:
            return base.SendOutcome("ok", offset=delivery.offset)
        err = delivery.error
        error = self._with_fatal(_error_text(err), err.code())
        return base.SendOutcome(classify_delivery_error(err.code(), self._retries), error=error)

    def close(self) -> None:
        if self._closing.is_set():
            return
        self._closing.set()
        self._poller.join(timeout=2)
        try:
            self._producer.flush(2)
        except Exception as e:
            log.debug("closing producer: %s", e)
        # librdkafka's handle holds error_cb, a method of this object: a cycle that only the garbage
        # collector breaks, maybe after the cluster is gone (the handle's connections then log
        # "Disconnected ... Connection refused"). Letting go of it here destroys the handle now.
        del self._producer


class ConfluentTxnProducer(ConfluentProducer):
    """One transactional producer (its own transactional.id); `TxnProducer` of
    workloads.clients.base. librdkafka retries a commit or abort itself while it can; what it hands
    back is retriable (the same call again, within the bound), an abortable error (abort, then the
    transaction is `fail`) or fatal (`info`: the producer must be replaced)."""

    def __init__(self, config: TestConfig, bootstrap: list[str], transactional_id: str):
        super().__init__(
            config,
            bootstrap,
            {
                "transactional.id": transactional_id,
                "transaction.timeout.ms": config.transaction_timeout_ms,
                "enable.idempotence": True,
                # librdkafka insists that a record not outlive its transaction
                "message.timeout.ms": min(delivery_timeout_ms(config), config.transaction_timeout_ms),
            },
        )
        self._end_s = base.end_bound_s(config)
        try:
            self._producer.init_transactions(self._end_s)
        except KafkaException as e:
            self.close()
            raise base.ClientError(_error_text(e.args[0]) if e.args else base.describe(e)) from e

    def begin(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as e:
            raise base.ClientError(_error_text(e.args[0]) if e.args else base.describe(e)) from e

    def _end(self, commit: bool) -> tuple[base.OutcomeType, str | None]:
        def attempt(left: float) -> tuple[base.OutcomeType, str | None] | None:
            try:
                if commit:
                    self._producer.commit_transaction(left)
                    return "ok", None
                self._producer.abort_transaction(left)
                return "fail", None
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if not isinstance(err, KafkaError) or err.fatal():
                    return "info", _error_text(err) if err is not None else base.describe(e)
                if err.txn_requires_abort() and commit:
                    outcome, error = self._end(commit=False)
                    return outcome, f"{_error_text(err)}; aborted" if outcome == "fail" else error
                if not err.retriable():
                    return "info", _error_text(err)
                return None  # retriable: the same call again

        return base.end_within(self._end_s, commit, attempt)

    def commit(self) -> tuple[base.OutcomeType, str | None]:
        return self._end(commit=True)

    def abort(self) -> tuple[base.OutcomeType, str | None]:
        return self._end(commit=False)


def _consume(consumer: Any, timeout_s: float, max_records: int) -> list[base.Record]:
    try:
        # consume() waits for all `num_messages` or the timeout: take what is buffered first,
        # and wait (for one message at most) only when nothing is.
        messages = consumer.consume(num_messages=max_records, timeout=0)
        if not messages:
            messages = consumer.consume(num_messages=1, timeout=timeout_s)
            if messages and max_records > 1:
                messages += consumer.consume(num_messages=max_records - 1, timeout=0)
    except Exception as e:
        raise base.ClientError(base.describe(e)) from e
    records: list[base.Record] = []
    for m in messages:
        err = m.error()
        if err is not None:
            if err.fatal():
                raise base.ClientError(_error_text(err))
            log.debug("consumer: %s", _error_text(err))
            continue
        records.append(
            base.Record(
                str(m.topic()), int(m.partition() or 0), int(m.offset() or 0), base.decode_value(m.value())
            )
        )
    return records


def _consumer(
    config: TestConfig,
    bootstrap: list[str],
    group: str,
    extra: dict[str, Any] | None = None,
    read_committed: bool = False,
) -> Any:
    """A librdkafka consumer with the settings both kinds of consumer share, plus `extra`."""
    try:
        return confluent_kafka.Consumer(
            {
                "bootstrap.servers": ",".join(bootstrap),
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "enable.partition.eof": False,
                "isolation.level": base.isolation_level(read_committed),
                "fetch.wait.max.ms": 100,
                # Prefetch little: an assign discards what was fetched ahead, and librdkafka's
                # default (100,000 messages) re-fetches a whole partition after each one.
                "queued.min.messages": PREFETCH_MESSAGES,
                "max.partition.fetch.bytes": PREFETCH_BYTES,
                "socket.timeout.ms": max(config.request_timeout_ms, 1000),
                "reconnect.backoff.max.ms": 1000,
                "topic.metadata.refresh.interval.ms": 10000,
                "error_cb": _log_error,
                "logger": LIBRDKAFKA_LOG,
                **(extra or {}),
            }
        )
    except (KafkaException, ValueError) as e:
        raise base.ClientError(base.describe(e), definite=True) from e


def _positions(consumer: Any, assigned: list[base.TopicPartition]) -> dict[base.TopicPartition, int]:
    """The consumer's positions on `assigned` (the next offset each poll would return)."""
    if not assigned:
        return {}
    try:
        tps = consumer.position([confluent_kafka.TopicPartition(t, p) for t, p in assigned])
    except Exception as e:
        log.debug("positions unknown: %s", e)
        return {}
    return {(str(tp.topic), int(tp.partition)): int(tp.offset) for tp in tps if tp.offset >= 0}


class ConfluentConsumer(base.ConsumerEnds):
    def __init__(
        self, config: TestConfig, bootstrap: list[str], bulk: bool = False, read_committed: bool = False
    ):
        # librdkafka insists on a group id; assign() never joins the group.
        ahead = {
            "queued.min.messages": BULK_PREFETCH_MESSAGES,
            "max.partition.fetch.bytes": BULK_PREFETCH_BYTES,
            "fetch.queue.backoff.ms": BULK_FETCH_QUEUE_BACKOFF_MS,
        }
        super().__init__(
            read_committed,
            _consumer(config, bootstrap, "strandline-assign-only", ahead if bulk else None, read_committed),
            _ends,
            lambda: _consumer(
                config, bootstrap, "strandline-assign-only", {"isolation.level": "read_uncommitted"}
            ),
        )
        self._assigned: list[base.TopicPartition] = []
        # A fresh consumer's first lookup also connects and reads metadata: as long as a commit may take.
        self._timeout_s = 2 * max(config.request_timeout_ms, 1000) / 1000

    def assign(
        self, partitions: list[base.TopicPartition], positions: dict[base.TopicPartition, int] | None
    ) -> None:
        try:
            tps = [confluent_kafka.TopicPartition(t, p, self._start(t, p, positions)) for t, p in partitions]
            self._consumer.assign(tps)
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e
        self._assigned = list(partitions)

    def _start(self, topic: str, partition: int, positions: dict[base.TopicPartition, int] | None) -> int:
        """Where to start: the given position, or the log start offset asked now.

        Not librdkafka's logical OFFSET_BEGINNING: that is resolved later, asynchronously, and under
        load a lookup of an earlier assign was seen to land after a newer assign had set an explicit
        position, moving the consumer back to offset 0 in the middle of its reads.
        """
        offset = (positions or {}).get((topic, partition))
        if offset is not None:
            return offset
        low, _high = self._consumer.get_watermark_offsets(
            confluent_kafka.TopicPartition(topic, partition), timeout=self._timeout_s, cached=False
        )
        return int(low) if low >= 0 else confluent_kafka.OFFSET_BEGINNING

    def poll(self, timeout_s: float, max_records: int) -> list[base.Record]:
        return _consume(self._consumer, timeout_s, max_records)

    def positions(self) -> dict[base.TopicPartition, int]:
        return _positions(self._consumer, self._assigned)


def _ends(
    consumer: Any, partitions: list[base.TopicPartition], timeout_s: float
) -> dict[base.TopicPartition, int]:
    """The end offsets (ListOffsets latest, at the consumer's isolation level) of the partitions."""
    result: dict[base.TopicPartition, int] = {}
    for t, p in partitions:
        try:
            _low, high = consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(t, p), timeout=timeout_s, cached=False
            )
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e
        result[(t, p)] = int(high)
    return result


# Errors with which the coordinator refuses a commit: nothing was stored.
REFUSED_COMMIT_ERRORS = frozenset(
    {
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError._ASSIGNMENT_LOST,
    }
)


def _tps(partitions: Any) -> tuple[base.TopicPartition, ...]:
    return tuple(sorted((str(tp.topic), int(tp.partition)) for tp in partitions))


class ConfluentGroupConsumer(base.RebalanceRecorder):
    def __init__(self, config: TestConfig, bootstrap: list[str], group: str):
        super().__init__()
        self._consumer = _consumer(config, bootstrap, group, base.MEMBERSHIP)
        self._assigned: list[base.TopicPartition] = []

    def _on_assign(self, _consumer: Any, partitions: Any) -> None:
        self._events.append(base.RebalanceEvent("assigned", _tps(partitions)))
        self._assigned = sorted(set(self._assigned) | set(_tps(partitions)))

    def _on_revoke(self, _consumer: Any, partitions: Any) -> None:
        self._events.append(base.RebalanceEvent("revoked", _tps(partitions)))
        self._assigned = sorted(set(self._assigned) - set(_tps(partitions)))

    def subscribe(self, topics: list[str]) -> None:
        try:
            self._consumer.subscribe(
                topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
            )
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e

    def poll(self, timeout_s: float, max_records: int) -> list[base.Record]:
        return _consume(self._consumer, timeout_s, max_records)

    def consumed_positions(self) -> dict[base.TopicPartition, int]:
        return _positions(self._consumer, self._assigned)

    def commit(self, offsets: dict[base.TopicPartition, int]) -> None:
        tps = [confluent_kafka.TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        try:
            result = self._consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            refused = isinstance(err, KafkaError) and err.code() in REFUSED_COMMIT_ERRORS
            raise base.ClientError(
                _error_text(err) if err is not None else base.describe(e), definite=refused
            ) from e
        except Exception as e:
            raise base.ClientError(base.describe(e)) from e
        errors = [tp.error for tp in result or [] if tp.error is not None]
        if errors:
            refused = all(err.code() in REFUSED_COMMIT_ERRORS for err in errors)
            raise base.ClientError(_error_text(errors[0]), definite=refused)

    def close(self) -> None:
        base.close_consumers(self._consumer)


LIBRARY = base.Library(
    "confluent-kafka", ConfluentProducer, ConfluentConsumer, ConfluentGroupConsumer, ConfluentTxnProducer
)
