"""What every backend's network of a cluster holds, and the bridge the netns and docker backends share.

A `ClusterNetwork` (netns, docker, ssh) has the cluster's name and its nodes' names (checked: they
become interface, namespace and container names), the directory of the clusters' state files, and
the cluster's state once it is created; destroying the network removes what that state recorded.

A `BridgeNetwork` (netns, docker) also has a bridge `slbr-<cluster>` on its own subnet
10.77.X.0/24: X, the cluster's slot, is chosen when it is created; the bridge is .1, the
controller's side. Its nodes (`BridgeNode`) are 10.77.X.(10+index) and have their names as
hostnames.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from clusters.state import ClusterState
from foundation.errors import BadInput, InfrastructureError

CLUSTER_NAME = re.compile(r"^[a-z0-9]{1,10}$")  # slbr-<name> must fit IFNAMSIZ (15 chars)
NODE_NAME = re.compile(r"^[a-z0-9]{1,4}$")


def check_names(cluster: str, node_names: Sequence[str]) -> None:
    """Names become interface, namespace and container names: refuse what would not fit."""
    if not CLUSTER_NAME.match(cluster):
        raise BadInput(f"cluster name {cluster!r}: use 1 to 10 lowercase letters or digits")
    for n in node_names:
        if not NODE_NAME.match(n):
            raise BadInput(f"node name {n!r}: use 1 to 4 lowercase letters or digits")


def node_address(cluster: str, slot: int | None, index: int) -> str:
    """Address of a cluster's index-th node (0-based): 10.77.X.(10+index); its bridge is .1."""
    if slot is None:
        raise InfrastructureError(f"cluster {cluster} is not up: its nodes have no address yet")
    return f"10.77.{slot}.{10 + index}"


class ClusterNetwork:
    """The nodes of one cluster on one backend, created and destroyed through its state file."""

    backend: str  # the backend's name, as the state file and messages say it

    def __init__(self, cluster: str, node_names: Sequence[str], state_dir: Path) -> None:
        check_names(cluster, node_names)
        self.cluster = cluster
        self.node_names = list(node_names)
        self.state_dir = Path(state_dir)
        self.state: ClusterState | None = None

    def refuse_if_up(self) -> None:
        """Refuse a second cluster of this name while the first one's state file exists."""
        if (self.state_dir / f"{self.cluster}.json").exists():
            raise BadInput(f"cluster {self.cluster} is already up (state in {self.state_dir})")

    def create_state(self, info: Mapping[str, object], **fields: object) -> ClusterState:
        """Write the cluster's state file: what it was created with (`info`), its backend and nodes,
        and what the backend needs to find its resources again (`fields`)."""
        self.state = ClusterState.create(
            self.state_dir,
            self.cluster,
            {**info, "backend": self.backend, "nodes": self.node_names, **fields},
        )
        return self.state

    def destroy(self) -> list[str]:
        """Remove everything recorded; returns what could not be removed (empty: all gone)."""
        if self.state is None:
            return []
        return self.state.cleanup()


class BridgeNetwork(ClusterNetwork):
    """A cluster whose nodes are on a bridge of this machine, `slbr-<cluster>` (netns, docker)."""

    def __init__(self, cluster: str, node_names: Sequence[str], state_dir: Path) -> None:
        super().__init__(cluster, node_names, state_dir)
        self.bridge = f"slbr-{cluster}"
        self.slot: int | None = None

    def host_address(self, index: int) -> str:
        return node_address(self.cluster, self.slot, index)

    @property
    def bridge_address(self) -> str:
        """The bridge's own address, 10.77.X.1: how the nodes reach the controller."""
        return f"10.77.{self.slot}.1"


NetworkT = TypeVar("NetworkT", bound=BridgeNetwork)


class BridgeNode(Generic[NetworkT]):
    """The index-th node of a bridge network: its address and hostname follow from its place."""

    def __init__(self, name: str, network: NetworkT, index: int) -> None:
        self.name = name
        self.network = network
        self.index = index

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.network.cluster})"

    @property
    def address(self) -> str:
        """10.77.X.(10+index); known once the cluster has its slot (after create or attach)."""
        return self.network.host_address(self.index)

    @property
    def hostname(self) -> str:
        return self.name
