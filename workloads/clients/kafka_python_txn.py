"""kafka-python's transactional producer, behaving as Kafka's Java producer does.

kafka-python 3.0 runs transactions, but three of its behaviours differ from the Java producer
(Kafka's reference client), and each changes what a fault test sees:

1. **KIP-890 part 2.** It sends EndTxn v3 at most, so a broker with `transaction.version = 2`
   cannot bump its epoch after each transaction. The Java producer from Kafka 4.0 sends EndTxn v5
   and takes the producer id and epoch the response returns for its next transaction; here
   EndTxn may be v5 too (when the broker offers it), and a bumped epoch is adopted the same way,
   every partition's sequence starting again at 0.
2. **A timed-out transactional request is retried.** kafka-python closes a connection whose
   request timed out and then fails the producer fatally. The Java producer's network client also
   disconnects, but its transaction manager retries the request on a new connection: that is how
   a delayed EndTxn can reach the coordinator after its retry (KAFKA-17754). Here a timed-out
   transactional request is retried like one whose connection broke.
3. **A request is not lost when the coordinator cannot be reached.** When connecting to the
   coordinator raises instead of returning "not ready", kafka-python 3.0 drops the pending request
   (EndTxn, AddPartitionsToTxn) and the application waits forever; here the sender sees "not
   ready", looks the coordinator up again and retries.

The changes are applied once per process (`install`), to kafka-python's own classes, and only
where they find the code they expect; `TxnProducer` is the driver's producer for `--workload txn`.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kafka import KafkaProducer
from kafka import errors as kafka_errors

from foundation.config import TestConfig
from workloads.clients.base import (
    ClientError,
    OutcomeType,
    SendOutcome,
    describe,
    end_bound_s,
    op_timeout_error,
    send_wait_s,
)
from workloads.clients.kafka_python_settings import producer_settings

log = logging.getLogger(__name__)

END_TXN_VERSION = 5  # KIP-890 part 2: the response carries the producer id and epoch to use next
_installed = False
_install_lock = threading.Lock()


def install() -> bool:
    """Give kafka-python's transaction manager the Java producer's behaviour (see the module
    docstring); False (and a warning) when its code is not what these changes expect."""
    global _installed
    with _install_lock:
        if _installed:
            return True
        try:
            from kafka.producer import transaction_manager as tm
        except ImportError:
            log.warning("kafka-python has no transaction manager: transactions run unchanged")
            return False
        handler = getattr(tm, "TxnRequestHandler", None)
        end_txn = getattr(tm, "EndTxnHandler", None)
        pid_epoch = getattr(tm, "ProducerIdAndEpoch", None)
        if handler is None or end_txn is None or pid_epoch is None:
            log.warning("kafka-python's transaction manager changed: transactions run unchanged")
            return False
        _retry_timed_out_requests(handler)
        _end_txn_v5(end_txn, pid_epoch)
        _installed = True
        return True


def _retry_timed_out_requests(handler: Any) -> None:
    original = handler.on_complete

    def on_complete(self: Any, correlation_id: Any, response_or_exc: Any) -> Any:
        if isinstance(response_or_exc, kafka_errors.RequestTimedOutError):
            # the connection was closed for the timeout: what the Java producer sees as a disconnect
            response_or_exc = kafka_errors.KafkaConnectionError(str(response_or_exc))
        return original(self, correlation_id, response_or_exc)

    handler.on_complete = on_complete


def _end_txn_v5(end_txn: Any, pid_epoch: Any) -> None:
    original_init = end_txn.__init__
    original_handle = end_txn.handle_response

    def __init__(self: Any, transaction_manager: Any, committed: bool) -> None:
        original_init(self, transaction_manager, committed)
        try:
            self.request = type(self.request)(
                transactional_id=self.transactional_id,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                committed=committed,
                max_version=END_TXN_VERSION,
            )
        except Exception as e:  # another kafka-python: keep its own request
            log.debug("EndTxn stays at kafka-python's versions: %s", e)

    def handle_response(self: Any, response: Any) -> Any:
        manager = self.transaction_manager
        if int(getattr(response, "error_code", -1)) == 0:
            pid = getattr(response, "producer_id", -1)
            epoch = getattr(response, "producer_epoch", -1)
            current = manager.producer_id_and_epoch
            if pid is not None and epoch is not None and pid >= 0 and epoch >= 0:
                if (pid, epoch) != (current.producer_id, current.epoch):
                    log.debug("EndTxn v5: producer %s epoch %s -> %s epoch %s", current.producer_id,
                              current.epoch, pid, epoch)  # fmt: skip
                    manager.set_producer_id_and_epoch(pid_epoch(pid, epoch))
                    manager._sequence_numbers.clear()
                    getattr(manager, "_last_acked_offset", {}).clear()
        return original_handle(self, response)

    end_txn.__init__ = __init__
    end_txn.handle_response = handle_response


class _ReadyOrNot:
    """The sender's network client, whose `await_ready` answers False where kafka-python's raises
    (so the sender's transactional path looks the coordinator up again instead of dropping the
    request); everything else is the client's own."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def await_ready(self, node_id: Any, timeout_ms: int = 30000) -> bool:
        try:
            return bool(self._client.await_ready(node_id, timeout_ms=timeout_ms))
        except kafka_errors.KafkaConnectionError as e:
            log.debug("node %s not ready: %s", node_id, e)
            return False


class KafkaPythonTxnProducer:
    """One transactional producer (its own transactional.id); `TxnProducer` of workloads.clients.base."""

    def __init__(self, config: TestConfig, bootstrap: list[str], transactional_id: str):
        install()
        settings = producer_settings(config, bootstrap)
        settings.update(
            transactional_id=transactional_id,
            enable_idempotence=True,
            transaction_timeout_ms=config.transaction_timeout_ms,
        )
        self._wait_s = send_wait_s(settings["delivery_timeout_ms"], config.op_timeout)
        self._op_timeout = config.op_timeout
        self._end_s = end_bound_s(config)
        try:
            self._producer = KafkaProducer(**settings)
        except Exception as e:
            raise ClientError(describe(e), definite=True) from e
        sender = getattr(self._producer, "_sender", None)
        if sender is not None and hasattr(sender, "_client"):
            sender._client = _ReadyOrNot(sender._client)
        try:
            self._producer.init_transactions()
        except Exception as e:
            self.close()
            raise ClientError(describe(e)) from e

    def begin(self) -> None:
        try:
            self._producer.begin_transaction()
        except Exception as e:
            raise ClientError(describe(e)) from e

    def send(self, topic: str, partition: int, value: int) -> SendOutcome:
        try:
            future = self._producer.send(topic, value=str(value).encode("ascii"), partition=partition)
        except Exception as e:
            return SendOutcome("fail", error=describe(e))
        try:
            metadata = future.get(timeout=self._wait_s)
            return SendOutcome("ok", offset=metadata.offset)
        except kafka_errors.KafkaError as e:
            if not future.is_done and self._wait_s == self._op_timeout:
                return SendOutcome("info", error=op_timeout_error(self._op_timeout))
            return SendOutcome("info", error=describe(e))
        except Exception as e:
            return SendOutcome("info", error=describe(e))

    def _end(self, commit: bool) -> tuple[OutcomeType, str | None]:
        manager = self._producer._transaction_manager
        try:
            result = manager.begin_commit() if commit else manager.begin_abort()
            self._producer._sender.wakeup()
            if not result.wait(timeout_ms=self._end_s * 1000):
                return "info", f"no answer to {'commit' if commit else 'abort'} within {self._end_s:g} s"
        except Exception as e:
            return "info", describe(e)
        return ("ok" if commit else "fail"), None

    def commit(self) -> tuple[OutcomeType, str | None]:
        """ok: committed; info: unknown (kafka-python's errors here leave the producer unusable)."""
        return self._end(commit=True)

    def abort(self) -> tuple[OutcomeType, str | None]:
        """fail: aborted, certainly; info: unknown."""
        return self._end(commit=False)

    def close(self) -> None:
        try:
            self._producer.close(timeout=2)
        except Exception as e:
            log.debug("closing transactional producer: %s", e)
