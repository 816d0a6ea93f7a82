"""What a definition gives its system (clusters/defined.py): the capabilities of clusters/sut.py
that it declares (clock skew, a ZooKeeper role, S3 stores, membership, where leaders are read),
composed into one class by `defined_system`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from clusters import broker_identity, store_proxy
from clusters.defined import DefinedSystem
from clusters.defined_membership import ReassignsPartitions, ReassignsThroughZookeeper
from clusters.faketime import wants_clock
from clusters.kafka_metadata import LeadersFromMetadata
from clusters.node import Node
from clusters.sut import StoreProxy
from clusters.system_def import ZOOKEEPER_ROLE, SystemDefinition
from clusters.zookeeper_state import ReadsZookeeper
from foundation.config import TestConfig
from foundation.errors import InfrastructureError


class _ListsEveryBroker:
    """Every broker lists every live broker (`metadata.brokers = "all"`): Metadata is a registry."""

    def registered_brokers(self: DefinedSystem) -> list[int]:  # type: ignore[misc]
        return self.metadata.registered_brokers()


class _ElectsLeaders(LeadersFromMetadata):
    """Each partition has one leader among the brokers (`metadata.leaders = "partition"`): faults
    aim at it. Brokers that each name themselves the leader of everything are said once."""

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        system: DefinedSystem = self  # type: ignore[assignment]
        state = self.metadata.partition_state()
        if state and not getattr(self, "_claims_seen", False):
            claim = broker_identity.self_claims(self.metadata.last_answers, self.metadata.node_in)
            if claim is not None:
                system._note(claim)
                self._claims_seen = True
        return state


class _ServesEveryPartition:
    """Every broker serves every partition (`metadata.leaders = "any-broker"`: stateless brokers
    over a shared store): no partition has a leader among the nodes, so nothing aims at one, and
    the cluster has recovered once every broker answers for itself."""

    def leaderless(self: DefinedSystem) -> str:  # type: ignore[misc]
        return (
            f"every broker of {self.definition.name} serves every partition (metadata.leaders = "
            f'"any-broker" in {self.definition.path.name}): no partition has a leader among the nodes '
            "to aim at"
        )

    def serving(self: DefinedSystem) -> dict[str, str | None]:  # type: ignore[misc]
        """Each broker node: None when it answers ApiVersions and Metadata for itself, else why not."""
        role = self.definition.broker_role
        out: dict[str, str | None] = {}
        for node in self.brokers:
            try:
                out[node.name] = self._broker_not_ready(node, role, everyone=False)
            except InfrastructureError as e:
                out[node.name] = str(e)
        return out


class _FrontsObjectStores:
    """Roles of `kind = "s3"`: strandline's S3 proxy fronts each of their nodes (`storage` faults)."""

    def store_proxies(self: DefinedSystem) -> list[StoreProxy]:  # type: ignore[misc]
        return [
            store_proxy.proxy_of(node, role)
            for role in self.definition.object_stores()
            for node in self.role_nodes[role.name]
        ]


class _SkewsClocks:
    """The broker role runs under the faketime preload: the clock nemesis writes this file."""

    def clock_file(self: DefinedSystem, node: Node) -> str:  # type: ignore[misc]
        """The libfaketime offset file of a role started under the faketime preload ("" if none: the
        role does not declare `faketime`, the test has no clock fault, or its JVM did not follow
        the clock file: `_prove_clock`)."""
        if self.clock_refused:
            return ""
        skews = self.role_of(node).faketime and wants_clock(self.config)
        return f"{self.home(node)}/clock" if skews else ""


class _NamesZookeeper:
    """A role named `zookeeper`: the zk-* partition shapes cut brokers from it."""

    def zookeeper_connect(self: DefinedSystem) -> str:  # type: ignore[misc]
        return self._zookeeper_servers()


def defined_system(
    config: TestConfig,
    definition: SystemDefinition,
    nodes: dict[str, list[Node]],
    *,
    python: Callable[[], str],
    spares: Sequence[Node] = (),
) -> DefinedSystem:
    """The system, with the capabilities its definition gives (clock skew, a ZooKeeper role)."""
    bases: list[type] = []
    if definition.state == "zookeeper":  # leaders, the controller and the registry: ZooKeeper's
        bases.append(ReadsZookeeper)
    else:
        bases.append(_ServesEveryPartition if definition.metadata.leaderless else _ElectsLeaders)
        if definition.metadata.brokers == "all":
            bases.append(_ListsEveryBroker)
    if definition.broker_role.faketime:
        bases.append(_SkewsClocks)
    if definition.object_stores():
        bases.append(_FrontsObjectStores)
    if ZOOKEEPER_ROLE in nodes:
        bases.append(_NamesZookeeper)
    if definition.membership == "reassign":
        bases.append(ReassignsPartitions)
    if definition.membership == "zookeeper":
        bases.append(ReassignsThroughZookeeper)
    cls = type("DefinedSystem", (*bases, DefinedSystem), {})
    system: DefinedSystem = cls(config, definition, nodes, python=python, spares=spares)
    return system
