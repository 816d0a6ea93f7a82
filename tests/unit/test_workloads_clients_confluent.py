"""The confluent-kafka driver's producer lets go of librdkafka when it is closed."""

from __future__ import annotations

import gc
import logging
import os
import socket
import time

import pytest

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


def test_librdkafka_logs_go_to_logging_not_to_stderr(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    """librdkafka's own lines (`%3|...|FAIL|...| Connect to ... failed`) reach harness.log through
    the logger, never the console: a producer refused by its bootstrap broker logs, stderr stays empty."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    name = confluent.LIBRDKAFKA_LOG.name
    with caplog.at_level(logging.INFO, logger=name):
        producer = confluent.ConfluentProducer(TestConfig(client="confluent-kafka"), [f"127.0.0.1:{port}"])
        try:
            deadline = time.monotonic() + 10
            while not any(r.name == name for r in caplog.records) and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            producer.close()
    assert any("Connect to" in r.getMessage() for r in caplog.records if r.name == name)
    assert "rdkafka" not in capfd.readouterr().err
