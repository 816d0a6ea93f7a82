"""Targets by the role a node plays for the cluster, beyond a partition's leader and the controller:
the ZooKeeper ensemble, a consumer group's coordinator, a transactional id's coordinator.

`zookeeper` names every ZooKeeper node (the own system's ZooKeeper node, or a definition file's
`zookeeper` role): kill, restart and pause hit ZooKeeper itself, the network faults its links
(`partition:zk-all` cuts it from every broker). `coordinator` and `txn-coordinator` ask the
cluster, as a client does, with Kafka's FindCoordinator (key type 0: a group; 1: a transactional
id) which broker coordinates the step's `group` (default: the workload's first group,
`strandline-g0`) or `transactional_id` (default `strandline-txn-0`), so they work on any
Kafka-compatible system whose brokers are named (`NamesBrokers`); a cluster that answers with an
error (e.g. no transaction coordinator) names no node, and the fault is journaled as `fail`.
"""

from __future__ import annotations

from typing import Any

from clusters.kafka_metadata import NO_ANSWER, coordinator_of
from clusters.sut import HasRoles, NamesBrokers
from foundation.errors import BadInput

ZOOKEEPER = "zookeeper"
COORDINATOR = "coordinator"
TXN_COORDINATOR = "txn-coordinator"
ROLE_TARGETS = (ZOOKEEPER, COORDINATOR, TXN_COORDINATOR)
DEFAULT_GROUP = "strandline-g0"  # workloads.generator.group_of's first group
DEFAULT_TRANSACTIONAL_ID = "strandline-txn-0"
KEY_TYPES = {COORDINATOR: 0, TXN_COORDINATOR: 1}


def is_role_target(target: Any) -> bool:
    return isinstance(target, str) and target in ROLE_TARGETS


def zookeeper_nodes(ctx: Any) -> list[str]:
    """The ZooKeeper nodes: the cluster's ZooKeeper node apart from the brokers, else the role's."""
    zk = ctx.zookeeper
    if zk is not None and zk.address not in {n.address for n in ctx.nodes}:
        return [zk.name]
    if isinstance(ctx.sut, HasRoles) and ZOOKEEPER in ctx.sut.roles():
        return sorted(ctx.sut.nodes_of_role(ZOOKEEPER))
    return []


def check(target: str, ctx: Any, what: str) -> None:
    """BadInput when the role can never name a node on this cluster."""
    if target == ZOOKEEPER and not zookeeper_nodes(ctx):
        raise BadInput(
            f"{what}: target zookeeper needs a ZooKeeper apart from the brokers; this system has none"
        )
    if target in KEY_TYPES and not isinstance(ctx.sut, NamesBrokers):
        raise BadInput(
            f"{what}: target {target} needs a system that names its brokers (NamesBrokers); "
            f"{type(ctx.sut).__name__} does not"
        )


def resolve(target: str, ctx: Any, step: dict[str, Any]) -> list[str]:
    """The nodes the role names now (empty: none, e.g. no coordinator available)."""
    if target == ZOOKEEPER:
        return zookeeper_nodes(ctx)
    key = str(
        step.get("group", DEFAULT_GROUP)
        if target == COORDINATOR
        else step.get("transactional_id", DEFAULT_TRANSACTIONAL_ID)
    )
    for server in ctx.bootstrap():
        host, _, port = server.rpartition(":")
        try:
            broker_id = coordinator_of(host, int(port), key, KEY_TYPES[target])
        except NO_ANSWER:
            continue  # that broker is down or cut off: ask the next one
        if broker_id is None:
            return []
        name = ctx.sut.node_of_broker(broker_id)
        return [name] if name else []
    return []
