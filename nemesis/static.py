"""The checks that need only the config: a nemesis over a cluster of the configured shape that can
do everything, validated without probing (fault names, schedule steps, targets vs node count)."""

from __future__ import annotations

import random
from typing import Any

from clusters.sut import StoreProxy
from foundation.config import TestConfig
from nemesis.core import Nemesis


class _ShapeNode:
    """A node that only has a name and an address: enough for the static checks."""

    def __init__(self, name: str, address: str) -> None:
        self.name, self.address, self.hostname = name, address, name


class _CapableSut:
    """A system under test that can do everything (the static checks assume the own system)."""

    def kill(self, node: Any) -> None: ...
    def start(self, node: Any) -> None: ...
    def restart(self, node: Any) -> None: ...
    def pause(self, node: Any) -> None: ...
    def resume(self, node: Any) -> None: ...
    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {}

    def controller(self) -> str | None:
        return None

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return {}

    def data_dirs(self, node: Any) -> list[str]:
        return []

    def clock_file(self, node: Any) -> str:
        return "clock"

    def lazyfs_sockets(self, node: Any) -> list[str]:
        return ["lazyfs.sock"]

    # Roles (`kill:role=NAME`): any role passes here; the real system is asked before the run.
    def roles(self) -> list[str]:
        return []

    def nodes_of_role(self, role: str) -> list[str]:
        return [f"{role}-node"]

    def node_named(self, name: str) -> Any:
        return None

    # Object stores (`storage`): any passes here; the real system says whether it has a role of
    # kind = "s3" before the run.
    def store_proxies(self) -> list[StoreProxy]:
        return [StoreProxy("storage-node", "storage", "rules.json", "stats.json")]

    # Broker names (`txn-coordinator`, `coordinator` targets): the real system is asked in the run.
    def broker_id(self, node: Any) -> int:
        return 1

    def node_of_broker(self, broker_id: int) -> str | None:
        return None

    # Membership (`member`): the counts of the config decide what is refused.
    def broker_nodes(self) -> list[Any]:
        return []

    def members(self) -> list[str]:
        return []

    def add_broker(self, node: Any) -> None: ...
    def remove_broker(self, node: Any) -> None: ...
    def assignment(self) -> dict[tuple[str, int], list[str]]:
        return {}

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None: ...
    def reassigning(self) -> list[tuple[str, int]]:
        return []


class ShapeCluster:
    """A cluster of the config's shape that is not up: enough for the static checks (`ClusterView`).

    `sut`: the real (not yet started) system under test, to check what it offers; by default one
    that can do everything (the checks that need only the config)."""

    state_dir = None

    def __init__(self, nodes: int, sut: Any = None) -> None:
        self.nodes: list[Any] = [_ShapeNode(f"n{i}", f"192.0.2.{i}") for i in range(1, nodes + 1)]
        self.zookeeper_node: Any = _ShapeNode("zk", "192.0.2.254")
        self.sut = sut if sut is not None else _CapableSut()

    def bootstrap_servers(self) -> list[str]:
        return []


def check_config(config: TestConfig) -> None:
    """The checks that need only the config (fault names, schedule steps, targets vs node count).

    Raises BadInput before anything is created; `Nemesis.validate()` repeats them against the
    real cluster and also asks the system and the nodes what they can do.
    """
    nem = Nemesis(config, ShapeCluster(config.nodes), None, random.Random(0), state_dir=".")
    nem.validate(probe=False)
