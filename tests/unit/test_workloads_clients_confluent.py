"""The confluent-kafka driver's producer lets go of librdkafka when it is closed."""

from __future__ import annotations

import gc
import os

from foundation.config import TestConfig
from workloads.clients import confluent


def _threads() -> int:
    """Threads of this process, native ones (librdkafka's) included."""
    return len(os.listdir("/proc/self/task"))


def test_closing_a_producer_destroys_its_librdkafka_handle_at_once() -> None:
    """At close, not at some later garbage collection: a handle that outlives the cluster under test
    logs its connections' refusals ("Disconnected", "Connection refused") over the user's output."""
    gc.disable()  # what close() does alone, not what a collection would do for it
    try:
        before = _threads()
        producer = confluent.ConfluentProducer(TestConfig(request_timeout_ms=2000), ["127.0.0.1:1"])
        assert _threads() > before + 1  # librdkafka's threads and the delivery-report poller
        producer.close()
        assert _threads() <= before
        producer.close()  # a second close is harmless
    finally:
        gc.enable()
