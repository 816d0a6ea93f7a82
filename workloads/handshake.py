"""Does the test's client talk to the brokers at all? Asked once the topics exist, before the load.

A client can refuse a broker the rest of the world talks to (librdkafka 2.0.2's kcat fails its
ApiVersions request against tansu 0.6.0, which kafka-python and a newer librdkafka read fine). A run
with such a client would end `unknown` for too little load, or look like the system's failure. So
the test's client asks the brokers what a consumer asks first (metadata, then the partitions' ends);
when it cannot, strandline asks every broker the same with its own Kafka protocol code, and when
they answer, the run stops in one line that says it is the client's failure, not the system's (exit
4: nothing was tested). When the brokers do not answer strandline either, the run goes on: what
the brokers lack is the system's to answer for (the load, its verdict, "Features a system lacks").
"""

from __future__ import annotations

import logging

from clusters.kafka_metadata import NO_ANSWER, metadata_of
from foundation.config import TestConfig
from workloads.clients import make_driver
from workloads.clients.base import ClientError, describe

log = logging.getLogger(__name__)

TIMEOUT_S = 15.0


def client_name(config: TestConfig) -> str:
    """The client and its library's version, as a person would name it."""
    try:
        if config.client == "kafka-python":
            import kafka

            return f"kafka-python {kafka.__version__}"
        if config.client == "confluent-kafka":
            import confluent_kafka

            return f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
        if config.client == "java":
            from workloads.clients import java

            return f"kafka-clients {java.version_of(config)} (the Java client)"
    except Exception as e:  # naming it must never stop a run
        log.debug("client version unknown: %s", e)
    return config.client


def client_refusal(
    config: TestConfig, bootstrap: list[str], topic: str = "t0", *, read_committed: bool = False
) -> str | None:
    """None when the test's client reads the partitions' ends; else, when strandline's own check
    finds the brokers answering, one line saying the client failed them. `read_committed`: the
    workload's consumers read committed records only (so this one does too)."""
    consumer = None
    try:
        consumer = make_driver(config, bootstrap, read_committed=read_committed).consumer()
        partitions = [(topic, p) for p in range(config.partitions)]
        consumer.end_offsets(partitions, timeout_s=TIMEOUT_S)
        return None
    except ClientError as e:
        error = e.error
    except Exception as e:
        error = describe(e)
    finally:
        if consumer is not None:
            try:
                consumer.close()
            except Exception as e:
                log.debug("closing the handshake consumer: %s", e)
    answered = []
    for server in bootstrap:
        host, _, port = server.rpartition(":")
        try:
            metadata_of(host, int(port), timeout=5.0)
            answered.append(server)
        except NO_ANSWER as e:
            log.info("%s does not answer strandline's ApiVersions and Metadata either: %s", server, e)
    if not answered:
        log.warning(
            "the client could not reach the brokers (%s), nor could strandline: the run goes on", error
        )
        return None
    return (
        f"the client {client_name(config)} failed the brokers ({error.splitlines()[0][:300]}), which answer "
        f"ApiVersions and Metadata to strandline's own check ({', '.join(answered)}): the client's "
        "failure, not the system's; nothing was tested (try another --client)"
    )
