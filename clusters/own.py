"""The own system under test: ZooKeeper on its own node plus N own brokers (broker i on node ni).

Works on any backend through the Node protocol only: files are written locally and uploaded,
processes are started with `start_daemon`, everything else is `exec`. ZooKeeper runs on a node of
its own so that the nemesis can partition brokers from it. When the test has clock faults
(`wants_clock`), brokers start with libfaketime preloaded, reading their clock offset from a
per-node file (`clock_file(node)`) that the clock nemesis rewrites; monotonic clocks stay real so
timeouts and timed waits keep working.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.config import render_properties
from clusters import daemon_control, zookeeper
from clusters.broker_ids import broker_id_of, node_of_broker_id
from clusters.node import CarriesFaketime, Node, node_home
from clusters.own_membership import OwnMembership
from clusters.ports import port_open
from foundation.config import TestConfig, fault_names
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

BROKER_PORT = 9092
ZOOKEEPER_PORT = 2181
BROKER = "broker"  # daemon names on the nodes
ZOOKEEPER = "zookeeper"
LAZYFS = "lazyfs"
LOSE_UNSYNCED = "lose-unsynced"  # the fault that needs data dirs on lazyfs (clusters/lazyfs.py)
CLOCK_UNSKEWED = "+0\n"  # libfaketime's offset syntax: "+0", "+5s", "-2m" ...


def faketime_library() -> str:
    """The libfaketime shipped by the PyPI `libfaketime` package (built to work with Python)."""
    import libfaketime

    return str(Path(libfaketime.__file__).parent / "vendor" / "libfaketime" / "src" / "libfaketime.so.1")


def preload_library(node: Node) -> str | None:
    """The libfaketime a broker on `node` preloads (None: not installed on it yet)."""
    if isinstance(node, CarriesFaketime):
        return node.faketime_library
    return faketime_library()  # a node that shares the controller's files (netns)


def faketime_env(clock_file: str, library: str | None = None) -> dict[str, str]:
    """Environment that fakes the wall clock from `clock_file` and leaves monotonic clocks real."""
    return {
        "LD_PRELOAD": library or faketime_library(),
        "FAKETIME_TIMESTAMP_FILE": clock_file,
        "FAKETIME_NO_CACHE": "1",  # re-read the file on every call: a skew applies at once
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "DONT_FAKE_MONOTONIC": "1",  # the older spelling, for older libfaketime builds
    }


# The faults that move a broker's wall clock (nemesis.packages.clockskew; `skew` is an alias).
CLOCK_FAULTS = frozenset({"clock", "clock-bump", "clock-strobe", "clock-reset", "skew"})


def wants_clock(config: TestConfig) -> bool:
    """Does this test skew clocks (`--nemesis all` may)? Only then do brokers run under libfaketime.

    The preload is not free: with FAKETIME_NO_CACHE it re-reads the offset file on every wall-clock
    read and on every timed condition wait, including each wait of Python's GIL, and it reads it
    while holding the GIL's mutex. A broker thread preempted in that read holds up every thread of
    the broker; on a busy machine fault-free runs stalled for seconds (docs/workloads.md, "Rate").
    """
    names = fault_names(config)
    return bool(names & (CLOCK_FAULTS | {"all"})) or any(s.get("do") in CLOCK_FAULTS for s in config.schedule)


def wants_lazyfs(config: TestConfig) -> bool:
    """Does this test ask for the power-loss fault (data dirs must then sit on lazyfs)?"""
    # Fault specs may carry qualifiers and groups: "lose-unsynced:all", "kill+power-loss".
    names = fault_names(config)
    if "all" in names and config.backend == "netns":  # `--nemesis all` takes power loss where it can
        return True
    return bool(names & {LOSE_UNSYNCED, "disk", "power-loss"}) or any(
        s.get("do") == LOSE_UNSYNCED for s in config.schedule
    )


def refuse_lazyfs_off_netns(config: TestConfig, backend: str) -> None:
    """Only netns nodes put data dirs on FUSE: say so before a power-loss test starts elsewhere."""
    if (config.system in ("own", "kafka") or config.system.endswith(".toml")) and wants_lazyfs(config):
        raise BadInput(
            f"the power-loss fault (lose-unsynced) needs the netns backend: data dirs on FUSE are "
            f"not set up on the {backend} backend"
        )


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


class OwnSystem(OwnMembership):
    """ZooKeeper + own brokers; implements Lifecycle, Killable, Pausable, HasLeaders, HasLogs,
    HasDataDirs, HasMembership (clusters/own_membership.py: spare nodes join, brokers leave,
    partitions are reassigned)."""

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
        self._zk: Any = None  # a kazoo client, connected on first use
        self._zk_lock = threading.Lock()

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
        with self._zk_lock:
            if self._zk is not None:
                try:
                    self._zk.stop()
                    self._zk.close()
                except Exception as e:  # a client of a dead server: nothing left to do
                    log.debug("closing the ZooKeeper client: %s", e)
                self._zk = None

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

    def zk(self) -> Any:
        """A connected kazoo client (the controller reads ZooKeeper directly)."""
        from kazoo.client import KazooClient

        with self._zk_lock:
            if self._zk is None:
                quiet = logging.getLogger("strandline.kazoo")
                quiet.setLevel(logging.ERROR)
                client = KazooClient(hosts=self.zookeeper_connect(), timeout=10.0, logger=quiet)
                try:
                    client.start(timeout=10.0)
                except Exception as e:
                    client.close()
                    raise InfrastructureError(
                        f"cannot reach ZooKeeper at {self.zookeeper_connect()}: {e}"
                    ) from None
                self._zk = client
            return self._zk

    def registered_brokers(self) -> list[int]:
        def read(zk: Any) -> list[int]:
            if not zk.exists("/brokers/ids"):
                return []
            return sorted(int(i) for i in zk.get_children("/brokers/ids"))

        return self._read_zk("/brokers/ids", read)  # type: ignore[no-any-return]

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
                self._stale_sessions[broker_id] = self._registration_owner(broker_id)
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

    def _registration_owner(self, broker_id: int) -> int | None:
        """The ZooKeeper session that holds /brokers/ids/<id> now (None: not registered)."""

        def read(zk: Any) -> int | None:
            stat = zk.exists(f"/brokers/ids/{broker_id}")
            return int(stat.ephemeralOwner) if stat else None

        return self._read_zk(f"/brokers/ids/{broker_id}", read)  # type: ignore[no-any-return]

    def _registered_anew(self, broker_id: int) -> bool:
        """Registered by a session other than the one of the broker's previous (killed) process:
        a killed broker's ephemeral node lives on until its session times out."""
        owner = self._registration_owner(broker_id)
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

    def _read_zk(self, what: str, read: Any) -> Any:
        """A ZooKeeper read whose failure (connection loss, timeout) is one clear error."""
        from kazoo.exceptions import KazooException

        try:
            return read(self.zk())
        except KazooException as e:
            raise InfrastructureError(
                f"reading {what} from ZooKeeper at {self.zookeeper_connect()}: {type(e).__name__} {e}"
            ) from None

    def partition_state(self) -> dict[tuple[str, int], dict[str, object]]:
        return self._read_zk("partition states", self._partition_state)  # type: ignore[no-any-return]

    def _partition_state(self, zk: Any) -> dict[tuple[str, int], dict[str, object]]:
        from kazoo.exceptions import NoNodeError

        result: dict[tuple[str, int], dict[str, object]] = {}
        try:
            topics = sorted(zk.get_children("/brokers/topics"))
        except NoNodeError:
            return result
        for topic in topics:
            replicas = self._topic_replicas(zk, topic)
            path = f"/brokers/topics/{topic}/partitions"
            try:  # a topic being created may not have its partitions (or their states) yet
                partitions = sorted(zk.get_children(path), key=int)
            except NoNodeError:
                continue
            for p in partitions:
                try:
                    data, _stat = zk.get(f"{path}/{p}/state")
                except NoNodeError:
                    continue
                state = json.loads(data)
                leader = int(state.get("leader", -1))
                result[(topic, int(p))] = {
                    "leader": self.node_of_broker(leader) if leader >= 0 else None,
                    "leader_epoch": int(state.get("leader_epoch", -1)),
                    "isr": [self.node_of_broker(int(b)) or str(b) for b in state.get("isr", [])],
                    "controller_epoch": state.get("controller_epoch"),
                    "replicas": [self.node_of_broker(b) or str(b) for b in replicas.get(int(p), ())],
                }
        return result

    def leaders(self) -> dict[tuple[str, int], str | None]:
        return {tp: s["leader"] for tp, s in self.partition_state().items()}  # type: ignore[misc]

    def controller(self) -> str | None:
        return self._read_zk("the controller", self._controller)  # type: ignore[no-any-return]

    def _controller(self, zk: Any) -> str | None:
        from kazoo.exceptions import NoNodeError

        try:
            data, _stat = zk.get("/controller")
        except NoNodeError:
            return None
        try:
            broker_id = int(json.loads(data)["brokerid"])
        except (ValueError, KeyError, TypeError):
            return None
        return self.node_of_broker(broker_id)

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
