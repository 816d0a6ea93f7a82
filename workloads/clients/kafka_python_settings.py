"""kafka-python's producer settings from the test, shared by its plain and transactional producers
(`kafka_python`, `kafka_python_txn`), which import them from here rather than from each other."""

from __future__ import annotations

from typing import Any

from foundation.config import TestConfig, delivery_timeout_ms


def _acks(acks: str) -> int | str:
    return "all" if acks == "all" else int(acks)


def producer_settings(config: TestConfig, bootstrap: list[str]) -> dict[str, Any]:
    """KafkaProducer settings from the test: acks, retries, idempotence, timeouts."""
    request_ms = config.request_timeout_ms
    return {
        "bootstrap_servers": bootstrap,
        "acks": _acks(config.acks),
        "retries": config.retries,
        "enable_idempotence": config.idempotence,
        "request_timeout_ms": request_ms,
        # One op must end in bounded time: every attempt may take a request timeout.
        "delivery_timeout_ms": delivery_timeout_ms(config),
        "max_block_ms": request_ms,
        # Creating a client must not block for kafka-python's default 30 s when no broker answers.
        "bootstrap_timeout_ms": request_ms,
        # A short linger batches the concurrent sends of all processes into fewer requests.
        "linger_ms": 2,
        "retry_backoff_ms": 100,
        "reconnect_backoff_max_ms": 1000,
        "metadata_max_age_ms": 10000,
        "metrics_enabled": False,
        "max_in_flight_requests_per_connection": 5,
    }
