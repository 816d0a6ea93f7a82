"""Client drivers: kafka-python (the default) and confluent-kafka, behind `base.Driver`."""

from __future__ import annotations

from foundation.config import TestConfig
from foundation.errors import BadInput
from workloads.clients.base import Driver


def make_driver(config: TestConfig, bootstrap: list[str]) -> Driver:
    """The driver the test names (`config.client`); libraries are imported only when chosen."""
    if config.idempotence and config.acks != "all":
        raise BadInput(
            f"config key 'idempotence': an idempotent producer needs acks=all, got acks={config.acks}"
        )
    if config.idempotence and config.retries == 0:
        raise BadInput("config key 'idempotence': an idempotent producer needs retries > 0")
    if config.client == "kafka-python":
        from workloads.clients.kafka_python import KafkaPythonDriver

        return KafkaPythonDriver(config, bootstrap)
    if config.client == "confluent-kafka":
        from workloads.clients.confluent import ConfluentDriver

        return ConfluentDriver(config, bootstrap)
    raise BadInput(f"config key 'client': unknown client {config.client!r}")
