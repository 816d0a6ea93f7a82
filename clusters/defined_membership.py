"""Membership of a defined system whose brokers can join and leave (`membership = "reassign"`):
`clusters.sut.HasMembership` through Kafka's own Admin API; or, `membership = "zookeeper"`, through
ZooKeeper as on ZooKeeper-mode Kafka (`ReassignsThroughZookeeper`, the own broker's way).

Spare broker nodes (`spare_nodes`) run nothing at the start; `add_broker` installs and starts the
broker role there (with the role's `spare_values`: a KRaft broker that is not a voter, say) and
waits until the cluster's Metadata lists it. Partitions move as an operator moves them on Kafka
2.4 and later: AlterPartitionReassignments with the target replicas (KIP-455, what
`kafka-reassign-partitions.sh --bootstrap-server` sends), and a move is finished once
ListPartitionReassignments no longer lists the partition. The replica sets come from Metadata, so
the nodes are whatever brokers advertise at their addresses.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from clusters.node import Node
from foundation.errors import InfrastructureError

if TYPE_CHECKING:
    from clusters.kafka_metadata import KafkaMetadata
    from clusters.zookeeper_state import ZookeeperState

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_MS = 15000


class ReassignsPartitions:
    """The HasMembership half of a DefinedSystem (which provides the names below)."""

    brokers: list[Node]
    spares: list[Node]
    metadata: KafkaMetadata

    if TYPE_CHECKING:

        def install(self, node: Node) -> None: ...
        def _start(self, node: Node, *, fresh: bool = False) -> int: ...
        def wait_ready(self, node: Node, timeout: float | None = None, *, everyone: bool = False) -> None: ...
        def stop(self, node: Node) -> None: ...
        def broker_id(self, node: Node) -> int: ...
        def node_of_broker(self, broker_id: int) -> str | None: ...
        def registered_brokers(self) -> list[int]: ...
        def partition_state(self) -> dict[tuple[str, int], dict[str, object]]: ...
        def _metadata_servers(self) -> list[str]: ...
        @property
        def broker_daemon(self) -> str: ...

    def broker_nodes(self) -> list[Node]:
        return [*self.brokers, *self.spares]

    def members(self) -> list[str]:
        return [name for b in self.registered_brokers() if (name := self.node_of_broker(b)) is not None]

    def add_broker(self, node: Node) -> None:
        """Install (once) and start the broker role on `node`, then wait until Metadata lists it."""
        installed = self.__dict__.setdefault("_installed_spares", set())
        if node.daemon_pid(self.broker_daemon) is None:
            first_time = node.name not in installed and node.name not in {n.name for n in self.brokers}
            if first_time:
                self.install(node)
                installed.add(node.name)
            self._start(node, fresh=first_time)
        self.wait_ready(node)

    def remove_broker(self, node: Node) -> None:
        """Stop the broker gracefully (a controlled shutdown): it leaves the live brokers at once."""
        self.stop(node)

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        """Each partition's replicas as Metadata lists them (during a move: target and original)."""
        return {key: list(state.get("replicas") or []) for key, state in self.partition_state().items()}  # type: ignore[call-overload]

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None:
        from kafka import TopicPartition

        ids = {n.name: self.broker_id(n) for n in self.broker_nodes()}
        wanted = {TopicPartition(t, p): [ids[name] for name in nodes] for (t, p), nodes in targets.items()}
        with self._admin() as admin:
            answers = admin.alter_partition_reassignments(wanted, timeout_ms=ADMIN_TIMEOUT_MS)
        failed = {f"{tp.topic}-{tp.partition}": err for tp, err in answers.items() if err is not None}
        if failed:
            said = "; ".join(f"{tp}: {getattr(err, '__name__', err)}" for tp, err in sorted(failed.items()))
            raise InfrastructureError(f"AlterPartitionReassignments refused: {said}")

    def reassigning(self) -> list[tuple[str, int]]:
        with self._admin() as admin:
            listed = admin.list_partition_reassignments(timeout_ms=ADMIN_TIMEOUT_MS)
        return sorted((tp.topic, tp.partition) for tp in listed)

    @contextlib.contextmanager
    def _admin(self) -> Iterator[Any]:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self._metadata_servers(),
                client_id="strandline-membership",
                request_timeout_ms=ADMIN_TIMEOUT_MS,
            )
        except KafkaError as e:
            raise InfrastructureError(f"no broker answered the Admin API: {type(e).__name__} {e}") from None
        try:
            yield admin
        except KafkaError as e:
            raise InfrastructureError(f"Kafka Admin API: {type(e).__name__} {e}") from None
        finally:
            admin.close()


class ReassignsThroughZookeeper(ReassignsPartitions):
    """`membership = "zookeeper"`: partitions move the way an operator moved them on ZooKeeper-mode
    Kafka (/admin/reassign_partitions, clusters/zookeeper_state.py); replicas are read there too."""

    zookeeper_state: ZookeeperState

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        return self.zookeeper_state.assignment()

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None:
        ids = {n.name: self.broker_id(n) for n in self.broker_nodes()}
        unknown = sorted({name for nodes in targets.values() for name in nodes} - set(ids))
        if unknown:
            raise InfrastructureError(f"node {unknown[0]} runs no broker")
        self.zookeeper_state.reassign({key: tuple(ids[n] for n in nodes) for key, nodes in targets.items()})

    def reassigning(self) -> list[tuple[str, int]]:
        return self.zookeeper_state.reassigning()
