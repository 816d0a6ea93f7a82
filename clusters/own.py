"""The own system under test: ZooKeeper on its own node plus N own brokers (broker i on node ni).

Works on any backend through the Node protocol only: files are written locally and uploaded,
processes are started with `start_daemon`, everything else is `exec`. ZooKeeper runs on a node of
its own so that the nemesis can partition brokers from it. When the test has clock faults
(`wants_clock`), brokers start with libfaketime preloaded, reading their clock offset from a
per-node file (`clock_file(node)`) that the clock nemesis rewrites; monotonic clocks stay real so
timeouts and timed waits keep working.
"""

from __future__ import annotations

import logging
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from broker.config import render_properties
from clusters import daemon_control, zookeeper
from clusters.broker_ids import broker_id_of, node_of_broker_id
from clusters.faketime import CLOCK_UNSKEWED, faketime_env, preload_library, wants_clock
from clusters.lazyfs_mount import wants_lazyfs
from clusters.node import Node, node_home
from clusters.ports import port_open
from clusters.zookeeper_state import ZookeeperState
from foundation.config import TestConfig
from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
BROKER = "broker"  # daemon names on the nodes
ZOOKEEPER = "zookeeper"
LAZYFS = "lazyfs"


@dataclass(frozen=True)
class BrokerLayout:
    """Where one broker's files live on its node."""

    home: str
    config_path: str
    data_dir: str
    log_path: str
    clock_file: str
    backing_dir: str  # with lazyfs: where data_dir's synced contents really live
    lazyfs_socket: str
    lazyfs_log: str


def broker_layout(home: str) -> BrokerLayout:
    return BrokerLayout(
        home=home,
        config_path=f"{home}/broker.properties",
        data_dir=f"{home}/data",
        log_path=f"{home}/logs/broker.log",
        clock_file=f"{home}/clock",
        backing_dir=f"{home}/data.backing",
        lazyfs_socket=f"{home}/lazyfs.sock",
        lazyfs_log=f"{home}/logs/lazyfs.log",
    )


def broker_settings(
    config: TestConfig, broker_id: int, address: str, zookeeper_connect: str, data_dir: str
) -> dict[str, str]:
    """Every broker setting the test config reaches, under Kafka's names (docs/broker-variants.md)."""
    listener = f"PLAINTEXT://{address}:{BROKER_PORT}"
    settings = {
        "broker.id": str(broker_id),
        "listeners": listener,
        "advertised.listeners": listener,
        "log.dirs": data_dir,
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.session.timeout.ms": str(config.zookeeper_session_timeout_ms),
        "num.partitions": str(config.partitions),
        "default.replication.factor": str(config.replication_factor),
        "min.insync.replicas": str(config.min_insync),
        "unclean.leader.election.enable": "true" if config.unclean_election else "false",
        "eligible.leader.replicas.enable": "true" if config.eligible_leader_replicas else "false",
        "isr.broker.epoch.check.enable": "true" if config.isr_broker_epoch_check else "false",
        "replication.truncation": config.variant,
        "leader.election.policy": config.leader_election_policy,
        "replica.high.watermark.checkpoint.interval.ms": str(
            config.replica_high_watermark_checkpoint_interval_ms
        ),
        "replica.lag.time.max.ms": str(config.replica_lag_time_max_ms),
        "transaction.version": str(config.transaction_version),
        "auto.create.topics.enable": "false",
    }
    if config.log_flush_interval_messages > 0:  # unset: never fsync on append, Kafka's default
        settings["log.flush.interval.messages"] = str(config.log_flush_interval_messages)
    if config.log_segment_bytes > 0:
        settings["log.segment.bytes"] = str(config.log_segment_bytes)
    if not config.leader_epoch_checkpoint_fsync:  # KAFKA-16541's unsafe twin
        settings["leader.epoch.checkpoint.fsync"] = "false"
    return settings


def render_broker_properties(
    config: TestConfig, broker_id: int, address: str, zookeeper_connect: str, data_dir: str
) -> str:
    settings = broker_settings(config, broker_id, address, zookeeper_connect, data_dir)
    return render_properties(settings, header="written by strandline (clusters/own.py)")


def broker_command(python: str, config_path: str) -> list[str]:
    return [python, "-m", "broker", "--config", config_path]


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail) if tail else "(empty log)"


class OwnSystem:
    """ZooKeeper + own brokers; implements Lifecycle, Killable, Pausable, HasLeaders, HasLogs,
    HasDataDirs, HasMembership (spare nodes join, brokers leave, partitions are reassigned through
    ZooKeeper: clusters/zookeeper_state.py)."""

    def __init__(
        self,
        config: TestConfig,
        brokers: Sequence[Node],
        zookeeper_node: Node,
        *,
        python: str = sys.executable,
        ready_timeout: float = 60.0,
        spares: Sequence[Node] = (),
    ) -> None:
        self.config = config
        self.initial_brokers = list(brokers)  # started by setup; the spares wait for `add_broker`
        self.brokers = [*brokers, *spares]  # broker i runs on the i-th of these
        self._installed_spares: set[str] = set()
        self.zookeeper_node = zookeeper_node
        self.python = python
        self.ready_timeout = ready_timeout
        self.lazyfs = wants_lazyfs(config)
        self.skews_clocks = wants_clock(config)
        self._stale_sessions: dict[int, int | None] = {}  # broker id -> session of its last process
        self.zookeeper_state = ZookeeperState(self.zookeeper_connect, self.node_of_broker)

    # --- names and places ---------------------------------------------------------------------

    def home(self, node: Node) -> str:
        """The node's working directory (netns: under the work dir; other backends: their own)."""
        return node_home(node)

    def layout(self, node: Node) -> BrokerLayout:
        return broker_layout(self.home(node))

    def broker_id(self, node: Node) -> int:
        """Kafka's broker id (`broker.id` / `node.id`) of the broker on `node` (1..N, in node order)."""
        return broker_id_of(self.brokers, node)

    def node_of_broker(self, broker_id: int) -> str | None:
        return node_of_broker_id(self.brokers, broker_id)

    @property
    def broker_daemon(self) -> str:
        return BROKER

    def zookeeper_connect(self) -> str:
        return f"{self.zookeeper_node.address}:{ZOOKEEPER_PORT}"

    def bootstrap_servers(self) -> list[str]:
        return [f"{b.address}:{BROKER_PORT}" for b in self.initial_brokers]

    def clock_file(self, node: Node) -> str:
        """The file holding this broker's clock offset (libfaketime syntax, e.g. "+30s"); "" when
        the test has no clock fault, so its brokers run without libfaketime."""
        return self.layout(node).clock_file if self.skews_clocks else ""

    # --- Lifecycle ----------------------------------------------------------------------------

    def setup(self) -> None:
        # Brokers spend seconds importing before they dial ZooKeeper (and then retry for 15 s):
        # start everything at once and wait afterwards, so the JVM and the imports overlap.
        deadline = time.monotonic() + self.ready_timeout
        self.start_zookeeper(wait=False)
        for node in self.initial_brokers:
            self._install_broker(node)
            self._start_broker(node, fresh=True)
        self.wait_zookeeper(timeout=max(1.0, deadline - time.monotonic()))
        for node in self.initial_brokers:
            self.wait_ready(node, timeout=max(1.0, deadline - time.monotonic()))

    def teardown(self) -> None:
        """Kill every process; files stay for `collect` (the backend removes its directories)."""
        self.close()
        for node in self.brokers:
            node.signal_daemon(BROKER, signal.SIGKILL)
            if self.lazyfs:
                node.exec(["umount", "-l", self.layout(node).data_dir], check=False)
                node.signal_daemon(LAZYFS, signal.SIGKILL)
        self.zookeeper_node.signal_daemon(ZOOKEEPER, signal.SIGKILL)

    def close(self) -> None:
        self.zookeeper_state.close()

    # --- ZooKeeper ----------------------------------------------------------------------------

    def start_zookeeper(self, *, wait: bool = True) -> None:
        node = self.zookeeper_node
        home = self.home(node)
        node.exec(["mkdir", "-p", f"{home}/zookeeper", f"{home}/logs"])
        cfg_text = zookeeper.render_config(
            data_dir=f"{home}/zookeeper",
            client_address=node.address,
            client_port=ZOOKEEPER_PORT,
            # ZooKeeper clamps sessions to maxSessionTimeout: let the configured timeout through.
            max_session_timeout_ms=max(10_000, self.config.zookeeper_session_timeout_ms),
        )
        cfg_path = f"{home}/zoo.cfg"
        self._put(node, cfg_text, cfg_path)
        node.start_daemon(ZOOKEEPER, zookeeper.command(cfg_path), log_path=self.zookeeper_log())
        if wait:
            self.wait_zookeeper()

    def zookeeper_log(self) -> str:
        return f"{self.home(self.zookeeper_node)}/logs/zookeeper.log"

    def wait_zookeeper(self, timeout: float | None = None) -> None:
        """Until ZooKeeper accepts connections; else one error quoting its log."""
        node, log_path = self.zookeeper_node, self.zookeeper_log()
        timeout = self.ready_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not port_open(node.address, ZOOKEEPER_PORT):
            if node.daemon_pid(ZOOKEEPER) is None:
                raise InfrastructureError(
                    f"ZooKeeper on {node.name} exited at start; log: {self._log_tail(node, log_path)}"
                )
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"ZooKeeper on {node.name} did not listen on {node.address}:{ZOOKEEPER_PORT} "
                    f"within {timeout:g}s; log: {self._log_tail(node, log_path)}"
                )
            time.sleep(0.1)

    def registered_brokers(self) -> list[int]:
        return self.zookeeper_state.registered_brokers()

    # --- brokers ------------------------------------------------------------------------------

    def _put(self, node: Node, text: str, remote_path: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".tmp", delete=False) as f:
            f.write(text)
            local = f.name
        try:
            node.upload(local, remote_path)
        finally:
            Path(local).unlink(missing_ok=True)

    def _install_broker(self, node: Node) -> None:
        lay = self.layout(node)
        node.exec(["mkdir", "-p", lay.data_dir, str(Path(lay.log_path).parent)])
        props = render_broker_properties(
            self.config, self.broker_id(node), node.address, self.zookeeper_connect(), lay.data_dir
        )
        self._put(node, props, lay.config_path)
        self._put(node, CLOCK_UNSKEWED, lay.clock_file)
        if self.lazyfs:
            self._mount_lazyfs(node)

    def _mount_lazyfs(self, node: Node) -> None:
        """Put the data dir on lazyfs (un-fsynced writes can be dropped) and wait until it answers."""
        from clusters import lazyfs_mount  # the power-loss fault's FUSE layer (imported only when asked)

        lay = self.layout(node)
        lazyfs_mount.mount(
            node, self.python, LAZYFS, lay.backing_dir, lay.data_dir, lay.lazyfs_socket, lay.lazyfs_log
        )

    def lazyfs_sockets(self, node: Node) -> list[str]:
        """Control sockets of the lazyfs under this node's data dirs (empty: not on lazyfs)."""
        if not self.lazyfs or node.name == self.zookeeper_node.name:
            return []
        return [self.layout(node).lazyfs_socket]

    def _start_broker(self, node: Node, *, fresh: bool = False) -> int:
        """Start the broker process; `fresh` (setup): there is no earlier registration to outwait."""
        lay = self.layout(node)
        broker_id = self.broker_id(node)
        self._stale_sessions[broker_id] = None
        if not fresh:
            try:
                self._stale_sessions[broker_id] = self.zookeeper_state.registration_owner(broker_id)
            except InfrastructureError as e:  # unreachable: readiness is then port + registration
                log.debug("registration of broker %d unknown before start: %s", broker_id, e)
        env = {"PYTHONUNBUFFERED": "1"}
        if self.skews_clocks:
            # A node whose libfaketime lives elsewhere than the controller's (docker, ssh) names it.
            env.update(faketime_env(lay.clock_file, preload_library(node)))
        return node.start_daemon(
            BROKER, broker_command(self.python, lay.config_path), env=env, log_path=lay.log_path
        )

    def _log_tail(self, node: Node, remote_path: str) -> str:
        with tempfile.TemporaryDirectory() as tmp:
            local = Path(tmp) / "log"
            try:
                node.download(remote_path, str(local))
            except InfrastructureError:
                return "(no log)"
            return _tail(local)

    def wait_ready(self, node: Node, timeout: float | None = None) -> None:
        """Until the broker listens and is registered in /brokers/ids; else one clear error."""
        timeout = self.ready_timeout if timeout is None else timeout
        broker_id = self.broker_id(node)
        lay = self.layout(node)
        deadline = time.monotonic() + timeout
        while True:
            if node.daemon_pid(BROKER) is None:
                raise InfrastructureError(
                    f"broker {broker_id} on {node.name} exited; log: {self._log_tail(node, lay.log_path)}"
                )
            if port_open(node.address, BROKER_PORT) and self._registered_anew(broker_id):
                return
            if time.monotonic() > deadline:
                raise InfrastructureError(
                    f"broker {broker_id} on {node.name} did not come up within {timeout:g}s "
                    f"(listening on {node.address}:{BROKER_PORT} and registered in /brokers/ids); "
                    f"log: {self._log_tail(node, lay.log_path)}"
                )
            time.sleep(0.1)

    def _registered_anew(self, broker_id: int) -> bool:
        """Registered by a session other than the one of the broker's previous (killed) process:
        a killed broker's ephemeral node lives on until its session times out."""
        owner = self.zookeeper_state.registration_owner(broker_id)
        return owner is not None and owner != self._stale_sessions.get(broker_id)

    # --- Killable -----------------------------------------------------------------------------

    def kill(self, node: Node) -> None:
        """SIGKILL the broker on `node` (on the ZooKeeper node: ZooKeeper)."""
        node.signal_daemon(self._daemon_on(node), signal.SIGKILL)

    def start(self, node: Node, *, wait_ready: bool = False) -> None:
        """Start the broker (or ZooKeeper) unless it runs; with wait_ready, until it serves again."""
        if node.name == self.zookeeper_node.name:
            if node.daemon_pid(ZOOKEEPER) is None:
                self.start_zookeeper(wait=wait_ready)
            return
        if node.daemon_pid(BROKER) is None:
            self._start_broker(node)
        if wait_ready:
            self.wait_ready(node)

    def stop(self, node: Node, *, timeout: float = 30.0) -> None:
        """Graceful stop: SIGTERM, then SIGKILL when it has not exited within `timeout`."""
        daemon_control.stop_gracefully(node, self._daemon_on(node), timeout)

    def restart(self, node: Node) -> None:
        self.stop(node)
        self.start(node)

    # --- Pausable -----------------------------------------------------------------------------

    def pause(self, node: Node) -> None:
        daemon_control.freeze(node, self._daemon_on(node))

    def resume(self, node: Node) -> None:
        daemon_control.thaw(node, self._daemon_on(node))

    def _daemon_on(self, node: Node) -> str:
        return ZOOKEEPER if node.name == self.zookeeper_node.name else BROKER

    # --- HasLeaders ---------------------------------------------------------------------------

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return self.zookeeper_state.partition_state()

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {tp: s["leader"] for tp, s in self.partition_state().items()}  # type: ignore[misc]

    def controller(self) -> str | None:
        return self.zookeeper_state.controller()

    # --- HasLogs, HasDataDirs -----------------------------------------------------------------

    def log_files(self, node: Node) -> list[str]:
        if node.name == self.zookeeper_node.name:
            return [self.zookeeper_log()]
        lay = self.layout(node)
        return [lay.log_path, lay.lazyfs_log] if self.lazyfs else [lay.log_path]

    def data_dirs(self, node: Node) -> list[str]:
        if node.name == self.zookeeper_node.name:
            return []
        return [self.layout(node).data_dir]

    # --- HasMembership: spare nodes join, brokers leave, partitions move -------------------------

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

    def assignment(self) -> dict[tuple[str, int], list[str]]:
        return self.zookeeper_state.assignment()

    def reassign(self, targets: dict[tuple[str, int], list[str]]) -> None:
        self.zookeeper_state.reassign(
            {key: tuple(self._broker_of(n) for n in nodes) for key, nodes in targets.items()}
        )

    def reassigning(self) -> list[tuple[str, int]]:
        return self.zookeeper_state.reassigning()

    def _broker_of(self, name: str) -> int:
        for node in self.brokers:
            if node.name == name:
                return self.broker_id(node)
        raise InfrastructureError(f"node {name} runs no broker")
