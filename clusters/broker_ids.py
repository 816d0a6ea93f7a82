"""Broker ids and the nodes that run them: broker i (Kafka's `broker.id` / `node.id`) runs on the
i-th broker node. One definition for every system under test (own, kafka, defined)."""

from __future__ import annotations

from collections.abc import Sequence

from clusters.node import Node
from foundation.errors import InfrastructureError


def broker_id_of(brokers: Sequence[Node], node: Node) -> int:
    for i, b in enumerate(brokers, start=1):
        if b.name == node.name:
            return i
    raise InfrastructureError(f"node {node.name} runs no broker")


def node_of_broker_id(brokers: Sequence[Node], broker_id: int) -> str | None:
    """The name of the node running broker `broker_id`; None when no node does."""
    return brokers[broker_id - 1].name if 1 <= broker_id <= len(brokers) else None
