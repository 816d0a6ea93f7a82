"""A system under test run from a definition file (clusters/system_def.py, docs/systems.md).

Every role's process is a node daemon named after the role, started by strandline, so killing
(SIGKILL of the daemon's cgroup or process group), pausing (cgroup freeze or SIGSTOP, per the
role's `pause`) and restarting (the role's stop signal, then its start command) work for every
role from what the definition says. Leaders, epochs and ISRs come from Kafka Metadata, as clients
see them (clusters/kafka_metadata.py). Works on any backend through the Node protocol only.
"""

from __future__ import annotations

import dataclasses
import logging
import shlex
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from clusters import broker_identity, daemon_control, jvm_clock, lazyfs, lazyfs_mount, software, store_proxy
from clusters.faketime import CLOCK_FAULTS, CLOCK_UNSKEWED, faketime_env, preload_library, wants_clock
from clusters.kafka_metadata import NO_ANSWER, KafkaMetadata, metadata_of, node_answers, quorum_leader
from clusters.lazyfs_mount import LOSE_UNSYNCED, wants_lazyfs
from clusters.node import Node, node_home
from clusters.node_files import log_tail, put_text
from clusters.ports import port_open
from clusters.system_def import (
    ZOOKEEPER_ROLE,
    RoleDef,
    SystemDefinition,
    config_values,
    new_cluster_id,
    own_role_values,
    render,
    render_file,
    role_placeholders,
    role_values,
)
from clusters.zookeeper_state import ZookeeperState
from foundation.config import TestConfig, fault_names
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 12
# How often readiness is asked: a port or a znode is cheap to look at; a Kafka request is not.
QUICK_CHECKS, QUICK_POLL_S, POLL_S = ("port", "zookeeper"), 0.1, 0.2
LAZYFS_DAEMON = "lazyfs"  # lazyfs, lazyfs1 ...: one FUSE daemon per data dir of a `lazyfs` role
# Settings of the own broker's code that only a definition reading them can honour: a test that
# changes one for a system whose definition never reads it is refused (`DefinedSystem.refusal`).
OWN_BROKER_SETTINGS = (
    "variant", "leader_election_policy", "eligible_leader_replicas", "isr_broker_epoch_check",
    "leader_epoch_checkpoint_fsync", "log_segment_bytes", "transaction_version",
)  # fmt: skip


def clock_faults_wanted(config: TestConfig) -> str | None:
    """ "named" when the test names a clock fault, "all" when `--nemesis all` may draw one, else None."""
    if fault_names(config) & CLOCK_FAULTS or any(s.get("do") in CLOCK_FAULTS for s in config.schedule):
        return "named"
    return "all" if wants_clock(config) else None


def _default(key: str) -> object:
    return next(f.default for f in dataclasses.fields(TestConfig) if f.name == key)


class DefinedSystem:
    """Lifecycle, Killable, Pausable, HasLogs, HasDataDirs, roles; leaders (Kafka Metadata) and
    the rest by what the definition says (`defined_system`)."""

    def __init__(
        self,
        config: TestConfig,
        definition: SystemDefinition,
        nodes: dict[str, list[Node]],
        *,
        python: Callable[[], str],
        cluster_id: str | None = None,
        spares: Sequence[Node] = (),
    ) -> None:
        self.config = config
        self.definition = definition
        self.role_nodes = nodes  # role name -> its nodes at the start, in id order
        self._python = python  # asked when needed: a remote backend knows it once it installed
        self.cluster_id = cluster_id or new_cluster_id()
        self.brokers = nodes[definition.brokers]
        self.spares = list(spares)  # broker nodes the member fault may start a broker on later
        self._role_of = {n.name: definition.role(r) for r, ns in nodes.items() for n in ns}
        self._role_of.update({n.name: definition.broker_role for n in self.spares})
        self.installed: dict[str, software.Installed] = {}  # software fetched for the nodes
        self.clock_refused = ""  # why the clock fault cannot skew this system's JVMs ("": it can)
        self.metadata = KafkaMetadata(
            self._metadata_servers, self.node_of_broker, node_of_endpoint=self.node_of_endpoint
        )
        # ZooKeeper's view of the cluster, when it has a ZooKeeper role (state, membership, readiness)
        self.zookeeper_state: ZookeeperState | None = None
        if ZOOKEEPER_ROLE in nodes:
            self.zookeeper_state = ZookeeperState(self._zookeeper_servers, self.node_of_broker)
        # What stands out in how the brokers name themselves (said once: harness.log, the report)
        self.identity_notes: list[str] = []
        # lose-unsynced: the data dirs of the `lazyfs` roles are mounted on clusters.lazyfs
        mountable = any(r.lazyfs and r.data_dirs for r in definition.roles)
        self.lazyfs = wants_lazyfs(config) and mountable
        asked = wants_lazyfs(
            dataclasses.replace(config, nemesis=tuple(n for n in config.nemesis if n != "all"))
        )
        if asked and not mountable:  # (`--nemesis all` just leaves the fault out)
            raise BadInput(
                f"system definition {definition.path}: roles.{definition.brokers}.data_dirs: "
                f"{LOSE_UNSYNCED} needs data dirs on a role with lazyfs = true, and none declares any"
            )

    # --- names and places ---------------------------------------------------------------------

    @property
    def python(self) -> str:
        """The Python on the nodes (`{python}`): one that can `import broker`."""
        return self._python()

    def home(self, node: Node) -> str:
        return node_home(node)

    def role_of(self, node: Node) -> RoleDef:
        return self._role_of[node.name]

    def roles(self) -> list[str]:
        return [r.name for r in self.definition.roles]

    def nodes_of_role(self, role: str) -> list[str]:
        """The names of the nodes running `role` (empty for a role the definition lacks)."""
        return [n.name for n in self.role_nodes.get(role, [])]

    def node_named(self, name: str) -> Node | None:
        for n in self._all_nodes():
            if n.name == name:
                return n
        return None

    def _all_nodes(self) -> list[Node]:
        return [*(n for nodes in self.role_nodes.values() for n in nodes), *self.spares]

    def _role_members(self, role: RoleDef) -> list[Node]:
        """The role's nodes in id order (the broker role's spares after its first nodes)."""
        members = list(self.role_nodes[role.name])
        return [*members, *self.spares] if role.name == self.definition.brokers else members

    @property
    def broker_daemon(self) -> str:
        return self.definition.brokers

    def _zookeeper_servers(self) -> str:
        role = self.definition.role(ZOOKEEPER_ROLE)
        return ",".join(f"{n.address}:{role.port}" for n in self.role_nodes[ZOOKEEPER_ROLE])

    # --- broker identity: what the system advertises ------------------------------------------

    def defined_node_id(self, node: Node) -> int:
        """The node id the definition gives the node (`{node_id}`: its role's `node_id` + index)."""
        role = self.role_of(node)
        index = [n.name for n in self._role_members(role)].index(node.name)
        return role.node_id + index

    def broker_endpoint(self, node: Node) -> str:
        return f"{node.address}:{self.definition.broker_role.port}"

    def broker_id(self, node: Node) -> int:
        """The broker id the cluster's Metadata lists at the node's address and port (what the
        system advertises), else the id the definition gives it."""
        advertised = self.metadata.advertised.get(self.broker_endpoint(node))
        return self.defined_node_id(node) if advertised is None else advertised

    def node_of_broker(self, broker_id: int) -> str | None:
        """The node whose address and port the broker advertises in Metadata; a broker not seen
        yet: the node the definition gives that id; None when no node is either, or when several
        nodes advertise that id (it names none of them: `KafkaMetadata.node_in` reads an id
        against the answer that carried it)."""
        nodes = [*self.brokers, *self.spares]
        advertised = self.metadata.advertised
        there = [n.name for n in nodes if advertised.get(self.broker_endpoint(n)) == broker_id]
        if there or broker_id in self.metadata.endpoints:
            return there[0] if len(there) == 1 else None
        unseen = [n for n in nodes if self.broker_endpoint(n) not in advertised]
        return next((n.name for n in unseen if self.defined_node_id(n) == broker_id), None)

    def node_of_endpoint(self, endpoint: str) -> str | None:
        """The broker node whose address and broker port are `endpoint` (host:port)."""
        return next(
            (n.name for n in [*self.brokers, *self.spares] if self.broker_endpoint(n) == endpoint), None
        )

    def bootstrap_servers(self) -> list[str]:
        return [self.broker_endpoint(b) for b in self.brokers]

    def _metadata_servers(self) -> list[str]:
        """Every broker node, spares included: a broker the member fault added answers too."""
        return [self.broker_endpoint(b) for b in [*self.brokers, *self.spares]]

    def controller(self) -> str | None:
        """The active controller: Metadata's controller id, or KRaft's quorum leader
        (DescribeQuorum asked of the controller role) when the definition says so."""
        found = self.definition.controller
        if found.kind != "describe-quorum":
            return self.metadata.controller()
        role = self.definition.role(found.role)
        port = role.ports[found.port] if found.port else role.port
        nodes = self.role_nodes[role.name]
        leader = quorum_leader([f"{n.address}:{port}" for n in nodes])
        return next((n.name for n in nodes if self.defined_node_id(n) == leader), None)

    # --- template values --------------------------------------------------------------------

    def values(self, node: Node) -> dict[str, str]:
        """Every template value for `node` (docs/systems.md lists them)."""
        role = self.role_of(node)
        out = config_values(self.config)
        for r in self.definition.roles:
            members = [(r.node_id + i, n.address) for i, n in enumerate(self.role_nodes[r.name])]
            out.update(role_values(r, members))
        out.update(own_role_values(role, out))
        index = [n.name for n in self._role_members(role)].index(node.name) + 1
        home = self.home(node)
        java = f"{self.config.java_home.rstrip('/')}/bin/java" if self.config.java_home else "java"
        out.update(
            {
                "id": str(index),
                "index": str(index - 1),
                "node_id": str(self.defined_node_id(node)),
                "name": node.name,
                "address": node.address,
                "home": home,
                "cluster_id": self.cluster_id,
                "python": self.python,
                "clock_file": self._clock_path(node),
                "bootstrap": ",".join(self.bootstrap_servers()),
                "java": java,
            }
        )
        for name, installed in self.installed.items():
            out.update(
                software.kind(name).values(self.config, installed, self._software_path(node, installed))
            )
        spare = node.name in {n.name for n in self.spares}
        for name, template in role.values.items():
            out[f"values.{name}"] = render(role.spare_values.get(name, template) if spare else template, out)
        return out

    def log_files(self, node: Node) -> list[str]:
        values = self.values(node)
        lazyfs_logs = [log_path for *_, log_path in self._lazyfs_mounts(node)]
        proxy_logs = [store_proxy.log_path(node)] if self.role_of(node).fronted else []
        role_logs = (render(p, values) for p in self.role_of(node).logs)
        return [self._daemon_log(node), *role_logs, *lazyfs_logs, *proxy_logs]

    def data_dirs(self, node: Node) -> list[str]:
        """Data dirs in Kafka's segment format (the replica-log checker reads them); others: none."""
        role = self.role_of(node)
        if role.data_format != "kafka":
            return []
        values = self.values(node)
        return [render(p, values) for p in role.data_dirs]

    def replica_logs_unavailable(self) -> str | None:
        role = self.definition.broker_role
        if role.data_format == "kafka" and role.data_dirs:
            for name, installed in self.installed.items():
                why = software.kind(name).unreadable_segments(installed)
                if why:
                    return f"the replica-log checks were not available for this system: {why}; the history checks decide alone"
            return None
        return (
            f"the replica-log checks were not available for this system: the data dirs of its "
            f"{role.name} role are not in Kafka's segment format (data_format = "
            f"{role.data_format!r} in {self.definition.path.name}); the history checks decide alone"
        )

    def _daemon_log(self, node: Node) -> str:
        """The start command's stdout and stderr (the role's `output`, else logs/<role>.out)."""
        role = self.role_of(node)
        return (
            render(role.output, self.values(node))
            if role.output
            else f"{self.home(node)}/logs/{role.name}.out"
        )

    def _clock_path(self, node: Node) -> str:
        return f"{self.home(node)}/clock"

    # --- software ---------------------------------------------------------------------------

    def refusal(self) -> str | None:
        """Why this test cannot run on this system, asked before anything is created: a setting
        the definition never reads, or what the software's release cannot do."""
        used = {p for role in self.definition.roles for p in role_placeholders(role)}
        for key in OWN_BROKER_SETTINGS:
            value, default = getattr(self.config, key), _default(key)
            read = {f"config.{key}", f"optional.{key}"} & used
            if value != default and not read and not self._software_reads(key):
                hint = " (Kafka's releases play that role: --kafka-version)" if key == "variant" else ""
                return (
                    f"{key} = {value} cannot apply to {self.definition.name}: its definition "
                    f"({self.definition.path.name}) never reads {{config.{key}}}{hint}"
                )
        for spec in self.definition.software:
            why = software.kind(spec.name).refusal(self.config, spec, self.definition)
            if why:
                return why
        return None

    def _software_reads(self, key: str) -> bool:
        return any(key in software.SETTINGS_READ.get(s.name, ()) for s in self.definition.software)

    def prepare(self, progress: software.Progress | None = None) -> None:
        """Refuse what cannot run (BadInput) and fetch the software the definition runs, on the
        controller, before any node exists (a first fetch of Kafka takes a while: `progress`)."""
        why = self.refusal()
        if why:
            raise BadInput(why)
        for spec in self.definition.software:
            if spec.name not in self.installed:
                self.installed[spec.name] = software.kind(spec.name).fetch(self.config, progress)

    def _software_path(self, node: Node, installed: software.Installed) -> str:
        """Where the software is on the node: the image's place, the controller's folder itself
        (netns nodes share the controller's files), or a copy under the node's home."""
        if installed.folder is None:
            return installed.node_path
        if self.config.backend == "netns":
            return str(installed.folder)
        return f"{self.home(node)}/software/{installed.name}-{installed.version}"

    def _install_software(self, node: Node) -> None:
        used = role_placeholders(self.role_of(node))
        for name, installed in self.installed.items():
            if installed.folder is None or self.config.backend == "netns":
                continue
            if not any(p.startswith(f"{name}.") for p in used):
                continue
            dest = self._software_path(node, installed)
            if node.exec(["test", "-e", f"{dest}/{software.MARKER}"], check=False).ok:
                continue
            node.exec(["mkdir", "-p", str(Path(dest).parent)])
            node.upload(str(installed.folder), dest)
            node.exec(["touch", f"{dest}/{software.MARKER}"])

    # --- Lifecycle ----------------------------------------------------------------------------

    def setup(self) -> None:
        """Roles in the file's order: install and start a role's nodes together, wait until they
        are ready, then the next role (a broker may need its storage or coordinator first);
        `startup = "together"`: every role's nodes start first, then each role is waited for."""
        self.prepare()
        together = self.definition.startup == "together"  # start everything, then wait in order
        if together:
            for role in self.definition.roles:
                self._start_role(role)
        for role in self.definition.roles:
            if not together:
                self._start_role(role)
            nodes = self.role_nodes[role.name]
            deadline = time.monotonic() + role.ready.timeout
            for node in nodes:
                self.wait_ready(node, timeout=max(1.0, deadline - time.monotonic()), everyone=True)
            if role.fronted:  # the roles after it reach the store through strandline's S3 proxy
                for node in nodes:
                    store_proxy.start(node, role, self.python)
        self._observe_identity()

    def _start_role(self, role: RoleDef) -> None:
        """Install and start the role's nodes (a first start: no registration to outwait)."""
        nodes = self.role_nodes[role.name]
        for node in nodes:
            self.install(node)
        if role.faketime and nodes:
            self._prove_clock(nodes[0])
        for node in nodes:
            self._start(node, fresh=True)

    def _observe_identity(self) -> None:
        """Ask every broker node whom its Metadata lists; say once what stands out (one id on
        several nodes, brokers that list only themselves)."""
        if self.definition.broker_role.ready.kind != "kafka":
            return  # a broker role that does not answer Kafka's protocol at bring-up: nothing to ask
        listings = self._listings(self.brokers)
        for note in broker_identity.notes(listings, self.node_of_endpoint):
            self._note(note)

    def _note(self, note: str) -> None:
        if note not in self.identity_notes:
            log.warning("broker identity: %s", note)
            self.identity_notes.append(note)

    def _listings(self, nodes: Sequence[Node]) -> list[broker_identity.Listing]:
        """What each node's broker lists in Metadata (those that answer)."""
        port = self.definition.broker_role.port
        out = []
        for node in nodes:
            try:
                answer = metadata_of(node.address, port, timeout=5.0, topics=False)
            except NO_ANSWER as e:
                log.debug("%s: no Metadata answer: %s", node.name, e)
                continue
            self.metadata._learn(answer)
            out.append(broker_identity.listing(node.name, self.broker_endpoint(node), answer))
        return out

    def install(self, node: Node) -> None:
        role, values = self.role_of(node), self.values(node)
        dirs = [f"{self.home(node)}/logs", str(Path(self._daemon_log(node)).parent)]
        dirs += [render(d, values) for d in role.data_dirs]
        node.exec(["mkdir", "-p", *dirs])
        self._install_software(node)
        for upload in role.upload:
            dest = render(upload.dest, values)
            node.exec(["mkdir", "-p", str(Path(dest).parent)])
            node.upload(str(upload.source), dest)
        for f in role.files:
            path = render(f.path, values)
            node.exec(["mkdir", "-p", str(Path(path).parent)])
            put_text(node, render_file(f, values), path)
        if role.faketime:
            put_text(node, CLOCK_UNSKEWED, self._clock_path(node))
        mounts = self._lazyfs_mounts(node)
        for daemon, data_dir, backing, sock, log_path in mounts:
            lazyfs_mount.mount(node, self.python, daemon, backing, data_dir, sock, log_path)
        self._run_install_commands(node)
        for _daemon, data_dir, _backing, sock, _log in mounts:  # what install wrote survives a drop
            synced = node.exec(lazyfs.ctl_argv(self.python, sock, "sync"), timeout=60, check=False)
            if not synced.ok:
                raise InfrastructureError(
                    f"{node.name}: lazyfs sync of {data_dir} failed: {synced.stderr.strip()}"
                )

    # --- lose-unsynced: data dirs on lazyfs -----------------------------------------------------

    def _lazyfs_mounts(self, node: Node) -> list[tuple[str, str, str, str, str]]:
        """(daemon, data dir, backing dir, control socket, log) of each lazyfs mount on the node."""
        role = self.role_of(node)
        if not (self.lazyfs and role.lazyfs):
            return []
        values, home = self.values(node), self.home(node)
        return [
            (f"{LAZYFS_DAEMON}{i or ''}", d, f"{d.rstrip('/')}.backing", f"{home}/lazyfs{i}.sock",
             f"{home}/logs/lazyfs{i}.log")
            for i, d in enumerate(render(p, values) for p in role.data_dirs)
        ]  # fmt: skip

    def lazyfs_sockets(self, node: Node) -> list[str]:
        """Control sockets of the lazyfs mounts under this node's data dirs (empty: not on lazyfs)."""
        return [sock for _daemon, _dir, _backing, sock, _log in self._lazyfs_mounts(node)]

    def _prove_clock(self, node: Node) -> None:
        """A JVM role under the faketime preload, in a test with clock faults: prove on its first
        node, before it starts, that the JVM follows the clock file. Refused (exit 2) when the
        test names a clock fault; `--nemesis all` leaves the fault out (no clock file then)."""
        wanted = clock_faults_wanted(self.config)
        if wanted is None:
            return
        role, values = self.role_of(node), self.values(node)
        command = render(role.start, values) if isinstance(role.start, str) else render(role.start[0], values)
        if not jvm_clock.is_java(command):
            return
        env = {**faketime_env(self._clock_path(node), preload_library(node)), **self._role_env(node)}
        why = jvm_clock.refusal(node, shlex.split(command)[0], env, f"{self.home(node)}/clock-proof")
        if why is None:
            log.info("%s: the JVM of role %s follows the faketime clock file", node.name, role.name)
            return
        if wanted == "named":
            raise BadInput(f"clock cannot run against {self.definition.name}: {why}")
        log.warning("--nemesis all leaves clock faults out: %s", why)
        self.clock_refused = why

    def _role_env(self, node: Node) -> dict[str, str]:
        values = self.values(node)
        return {k: render(v, values) for k, v in self.role_of(node).env.items()}

    def _start(self, node: Node, *, fresh: bool = False) -> int:
        """Start the node's role; `fresh`: it never ran here (no registration to outwait)."""
        role, values = self.role_of(node), self.values(node)
        if role.ready.kind == "zookeeper" and self.zookeeper_state is not None:
            self.zookeeper_state.starting(self.broker_id(node), fresh=fresh)
        if isinstance(role.start, str):
            argv = ["sh", "-c", f"exec {render(role.start, values)}"]
        else:
            argv = [render(a, values) for a in role.start]
        env = self._role_env(node)
        if role.faketime and wants_clock(self.config):
            env = {**faketime_env(self._clock_path(node), preload_library(node)), **env}
        log.info("%s: starting %s: %s", node.name, role.name, shlex.join(argv))
        return node.start_daemon(role.name, argv, env=env, log_path=self._daemon_log(node))

    def teardown(self) -> None:
        self.close()
        for role in reversed(self.definition.roles):
            for node in self._role_members(role):  # the broker role's spares too
                node.signal_daemon(role.name, signal.SIGKILL)
                if role.fronted:
                    store_proxy.stop(node)
                for daemon, data_dir, _backing, _sock, _log in self._lazyfs_mounts(node):
                    node.exec(["umount", "-l", data_dir], check=False)
                    node.signal_daemon(daemon, signal.SIGKILL)

    def close(self) -> None:
        self.metadata.close()
        if self.zookeeper_state is not None:
            self.zookeeper_state.close()

    # --- readiness ------------------------------------------------------------------------------

    def wait_ready(self, node: Node, timeout: float | None = None, *, everyone: bool = False) -> None:
        """Until the node's role serves (its `ready` check); `everyone`: a broker must also list
        every broker in its Metadata (bring-up), else itself. Raises with its log's last lines."""
        role = self.role_of(node)
        timeout = role.ready.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if node.daemon_pid(role.name) is None:
                raise InfrastructureError(
                    f"{role.name} on {node.name} exited; last lines of its log: {self._log_tail(node)}"
                )
            why = self._not_ready(node, role, everyone)
            if why is None:
                return
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"{role.name} on {node.name} not ready within {timeout:g}s ({why}); "
                    f"last lines of its log: {self._log_tail(node)}"
                )
            time.sleep(QUICK_POLL_S if role.ready.kind in QUICK_CHECKS else POLL_S)

    def _not_ready(self, node: Node, role: RoleDef, everyone: bool) -> str | None:
        kind = role.ready.kind
        if kind == "none":
            return None
        if kind in ("port", "zookeeper") and not port_open(node.address, role.port):
            return f"port {role.port} closed"
        if kind == "port":
            return None
        if kind == "zookeeper" and self.zookeeper_state is not None:
            registered = self.zookeeper_state.registered_anew(self.broker_id(node))
            return None if registered else "not registered anew in ZooKeeper's /brokers/ids"
        if kind == "command":
            command = render(role.ready.command, self.values(node))
            done = node.exec(["sh", "-c", command], timeout=30, check=False)
            return None if done.ok else f"ready command exited {done.exit_code}"
        brokers = {n.name for n in [*self.brokers, *self.spares]}
        if node.name not in brokers:  # a role of its own answering Kafka's protocol
            return node_answers(node.address, role.port, [])
        return self._broker_not_ready(node, role, everyone)

    def _broker_not_ready(self, node: Node, role: RoleDef, everyone: bool) -> str | None:
        """A broker is ready once it answers ApiVersions and Metadata listing every broker
        (`everyone`, at bring-up; else itself); brokers that do not know each other
        (`metadata.brokers = "self"`) list only themselves. A listing none of whose brokers is at a
        broker node's address never maps to the nodes: InfrastructureError at once."""
        try:
            answer = metadata_of(node.address, role.port, timeout=5.0, topics=False)
        except NO_ANSWER as e:
            return f"{node.address}:{role.port} does not answer ApiVersions and Metadata ({type(e).__name__} {e})"
        seen = broker_identity.listing(node.name, self.broker_endpoint(node), answer)
        if broker_identity.unmappable(seen, self.node_of_endpoint):
            others = [n for n in self.brokers if n.name != node.name]
            raise InfrastructureError(broker_identity.unmappable_error([seen, *self._listings(others)]))
        lists_all = everyone and self.definition.metadata.brokers == "all"
        wanted = self.bootstrap_servers() if lists_all else [self.broker_endpoint(node)]
        advertised = {e for _, e in seen.brokers}
        missing = [b for b in wanted if b not in advertised]
        if not missing:
            return None
        hint = ""
        if broker_identity.lists_only_itself(seen) and len(wanted) > 1:
            hint = (
                f"; it lists only itself: brokers that do not know each other need "
                f'metadata.brokers = "self" in {self.definition.path.name} (docs/systems.md)'
            )
        return (
            f"{node.address}:{role.port} lists no broker at {', '.join(missing)} in its metadata "
            f"(it lists {broker_identity.said(seen)}){hint}"
        )

    def _log_tail(self, node: Node) -> str:
        return log_tail(node, self._daemon_log(node), LOG_TAIL_LINES)

    # --- Killable, Pausable ---------------------------------------------------------------------

    def kill(self, node: Node) -> None:
        node.signal_daemon(self.role_of(node).name, signal.SIGKILL)

    def _run_install_commands(self, node: Node) -> None:
        role, values = self.role_of(node), self.values(node)
        for command in role.install:
            done = node.exec(["sh", "-c", render(command, values)], timeout=300, check=False)
            if not done.ok:
                raise InfrastructureError(
                    f"{node.name}: install command of role {role.name} failed "
                    f"(exit {done.exit_code}): {render(command, values)}: {done.stderr.strip()[-500:]}"
                )

    def _has_empty_data_dir(self, node: Node) -> bool:
        values = self.values(node)
        dirs = [render(d, values) for d in self.role_of(node).data_dirs]
        script = 'for d in "$@"; do [ -z "$(ls -A "$d" 2>/dev/null)" ] && exit 0; done; exit 1'
        return bool(dirs) and node.exec(["sh", "-c", script, "sh", *dirs], check=False).ok

    def start(self, node: Node, *, wait_ready: bool = False) -> None:
        if node.daemon_pid(self.role_of(node).name) is None:
            if self.role_of(node).install and self._has_empty_data_dir(node):
                # a wiped (replaced) disk: prepared again as an operator would (Kafka: formatted)
                log.info("%s: a data dir is empty: running the install commands again", node.name)
                self._run_install_commands(node)
            self._start(node)
        # A role other than the brokers serves again once its ready check passes, and that check
        # may prepare it as bring-up did (an in-memory store's bucket, created by its command).
        if wait_ready or self.role_of(node).name != self.definition.brokers:
            self.wait_ready(node)

    def stop(self, node: Node) -> None:
        """The role's stop signal, then SIGKILL when it has not exited within its stop timeout."""
        role = self.role_of(node)
        if node.daemon_pid(role.name) is None:
            return
        if role.stop_signal == signal.SIGTERM:
            daemon_control.stop_gracefully(node, role.name, role.stop_timeout, poll=0.1)
            return
        daemon_control.thaw(node, role.name)
        node.signal_daemon(role.name, role.stop_signal)
        if not daemon_control.wait_gone(node, role.name, role.stop_timeout):
            node.signal_daemon(role.name, signal.SIGKILL)

    def restart(self, node: Node) -> None:
        self.stop(node)
        self.start(node)

    def pause(self, node: Node) -> None:
        self._hold(node, held=True)

    def resume(self, node: Node) -> None:
        self._hold(node, held=False)

    def _hold(self, node: Node, held: bool) -> None:
        """Stop the node's daemon in place or let it go, the same way both ways: SIGSTOP/SIGCONT
        where the role asks for signals (`pause = "sigstop"`), else the node's own freeze."""
        role = self.role_of(node)
        if role.pause == "sigstop":
            node.signal_daemon(role.name, signal.SIGSTOP if held else signal.SIGCONT)
        else:
            (daemon_control.freeze if held else daemon_control.thaw)(node, role.name)
