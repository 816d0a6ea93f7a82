"""Client drivers: kafka-python (the default) and confluent-kafka, behind `base.Driver`."""

from __future__ import annotations

from foundation.config import TestConfig
from foundation.errors import BadInput
from workloads.clients.base import Driver, LibraryDriver


def make_driver(config: TestConfig, bootstrap: list[str]) -> Driver:
    """The driver the test names (`config.client`); libraries are imported only when chosen."""
    if config.idempotence and config.acks != "all":
        raise BadInput(
            f"config key 'idempotence': an idempotent producer needs acks=all, got acks={config.acks}"
        )
    if config.idempotence and config.retries == 0:
        raise BadInput("config key 'idempotence': an idempotent producer needs retries > 0")
    if config.client == "kafka-python":
        from workloads.clients import kafka_python

        return LibraryDriver(kafka_python.LIBRARY, config, bootstrap)
    if config.client == "confluent-kafka":
        from workloads.clients import confluent

        return LibraryDriver(confluent.LIBRARY, config, bootstrap)
    raise BadInput(f"config key 'client': unknown client {config.client!r}")
