"""`build_cluster(config, work_dir) -> Cluster`: nodes on a backend plus a system under test.

The Cluster is what the harness, the nemesis and `strandline cluster` hold: `.nodes` (the broker
nodes), `.zookeeper_node`, `.sut`, `.up()`, `.down()`, `.bootstrap_servers()`, `.collect(dest)`.
Backends (netns, docker, ssh) create and destroy the nodes and record what they create in a state
file; systems under test (the own broker, Apache Kafka) run on the nodes through the Node protocol
only, and offer what faults need through the capability protocols of clusters/sut.py.

`up()` first removes what crashed controllers left behind (`cleanup_leftovers`), and on any
failure or Ctrl-C removes what it created itself before re-raising. `down()` kills everything and
removes every resource in the state file; collect data before it.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from clusters import docker_backend, external_def, ssh_backend, system_def  # backends: their state removers
from clusters.defined_capabilities import defined_system
from clusters.external import ExternalNetwork, external_system
from clusters.kafka_metadata import NO_ANSWER, offered_apis
from clusters.netns import NetnsNetwork
from clusters.node import Node
from clusters.state import ClusterState, cleanup_leftovers, locked, state_dir_default
from clusters.sut import CollectsDataDirs, MayLackReplicaLogs
from clusters.system_def import SystemDefinition
from foundation.config import TestConfig, validate
from foundation.errors import BadInput, InfrastructureError
from foundation.run_files import API_VERSIONS, REPLICAS_UNAVAILABLE

log = logging.getLogger(__name__)

ZOOKEEPER_NODE = "zk"


class Network(Protocol):
    """What a backend gives the factory: nodes by name, created and destroyed through a state."""

    nodes: dict[str, Any]
    state: ClusterState | None
    state_dir: Path  # where the clusters' state files are (leftovers of crashed ones are found there)

    def create(self, info: dict[str, object] | None = None) -> None: ...

    def destroy(self) -> list[str]: ...


@runtime_checkable
class Prepares(Protocol):
    """A system that refuses what it cannot run and fetches its software before nodes exist."""

    def prepare(self, progress: Callable[[str], None] | None = None) -> None: ...


@runtime_checkable
class InstallsPython(Protocol):
    """A remote backend that installs the project's Python on its nodes (None until it has)."""

    python: str | None


def default_cluster_name(config: TestConfig) -> str:
    """A unique short name: up to 6 characters of the test name plus 4 random hex digits."""
    stem = re.sub(r"[^a-z0-9]", "", config.name.lower())[:6] or "sl"
    return f"{stem}{secrets.token_hex(2)}"


def broker_node_names(config: TestConfig) -> list[str]:
    return [f"n{i}" for i in range(1, config.nodes + 1)]


def spare_node_names(config: TestConfig) -> list[str]:
    """Nodes that run no broker at the start; the membership fault adds them (a definition whose
    brokers can join and leave: `membership = "reassign"` or `"zookeeper"`)."""
    definition = _definition(config)
    if definition is None or definition.membership == "none":
        return []
    return [f"n{i}" for i in range(config.nodes + 1, config.nodes + max(0, config.spare_nodes) + 1)]


@dataclass(eq=False)  # a cluster is itself, not its parts
class Cluster:
    """Nodes, the system under test on them, and the state file that makes cleanup certain."""

    config: TestConfig
    name: str
    network: Network
    sut: Any
    timings: dict[str, float] = field(default_factory=dict, init=False)  # nodes_s, up_s, down_s
    # Where a first fetch of the system's software reports how far it got (a person watches it).
    progress: Callable[[str], None] | None = field(default=None, init=False)

    @property
    def nodes(self) -> list[Node]:
        """The broker nodes (a defined system's other roles are reached through its sut)."""
        brokers = set(broker_node_names(self.config))
        return [n for name, n in self.network.nodes.items() if name in brokers]

    @property
    def zookeeper_node(self) -> Node | None:
        node: Node | None = self.network.nodes.get(ZOOKEEPER_NODE)
        return node

    @property
    def all_nodes(self) -> list[Node]:
        return list(self.network.nodes.values())

    def node(self, name: str) -> Node:
        try:
            node: Node = self.network.nodes[name]
        except KeyError:
            raise BadInput(f"no node {name!r} in cluster {self.name}") from None
        return node

    @property
    def state(self) -> ClusterState | None:
        return self.network.state

    @property
    def state_dir(self) -> Path | None:
        """The directory of the cluster's state file (the nemesis keeps its fault ledger there)."""
        return self.state.path.parent if self.state is not None else None

    def bootstrap_servers(self) -> list[str]:
        servers: list[str] = self.sut.bootstrap_servers()
        return servers

    def up(self) -> None:
        """Create the nodes and start the system; on failure or Ctrl-C, remove it all again."""
        cleaned = cleanup_leftovers(self.network.state_dir)
        if cleaned:
            log.warning("removed leftovers of crashed clusters: %s", ", ".join(cleaned))
        started = time.monotonic()
        if isinstance(self.sut, Prepares):  # refusals and fetches before any node exists
            self.sut.prepare(self.progress)
        try:
            self.network.create(
                {"system": self.config.system, "config": self.config.to_json(), "name": self.name}
            )
            created = time.monotonic()
            self.sut.setup()
            if self.state is not None:
                self.state.set_info(bootstrap=self.bootstrap_servers())
        except BaseException:
            self.down()
            raise
        self.timings["nodes_s"] = created - started
        self.timings["up_s"] = time.monotonic() - started
        log.info("cluster %s up in %.2fs", self.name, self.timings["up_s"])

    def down(self) -> None:
        """Kill every process and remove every resource; raises when something would not go."""
        started = time.monotonic()
        if self.state is not None:
            try:  # stop processes the SUT's way first; destroying the nodes kills whatever is left
                self.sut.teardown()
            except Exception as e:
                log.debug("teardown of the system under test: %s", e)
        failures = self.network.destroy()
        self.timings["down_s"] = time.monotonic() - started
        if failures:
            raise InfrastructureError(f"cluster {self.name}: could not remove {'; '.join(failures)}")

    def detach(self) -> None:
        """Let the cluster outlive this process (`strandline cluster up`)."""
        if self.state is not None:
            self.state.detach()

    def collect(self, dest: Path) -> None:
        """Copy logs and data dirs to dest/<node>/logs/ and dest/<node>/data/; a system whose data
        dirs are not Kafka segments says so in dest/replicas-unavailable.txt (checkers/api.py)."""
        why = self.sut.replica_logs_unavailable() if isinstance(self.sut, MayLackReplicaLogs) else None
        Path(dest).mkdir(parents=True, exist_ok=True)
        if why is not None:
            (Path(dest) / REPLICAS_UNAVAILABLE).write_text(why + "\n")
        self._record_offered_apis(Path(dest) / API_VERSIONS)
        for node in self.all_nodes:
            node_dest = Path(dest) / node.name
            for path in self.sut.log_files(node):
                try:
                    node.download(path, str(node_dest / "logs" / Path(path).name))
                except InfrastructureError as e:
                    log.warning("%s: cannot collect %s: %s", node.name, path, e)
            if isinstance(self.sut, CollectsDataDirs):
                self.sut.collect_data(node, node_dest / "data")
                continue
            data_dirs = self.sut.data_dirs(node)
            for path in data_dirs:
                target = node_dest / "data"
                if len(data_dirs) > 1:
                    target = target / Path(path).name
                try:
                    node.download(path, str(target))
                except InfrastructureError as e:
                    log.warning("%s: cannot collect %s: %s", node.name, path, e)

    def _record_offered_apis(self, path: Path) -> None:
        """What the first broker that answers lists in ApiVersions (checkers/refusals.py reads it)."""
        for server in self.bootstrap_servers():
            host, _, port = server.rpartition(":")
            try:
                apis = offered_apis(host, int(port))
            except NO_ANSWER as e:
                log.debug("ApiVersions of %s: %s", server, e)
                continue
            offered = {str(key): list(versions) for key, versions in sorted(apis.items())}
            path.write_text(json.dumps({"broker": server, "apis": offered}) + "\n")
            return
        log.warning("no broker answered ApiVersions: the run dir does not say which APIs the system offers")

    def __enter__(self) -> Cluster:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


def _definition(config: TestConfig) -> SystemDefinition | None:
    if external_def.is_external(config.system):
        return None
    return system_def.load(config.system) if system_def.is_definition(config.system) else None


def fit_external(config: TestConfig) -> TestConfig:
    """A cluster strandline did not start has the nodes its definition names: `nodes` follows."""
    if not external_def.is_external(config.system):
        return config
    count = len(external_def.load(config.system).nodes)
    return config if config.nodes == count else dataclasses.replace(config, nodes=count)


def _nodes_python(network: Network) -> str | None:
    """The nodes' own Python on a remote backend; None: the controller's (local backends)."""
    return network.python if isinstance(network, InstallsPython) else None


def _sut(config: TestConfig, network: Network) -> Any:
    if isinstance(network, ExternalNetwork):
        return external_system(config, external_def.load(config.system), network)
    definition = _definition(config)
    if definition is not None:
        nodes = {
            r.name: [network.nodes[n] for n in definition.node_names(r, config)] for r in definition.roles
        }

        def nodes_python() -> str:  # remote backends know their nodes' Python once they installed it
            return _nodes_python(network) or sys.executable

        spares = [network.nodes[n] for n in spare_node_names(config)]
        return defined_system(config, definition, nodes, python=nodes_python, spares=spares)
    raise BadInput(f"system {config.system!r} is not available (use --system own, kafka or a PATH.toml)")


def _node_names(config: TestConfig) -> list[str]:
    """A defined system has the nodes of its roles: ZooKeeper's own node `zk` first (where a role
    runs there), then the broker role's n1..nN and its spares, then the other roles' nodes."""
    definition = _definition(config)
    if definition is None:
        return broker_node_names(config)
    names = definition.node_names(definition.broker_role, config)
    others = [
        n for r in definition.roles if r.name != definition.brokers for n in definition.node_names(r, config)
    ]
    first = [n for n in others if n == ZOOKEEPER_NODE]
    rest = [n for n in others if n != ZOOKEEPER_NODE]
    return [*first, *names, *spare_node_names(config), *rest]


def _network(
    config: TestConfig, name: str, work_dir: Path, state_dir: Path, node_names: list[str] | None = None
) -> Network:
    if external_def.is_external(config.system) and node_names is None:  # reached over its own ssh
        return ExternalNetwork(name, external_def.load(config.system), state_dir)
    names = node_names if node_names is not None else _node_names(config)
    if config.backend == "docker":
        return docker_backend.DockerNetwork(name, names, config, state_dir)
    if config.backend == "ssh":
        return ssh_backend.SshNetwork(name, names, config, state_dir)
    return NetnsNetwork(name, names, work_dir, state_dir)


@contextmanager
def probe_node(config: TestConfig, work_dir: Path, *, state_dir: Path | None = None) -> Iterator[Node]:
    """One bare node on the test's backend, with no system on it, removed on the way out.

    What a fault needs of a node (tc netem, the iptables statistic match, FUSE, the clock preload)
    is asked of this node before any cluster starts, so a test that cannot run is refused at once.
    Its resources go through a state file like any cluster's, so a crash cannot leak them.
    """
    name = f"probe{secrets.token_hex(2)}"
    network = _network(
        config, name, Path(work_dir), Path(state_dir) if state_dir else state_dir_default(), ["n1"]
    )
    try:
        network.create({"system": "none", "config": config.to_json(), "name": name, "probe": True})
        node: Node = network.nodes["n1"]
        yield node
    finally:
        failures = network.destroy()
        if failures:
            log.warning("probe node %s: could not remove %s", name, "; ".join(failures))


def build_cluster(
    config: TestConfig, work_dir: Path, *, name: str | None = None, state_dir: Path | None = None
) -> Cluster:
    """A cluster described by `config`, not yet created: call `.up()` (or use it as a context)."""
    name = name or default_cluster_name(config)
    config = fit_external(config)
    state_dir = Path(state_dir) if state_dir else state_dir_default()
    network = _network(config, name, Path(work_dir), state_dir)
    return Cluster(config, name, network, _sut(config, network))


def attach_cluster(state_path: Path) -> Cluster:
    """The Cluster described by an existing state file (for `cluster status` and `cluster down`)."""
    try:
        state = ClusterState.load(Path(state_path))
    except FileNotFoundError:
        raise BadInput(f"no cluster state at {state_path}") from None
    except (OSError, ValueError) as e:
        raise BadInput(f"unreadable cluster state {state_path}: {e}") from None
    info = state.info
    config = validate(info["config"])
    network: Network
    if info.get("backend") == "docker":
        network = docker_backend.DockerNetwork.attach(state, config)
    elif info.get("backend") == "ssh":
        network = ssh_backend.SshNetwork.attach(state, config)
    elif info.get("backend") == "netns":
        network = NetnsNetwork.attach(state)
    else:
        raise BadInput(f"cluster {state.cluster}: unknown backend {info.get('backend')!r}")
    return Cluster(config, state.cluster, network, _sut(config, network))


def cluster_states(state_dir: Path | None = None) -> list[ClusterState]:
    """Every cluster with a state file (live, detached or left behind)."""
    from clusters.state import list_states

    state_dir = state_dir or state_dir_default()
    with locked(state_dir):
        return list_states(state_dir)
