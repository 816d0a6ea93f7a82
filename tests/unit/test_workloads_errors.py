"""Error mapping of both drivers: `fail` only when the write certainly did not happen."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError
from kafka import errors as E

from foundation.config import TestConfig
from foundation.errors import BadInput
from workloads.clients import confluent, kafka_python
from workloads.clients.base import DEFINITE_PRODUCE_ERRORS, decode_value, describe, op_timeout_error
from workloads.clients.kafka_python import AttemptLog, KafkaPythonProducer, classify_send_error


@pytest.mark.parametrize(
    ("attempts", "final", "retries", "expected"),
    [
        ([E.NotEnoughReplicasError], E.NotEnoughReplicasError(), 5, "fail"),
        ([E.NotEnoughReplicasError] * 3, E.NotEnoughReplicasError(), 5, "fail"),
        # A first attempt that may have been appended makes the final definite error ambiguous.
        ([E.KafkaConnectionError, E.NotEnoughReplicasError], E.NotEnoughReplicasError(), 5, "info"),
        ([E.RequestTimedOutError, E.NotEnoughReplicasError], E.NotEnoughReplicasError(), 5, "info"),
        ([E.NotEnoughReplicasAfterAppendError], E.NotEnoughReplicasAfterAppendError(), 0, "info"),
        ([E.NotLeaderForPartitionError], E.NotLeaderForPartitionError(), 0, "info"),
        ([E.RequestTimedOutError], E.RequestTimedOutError(), 0, "info"),
        ([], E.KafkaTimeoutError("Expiring 1 record(s)"), 5, "info"),
        ([], E.TopicAuthorizationFailedError(), 5, "fail"),
        ([E.MessageSizeTooLargeError], E.MessageSizeTooLargeError(), 5, "fail"),
        ([E.UnknownError], E.UnknownError(), 0, "info"),
        # Attempts not observable: definite only without retries.
        (None, E.NotEnoughReplicasError(), 0, "fail"),
        (None, E.NotEnoughReplicasError(), 3, "info"),
    ],
)
def test_kafka_python_classification(
    attempts: Any, final: BaseException, retries: int, expected: str
) -> None:
    assert classify_send_error(attempts, final, retries) == expected


@pytest.mark.parametrize(
    ("code", "retries", "expected"),
    [
        (KafkaError.NOT_ENOUGH_REPLICAS, 0, "fail"),
        (KafkaError.NOT_ENOUGH_REPLICAS, 5, "info"),
        (KafkaError.MSG_SIZE_TOO_LARGE, 0, "fail"),
        (KafkaError._PURGE_QUEUE, 5, "fail"),
        (KafkaError._PURGE_INFLIGHT, 0, "info"),
        (KafkaError._MSG_TIMED_OUT, 0, "info"),
        (KafkaError._TRANSPORT, 0, "info"),
        (KafkaError.REQUEST_TIMED_OUT, 0, "info"),
        (KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 0, "info"),
        (KafkaError.NOT_LEADER_FOR_PARTITION, 0, "info"),
    ],
)
def test_confluent_classification(code: int, retries: int, expected: str) -> None:
    assert confluent.classify_delivery_error(code, retries) == expected


def test_both_drivers_call_the_same_broker_errors_definite() -> None:
    """One list of Kafka error codes decides for both libraries: a code in it is `fail` for each
    (without retries), and an ambiguous one (NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT,
    NOT_LEADER_OR_FOLLOWER) is `info` for each."""
    assert KafkaError.RECORD_LIST_TOO_LARGE in DEFINITE_PRODUCE_ERRORS
    for code in [*DEFINITE_PRODUCE_ERRORS, 20, 7, 6]:
        definite = code in DEFINITE_PRODUCE_ERRORS
        error_cls = E.for_code(code)
        assert kafka_python.is_definite(error_cls) is definite, error_cls
        expected = "fail" if definite else "info"
        assert classify_send_error([error_cls], error_cls(), 0) == expected
        assert confluent.classify_delivery_error(code, 0) == expected


class _Future:
    """Stands in for kafka-python's FutureRecordMetadata (a unit test of the driver's mapping)."""

    def __init__(self, value: Any = None, error: BaseException | None = None, done: bool = True):
        self.value, self.error, self.is_done = value, error, done
        self._produce_future = object()

    def get(self, timeout: float) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class _StubProducer:
    def __init__(self, outcome: Any):
        self.outcome = outcome

    def send(self, topic: str, value: bytes, partition: int) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


def _producer_with(
    outcome: Any, attempt_errors: list[type[BaseException]] | None = None
) -> KafkaPythonProducer:
    p = KafkaPythonProducer.__new__(KafkaPythonProducer)
    p._retries, p._wait_s, p._sends, p._op_timeout = 5, 1.0, 0, 0.0
    p._attempts = AttemptLog()
    p._observed = True
    p._producer = _StubProducer(outcome)  # type: ignore[assignment]
    if isinstance(outcome, _Future) and attempt_errors:
        for e in attempt_errors:
            p._attempts.record(outcome._produce_future, e)
    return p


def test_kafka_python_send_outcomes() -> None:
    class Meta:
        offset = 41

    assert _producer_with(_Future(Meta())).send("t0", 0, 1).offset == 41
    # Raised by send() itself (metadata never arrived): the record never entered the buffer.
    out = _producer_with(E.KafkaTimeoutError("Failed to update metadata after 5.0 secs.")).send("t0", 0, 1)
    assert out.type == "fail" and "KafkaTimeoutError" in (out.error or "")
    # Our own wait ran out while the future is still pending.
    assert _producer_with(_Future(error=E.KafkaTimeoutError("x"), done=False)).send("t0", 0, 1).type == "info"
    nre = E.NotEnoughReplicasError()
    assert _producer_with(_Future(error=nre), [E.NotEnoughReplicasError]).send("t0", 0, 1).type == "fail"
    assert (
        _producer_with(_Future(error=nre), [E.KafkaConnectionError, E.NotEnoughReplicasError])
        .send("t0", 0, 1)
        .type
        == "info"
    )
    assert _producer_with(_Future(error=RuntimeError("bug"))).send("t0", 0, 1).type == "info"


def test_operation_timeout_is_info_and_says_so() -> None:
    p = _producer_with(_Future(error=E.KafkaTimeoutError("x"), done=False))
    p._wait_s = p._op_timeout = 0.25
    out = p.send("t0", 0, 1)
    assert out.type == "info" and out.error == op_timeout_error(0.25)
    # librdkafka: no broker answers, the delivery report never comes within the operation timeout.
    config = TestConfig(op_timeout=0.3, request_timeout_ms=2000)
    producer = confluent.ConfluentProducer(config, ["127.0.0.1:1"])
    try:
        started = time.monotonic()
        out = producer.send("t0", 0, 1)
        assert out.type == "info" and out.error == op_timeout_error(0.3)
        assert time.monotonic() - started < 2
    finally:
        producer._closing.set()
        producer._poller.join(timeout=2)
        producer._producer.purge()
    with pytest.raises(BadInput, match="op_timeout"):
        TestConfig().replace(op_timeout=-1)


def test_sender_hook_records_every_attempt() -> None:
    calls: list[Any] = []

    class Sender:
        def _dispatch_error(self, batch: Any, exception: BaseException, response: Any) -> None:
            calls.append(exception)

    class Batch:
        produce_future = object()

    class Producer:
        _sender = Sender()

    log = AttemptLog()
    assert kafka_python._hook_sender(Producer(), log)  # type: ignore[arg-type]
    batch = Batch()
    Producer._sender._dispatch_error(batch, E.RequestTimedOutError(), None)
    Producer._sender._dispatch_error(batch, E.NotEnoughReplicasError(), None)
    assert log.errors(batch.produce_future) == [E.RequestTimedOutError, E.NotEnoughReplicasError]
    assert len(calls) == 2  # the original still decides


def test_producer_settings_follow_the_test() -> None:
    config = TestConfig(acks="1", retries=0, idempotence=False, request_timeout_ms=3000)
    s = kafka_python.producer_settings(config, ["127.0.0.1:1"])
    assert (s["acks"], s["retries"], s["enable_idempotence"], s["request_timeout_ms"]) == (1, 0, False, 3000)
    assert s["delivery_timeout_ms"] >= 3000
    c = confluent.producer_settings(TestConfig(acks="all", retries=3, idempotence=True), ["a:1", "b:2"])
    assert (c["acks"], c["retries"], c["enable.idempotence"], c["bootstrap.servers"]) == (
        "all",
        3,
        True,
        "a:1,b:2",
    )


def test_values_decode_as_ascii_decimal() -> None:
    assert decode_value(b"42") == 42
    assert decode_value(b"x1") == "x1"
    assert decode_value(None) is None
    assert describe(E.NotEnoughReplicasError("isr 1 < 2")).startswith("NotEnoughReplicasError")


def test_settings_no_producer_accepts_are_bad_input() -> None:
    from foundation.errors import BadInput
    from workloads.clients import make_driver

    with pytest.raises(BadInput, match="acks=all"):
        make_driver(TestConfig(seed=1, acks="1", idempotence=True), ["127.0.0.1:1"])
    with pytest.raises(BadInput, match="retries"):
        make_driver(TestConfig(seed=1, retries=0, idempotence=True), ["127.0.0.1:1"])
    assert (
        make_driver(TestConfig(seed=1, client="confluent-kafka"), ["127.0.0.1:1"]).name == "confluent-kafka"
    )


def test_a_prune_by_another_slot_keeps_a_batch_its_sender_has_not_read() -> None:
    """A batch whose future just completed survives one prune (another slot's 1000th send), so its
    own sender still sees the timed-out first attempt and journals `info`, not `fail`."""

    class Future:
        is_done = False

    log = AttemptLog()
    future = Future()
    log.record(future, E.RequestTimedOutError)
    log.record(future, E.NotEnoughReplicasError)
    future.is_done = True
    log.prune()  # another slot's prune, before the sender read its outcome
    attempts = log.errors(future)
    assert attempts == [E.RequestTimedOutError, E.NotEnoughReplicasError]
    assert classify_send_error(attempts, E.NotEnoughReplicasError(), retries=5) == "info"
    log.prune()
    assert log.errors(future) == []  # forgotten at the second prune that saw it done
