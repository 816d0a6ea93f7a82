"""Client drivers: kafka-python (the default), confluent-kafka and Kafka's own Java client, behind
`base.Driver`."""

from __future__ import annotations

from collections.abc import Callable

from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError
from workloads.clients.base import ClientError, Driver, LibraryDriver, Producer

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


def make_driver(config: TestConfig, bootstrap: list[str], *, read_committed: bool = False) -> Driver:
    """The driver the test names (`config.client`); libraries are imported only when chosen.
    `read_committed`: its assigning consumers read committed records only (the workload says)."""
    if config.idempotence and config.acks != "all":
        raise BadInput(
            f"config key 'idempotence': an idempotent producer needs acks=all, got acks={config.acks}"
        )
    if config.idempotence and config.retries == 0:
        raise BadInput("config key 'idempotence': an idempotent producer needs retries > 0")
    if config.client == "kafka-python":
        from workloads.clients import kafka_python

        return LibraryDriver(kafka_python.LIBRARY, config, bootstrap, read_committed)
    if config.client == "confluent-kafka":
        from workloads.clients import confluent

        return LibraryDriver(confluent.LIBRARY, config, bootstrap, read_committed)
    if config.client == "java":
        from workloads.clients import java

        java.start(config)  # the program fetched, compiled and its JVM up: failures surface here
        return LibraryDriver(java.LIBRARY, config, bootstrap, read_committed)
    raise BadInput(f"config key 'client': unknown client {config.client!r}")


def make_producer(driver: Driver) -> Producer:
    """A producer, or a clear error: bad settings are the user's, anything else infrastructure."""
    try:
        return driver.producer()
    except ClientError as e:
        raise BadInput(f"cannot create a {driver.name} producer: {e.error}") from None
    except Exception as e:
        if type(e).__name__ == "KafkaConfigurationError":
            raise BadInput(f"producer settings rejected by {driver.name}: {e}") from None
        raise InfrastructureError(
            f"cannot create a {driver.name} producer: {type(e).__name__}: {e}"
        ) from None
