"""Membership of the own system (`clusters.sut.HasMembership`): spare broker nodes join, brokers
leave, partitions are reassigned.

The own system may bring up spare nodes beyond `nodes` (`spare_nodes`) on which no broker runs at
the start; `add_broker` installs and starts one there, and it registers in ZooKeeper like any
broker (broker i on the i-th broker node, spares numbered after the first `nodes`). Partitions
move the way an operator moved them on ZooKeeper-mode Kafka: the target replicas are written to
`/admin/reassign_partitions` (as `kafka-reassign-partitions.sh --zookeeper` did), and the
controller carries the reassignment out (broker/reassignment.py); it is finished when the
partition has left that znode and its topic znode lists no adding or removing replicas.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from broker.reassignment import encode_request, parse_request
from clusters.node import Node
from foundation.errors import InfrastructureError

if TYPE_CHECKING:
    from foundation.config import TestConfig

log = logging.getLogger(__name__)

REASSIGN_PARTITIONS = "/admin/reassign_partitions"  # Kafka's ZooKeeper path (broker/zookeeper/layout.py)
TOPICS = "/brokers/topics"
BROKER = "broker"  # the daemon's name on the nodes (clusters/own.py)


class OwnMembership:
    """The HasMembership half of `clusters.own.OwnSystem` (which provides the names below)."""

    config: TestConfig
    brokers: list[Node]
    initial_brokers: list[Node]

    if TYPE_CHECKING:

        def _read_zk(self, what: str, read: Any) -> Any: ...
        def _install_broker(self, node: Node) -> None: ...
        def _start_broker(self, node: Node, *, fresh: bool = False) -> int: ...
        def wait_ready(self, node: Node, timeout: float | None = None) -> None: ...
        def stop(self, node: Node, *, timeout: float = 30.0) -> None: ...
        def node_of_broker(self, broker_id: int) -> str | None: ...
        def broker_id(self, node: Node) -> int: ...
        def registered_brokers(self) -> list[int]: ...

    _installed_spares: set[str]  # spare nodes whose broker was installed (OwnSystem sets it empty)

    def broker_nodes(self) -> list[Node]:
        return list(self.brokers)

    def members(self) -> list[str]:
        return [name for b in self.registered_brokers() if (name := self.node_of_broker(b)) is not None]

    def add_broker(self, node: Node) -> None:
        """Install (once) and start a broker on `node`, then wait until it serves and is registered."""
        installed = self._installed_spares
        first_time = node.name not in installed and node.name not in {n.name for n in self.initial_brokers}
        if node.daemon_pid(BROKER) is None:
            if first_time:
                self._install_broker(node)
                installed.add(node.name)
            self._start_broker(node, fresh=first_time)
        self.wait_ready(node)

    def remove_broker(self, node: Node) -> None:
        """Stop the broker gracefully: it closes its session, so it leaves at once."""
        self.stop(node)

    # --- assignments ------------------------------------------------------------------------------

    @staticmethod
    def _topic_replicas(zk: Any, topic: str) -> dict[int, tuple[int, ...]]:
        """Each partition's replicas in the topic znode (RS: during a reassignment, TRS + ORS)."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _stat = zk.get(f"{TOPICS}/{topic}")
        except NoNodeError:
            return {}
        info = json.loads(data or b"{}")
        return {int(p): tuple(int(b) for b in r) for p, r in (info.get("partitions") or {}).items()}

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        def read(zk: Any) -> dict[tuple[str, int], list[str]]:
            if not zk.exists(TOPICS):
                return {}
            found: dict[tuple[str, int], list[str]] = {}
            for topic in sorted(zk.get_children(TOPICS)):
                for index, replicas in self._topic_replicas(zk, topic).items():
                    found[(topic, index)] = [self.node_of_broker(b) or str(b) for b in replicas]
            return found

        return self._read_zk("the partition assignment", read)  # type: ignore[no-any-return]

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None:
        """Add these targets to /admin/reassign_partitions (created, or updated by compare-and-set)."""
        by_id = {key: tuple(self._broker_of(name) for name in nodes) for key, nodes in targets.items()}

        def write(zk: Any) -> None:
            from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

            for _ in range(20):
                try:
                    data, stat = zk.get(REASSIGN_PARTITIONS)
                except NoNodeError:
                    try:
                        zk.create(
                            REASSIGN_PARTITIONS, json.dumps(encode_request(by_id)).encode(), makepath=True
                        )
                        return
                    except NodeExistsError:
                        continue
                pending, _ = parse_request(json.loads(data or b"{}"))
                try:
                    merged = encode_request({**pending, **by_id})
                    zk.set(REASSIGN_PARTITIONS, json.dumps(merged).encode(), stat.version)
                    return
                except (BadVersionError, NoNodeError):
                    continue
            raise InfrastructureError(f"could not write {REASSIGN_PARTITIONS}: it kept changing")

        self._read_zk(REASSIGN_PARTITIONS, write)

    def reassigning(self) -> list[tuple[str, int]]:
        def read(zk: Any) -> list[tuple[str, int]]:
            from kazoo.exceptions import NoNodeError

            pending: set[tuple[str, int]] = set()
            try:
                data, _stat = zk.get(REASSIGN_PARTITIONS)
                pending |= set(parse_request(json.loads(data or b"{}"))[0])
            except NoNodeError:
                pass
            if zk.exists(TOPICS):
                for topic in zk.get_children(TOPICS):
                    try:
                        info = json.loads(zk.get(f"{TOPICS}/{topic}")[0] or b"{}")
                    except NoNodeError:
                        continue
                    for field in ("adding_replicas", "removing_replicas"):
                        pending |= {(topic, int(p)) for p, r in (info.get(field) or {}).items() if r}
            return sorted(pending)

        return self._read_zk("reassignments in progress", read)  # type: ignore[no-any-return]

    def _broker_of(self, name: str) -> int:
        for node in self.brokers:
            if node.name == name:
                return self.broker_id(node)
        raise InfrastructureError(f"node {name} runs no broker")
