"""Client drivers: kafka-python (the default), confluent-kafka and Kafka's own Java client, behind
`base.Driver`."""

from __future__ import annotations

from collections.abc import Callable

from foundation.config import TestConfig
from foundation.errors import BadInput
from workloads.clients.base import Driver, LibraryDriver

Progress = Callable[[str], None]


def client_setup(config: TestConfig) -> tuple[str, Callable[[Progress | None], None]] | None:
    """What the test's client needs before the test starts, as (a line saying what, the step that
    does it); None when it needs nothing (the Python drivers). The Java client's step fetches
    kafka-clients and compiles its program on first use: a version Maven Central lacks is BadInput,
    a machine without a JDK InfrastructureError, both before any cluster starts."""
    if config.client != "java":
        return None
    from workloads.clients import java

    def prepare(progress: Progress | None) -> None:
        java.program(java.version_of(config), progress)
        java.start(config)  # this process's JVM, which the workload's threads and the drain share

    return (
        f"java client: kafka-clients {java.version_of(config)} (fetched and compiled on first use)",
        prepare,
    )


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
    if config.client == "java":
        from workloads.clients import java

        java.start(config)  # the program fetched, compiled and its JVM up: failures surface here
        return LibraryDriver(java.LIBRARY, config, bootstrap)
    raise BadInput(f"config key 'client': unknown client {config.client!r}")
