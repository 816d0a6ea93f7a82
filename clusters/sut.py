"""Small optional protocols a system under test implements (after Jepsen's DB/Kill/Pause/Primary).

A nemesis, a condition or the report asks `isinstance(sut, Killable)` (each protocol is
`runtime_checkable`) and says clearly, before the run starts, when a system cannot do a fault.
Every capability a fault needs is declared here; nothing probes a system with `getattr`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from clusters.node import Node


@runtime_checkable
class Lifecycle(Protocol):
    def setup(self) -> None:
        """Install, configure and start the whole system on its nodes."""
        ...

    def teardown(self) -> None:
        """Stop everything and remove what setup created."""
        ...

    def bootstrap_servers(self) -> list[str]:
        """host:port addresses the controller's clients connect to."""
        ...


@runtime_checkable
class Killable(Protocol):
    def kill(self, node: Node) -> None:
        """SIGKILL the broker on `node`."""
        ...

    def start(self, node: Node) -> None:
        """(Re)start the broker on `node`; returns once the process runs."""
        ...

    def restart(self, node: Node) -> None:
        """Graceful stop (SIGTERM, wait) and start."""
        ...


@runtime_checkable
class Pausable(Protocol):
    def pause(self, node: Node) -> None: ...

    def resume(self, node: Node) -> None: ...


@runtime_checkable
class HasLeaders(Protocol):
    def leaders(self) -> dict[tuple[str, int], str | None]:
        """(topic, partition) -> name of the node that leads it now (None when leaderless)."""
        ...

    def controller(self) -> str | None:
        """Name of the node that is the cluster controller now."""
        ...

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        """(topic, partition) -> {"leader": node name, "leader_epoch": int, "isr": [node names]}."""
        ...


@runtime_checkable
class ServesEveryPartition(Protocol):
    """Every broker serves every partition (stateless brokers over a shared store): no partition
    has a leader among the nodes. Leader-targeted faults are refused with `leaderless()`; the
    cluster has recovered once every broker answers (`serving`), as it has no ISR to fill."""

    def leaderless(self) -> str:
        """Why no fault can aim at a partition's leader, in one sentence."""
        ...

    def serving(self) -> dict[str, str | None]:
        """Each broker node's name: None when it serves, else why not."""
        ...


@runtime_checkable
class HasMembership(Protocol):
    """Brokers join and leave, and partitions move between them (Kafka's partition reassignment):
    what the membership fault (`member`) needs. Node names stand for brokers throughout."""

    def broker_nodes(self) -> list[Node]:
        """Every node that may run a broker: the first `nodes`, then the spare ones."""
        ...

    def members(self) -> list[str]:
        """The nodes whose brokers are registered now."""
        ...

    def add_broker(self, node: Node) -> None:
        """Start a broker on a node that runs none and wait until it is registered."""
        ...

    def remove_broker(self, node: Node) -> None:
        """Stop the broker on `node` for good (its partitions were moved away first)."""
        ...

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        """Each partition's replicas now (during a reassignment: the target and the original)."""
        ...

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None:
        """Ask the cluster to move these partitions to these replicas (in this order)."""
        ...

    def reassigning(self) -> list[tuple[str, int]]:
        """The partitions whose reassignment has not finished."""
        ...


@runtime_checkable
class HasLogs(Protocol):
    def log_files(self, node: Node) -> list[str]:
        """Paths on the node of the logs worth collecting."""
        ...


@runtime_checkable
class HasDataDirs(Protocol):
    def data_dirs(self, node: Node) -> list[str]:
        """Paths on the node of the broker's data dirs (Kafka's on-disk format)."""
        ...


@runtime_checkable
class NamesBrokers(Protocol):
    """Broker ids (Kafka's `broker.id` / `node.id`, whatever the system advertises) and the nodes
    that run them."""

    def broker_id(self, node: Node) -> int: ...

    def node_of_broker(self, broker_id: int) -> str | None:
        """The name of the node running broker `broker_id`; None when no node does."""
        ...


@runtime_checkable
class HasBrokerRegistry(Protocol):
    """The brokers the cluster counts as alive now (ZooKeeper's /brokers/ids, KRaft's unfenced)."""

    def broker_id(self, node: Node) -> int: ...

    def registered_brokers(self) -> list[int]: ...


@runtime_checkable
class WaitsReady(Protocol):
    def wait_ready(self, node: Node, timeout: float | None = None) -> None:
        """Return once `node`'s broker serves; raise InfrastructureError when it does not in time."""
        ...


@runtime_checkable
class HasBrokerDaemon(Protocol):
    """The name under which the broker runs as a node daemon (`Node.start_daemon`)."""

    @property
    def broker_daemon(self) -> str: ...


@runtime_checkable
class HasClockFile(Protocol):
    def clock_file(self, node: Node) -> str:
        """The libfaketime offset file the broker on `node` reads its wall clock from ("" if none)."""
        ...


@runtime_checkable
class HasLazyfs(Protocol):
    def lazyfs_sockets(self, node: Node) -> list[str]:
        """Control sockets of the lazyfs mounts under the broker's data dirs (empty: none mounted)."""
        ...


@runtime_checkable
class HasZookeeper(Protocol):
    def zookeeper_connect(self) -> str:
        """ZooKeeper's connect string as the brokers use it (`host:port[/chroot]`)."""
        ...


@runtime_checkable
class RunsOnPython(Protocol):
    """A system whose node-side helpers (lazyfs) run with this Python on the nodes."""

    @property
    def python(self) -> str: ...


@runtime_checkable
class CollectsDataDirs(Protocol):
    def collect_data(self, node: Node, dest: Path) -> None:
        """Copy what the replica-log checks read of the node's data dirs into `dest` (a system
        that chooses what to copy: another's long-lived data dirs hold far more than the test's)."""
        ...


@runtime_checkable
class MayLackReplicaLogs(Protocol):
    def replica_logs_unavailable(self) -> str | None:
        """Why the brokers' data dirs cannot be read as Kafka segments (None: they can)."""
        ...


@runtime_checkable
class RefusesTests(Protocol):
    def refusal(self) -> str | None:
        """Why this system cannot run this test (a setting it never reads, a release that lacks a
        feature), asked before anything is created; None when it can."""
        ...


@runtime_checkable
class HasRoles(Protocol):
    """A system of several roles (a definition file's): faults aim at one (`kill:role=storage`)."""

    def roles(self) -> list[str]: ...

    def nodes_of_role(self, role: str) -> list[str]:
        """The names of the nodes running `role` (empty for a role the system lacks)."""
        ...

    def node_named(self, name: str) -> Node | None:
        """Any node of the system by name (brokers and the other roles' nodes)."""
        ...


@dataclass(frozen=True)
class StoreProxy:
    """strandline's S3 proxy in front of an object store (a role of `kind = "s3"`): the node it
    runs on, the rules file a `storage` fault writes and the file it counts injections in."""

    node: str
    role: str
    rules: str
    stats: str


@runtime_checkable
class FrontsObjectStores(Protocol):
    """Object stores reached through strandline's S3 proxy: the `storage` faults write its rules."""

    def store_proxies(self) -> list[StoreProxy]:
        """Every proxy (empty: no role of kind = "s3")."""
        ...


@runtime_checkable
class FaultsByCommand(Protocol):
    """A cluster strandline did not start: each fault runs the command its owner granted (kill,
    start, pause, resume through Killable and Pausable; a partition through `cut` and `mend`),
    and a fault without its commands is refused before the run."""

    def fault_refusal(self, fault: str) -> str | None:
        """Why `fault` cannot run here (a command the definition lacks); None when it can."""
        ...

    def cut(self, node: Node, drop: list[str]) -> None:
        """Make `node` stop hearing from the addresses `drop`."""
        ...

    def mend(self, node: Node) -> None:
        """Undo `cut` on `node`."""
        ...

    def heal_argv(self, fault: str, node: Node) -> list[str] | None:
        """The command (argv) that undoes `fault` on `node`, for the fault ledger; None: none."""
        ...


@runtime_checkable
class ClusterView(Protocol):
    """What the nemesis holds of a cluster (`clusters.factory.Cluster` is one)."""

    @property
    def nodes(self) -> list[Node]: ...

    @property
    def zookeeper_node(self) -> Node | None: ...

    @property
    def sut(self) -> Any: ...

    @property
    def state_dir(self) -> Path | None:
        """Where the cluster keeps its state file (the fault ledger goes beside it)."""
        ...

    def bootstrap_servers(self) -> list[str]: ...
