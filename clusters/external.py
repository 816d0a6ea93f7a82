"""A cluster strandline did not start (clusters/external_def.py): nothing is installed, started,
stopped or removed; faults run the commands the definition grants, over ssh.

The nodes are the definition's brokers. A node's commands and file copies go over the ssh
backend's connection (paramiko, host keys verified against known_hosts); a node without ssh runs
nothing. Bring-up only connects and waits until every broker answers ApiVersions and lists every
node's broker in Metadata; brokers are known by the host:port they advertise (clusters/kafka_metadata.py),
and leaders, epochs and ISRs come from Metadata as clients see them. Tear-down closes the
connections: the cluster stays as it was found, but for what a fault broke, which its heal mends
(a killed broker is started again, a partition healed).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clusters import broker_identity
from clusters.external_def import ExternalDefinition, ExternalNodeDef, render
from clusters.kafka_metadata import (
    NO_ANSWER,
    KafkaMetadata,
    LeadersFromMetadata,
    high_watermark_of,
    metadata_of,
)
from clusters.node import ExecResult, Node
from clusters.ssh_backend import SshNode
from clusters.state import ClusterState
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

COMMAND_TIMEOUT_S = 120.0
# $1 a data dir, $2 the test's topics as `t0|t1`: its files, and those of the topics' partition
# folders but their indexes, relative to it, one a line.
_TEST_FILES = r"""
cd "$1" || exit 1
for f in * .[!.]*; do [ -f "$f" ] && echo "$f"; done
for d in *; do
  [ -d "$d" ] || continue
  topic=${d%-*}
  case "|$2|" in *"|$topic|"*) ;; *) continue ;; esac
  for f in "$d"/*; do
    case "$f" in *.index|*.timeindex) continue ;; esac
    [ -f "$f" ] && echo "$f"
  done
done
exit 0
"""


class ExternalNode:
    """A broker's host: commands and files over ssh when the definition gives it, else nothing."""

    def __init__(self, spec: ExternalNodeDef, cluster: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.ssh = SshNode(spec.name, spec.ssh, cluster) if spec.ssh is not None else None
        self._address = spec.address or None

    def __repr__(self) -> str:
        return f"ExternalNode({self.name!r}, {self.spec.broker})"

    @property
    def address(self) -> str:
        """The node's IP address (what a partition command drops): the definition's, else the
        broker's host resolved."""
        if self._address is None:
            try:
                infos = socket.getaddrinfo(self.spec.host, self.spec.port, socket.AF_INET, socket.SOCK_STREAM)
            except socket.gaierror as e:
                raise BadInput(f"{self.name}: cannot resolve {self.spec.host}: {e.strerror}") from None
            self._address = str(infos[0][4][0])
        return self._address

    @property
    def hostname(self) -> str:
        return self.spec.host

    def _remote(self, what: str) -> SshNode:
        if self.ssh is None:
            raise InfrastructureError(f"{self.name}: cannot {what}: the definition gives this node no ssh")
        return self.ssh

    def handle(self) -> dict[str, Any]:
        """How a heal recipe reaches this node after a controller crash (the ssh backend's way)."""
        return self._remote("be reached again").handle()

    def exec(self, argv: list[str], **options: Any) -> ExecResult:
        """The Node protocol's `exec` (timeout, check, input, env), over the node's ssh."""
        return self._remote("run commands").exec(argv, **options)

    def download(self, remote_path: str, local_path: str) -> None:
        self._remote("copy files").download(remote_path, local_path)

    def upload(self, local_path: str, remote_path: str) -> None:
        raise InfrastructureError(f"{self.name}: nothing is installed on a cluster strandline did not start")

    def start_daemon(
        self, name: str, argv: list[str], *, env: dict[str, str] | None = None, log_path: str
    ) -> int:
        raise InfrastructureError(f"{self.name}: strandline starts no process on a cluster it did not start")

    def daemon_pid(self, name: str) -> int | None:
        return None  # strandline started nothing here

    def signal_daemon(self, name: str, signal: int) -> None:
        raise InfrastructureError(f"{self.name}: strandline signals no process of a cluster it did not start")

    def close(self) -> None:
        if self.ssh is not None:
            self.ssh.close()


class ExternalNetwork:
    """The nodes of a cluster strandline did not start: no state file, nothing to remove."""

    backend = "external"

    def __init__(self, cluster: str, definition: ExternalDefinition, state_dir: Any) -> None:
        self.cluster = cluster
        self.state_dir = state_dir
        self.state: ClusterState | None = None
        self.nodes: dict[str, ExternalNode] = {n.name: ExternalNode(n, cluster) for n in definition.nodes}

    def create(self, info: dict[str, object] | None = None) -> None:
        """Connect to every host that has ssh (a bad host or key stops the run here)."""
        for node in self.nodes.values():
            if node.ssh is not None:
                node.ssh.client()
            _ = node.address

    def destroy(self) -> list[str]:
        for node in self.nodes.values():
            node.close()
        return []


class ExternalSystem(LeadersFromMetadata):
    """Lifecycle (connect and wait, nothing started or stopped), Killable, Pausable, HasLeaders,
    HasLogs, HasDataDirs and faults by command (`clusters.sut.FaultsByCommand`)."""

    def __init__(
        self, config: TestConfig, definition: ExternalDefinition, nodes: Sequence[ExternalNode]
    ) -> None:
        self.config = config
        self.definition = definition
        self.brokers = list(nodes)
        self.metadata = KafkaMetadata(
            self.bootstrap_servers, self.node_of_broker, node_of_endpoint=self.node_of_endpoint
        )
        self.identity_notes: list[str] = []

    # --- names -----------------------------------------------------------------------------------

    def _spec(self, node: Node) -> ExternalNodeDef:
        return next(b.spec for b in self.brokers if b.name == node.name)

    def bootstrap_servers(self) -> list[str]:
        return [b.spec.broker for b in self.brokers]

    def node_of_endpoint(self, endpoint: str) -> str | None:
        """The node whose broker advertises `endpoint` (as the definition writes it, or its address)."""
        for b in self.brokers:
            if endpoint in (b.spec.broker, f"{b.address}:{b.spec.port}"):
                return b.name
        return None

    def node_of_broker(self, broker_id: int) -> str | None:
        endpoint = self.metadata.endpoints.get(broker_id)
        return self.node_of_endpoint(endpoint) if endpoint is not None else None

    def broker_id(self, node: Node) -> int:
        spec = self._spec(node)
        for endpoint in (spec.broker, f"{node.address}:{spec.port}"):
            if endpoint in self.metadata.advertised:
                return self.metadata.advertised[endpoint]
        raise InfrastructureError(f"{node.name}: no broker advertises {spec.broker} in Metadata")

    def registered_brokers(self) -> list[int]:
        return self.metadata.registered_brokers()

    # --- lifecycle -------------------------------------------------------------------------------

    def setup(self) -> None:
        """Nothing is installed or started: wait until every broker answers and lists every node's."""
        deadline = time.monotonic() + self.definition.ready_timeout
        for node in self.brokers:
            while (why := self._not_ready(node)) is not None:
                if time.monotonic() > deadline:
                    raise InfrastructureError(
                        f"{self.definition.name}: the broker of {node.name} is not ready within "
                        f"{self.definition.ready_timeout:g}s ({why})"
                    )
                time.sleep(0.5)
        self._refuse_used_topics()
        log.info("%s: every broker answers (%s)", self.definition.name, ", ".join(self.bootstrap_servers()))

    def _refuse_used_topics(self) -> None:
        """The history's values are unique within one run only: records an earlier run left in the
        test's topics would read as this run's (duplicates, phantoms). Refused before any load."""
        wanted = {f"t{i}" for i in range(self.config.topics)}
        nodes = {b.name: b.spec for b in self.brokers}
        for (topic, partition), state in sorted(self.metadata.partition_state().items()):
            leader = nodes.get(str(state.get("leader")))
            if topic not in wanted or leader is None:
                continue
            try:
                high_watermark = high_watermark_of(leader.host, leader.port, topic, partition)
            except NO_ANSWER:
                continue
            if high_watermark:
                raise BadInput(
                    f"{self.definition.name}: topic {topic} already holds records ({topic}-{partition} up to "
                    f"offset {high_watermark}), which would read as this run's: delete the test's topics "
                    f"first (kafka-topics.sh --bootstrap-server {leader.broker} --delete --topic {topic})"
                )

    def _not_ready(self, node: ExternalNode) -> str | None:
        spec = node.spec
        try:
            answer = metadata_of(spec.host, spec.port, timeout=5.0, topics=False)
        except NO_ANSWER as e:
            return f"{spec.broker} does not answer ApiVersions and Metadata ({type(e).__name__} {e})"
        seen = broker_identity.listing(node.name, spec.broker, answer)
        if broker_identity.unmappable(seen, self.node_of_endpoint):
            raise InfrastructureError(broker_identity.unmappable_error([seen]))
        listed = {e for _, e in seen.brokers}
        missing = [
            b.spec.broker for b in self.brokers if not {b.spec.broker, f"{b.address}:{b.spec.port}"} & listed
        ]
        if missing:
            return f"{spec.broker} lists no broker at {', '.join(missing)} (it lists {broker_identity.said(seen)})"
        return None

    def teardown(self) -> None:
        """Nothing strandline did not start is stopped."""

    def close(self) -> None:
        self.metadata.close()

    # --- logs and data dirs ----------------------------------------------------------------------

    def log_files(self, node: Node) -> list[str]:
        return list(self._spec(node).logs)

    def data_dirs(self, node: Node) -> list[str]:
        return list(self._spec(node).data_dirs)

    def collect_data(self, node: Node, dest: Path) -> None:
        """The test's topic-partition folders and the data dir's own files (checkpoints), without
        the preallocated indexes (the replica-log checks read segments): a cluster's long-lived
        data dirs hold far more than the test wrote. Several data dirs go to dest/<folder name>/."""
        dirs = self.data_dirs(node)
        topics = "|".join(f"t{i}" for i in range(self.config.topics))
        for data_dir in dirs:
            found = node.exec(["sh", "-c", _TEST_FILES, "files", data_dir, topics], timeout=COMMAND_TIMEOUT_S)
            target = dest / Path(data_dir).name if len(dirs) > 1 else dest
            for relative in found.stdout.splitlines():
                try:
                    node.download(f"{data_dir.rstrip('/')}/{relative}", str(target / relative))
                except InfrastructureError as e:
                    log.warning("%s: cannot collect %s/%s: %s", node.name, data_dir, relative, e)

    def replica_logs_unavailable(self) -> str | None:
        lacking = [b.name for b in self.brokers if not b.spec.data_dirs]
        if not lacking:
            return None
        return (
            f"the replica-log checks were not available: {self.definition.path.name} gives no data_dirs "
            f"for {', '.join(lacking)} (a cluster strandline did not start: its brokers' logs are "
            "collected only from the paths it names)"
        )

    # --- faults by command ----------------------------------------------------------------------

    def fault_refusal(self, fault: str) -> str | None:
        return self.definition.missing(fault)

    def values(self, node: Node, **more: str | list[str]) -> dict[str, str | list[str]]:
        spec = self._spec(node)
        return {
            "name": node.name,
            "address": node.address,
            "broker": spec.broker,
            "host": spec.host,
            "port": str(spec.port),
            "data_dir": spec.data_dirs[0] if spec.data_dirs else "",
            "peers": [b.address for b in self.brokers if b.name != node.name],
            **more,
        }

    def command_argv(self, command: str, node: Node, **more: str | list[str]) -> list[str]:
        template = self._spec(node).commands.get(command)
        if not template:
            raise BadInput(f"{node.name}: no {command} command in {self.definition.path.name}")
        return ["sh", "-c", render(template, self.values(node, **more))]

    def run(self, command: str, node: Node, **more: str | list[str]) -> None:
        argv = self.command_argv(command, node, **more)
        log.info("%s: %s: %s", node.name, command, argv[-1])
        node.exec(argv, timeout=COMMAND_TIMEOUT_S)

    def heal_argv(self, fault: str, node: Node) -> list[str] | None:
        """The command that undoes `fault` on `node` (the ledger's heal recipe after a crash)."""
        undo = {"kill": "start", "pause": "resume", "partition": "heal"}.get(fault)
        if undo is None or not self._spec(node).commands.get(undo):
            return None
        return self.command_argv(undo, node)

    def kill(self, node: Node) -> None:
        self.run("kill", node)

    def start(self, node: Node, *, wait_ready: bool = False) -> None:
        self.run("start", node)

    def restart(self, node: Node) -> None:
        self.run("stop", node)
        self.run("start", node)

    def pause(self, node: Node) -> None:
        self.run("pause", node)

    def resume(self, node: Node) -> None:
        self.run("resume", node)

    def cut(self, node: Node, drop: list[str]) -> None:
        """Stop `node` hearing from the addresses `drop` (the partition command, `{drop}`)."""
        self.run("partition", node, drop=drop)

    def mend(self, node: Node) -> None:
        self.run("heal", node)


def external_system(
    config: TestConfig, definition: ExternalDefinition, network: ExternalNetwork
) -> ExternalSystem:
    return ExternalSystem(config, definition, list(network.nodes.values()))
