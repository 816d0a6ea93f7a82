"""Apache Kafka (KRaft mode) configuration and command lines, rendered from a TestConfig.

Pure functions: no node, no process. `clusters/kafka.py` runs them on nodes. Every node is both
broker and controller (combined mode), which is what a small test cluster wants: the controller
quorum is the cluster's nodes, so node faults hit the quorum too, as they do in production KRaft.
"""

from __future__ import annotations

import base64
import shlex
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from foundation.config import TestConfig
from foundation.errors import BadInput

BROKER_PORT = 9092
CONTROLLER_PORT = 9093


@dataclass(frozen=True)
class KafkaNodeLayout:
    """Where one node's Kafka lives; paths are on the node."""

    install_dir: str  # the unpacked distribution (bin/, libs/, config/)
    config_path: str  # the rendered server.properties
    data_dir: str  # log.dirs
    log_dir: str  # LOG_DIR for Kafka's own log4j output


def layout_under(root: str) -> KafkaNodeLayout:
    return KafkaNodeLayout(
        install_dir=f"{root}/kafka",
        config_path=f"{root}/server.properties",
        data_dir=f"{root}/data",
        log_dir=f"{root}/logs",
    )


def new_cluster_id(seed_bytes: bytes | None = None) -> str:
    """A KRaft cluster id: 16 bytes, URL-safe base64 without padding (what kafka-storage.sh makes)."""
    raw = seed_bytes[:16].ljust(16, b"\0") if seed_bytes is not None else uuid.uuid4().bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def render_server_properties(
    config: TestConfig, node_id: int, addresses: Sequence[str], layout: KafkaNodeLayout
) -> str:
    """server.properties for node `node_id` (1-based) of a combined-mode KRaft cluster."""
    if not 1 <= node_id <= len(addresses):
        raise BadInput(f"kafka node id {node_id} is not between 1 and {len(addresses)}")
    address = addresses[node_id - 1]
    voters = ",".join(f"{i}@{a}:{CONTROLLER_PORT}" for i, a in enumerate(addresses, start=1))
    replication = min(config.replication_factor, len(addresses))
    settings: dict[str, str | int] = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://{address}:{BROKER_PORT},CONTROLLER://{address}:{CONTROLLER_PORT}",
        "advertised.listeners": f"PLAINTEXT://{address}:{BROKER_PORT}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": layout.data_dir,
        "num.partitions": config.partitions,
        "default.replication.factor": replication,
        "min.insync.replicas": config.min_insync,
        "unclean.leader.election.enable": str(config.unclean_election).lower(),
        "offsets.topic.replication.factor": replication,
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min(config.min_insync, replication),
        "replica.lag.time.max.ms": config.replica_lag_time_max_ms,
        "replica.high.watermark.checkpoint.interval.ms": config.replica_high_watermark_checkpoint_interval_ms,
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": 0,
    }
    if config.log_flush_interval_messages > 0:
        settings["log.flush.interval.messages"] = config.log_flush_interval_messages
    lines = ["# Rendered by strandline for one test; every node is broker and controller."]
    lines += [f"{key}={value}" for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def format_storage_argv(layout: KafkaNodeLayout, cluster_id: str) -> list[str]:
    """Format log.dirs for KRaft before the first start (idempotent with --ignore-formatted)."""
    return [
        f"{layout.install_dir}/bin/kafka-storage.sh",
        "format",
        "--ignore-formatted",
        "-t",
        cluster_id,
        "-c",
        layout.config_path,
    ]


def server_start_argv(layout: KafkaNodeLayout) -> list[str]:
    return [f"{layout.install_dir}/bin/kafka-server-start.sh", layout.config_path]


def server_env(layout: KafkaNodeLayout, heap: str = "512m") -> dict[str, str]:
    return {"LOG_DIR": layout.log_dir, "KAFKA_HEAP_OPTS": f"-Xms{heap} -Xmx{heap}"}


def unpack_argv(tarball_on_node: str, layout: KafkaNodeLayout) -> list[str]:
    """Unpack a Kafka distribution tarball into install_dir, dropping its top-level folder."""
    script = (
        f"mkdir -p {shlex.quote(layout.install_dir)} && "
        f"tar -xzf {shlex.quote(tarball_on_node)} -C {shlex.quote(layout.install_dir)} --strip-components=1"
    )
    return ["sh", "-c", script]
